"""The sampler/trainer match reinforcement-learning pipelines are built around: sample with
logprobs, then re-score the same sequences with prompt_logprobs (what a trainer's forward pass
computes) and check that every token's logprob is the same float32, bit for bit.

    python examples/rl_logprobs.py Qwen/Qwen3-8B
"""
import struct
import sys

from ditto import LLM, SamplingParams

llm = LLM(model=sys.argv[1] if len(sys.argv) > 1 else "Qwen/Qwen3-8B")
prompts = ["Solve: 12 * 7 =", "Write a haiku about rain"]
rollouts = llm.generate(prompts, SamplingParams(temperature=1.0, max_tokens=32, n=4, seed=0, logprobs=0))

sequences, sampled = [], []
for out in rollouts:
    for choice in out.outputs:
        sequences.append({"prompt_token_ids": out.prompt_token_ids + choice.token_ids})
        sampled.append([lp[token].logprob for token, lp in zip(choice.token_ids, choice.logprobs)])

rescored = llm.generate(sequences, SamplingParams(max_tokens=1, prompt_logprobs=0))
mismatches = 0
for seq, out, logprobs in zip(sequences, rescored, sampled):
    tail = seq["prompt_token_ids"][-len(logprobs):]
    scored = [lp[token].logprob for token, lp in zip(tail, out.prompt_logprobs[-len(logprobs):])]
    mismatches += sum(struct.pack("<f", a) != struct.pack("<f", b) for a, b in zip(logprobs, scored))
print(f"{sum(map(len, sampled))} sampled tokens re-scored, {mismatches} logprobs differ")
sys.exit(1 if mismatches else 0)
