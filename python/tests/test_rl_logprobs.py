"""For reinforcement learning: the logprob each sampled token came with equals, bit for bit, its
logprob when the finished sequence is re-scored with prompt_logprobs (the sampler and the trainer
see the same numbers)."""
import struct

from ditto import SamplingParams


def test_sampled_logprobs_equal_rescored_prompt_logprobs(llm):
    prompts = ["Solve: 12 * 7 =", "Write a haiku about rain", "The capital of Japan is"]
    sampled = llm.generate(prompts, SamplingParams(temperature=1.0, top_p=0.95, max_tokens=24, n=2, seed=1234,
                                                   logprobs=0), use_tqdm=False)
    rescore, expected = [], []
    for out in sampled:
        for c in out.outputs:
            rescore.append({"prompt_token_ids": out.prompt_token_ids + c.token_ids})
            expected.append([(t, e[t].logprob) for t, e in zip(c.token_ids, c.logprobs)])
    scored = llm.generate(rescore, SamplingParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False)
    checked = 0
    for want, out in zip(expected, scored):
        got = [(t, e[t].logprob) for t, e in zip(out.prompt_token_ids[-len(want):], out.prompt_logprobs[-len(want):])]
        for (t1, a), (t2, b) in zip(want, got):
            assert t1 == t2 and struct.pack("<f", a) == struct.pack("<f", b), (t1, a, b)
            checked += 1
    assert checked == sum(len(w) for w in expected) >= 100
