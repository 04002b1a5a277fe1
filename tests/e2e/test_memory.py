"""Loading a full-depth qwen3-0.6b (28 layers, bf16) peaks below 1.3x the weights' size: weights
are repacked from the memory map tensor by tensor, and each chunk's mapped pages are released."""
import os
import re

from conftest import run_ditto


def test_qwen3_0_6b_load_peak_rss(ditto_bin, tmp_path):
    model = tmp_path / "qwen3-0.6b"
    run_ditto(ditto_bin, "make-test-model", "--preset", "qwen3-0.6b", "--seed", "0", "--out", model)
    proc = run_ditto(ditto_bin, "generate", "--model", model, "--prompt-token-ids", "1,2,3",
                     "--max-tokens", "1", "--report-memory")
    m = re.search(r"weights ([\d.]+) MB, peak RSS ([\d.]+) MB \(([\d.]+)x weights\)", proc.stderr)
    assert m, proc.stderr
    weights_mb, rss_mb, ratio = map(float, m.groups())
    print(f"\nqwen3-0.6b 28 layers bf16: weights {weights_mb} MB, peak RSS {rss_mb} MB, {ratio}x")
    assert weights_mb > 1100  # the full-depth model (0.6e9 parameters), not a reduced one
    if not os.environ.get("DITTO_SANITIZER"):  # a sanitizer's shadow memory is in the RSS (make test-sanitize)
        assert ratio < 1.3
