"""ditto.AsyncLLM, vLLM's asynchronous engine API: generate() streams run concurrently in one
engine and each final output is the same bits as LLM.generate gives the same request; DELTA
reports add up to it, FINAL_ONLY gives one; abort() and leaving the loop end a request with
finish_reason "abort"."""
import asyncio
import struct

import pytest

from ditto import AsyncLLM, LLM, RequestOutputKind, SamplingParams

PROMPTS = ["The future of AI is", {"prompt_token_ids": list(range(3000, 3040))}, "Rivers of the world:",
           "1, 2, 3,"]
PARAMS = [SamplingParams(temperature=0.8, seed=3, max_tokens=12, logprobs=2, n=2, ignore_eos=True),
          SamplingParams(temperature=0, max_tokens=9, logprobs=1, prompt_logprobs=1, ignore_eos=True),
          SamplingParams(temperature=1.0, top_p=0.9, seed=11, max_tokens=15, ignore_eos=True),
          SamplingParams(temperature=0.7, seed=2, max_tokens=7, logprobs=0, stop=[" 9"])]


def bits(x):
    return None if x is None else struct.unpack("<Q", struct.pack("<d", x))[0]


def assert_same_bits(a, b):
    assert a.prompt_token_ids == b.prompt_token_ids and a.finished and b.finished
    assert len(a.outputs) == len(b.outputs)
    for x, y in zip(a.outputs, b.outputs):
        assert (x.index, x.token_ids, x.text, x.finish_reason, x.stop_reason) == \
            (y.index, y.token_ids, y.text, y.finish_reason, y.stop_reason)
        assert bits(x.cumulative_logprob) == bits(y.cumulative_logprob)
        assert (x.logprobs is None) == (y.logprobs is None)
        for p, q in zip(x.logprobs or [], y.logprobs or []):
            assert [(t, bits(v.logprob), v.rank) for t, v in p.items()] == \
                [(t, bits(v.logprob), v.rank) for t, v in q.items()]
    assert (a.prompt_logprobs is None) == (b.prompt_logprobs is None)
    for p, q in zip(a.prompt_logprobs or [], b.prompt_logprobs or []):
        assert (p is None) == (q is None)
        if p is not None:
            assert [(t, bits(v.logprob)) for t, v in p.items()] == [(t, bits(v.logprob)) for t, v in q.items()]


@pytest.fixture(scope="module")
def engine(model_dir):
    e = AsyncLLM(model=model_dir, kv_cache_memory="128MiB")
    yield e
    e.shutdown()


@pytest.fixture(scope="module")
def alone(model_dir):
    """Each request alone through the offline LLM: the reference bits."""
    llm = LLM(model=model_dir, kv_cache_memory="128MiB")
    return [llm.generate(p, s, use_tqdm=False)[0] for p, s in zip(PROMPTS, PARAMS)]


async def collect(engine, prompt, params, request_id):
    return [o async for o in engine.generate(prompt, params, request_id)]


def test_concurrent_streams_equal_the_requests_alone(engine, alone):
    async def main():
        return await asyncio.gather(*[collect(engine, p, s, f"c{i}") for i, (p, s) in enumerate(zip(PROMPTS, PARAMS))])
    for i, outs in enumerate(asyncio.run(main())):
        assert len(outs) > 1, i  # CUMULATIVE: one per step that produced something
        assert [o.finished for o in outs] == [False] * (len(outs) - 1) + [True]
        assert all(o.request_id == f"c{i}" for o in outs)
        assert_same_bits(outs[-1], alone[i])
        sizes = [sum(len(c.token_ids) for c in o.outputs) for o in outs]
        assert sizes == sorted(sizes)  # each the whole output so far
    assert engine.num_unfinished_requests == 0


def test_delta_and_final_only_kinds(engine, alone):
    async def main():
        delta = PARAMS[0].clone()
        delta.output_kind = RequestOutputKind.DELTA
        final = PARAMS[2].clone()
        final.output_kind = RequestOutputKind.FINAL_ONLY
        return await asyncio.gather(collect(engine, PROMPTS[0], delta, "d"), collect(engine, PROMPTS[2], final, "f"))
    deltas, finals = asyncio.run(main())
    assert len(finals) == 1
    assert_same_bits(finals[0], alone[2])
    assert len(deltas) > 1 and deltas[-1].finished
    for c, ref in enumerate(alone[0].outputs):
        pieces = [o for d in deltas for o in d.outputs if o.index == c]
        assert sum((o.token_ids for o in pieces), []) == ref.token_ids
        assert "".join(o.text for o in pieces) == ref.text
        assert [bits(next(iter(p.values())).logprob) for o in pieces for p in o.logprobs] == \
            [bits(next(iter(p.values())).logprob) for p in ref.logprobs]
    assert all(d.prompt_token_ids == alone[0].prompt_token_ids for d in deltas)  # vLLM repeats the prompt


def test_abort_ends_the_stream_with_finish_reason_abort(engine):
    async def main():
        params = SamplingParams(temperature=0, max_tokens=2000, ignore_eos=True)
        outs = []
        async for o in engine.generate("Count forever:", params, "long"):
            outs.append(o)
            if len(outs) == 2:
                await engine.abort("long")
        return outs
    outs = asyncio.run(main())
    assert outs[-1].finished and outs[-1].outputs[0].finish_reason == "abort"
    assert len(outs[-1].outputs[0].token_ids) < 2000
    assert engine.num_unfinished_requests == 0


def test_leaving_the_loop_aborts_and_errors_name_the_field(engine):
    async def leave_early():
        params = SamplingParams(temperature=0, max_tokens=2000, ignore_eos=True)
        async for _ in engine.generate("Count forever:", params, "left"):
            break
        for _ in range(200):  # the engine thread takes the abort at its next step
            if engine.num_unfinished_requests == 0:
                return True
            await asyncio.sleep(0.01)
        return False
    assert asyncio.run(leave_early())

    async def bad():
        return await collect(engine, "hi", SamplingParams(max_tokens=10**9, logprobs=10**6), "bad")
    with pytest.raises(ValueError, match="logprobs"):
        asyncio.run(bad())

    async def duplicate():
        params = SamplingParams(temperature=0, max_tokens=2000, ignore_eos=True)
        first = engine.generate("Count forever:", params, "dup")
        await first.__anext__()  # running now
        with pytest.raises(ValueError, match="dup"):
            await collect(engine, "Again", SamplingParams(max_tokens=2), "dup")
        await engine.abort("dup")
        return [o async for o in first][-1]
    last = asyncio.run(duplicate())
    assert last.outputs[0].finish_reason == "abort"


def test_prefix_cache_and_tokenizer(engine):
    async def main():
        p = SamplingParams(temperature=0, max_tokens=3)
        prompt = {"prompt_token_ids": list(range(4000, 4050))}
        assert await engine.reset_prefix_cache()
        a = (await collect(engine, prompt, p, "p1"))[-1]
        b = (await collect(engine, prompt, p, "p2"))[-1]
        assert await engine.reset_prefix_cache()
        c = (await collect(engine, prompt, p, "p3"))[-1]
        return a, b, c, await engine.get_tokenizer()
    a, b, c, tok = asyncio.run(main())
    assert (a.num_cached_tokens, b.num_cached_tokens, c.num_cached_tokens) == (0, 48, 0)
    assert a.outputs[0].token_ids == b.outputs[0].token_ids == c.outputs[0].token_ids
    assert tok.eos_token == "<|im_end|>"
