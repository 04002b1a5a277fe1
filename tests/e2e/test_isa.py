"""The whole model gives the same bits on every kernel path: `ditto score` and `ditto generate`
under DITTO_ISA=scalar, avx2 and avx512 (those this CPU runs; on a CPU with AVX512-BF16, avx512
both with VDPBF16PS forced on and with its FMA emulation, DITTO_AVX512_BF16=1 / 0) on a generated 2-layer
qwen3-0.6b, compared as JSON text (shortest round-trip floats) and raw float32 log-probability
rows."""
import json
import os
import re
import subprocess

import pytest

from conftest import run_ditto

PATHS = ["scalar", "avx2", "avx512"]
SEQ_A = ",".join(str((i * 7919) % 151643) for i in range(1, 80))  # 79 tokens: several attention tiles
SEQ_B = "9707,11,1879,0,3"


BF16_VARIANTS = {"avx512-with-bf16": "1", "avx512-without-bf16": "0"}  # DITTO_AVX512_BF16


def run_isa(ditto_bin, isa, *args, check=True):
    env = dict(os.environ, DITTO_ISA=isa)
    if isa in BF16_VARIANTS:
        env.update(DITTO_ISA="avx512", DITTO_AVX512_BF16=BF16_VARIANTS[isa])
    proc = subprocess.run([ditto_bin, *map(str, args)], capture_output=True, text=True, timeout=900, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"DITTO_ISA={isa} ditto {' '.join(map(str, args))} failed:\n{proc.stderr}")
    return proc


def supported_paths(ditto_bin):
    out = run_ditto(ditto_bin, "--version").stdout
    best = re.search(r"cpu supports (\w+)", out).group(1)
    paths = PATHS[: PATHS.index(best) + 1]
    return paths + list(BF16_VARIANTS) if "avx512_bf16" in out else paths


@pytest.fixture(scope="module")
def model(ditto_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("qwen3isa") / "m"
    run_ditto(ditto_bin, "make-test-model", "--preset", "qwen3-0.6b", "--num-hidden-layers", "2",
              "--seed", "11", "--out", out)
    return out


def test_version_names_the_path(ditto_bin):
    for isa in supported_paths(ditto_bin):
        out = run_isa(ditto_bin, isa, "--version").stdout
        assert f"isa {'avx512' if isa in BF16_VARIANTS else isa} " in out, out
        if isa in BF16_VARIANTS:
            assert ("avx512_bf16 for bf16 weights" in out) == (BF16_VARIANTS[isa] == "1"), out


def test_score_bits_identical_on_every_path(ditto_bin, model, tmp_path):
    paths = supported_paths(ditto_bin)
    assert "scalar" in paths
    results = {}
    for isa in paths:
        rows = tmp_path / f"{isa}.f32"
        proc = run_isa(ditto_bin, isa, "score", "--model", model, "--json", "--threads", "2",
                       "--token-ids", SEQ_A, "--token-ids", SEQ_B, "--logprobs-out", rows)
        results[isa] = (proc.stdout, rows.read_bytes())
    base_json, base_rows = results["scalar"]
    assert len(base_json.splitlines()) == 78 + 4
    assert len(base_rows) == (79 + 5) * 151936 * 4
    for isa in paths[1:]:
        assert results[isa][0] == base_json, f"score JSON differs on {isa}"
        assert results[isa][1] == base_rows, f"log-probability rows differ on {isa}"


def test_generate_identical_on_every_path(ditto_bin, model):
    outs = {isa: run_isa(ditto_bin, isa, "generate", "--model", model, "--prompt-token-ids", SEQ_B,
                         "--max-tokens", "12", "--ignore-eos", "--json").stdout
            for isa in supported_paths(ditto_bin)}
    first = outs["scalar"]
    assert json.loads(first)
    for isa, out in outs.items():
        assert out == first, f"generate differs on {isa}"


def test_structured_outputs_identical_on_every_path(ditto_bin, model, tmp_path):
    """Constrained requests (a JSON Schema, a regex, a choice, a Lark grammar) beside a free one, sampled
    with logprobs: the same JSON text on every path — the masks are integer bit operations, and the
    logits they mask are the same bits everywhere."""
    so = [{"json": {"type": "object", "properties": {"id": {"type": "integer"}, "tags": {"type": "array",
                    "items": {"enum": ["a", "b"]}, "minItems": 1}}, "required": ["id", "tags"]}},
          {"regex": "[a-z]{3,8}-[0-9]{2}"}, {"choice": ["alpha", "beta", "gamma delta"]},
          {"grammar": 'start: "(" NUM ("+" NUM)* ")"\nNUM: /[0-9]{1,3}/\n'}, None]
    lines = []
    for i, constraint in enumerate(so):
        line = {"prompt": f"Request {i}:", "max_tokens": 24, "temperature": 0.8, "seed": 7 + i, "logprobs": 2}
        if constraint:
            line["structured_outputs"] = constraint
        lines.append(json.dumps(line))
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    outs = {isa: run_isa(ditto_bin, isa, "generate", "--model", model, "--prompts", src).stdout
            for isa in supported_paths(ditto_bin)}
    first = outs["scalar"]
    assert len(first.splitlines()) == 5 and all("error" not in json.loads(l) for l in first.splitlines())
    for isa, out in outs.items():
        assert out == first, f"structured outputs differ on {isa}"


def test_unknown_isa_is_a_clear_error(ditto_bin, model):
    proc = run_isa(ditto_bin, "sse9", "score", "--model", model, "--token-ids", SEQ_B, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: DITTO_ISA='sse9'"), proc.stderr
    assert "scalar, avx2 or avx512" in proc.stderr
    assert proc.stdout == ""
