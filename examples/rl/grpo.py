"""A small GRPO loop with ditto as the rollout engine and a PyTorch float32 trainer, on a verifiable
toy task: "What is A + B? Answer with the number only." (reward 1 for exactly the number, 0.5 for the
right number among others in the text, 0 otherwise).

Each step: ditto samples G completions per prompt (temperature 1, a seed per prompt, logprobs of the
sampled tokens); ditto re-scores them (prompt_logprobs) and the trainer's forward scores them; the
rewards become group-normalized advantages; the loss is GRPO's clipped surrogate with the importance
ratio exp(logp_trainer - logp_old), logp_old being the sampler's (ditto's) logprobs; one AdamW step;
then the new weights go into the running ditto through the weight-transfer API (weight_sync.py).

Per step it prints the reward, the seconds spent sampling / re-scoring / training / transferring, and
the trainer-vs-sampler logprob mismatch over every sampled token, two ways:
  (a) ditto's re-scoring vs ditto's sampled logprobs — the ratio is exactly 1.0 for every token
      (ditto's contract row 9: a token's sampled logprob equals its re-scored one, bit for bit);
  (b) the torch float32 forward (before the step's update) vs ditto's sampled logprobs — whatever
      the numerics give (ditto runs bf16 weights and rounds GEMM inputs to bf16);
  (c) the same forward with every weight rounded to bf16, as the push rounds them: what is left is
      the activations' rounding, so (b) − (c) is the float32 master weights' distance from the
      bf16 weights the sampler holds.

    ditto export-hf --model models/SmolLM2-135M-Instruct.Q4_1.gguf --out models/SmolLM2-135M-Instruct-hf
    python3 examples/rl/grpo.py --model models/SmolLM2-135M-Instruct-hf --steps 30 --out results.json

Needs torch (Debian's python3-torch: /usr/bin/python3) and the ditto package on the same Python
(pip install . into a venv made with --system-site-packages, or PYTHONPATH naming the package).
"""
import argparse
import json
import math
import os
import random
import re
import sys
import time
from typing import List

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from policy import LlamaPolicy  # noqa: E402
from weight_sync import WeightSync, make_llm  # noqa: E402

from ditto import SamplingParams  # noqa: E402


def make_task(rng: random.Random, max_operand: int):
    """One question and its answer."""
    a, b = rng.randint(1, max_operand), rng.randint(1, max_operand)
    return f"What is {a} + {b}? Answer with the number only.", a + b


def reward(text: str, answer: int) -> float:
    """1.0: the text is the number (a final period allowed); 0.5: the number is among those in it
    (SmolLM2-135M tends to restate the sum first: "3 + 4 = 7."); else 0."""
    stripped = text.strip().rstrip(".").strip()
    if stripped == str(answer):
        return 1.0
    return 0.5 if str(answer) in re.findall(r"-?\d+", text) else 0.0


def stats(deltas: List[float]) -> dict:
    """max and mean |Δ| of logprob differences, and the ratio exp(Δ)'s min / median / max."""
    if not deltas:
        return {"max_abs": 0.0, "mean_abs": 0.0, "ratio_min": 1.0, "ratio_median": 1.0, "ratio_max": 1.0}
    d = torch.tensor(deltas, dtype=torch.float64)
    ratio = d.exp()
    return {"max_abs": d.abs().max().item(), "mean_abs": d.abs().mean().item(), "ratio_min": ratio.min().item(),
            "ratio_median": ratio.median().item(), "ratio_max": ratio.max().item()}


def sample(llm, tokenizer, tasks, args, step):
    """ditto's rollouts: per task, G (prompt ids, completion ids, sampled logprobs, text)."""
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True)
               for q, _ in tasks]
    params = [SamplingParams(n=args.group_size, temperature=1.0, max_tokens=args.max_tokens, logprobs=0,
                             seed=args.seed * 1_000_003 + step * 1000 + i) for i in range(len(tasks))]
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    rollouts = []
    for prompt, out in zip(prompts, outs):
        group = []
        for choice in out.outputs:
            ids = list(choice.token_ids)
            logprobs = [lp[t].logprob for t, lp in zip(ids, choice.logprobs)]
            group.append({"prompt": prompt, "completion": ids, "sampled": logprobs, "text": choice.text})
        rollouts.append(group)
    return rollouts


