"""Pooling from the command line: `ditto embed` gives the same bits on every kernel path
(DITTO_ISA=scalar, avx2, avx512 — those this CPU runs) for embeddings and reranker scores;
`ditto check-invariance --pooling-only` passes on LAST, MEAN and score models and fails under
its negative control; the embedding preset's sentence-transformers files make it a pooling model
without flags; bad input is refused naming the field. Models: generated 2-layer presets."""
import json

import pytest

from conftest import run_ditto
from test_isa import run_isa, supported_paths

LINES = [
    {"input": "The quick brown fox jumps over the lazy dog."},
    {"input": [(i * 7919) % 151000 for i in range(1, 80)], "dimensions": 64},
    {"input": "Hello", "normalize": False},
    {"text_1": "What is the capital of China?", "text_2": "The capital of China is Beijing."},
]


@pytest.fixture(scope="module")
def models(ditto_bin, tmp_path_factory):
    root = tmp_path_factory.mktemp("pooling")
    emb, rr = root / "embedding", root / "reranker"
    run_ditto(ditto_bin, "make-test-model", "--preset", "qwen3-embedding-0.6b", "--num-hidden-layers", "2",
              "--seed", "2", "--out", emb)
    run_ditto(ditto_bin, "make-test-model", "--preset", "qwen3-reranker-0.6b", "--num-hidden-layers", "2",
              "--seed", "3", "--out", rr)
    return {"embedding": str(emb), "reranker": str(rr)}


def embed(ditto_bin, model, lines, *flags, isa=None, failing=False):
    """`ditto embed`'s result lines; `failing`: some lines fail, so the exit status is 1."""
    text = "".join(json.dumps(line) + "\n" for line in lines)
    args = ["embed", "--model", model, "--input", "-", *flags]
    if isa is None:
        proc = run_ditto(ditto_bin, *args, input_text=text, check=False)
        assert proc.returncode == (1 if failing else 0), proc.stderr
        out = proc.stdout
    else:
        import subprocess, os
        env = dict(os.environ, DITTO_ISA=isa)
        proc = subprocess.run([ditto_bin, *args], input=text, capture_output=True, text=True, timeout=900,
                              env=env)
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
    return [json.loads(line) for line in out.splitlines()]


def test_sentence_transformers_files_make_a_pooling_model(ditto_bin, models):
    got = embed(ditto_bin, models["embedding"], LINES)
    assert len(got[0]["embedding"]) == 1024 and len(got[1]["embedding"]) == 64
    # The tokenizer appends <|endoftext|> (Qwen3-Embedding's post-processor): 11 tokens, not 10.
    assert got[0]["prompt_tokens"] == 11
    assert 0.0 < got[3]["score"] <= 1.0  # an embedding model's pair: the cosine


@pytest.mark.parametrize("which,flags", [("embedding", []), ("reranker", ["--task", "score"])])
def test_embed_is_the_same_bits_on_every_kernel_path(ditto_bin, models, which, flags):
    lines = LINES if which == "embedding" else [LINES[0], {"input": LINES[1]["input"]}, LINES[3]]
    results = {isa: embed(ditto_bin, models[which], lines, *flags, isa=isa) for isa in supported_paths(ditto_bin)
               if isa in ("scalar", "avx2", "avx512")}
    assert "scalar" in results
    first = next(iter(results.values()))
    for isa, got in results.items():
        assert got == first, f"DITTO_ISA={isa} differs"  # JSON floats: shortest round trip of the float32


@pytest.mark.parametrize("flags", [
    ["--pooler-config", '{"pooling_type": "MEAN"}'],
    ["--task", "score"],
])
def test_check_invariance_pooling_rows_pass(ditto_bin, models, flags):
    model = models["reranker" if "score" in flags else "embedding"]
    proc = run_ditto(ditto_bin, "check-invariance", "--model", model, *flags, "--pooling-only", "--num-prompts", "8",
                     "--max-prompt-tokens", "96", "--json")
    report = json.loads(proc.stdout)
    rows = report["rows"] if isinstance(report, dict) else report
    assert len(rows) >= 9
    assert all(r["mismatches"] == 0 for r in rows), rows
    assert any("preemption" in r["row"] and "preemptions" in r["note"] for r in rows), rows


def test_check_invariance_negative_control_fails(ditto_bin, models):
    proc = run_ditto(ditto_bin, "check-invariance", "--model", models["reranker"], "--task", "score",
                     "--pooling-only", "--num-prompts", "6", "--max-prompt-tokens", "64", "--inject-fault",
                     "batch-size", check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "mismatches" in proc.stderr + proc.stdout


def test_bad_input_is_refused_naming_the_field(ditto_bin, models):
    model = models["embedding"]
    got = embed(ditto_bin, model, [{"input": []}, {"input": "x", "dimensions": 4096}, {"input": "ok"},
                                   {"input": list(range(50))}, {"input": "x", "bogus": 1}], "--max-model-len", "32",
                failing=True)
    assert "input" in got[0]["error"] and "empty" in got[0]["error"]
    assert "dimensions" in got[1]["error"]
    assert "embedding" in got[2]  # the others of the batch still run
    assert "truncate_prompt_tokens" in got[3]["error"]
    assert got[1]["error"].startswith("line 2: ") and got[4]["error"].startswith("line 5: ")  # the file's lines
    assert "unknown field 'bogus'" in got[4]["error"]
    cut = embed(ditto_bin, model, [{"input": list(range(50)), "truncate_prompt_tokens": 32}], "--max-model-len", "32")
    assert len(cut[0]["embedding"]) == 1024
    proc = run_ditto(ditto_bin, "embed", "--model", model, "--runner", "generate", "--input", "-",
                     input_text='{"input": "x"}\n', check=False)
    assert proc.returncode != 0 and "pooling" in proc.stderr
    proc = run_ditto(ditto_bin, "embed", "--model", model, "--input", "-",
                     input_text='{"prompt": "x"}\nnot json\n{"input": "ok"}\n', check=False)
    assert proc.returncode == 1 and "2 of 3 lines failed" in proc.stderr, proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert "unknown field 'prompt'" in out[0]["error"] and "not a JSON object" in out[1]["error"]
    assert "embedding" in out[2]
    proc = run_ditto(ditto_bin, "embed", "--model", model, "--hf-overrides", '{"rope_theta": 5}', "--input", "-",
                     input_text='{"input": "x"}\n', check=False)
    assert proc.returncode != 0 and "hf_overrides.rope_theta" in proc.stderr
