"""Pooling parity: ditto's embeddings and reranker scores vs the independent float64 reference.

    /usr/bin/python3 -m pytest -s -p no:cacheprovider tests/reference/test_pooling_parity.py

Models: 2-layer test models of the qwen3-embedding-0.6b preset (its sentence-transformers files:
LAST pooling, Normalize) as safetensors and as its `ditto export-gguf --outtype q8_0` file (the
pooling_type key, quantized weights), and of qwen3-reranker-0.6b (--task score). ditto's numbers
come from `ditto embed` (tools/cmd_embed.cc) on token-id inputs; the reference's from
reference.embedding / reference.yes_no_score on the same ids.

Tolerances. The values: a normalized 1024-value embedding has entries of about 1/32; a score is a
probability. Two references are compared:
  * "rounded": ditto's roundings emulated in float64 (K/V and every GEMM input on a bf16 weight
    rounded to bf16; on the Q8_0 file, the activations quantized per 32-value block as ditto's
    integer dot products take them: kv_cache_dtype="bfloat16", bf16_activations /
    quantize_activations). What is left is float32 arithmetic and the rounding-boundary flips
    (a value ditto rounds from float32 and the reference from float64 lands one bf16 ulp apart,
    and everything downstream moves): the same noise as test_parity.py's, measured here the same
    way in each run — the rounded reference against itself with its rounded inputs perturbed by
    1e-6 relative (activation_dither_seed, another draw of the noise). tol = max(floor,
    NOISE_FACTOR × that noise), NOISE_FACTOR = 3, per measure: max |Δ| per entry, 1 − cosine,
    |Δscore|. MEASURED (2 layers): noise 1e-4 .. 7e-4 per entry, 1 − cos up to 1e-5.
  * "float64": no rounding at all; the roundings' own systematic effect (2^-8 relative per
    rounded value): TOL_F64 max |Δ| ≤ 1e-2, 1 − cos ≤ 1e-3, |Δscore| ≤ 1e-2.
Sensitivity: the rounded reference with a deliberate bug — MEAN instead of LAST pooling, the
Matryoshka cut after normalizing instead of before, the score's yes and no swapped — must lie at
least SENSITIVITY × tol away from ditto, proof that each comparison can fail.

MEASURED (AMD EPYC Zen 5, this file's models and prompts): see the printed lines (pytest -s).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference as ref  # noqa: E402

REPO = HERE.parents[1]
DITTO_BIN = os.environ.get("DITTO_BIN") or str(REPO / "build" / "tools" / "ditto")

pytestmark = pytest.mark.skipif(not os.path.exists(DITTO_BIN),
                                reason=f"ditto binary not found at {DITTO_BIN} (build it, or set DITTO_BIN)")

TOL_FLOOR = dict(max_abs=1e-5, one_minus_cos=1e-9, score=1e-5)
NOISE_FACTOR = 3.0
TOL_F64 = dict(max_abs=1e-2, one_minus_cos=1e-3, score=1e-2)
SENSITIVITY = 3.0
DITHER = dict(activation_dither_seed=1)
YES, NO = 9693, 2152  # the Qwen3 vocabulary's "yes" and "no"

# token-id prompts: the first ends in <|endoftext|> as Qwen3-Embedding's tokenizer appends it
PROMPTS = [
    [785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 13, 151643],
    [9707, 11, 1879, 0, 151643],
    [(i * 7919 + 13) % 151000 for i in range(1, 90)],
]


def _run(*args, stdin=None):
    p = subprocess.run([DITTO_BIN, *map(str, args)], capture_output=True, text=True, input=stdin, timeout=900)
    if p.returncode != 0:
        raise AssertionError(f"ditto {' '.join(map(str, args))} failed ({p.returncode}):\n{p.stderr[-4000:]}")
    return p.stdout


def _embed(model, lines, *flags):
    out = _run("embed", "--model", model, "--input", "-", *flags,
               stdin="".join(json.dumps(line) + "\n" for line in lines))
    return [json.loads(line) for line in out.splitlines()]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("pooling")
    emb, rr = root / "embedding", root / "reranker"
    _run("make-test-model", "--preset", "qwen3-embedding-0.6b", "--num-hidden-layers", "2", "--seed", "4",
         "--out", emb)
    _run("make-test-model", "--preset", "qwen3-reranker-0.6b", "--num-hidden-layers", "2", "--seed", "5",
         "--out", rr)
    gguf = root / "embedding-q8_0.gguf"
    _run("export-gguf", "--model", emb, "--outtype", "q8_0", "--output", gguf)
    return dict(embedding=str(emb), gguf=str(gguf), reranker=str(rr))


def _distance(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b))), float(1 - a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _noise_tol(rounded, dithered):
    """The tolerance from one more draw of the rounding noise (docstring)."""
    max_abs, one_minus_cos = _distance(rounded, dithered)
    return dict(max_abs=max(TOL_FLOOR["max_abs"], NOISE_FACTOR * max_abs),
                one_minus_cos=max(TOL_FLOOR["one_minus_cos"], NOISE_FACTOR * one_minus_cos))


def _compare(name, got, want, tol, ratio_only=False):
    max_abs, one_minus_cos = _distance(got, want)
    print(f"[{name}] max |Δ| {max_abs:.3g} (tol {tol['max_abs']:.3g}), 1 − cos {one_minus_cos:.3g} "
          f"(tol {tol['one_minus_cos']:.3g})")
    if not ratio_only:
        assert max_abs <= tol["max_abs"], f"{name}: max |Δ| {max_abs} > {tol['max_abs']}"
        assert one_minus_cos <= tol["one_minus_cos"], f"{name}: 1 − cos {one_minus_cos} > {tol['one_minus_cos']}"
    return max_abs


def _options(model):
    quantized = model.endswith(".gguf")
    return dict(kv_cache_dtype="bfloat16", bf16_activations=not quantized, quantize_activations=quantized)


@pytest.mark.parametrize("which", ["embedding", "gguf"])
def test_embeddings_match_the_float64_reference(models, which):
    model = models[which]
    lines = [{"input": ids} for ids in PROMPTS] + [{"input": PROMPTS[2], "dimensions": 128}]
    got = _embed(model, lines)
    assert all("embedding" in g for g in got), got
    for k, ids in enumerate(PROMPTS + [PROMPTS[2]]):
        dims = 128 if k == len(PROMPTS) else None
        e = got[k]["embedding"]
        assert len(e) == (dims or 1024)
        assert abs(np.linalg.norm(np.asarray(e, np.float64)) - 1) < 1e-6  # the preset's Normalize module
        rounded = ref.embedding(model, ids, pooling="LAST", normalize=True, dimensions=dims, **_options(model))
        dithered = ref.embedding(model, ids, pooling="LAST", normalize=True, dimensions=dims, **_options(model),
                                 **DITHER)
        tol = _noise_tol(rounded, dithered)
        _compare(f"{which} prompt {k} vs rounded", e, rounded, tol)
        exact = ref.embedding(model, ids, pooling="LAST", normalize=True, dimensions=dims)
        _compare(f"{which} prompt {k} vs float64", e, exact, TOL_F64)
        # Sensitivity: MEAN pooling, or normalizing before the Matryoshka cut, is far outside.
        if dims is None and len(ids) > 1:
            bug = ref.embedding(model, ids, pooling="MEAN", normalize=True, **_options(model))
            assert _compare(f"{which} prompt {k} vs MEAN (bug)", e, bug, tol, ratio_only=True) >= \
                SENSITIVITY * tol["max_abs"]
        if dims is not None:
            full = ref.embedding(model, ids, pooling="LAST", normalize=True, **_options(model))[:dims]
            assert _compare(f"{which} cut after normalizing (bug)", e, full, tol, ratio_only=True) >= \
                SENSITIVITY * tol["max_abs"]


def test_mean_pooling_and_no_normalize_match_the_reference(models):
    model = models["embedding"]
    got = _embed(model, [{"input": PROMPTS[2], "normalize": False}], "--pooler-config",
                 '{"pooling_type": "MEAN"}')
    rounded = ref.embedding(model, PROMPTS[2], pooling="MEAN", normalize=False, **_options(model))
    dithered = ref.embedding(model, PROMPTS[2], pooling="MEAN", normalize=False, **_options(model), **DITHER)
    _compare("MEAN, raw vs rounded", got[0]["embedding"], rounded, _noise_tol(rounded, dithered))


def test_reranker_scores_match_the_float64_reference(models):
    model = models["reranker"]
    got = _embed(model, [{"input": ids} for ids in PROMPTS], "--task", "score")
    for k, ids in enumerate(PROMPTS):
        s = got[k]["score"]
        assert 0.0 < s < 1.0
        rounded = ref.yes_no_score(model, ids, YES, NO, **_options(model))
        dithered = ref.yes_no_score(model, ids, YES, NO, **_options(model), **DITHER)
        exact = ref.yes_no_score(model, ids, YES, NO)
        swapped = ref.yes_no_score(model, ids, NO, YES, **_options(model))
        tol = max(TOL_FLOOR["score"], NOISE_FACTOR * abs(rounded - dithered))
        print(f"[reranker prompt {k}] ditto {s:.9g}, rounded {rounded:.9g} (tol {tol:.3g}), float64 {exact:.9g}")
        assert abs(s - rounded) <= tol
        assert abs(s - exact) <= TOL_F64["score"]
        assert abs(s - swapped) >= SENSITIVITY * tol


def test_reranker_pair_is_rendered_with_qwen3_rerankers_prompt(models):
    """The pair's tokens are Qwen3-Reranker's documented format, tokenized; the score is the
    reference's on those tokens."""
    model = models["reranker"]
    got = _embed(model, [{"text_1": "What is the capital of China?", "text_2": "The capital of China is Beijing."}],
                 "--task", "score")[0]
    prompt = ('<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the '
              'Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
              '<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n'
              '<Query>: What is the capital of China?\n<Document>: The capital of China is Beijing.<|im_end|>\n'
              '<|im_start|>assistant\n<think>\n\n</think>\n\n')
    ids = json.loads(_run("tokenize", "--model", model, "--text", prompt))["ids"]
    assert got["prompt_tokens"] == len(ids)
    rounded = ref.yes_no_score(model, ids, YES, NO, **_options(model))
    dithered = ref.yes_no_score(model, ids, YES, NO, **_options(model), **DITHER)
    assert abs(got["score"] - rounded) <= max(TOL_FLOOR["score"], NOISE_FACTOR * abs(rounded - dithered))
