"""Invariance through Python: a prompt's output is the same bits alone, in a batch, in any order,
with any thread count (floats compared as their bit patterns)."""
import random
import struct

import pytest

from ditto import LLM, SamplingParams

PROMPTS = ["The future of AI is", "Machine learning enables", "Deep learning models can",
           "Once upon a time", "def fibonacci(n):", "The quick brown fox", "In 1492,", "Water boils at"]


def bits(out):
    """Everything an output carries, floats as their float32 bit patterns."""
    f = lambda x: struct.pack("<f", x)
    return [(c.index, c.text, tuple(c.token_ids), c.finish_reason, c.stop_reason,
             None if c.cumulative_logprob is None else struct.pack("<d", c.cumulative_logprob),
             None if c.logprobs is None else
             tuple(tuple((t, f(l.logprob), l.rank) for t, l in e.items()) for e in c.logprobs))
            for c in out.outputs]


def params_for(i):
    return SamplingParams(temperature=[0.0, 0.7, 1.0][i % 3], top_p=[1.0, 0.9][i % 2], seed=100 + i, max_tokens=12,
                          n=1 + i % 2, logprobs=2, ignore_eos=True)


def test_alone_batch_order_and_threads_agree(model_dir, llm):
    alone = [bits(llm.generate(PROMPTS[i], params_for(i), use_tqdm=False)[0]) for i in range(len(PROMPTS))]
    together = llm.generate(PROMPTS, [params_for(i) for i in range(len(PROMPTS))], use_tqdm=False)
    assert [bits(o) for o in together] == alone
    order = list(range(len(PROMPTS)))
    random.Random(3).shuffle(order)
    shuffled = llm.generate([PROMPTS[i] for i in order], [params_for(i) for i in order], use_tqdm=False)
    assert [bits(o) for o in shuffled] == [alone[i] for i in order]
    one_thread = LLM(model=model_dir, threads=1, kv_cache_memory="256MiB", max_num_batched_tokens=16)
    assert [bits(o) for o in one_thread.generate(PROMPTS, [params_for(i) for i in range(len(PROMPTS))],
                                                 use_tqdm=False)] == alone


def test_inside_a_larger_batch_of_other_traffic(llm):
    params = SamplingParams(temperature=0.7, max_tokens=16, seed=42)
    alone = [bits(o) for o in llm.generate(PROMPTS[:3], params, use_tqdm=False)]
    others = [f"Other request {k}: tell me about {w}" for k, w in enumerate(["cats", "rust", "tea", "rain"] * 5)]
    batch = [(p, params) for p in PROMPTS[:3]] + [(o, SamplingParams(temperature=1.0, max_tokens=20, seed=k))
                                                  for k, o in enumerate(others)]
    random.Random(9).shuffle(batch)
    outs = llm.generate([p for p, _ in batch], [s for _, s in batch], use_tqdm=False)
    got = {p: bits(o) for (p, _), o in zip(batch, outs) if p in PROMPTS[:3]}
    assert [got[p] for p in PROMPTS[:3]] == alone


def test_unseeded_requests_follow_the_llm_seed(model_dir, llm):
    params = SamplingParams(temperature=1.0, max_tokens=8)
    a = [bits(o) for o in llm.generate(PROMPTS[:2], params, use_tqdm=False)]
    b = [bits(o) for o in llm.generate(PROMPTS[:2], params, use_tqdm=False)]
    assert a != b  # later requests of the same LLM draw other seeds
    fresh = [LLM(model=model_dir, kv_cache_memory="128MiB", seed=5) for _ in range(2)]
    runs = [[bits(o) for o in f.generate(PROMPTS[:2], params, use_tqdm=False)] for f in fresh]
    assert runs[0] == runs[1]  # the same script gives the same text


@pytest.mark.parametrize("n", [2, 4])
def test_n_choices_are_each_their_own_stream(llm, n):
    params = SamplingParams(temperature=1.0, max_tokens=10, seed=11, n=n, ignore_eos=True)
    out = llm.generate(PROMPTS[0], params, use_tqdm=False)[0]
    assert len(out.outputs) == n and len({tuple(c.token_ids) for c in out.outputs}) > 1
    single = llm.generate(PROMPTS[0], SamplingParams(temperature=1.0, max_tokens=10, seed=11, ignore_eos=True),
                          use_tqdm=False)[0]
    assert out.outputs[0].token_ids == single.outputs[0].token_ids  # choice 0's stream does not depend on n


COPY_PROMPTS = ["Repeat exactly: one two three four five six seven eight nine ten, one two three four five",
                "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\ndef add(",
                "The quick brown fox"]


@pytest.mark.parametrize("config", [
    {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3},
    "draft"])
def test_speculative_decoding_on_and_off_agree(model_dir, llm, config):
    """speculative_config changes the speed, never the bits: greedy and seeded sampling, n > 1,
    logprobs, beside other traffic; the draft is the model itself (its greedy guesses are right)."""
    if config == "draft":
        config = {"model": model_dir, "num_speculative_tokens": 3}
    prompts = COPY_PROMPTS + PROMPTS[:3]
    params = [SamplingParams(temperature=0.0, max_tokens=24, logprobs=2, ignore_eos=True),
              SamplingParams(temperature=0.8, seed=7, n=2, max_tokens=20, logprobs=1, ignore_eos=True),
              SamplingParams(temperature=1.0, top_p=0.9, seed=3, max_tokens=16)] * 2
    plain = [bits(o) for o in llm.generate(prompts, params, use_tqdm=False)]
    spec = LLM(model=model_dir, kv_cache_memory="256MiB", speculative_config=config)
    assert [bits(o) for o in spec.generate(prompts, params, use_tqdm=False)] == plain
    assert [bits(spec.generate(p, s, use_tqdm=False)[0]) for p, s in zip(prompts, params)] == plain  # alone


@pytest.mark.parametrize("config, named", [
    ({"method": "eagle", "num_speculative_tokens": 2}, "method"),
    ({"method": "ngram"}, "num_speculative_tokens"),
    ({"method": "ngram", "num_speculative_tokens": 2, "lookahead": 1}, "lookahead"),
    ("ngram", "dict")])
def test_bad_speculative_config_is_refused_by_name(model_dir, config, named):
    with pytest.raises(ValueError, match=named):
        LLM(model=model_dir, kv_cache_memory="64MiB", speculative_config=config)
