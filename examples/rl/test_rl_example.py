"""The RL example's pieces on the real SmolLM2-135M-Instruct, exported to a bf16 Hugging Face
directory (`ditto export-hf`): the torch float32 policy's logprobs of a ditto greedy completion agree
with ditto's own within TOL_LOGPROB, they are differentiable, and grpo.py's short form runs (2 steps,
one prompt, 2 completions) with ditto's re-scoring equal to its sampled logprobs bit for bit (ratio
exactly 1.0).

Run with a Python that has torch and the ditto package (python/tests/test_rl_example.py runs it so
from `make test`): DITTO_BIN names the ditto binary (else `ditto` on PATH); DITTO_RL_MODEL names an
exported directory to use instead of exporting one.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
torch = pytest.importorskip("torch")
from policy import LlamaPolicy  # noqa: E402

SMOLLM2 = REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
# max |Δ| between the torch float32 forward and ditto (bf16 weights, GEMM inputs rounded to bf16,
# bf16 KV cache) over a 16-token greedy completion's logprobs. Measured on SmolLM2 (2026-12-06): max
# 0.0134, mean 0.0037 (greedy); over grpo.py's temperature-1 samples at step 0: max 0.038, mean 0.004.
TOL_LOGPROB = 0.05
QUESTION = "What is 17 + 25? Answer with the number only."


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    if os.environ.get("DITTO_RL_MODEL"):
        return os.environ["DITTO_RL_MODEL"]
    if not SMOLLM2.exists():
        pytest.skip(f"{SMOLLM2} missing (scripts/install-deps.sh)")
    ditto = os.environ.get("DITTO_BIN") or shutil.which("ditto")
    if ditto is None:
        pytest.skip("no ditto binary (set DITTO_BIN)")
    out = tmp_path_factory.mktemp("rl") / "SmolLM2-135M-Instruct-hf"
    subprocess.run([ditto, "export-hf", "--model", str(SMOLLM2), "--out", str(out), "--dtype", "bfloat16"],
                   check=True, capture_output=True, text=True, timeout=600)
    return str(out)


@pytest.fixture(scope="module")
def policy(model_dir) -> LlamaPolicy:
    return LlamaPolicy.from_pretrained(model_dir)


def test_policy_logprobs_match_ditto(model_dir, policy):
    from ditto import LLM, SamplingParams
    llm = LLM(model=model_dir, kv_cache_memory="256MiB", max_model_len=512)
    prompt = llm.get_tokenizer().apply_chat_template([{"role": "user", "content": QUESTION}],
                                                     add_generation_prompt=True)
    out = llm.generate([{"prompt_token_ids": prompt}],
                       SamplingParams(temperature=0, logprobs=0, max_tokens=16, ignore_eos=True), use_tqdm=False)[0]
    choice = out.outputs[0]
    ids = list(choice.token_ids)
    sampled = torch.tensor([lp[t].logprob for t, lp in zip(ids, choice.logprobs)], dtype=torch.float64)
    with torch.no_grad():
        mine = policy.token_logprobs(torch.tensor(prompt + ids), len(prompt)).double()
    delta = (mine - sampled).abs()
    print(f"SmolLM2 torch float32 vs ditto over {len(ids)} greedy tokens ({choice.text!r}): "
          f"max |Δ| {delta.max().item():.4g}, mean {delta.mean().item():.4g}")
    assert len(ids) == 16
    assert delta.max().item() < TOL_LOGPROB


def test_token_logprobs_are_differentiable(policy):
    ids = torch.tensor([1, 504, 3458, 282, 4649, 314, 2114, 30])
    lp = policy.token_logprobs(ids, 3)
    assert lp.shape == (5,) and lp.requires_grad and bool((lp <= 0).all())
    lp.sum().backward()
    grad = policy.model.layers[0].self_attn.q_proj.weight.grad
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0
    policy.zero_grad(set_to_none=True)
    # One sequence alone or in a right-padded batch: the same values (up to float32 summation order).
    batch = policy.batch_token_logprobs([ids.tolist(), ids[:5].tolist()], [3, 2])
    assert torch.allclose(batch[0], lp.detach(), atol=1e-4)


def test_grpo_short_form(model_dir, tmp_path, capsys):
    import grpo
    out = tmp_path / "results.json"
    start = time.perf_counter()
    rows = grpo.main(["--model", model_dir, "--steps", "2", "--group-size", "2", "--prompts", "1",
                      "--max-tokens", "8", "--out", str(out)])
    seconds = time.perf_counter() - start
    printed = capsys.readouterr().out
    print(printed, f"grpo short form: {seconds:.1f} s")
    assert "weight transfer:" in printed and len(rows) == 2
    for r in rows:
        assert r["rescore_bit_identical"], r  # ditto's re-scoring == its sampled logprobs, bit for bit
        a = r["rescore_vs_sampled"]
        assert a["ratio_min"] == a["ratio_median"] == a["ratio_max"] == 1.0 and a["max_abs"] == 0.0
        b = r["torch_vs_sampled"]
        assert 0 <= b["mean_abs"] <= b["max_abs"] < 1.0 and 0 <= r["reward"] <= 1
    assert rows[0]["torch_vs_sampled"]["max_abs"] < TOL_LOGPROB * 2
    saved = json.loads(out.read_text())
    assert [s["step"] for s in saved["steps"]] == [0, 1] and saved["args"]["group_size"] == 2