def rescore(llm, sequences):
    """ditto's teacher-forced logprobs of each completion (prompt_logprobs over prompt + completion)."""
    outs = llm.generate([{"prompt_token_ids": s["prompt"] + s["completion"]} for s in sequences],
                        SamplingParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False)
    scored = []
    for s, out in zip(sequences, outs):
        n = len(s["completion"])
        tail = out.prompt_logprobs[-n:]
        scored.append([lp[t].logprob for t, lp in zip(s["completion"], tail)])
    return scored


def trainer_logprobs(policy, sequences, micro_batch, grad=False):
    """The torch forward's logprobs of each completion, in micro-batches."""
    out = []
    for i in range(0, len(sequences), micro_batch):
        chunk = sequences[i:i + micro_batch]
        with torch.set_grad_enabled(grad):
            out += policy.batch_token_logprobs([s["prompt"] + s["completion"] for s in chunk],
                                               [len(s["prompt"]) for s in chunk])
    return out


def trainer_logprobs_bf16_weights(policy, sequences, micro_batch):
    """trainer_logprobs with every weight rounded to bfloat16 — what the engine holds after a push
    (the push casts the float32 master weights): separates the weights' rounding from the rest."""
    saved = [p.detach().clone() for p in policy.parameters()]
    with torch.no_grad():
        for p in policy.parameters():
            p.copy_(p.bfloat16().float())
    try:
        return trainer_logprobs(policy, sequences, micro_batch)
    finally:
        with torch.no_grad():
            for p, s in zip(policy.parameters(), saved):
                p.copy_(s)


def train_step(policy, optimizer, sequences, advantages, args) -> float:
    """GRPO's clipped surrogate (no KL term), each sequence's token mean, averaged over sequences;
    gradients accumulated over micro-batches; one AdamW step. Returns the loss."""
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for i in range(0, len(sequences), args.micro_batch):
        chunk = sequences[i:i + args.micro_batch]
        new = policy.batch_token_logprobs([s["prompt"] + s["completion"] for s in chunk],
                                          [len(s["prompt"]) for s in chunk])
        loss = torch.zeros(())
        for s, logp, adv in zip(chunk, new, advantages[i:i + args.micro_batch]):
            old = torch.tensor(s["sampled"], dtype=torch.float32)
            ratio = torch.exp(logp - old)
            clipped = torch.clamp(ratio, 1 - args.clip, 1 + args.clip)
            surrogate = torch.minimum(ratio * adv, clipped * adv)
            loss = loss - surrogate.mean() / len(sequences)
        loss.backward()
        total += loss.item()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    optimizer.step()
    return total


HEADER = ("step  reward  sample_s  rescore_s  train_s  push_s | (a) ditto rescore vs sampled: max|Δ|  mean|Δ|  "
          "ratio min/med/max | (b) torch f32 vs sampled: max|Δ|  mean|Δ|  ratio min/med/max | "
          "(c) torch, weights rounded to bf16: max|Δ|  mean|Δ|")


def row(r: dict) -> str:
    a, b, c = r["rescore_vs_sampled"], r["torch_vs_sampled"], r["torch_bf16_vs_sampled"]
    return (f"{r['step']:4d}  {r['reward']:6.3f}  {r['sample_s']:8.2f}  {r['rescore_s']:9.2f}  {r['train_s']:7.2f}  "
            f"{r['push_s']:6.2f} | {a['max_abs']:.3g}  {a['mean_abs']:.3g}  "
            f"{a['ratio_min']:.6g}/{a['ratio_median']:.6g}/{a['ratio_max']:.6g} | {b['max_abs']:.4f}  "
            f"{b['mean_abs']:.4f}  {b['ratio_min']:.4f}/{b['ratio_median']:.4f}/{b['ratio_max']:.4f} | "
            f"{c['max_abs']:.4f}  {c['mean_abs']:.4f}")


