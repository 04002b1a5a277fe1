"""`ditto check-invariance` on a small generated model: every row 0 mismatches; and the negative
control — a test double that nudges logits by the step's batch size — makes it report mismatches
and exit 1, so the harness can fail."""
import json

import pytest

from conftest import run_ditto

ARGS = ["--num-prompts", "12", "--max-prompt-tokens", "80", "--max-tokens", "8", "--json"]
# The negative controls: the injected fault changes the logits of every batched step, so four
# prompts (batched in every row that batches) show it as surely as twelve, at a third of the time.
CONTROL_ARGS = ["--num-prompts", "4", "--max-prompt-tokens", "80", "--max-tokens", "8", "--json"]


@pytest.fixture(scope="module")
def model(ditto_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("qwen3check") / "m"
    run_ditto(ditto_bin, "make-test-model", "--preset", "qwen3-0.6b", "--num-hidden-layers", "2",
              "--seed", "8", "--out", out)
    return out


def test_every_row_matches(ditto_bin, model):
    report = json.loads(run_ditto(ditto_bin, "check-invariance", "--model", model, *ARGS).stdout)
    names = [r["row"] for r in report["rows"]]
    assert len(names) == 19, names
    # The model has the real Qwen3 tokenizer: structured outputs join the mix (issue 33), and a
    # first row walks each constrained output through its constraint.
    assert names[0] == "structured outputs: each output satisfies its constraint"
    modes = [n for n in names if n.startswith("logprobs_mode ")]  # issue 30: one row per mode but raw_logprobs
    assert [m.split()[1].rstrip(":") for m in modes] == ["raw_logits", "processed_logprobs", "processed_logits"]
    assert "beam search: alone vs all prompts at once" in names
    for r in report["rows"]:
        assert r["mismatches"] == 0, r
        assert r["cases"] > 0 and r["tokens_compared"] > 0, r
    assert report["mismatches"] == 0
    notes = " ".join(r["note"] for r in report["rows"])
    assert "preemptions" in notes and "prefix-cache hit tokens" in notes
    # The LLM keeps its prefix cache between generate() calls: the row run after another finds it.
    warm = next(r for r in report["rows"] if r["row"] == "prefix cache kept from the previous generate() call")
    assert "prefix-cache hit tokens" in warm["note"], warm
    speculative = [r for r in report["rows"] if r["row"].startswith("speculative decoding on vs off")]
    assert len(speculative) == 2
    for r in speculative:  # guesses were made, and some kept: the rows verified something
        assert r["spec_decode_num_accepted_tokens"] > 0, r
        assert r["spec_decode_num_draft_tokens"] >= r["spec_decode_num_accepted_tokens"], r


def test_negative_control_reports_mismatches(ditto_bin, model):
    proc = run_ditto(ditto_bin, "check-invariance", "--model", model, *CONTROL_ARGS, "--inject-fault", "batch-size",
                     check=False)
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["mismatches"] > 0
    assert proc.stderr.startswith("error: check-invariance:")


def test_bad_fault_name(ditto_bin, model):
    proc = run_ditto(ditto_bin, "check-invariance", "--model", model, "--inject-fault", "cosmic-ray", check=False)
    assert proc.returncode == 1
    assert "the only fault is 'batch-size'" in proc.stderr


@pytest.fixture(scope="module")
def moe_model(ditto_bin, tmp_path_factory):
    """Qwen3-30B-A3B's configuration cut to 2 layers and 16 experts (top 8 stays: routing picks
    half of them per token)."""
    out = tmp_path_factory.mktemp("qwen3moecheck") / "m"
    run_ditto(ditto_bin, "make-test-model", "--preset", "qwen3-30b-a3b", "--num-hidden-layers", "2",
              "--num-experts", "16", "--seed", "9", "--out", out)
    return out


def test_every_row_matches_on_qwen3_moe(ditto_bin, moe_model):
    report = json.loads(run_ditto(ditto_bin, "check-invariance", "--model", moe_model, *ARGS).stdout)
    assert len(report["rows"]) == 19
    for r in report["rows"]:
        assert r["mismatches"] == 0, r
        assert r["cases"] > 0 and r["tokens_compared"] > 0, r
    proc = run_ditto(ditto_bin, "check-invariance", "--model", moe_model, *CONTROL_ARGS, "--inject-fault", "batch-size",
                     check=False)
    assert proc.returncode == 1 and json.loads(proc.stdout)["mismatches"] > 0


@pytest.mark.parametrize("outtype", ["q8_0", "q4_k"])
def test_every_row_matches_on_a_quantized_gguf(ditto_bin, model, outtype, tmp_path):
    """The same model exported as Q8_0 / Q4_K GGUF: the quantized kernels keep every row at 0."""
    gguf = tmp_path / f"m-{outtype}.gguf"
    run_ditto(ditto_bin, "export-gguf", "--model", model, "--output", gguf, "--outtype", outtype)
    report = json.loads(run_ditto(ditto_bin, "check-invariance", "--model", gguf, *ARGS).stdout)
    assert len(report["rows"]) == 19
    for r in report["rows"]:
        assert r["mismatches"] == 0, r
        assert r["cases"] > 0 and r["tokens_compared"] > 0, r
