"""Long work shows progress on a terminal (src/core/progress.h): export-gguf's tensors, bench's
runs, generate's long prefill chunk by chunk — drawn on stderr only when it is a terminal, never
with --quiet, never on stdout."""
import pytest

from conftest import run_ditto, run_on_terminal


@pytest.fixture(scope="module")
def model(ditto_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("progress") / "m"
    run_ditto(ditto_bin, "make-test-model", "--preset", "qwen3-0.6b", "--num-hidden-layers", "2", "--seed", "3",
              "--out", out)
    return out


def test_export_gguf_draws_its_tensors_on_a_terminal_only(ditto_bin, model, tmp_path):
    args = ["export-gguf", "--model", model, "--output", tmp_path / "m.gguf", "--outtype", "q8_0"]
    terminal, out, running = run_on_terminal(ditto_bin, args, 120)
    assert not running and out.startswith("wrote ")
    assert "\rexport-gguf [" in terminal and " tensors, " in terminal, terminal
    piped = run_ditto(ditto_bin, *args)
    assert piped.stderr == "" and piped.stdout == out
    quiet, out, _ = run_on_terminal(ditto_bin, [*args, "--quiet"], 120)
    assert quiet == "" and out.startswith("wrote ")


def test_generate_shows_a_long_prefill_chunk_by_chunk(ditto_bin, model):
    prompt = ",".join(str(5 + i % 900) for i in range(3000))
    args = ["generate", "--model", model, "--prompt-token-ids", prompt, "--max-tokens", "2",
            "--max-num-batched-tokens", "256", "--long-prefill-token-threshold", "256"]
    terminal, out, running = run_on_terminal(ditto_bin, args, 300)
    assert not running and out.count("\n") == 1
    assert "\rgenerate [" in terminal and "/3000 tokens" in terminal, terminal
    piped = run_ditto(ditto_bin, *args)
    assert piped.stderr == "" and piped.stdout == out  # the same bits, and nothing drawn into a pipe
    quiet, _, _ = run_on_terminal(ditto_bin, [*args, "--quiet"], 300)
    assert quiet == ""


def test_bench_draws_its_runs(ditto_bin, model):
    args = ["bench", "--model", model, "--prompt-tokens", "32", "--decode-tokens", "4", "--repeat", "1", "--json"]
    terminal, out, running = run_on_terminal(ditto_bin, args, 300)
    assert not running and out.startswith("{")
    assert "\rbench [" in terminal and " runs, " in terminal, terminal
    quiet, _, _ = run_on_terminal(ditto_bin, [*args, "--quiet"], 300)
    assert quiet == ""