def main(argv=None) -> List[dict]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="Hugging Face directory (ditto export-hf of SmolLM2, bf16)")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--group-size", type=int, default=8, help="completions per prompt (G)")
    p.add_argument("--prompts", type=int, default=4, help="prompts per step")
    p.add_argument("--max-tokens", type=int, default=12)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--clip", type=float, default=0.2, help="PPO clip range epsilon")
    p.add_argument("--max-operand", type=int, default=9)
    p.add_argument("--micro-batch", type=int, default=8, help="sequences per trainer forward")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="ditto's threads (default: every core)")
    p.add_argument("--out", default="", help="write the per-step table as JSON here")
    args = p.parse_args(argv)
    torch.manual_seed(args.seed)

    llm = make_llm(args.model, kv_cache_memory="512MiB", max_model_len=1024, threads=args.threads)
    tokenizer = llm.get_tokenizer()
    policy = LlamaPolicy.from_pretrained(args.model)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=args.lr, weight_decay=0.0)
    sync = WeightSync(llm)
    print(sync.status, flush=True)
    print(HEADER, flush=True)
    rng = random.Random(args.seed)
    results = []
    try:
        for step in range(args.steps):
            tasks = [make_task(rng, args.max_operand) for _ in range(args.prompts)]
            t0 = time.perf_counter()
            groups = sample(llm, tokenizer, tasks, args, step)
            t1 = time.perf_counter()
            sequences = [s for g in groups for s in g]
            rescored = rescore(llm, sequences)
            t2 = time.perf_counter()
            trainer_old = trainer_logprobs(policy, sequences, args.micro_batch)
            trainer_bf16 = trainer_logprobs_bf16_weights(policy, sequences, args.micro_batch)
            rewards, advantages = [], []
            for (_, answer), group in zip(tasks, groups):
                rs = [reward(s["text"], answer) for s in group]
                mean = sum(rs) / len(rs)
                std = math.sqrt(sum((r - mean) ** 2 for r in rs) / len(rs))
                rewards += rs
                advantages += [(r - mean) / (std + 1e-4) for r in rs]  # a group all alike teaches nothing: 0
            loss = train_step(policy, optimizer, sequences, advantages, args)
            t3 = time.perf_counter()
            pushed = sync.push(policy.hf_state_dict(), f"step-{step + 1}")
            t4 = time.perf_counter()
            a = [r - s for seq, r_all in zip(sequences, rescored) for r, s in zip(r_all, seq["sampled"])]
            b = [t - s for seq, t_all in zip(sequences, trainer_old) for t, s in zip(t_all.tolist(), seq["sampled"])]
            c = [t - s for seq, t_all in zip(sequences, trainer_bf16) for t, s in zip(t_all.tolist(), seq["sampled"])]
            r = {"step": step, "reward": sum(rewards) / len(rewards), "loss": loss,
                 "sample_s": t1 - t0, "rescore_s": t2 - t1, "train_s": t3 - t2, "push_s": t4 - t3,
                 "pushed": pushed["pushed"], "tokens": len(a),
                 "rescore_vs_sampled": stats(a), "torch_vs_sampled": stats(b), "torch_bf16_vs_sampled": stats(c),
                 "rescore_bit_identical": all(x == 0.0 for x in a),
                 "example": {"question": tasks[0][0], "completion": groups[0][0]["text"]}}
            results.append(r)
            print(row(r), flush=True)
    finally:
        sync.close()
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "weight_transfer": sync.status, "steps": results}, f, indent=2)
    return results


if __name__ == "__main__":
    main()
