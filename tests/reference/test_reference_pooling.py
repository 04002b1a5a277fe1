"""Self-tests of the float64 reference's pooling entry points (no ditto needed, < 1 s):
hidden_states is what the LM head multiplies; embedding's LAST / MEAN / CLS pooling, its
normalisation and Matryoshka truncation (first `dimensions` values, then normalised: vLLM's
order); yes_no_score equals the official softmax over [no, yes] of the last row's logits; a GGUF
file gives what its safetensors twin gives.

Run: /usr/bin/python3 -m pytest -q tests/reference/test_reference_pooling.py
"""

from __future__ import annotations

import numpy as np
import pytest

import reference as ref
from selftest_models import make_model, qwen3_config
from test_gguf_selftest import tiny_pair

IDS = [3, 0, 17, 5, 36, 1, 9]


@pytest.fixture(scope="module")
def tied(tmp_path_factory):
    """A tiny Qwen3 with tied embeddings (as Qwen3-Embedding, -Reranker): (dir, exact weights)."""
    return make_model(tmp_path_factory.mktemp("tied"), qwen3_config(tie_word_embeddings=True),
                      dtype="BF16", seed=5)


def test_hidden_states_are_what_the_lm_head_multiplies(tied):
    d, W = tied
    h = ref.hidden_states(d, IDS)
    assert h.shape == (len(IDS), qwen3_config()["hidden_size"]) and h.dtype == np.float64
    np.testing.assert_allclose(h @ W["model.embed_tokens.weight"].T, ref.logits(d, IDS),
                               rtol=0, atol=1e-12)
    # causal: a prefix's rows are the whole prompt's first rows
    np.testing.assert_allclose(ref.hidden_states(d, IDS[:4]), h[:4], rtol=0, atol=1e-13)
    # options reach the pass: a bf16 KV cache moves the rows a little
    hb = ref.hidden_states(d, IDS, kv_cache_dtype="bfloat16")
    assert 0 < np.max(np.abs(hb - h)) < 1e-1


def test_pooling_picks_the_rows(tied):
    d, _ = tied
    h = ref.hidden_states(d, IDS)
    raw = {p: ref.embedding(d, IDS, pooling=p, normalize=False) for p in ref.POOLING_TYPES}
    np.testing.assert_array_equal(raw["LAST"], h[-1])
    np.testing.assert_array_equal(raw["CLS"], h[0])
    np.testing.assert_allclose(raw["MEAN"], h.sum(axis=0) / len(IDS), rtol=0, atol=1e-14)
    np.testing.assert_array_equal(ref.embedding(d, IDS, pooling="last", normalize=False), h[-1])
    # one token: the three poolings agree
    one = [ref.embedding(d, IDS[:1], pooling=p) for p in ref.POOLING_TYPES]
    np.testing.assert_allclose(one[1], one[0], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(one[2], one[0])
    # LAST of a prefix is that prefix's last row of the whole prompt
    np.testing.assert_allclose(ref.embedding(d, IDS[:5], normalize=False), h[4], rtol=0, atol=1e-13)


def test_normalize_and_matryoshka_dimensions(tied):
    d, _ = tied
    for p in ref.POOLING_TYPES:
        raw = ref.embedding(d, IDS, pooling=p, normalize=False)
        e = ref.embedding(d, IDS, pooling=p)
        assert abs(np.linalg.norm(e) - 1.0) < 1e-15
        np.testing.assert_allclose(e, raw / np.linalg.norm(raw), rtol=0, atol=1e-15)
    raw = ref.embedding(d, IDS, normalize=False)
    for k in (1, 5, len(raw)):
        e = ref.embedding(d, IDS, dimensions=k)
        assert e.shape == (k,)
        assert abs(np.linalg.norm(e) - 1.0) < 1e-15
        # truncated first, then normalised (not a slice of the normalised vector)
        np.testing.assert_allclose(e, raw[:k] / np.linalg.norm(raw[:k]), rtol=0, atol=1e-15)
    assert not np.allclose(ref.embedding(d, IDS, dimensions=5), ref.embedding(d, IDS)[:5])
    np.testing.assert_array_equal(ref.embedding(d, IDS, dimensions=5, normalize=False), raw[:5])
    for bad in (0, len(raw) + 1, 2.5, True):
        with pytest.raises(ValueError, match="dimensions"):
            ref.embedding(d, IDS, dimensions=bad)
    with pytest.raises(ValueError, match="pooling 'MAX'"):
        ref.embedding(d, IDS, pooling="MAX")


def test_yes_no_score_is_the_softmax_over_no_and_yes(tied):
    d, _ = tied
    z = ref.logits(d, IDS)[-1]
    for yes, no in ((7, 11), (11, 7), (2, 30)):
        s = ref.yes_no_score(d, IDS, yes, no)
        pair = np.array([z[no], z[yes]])
        softmax = np.exp(pair - pair.max()) / np.sum(np.exp(pair - pair.max()))
        assert 0.0 < s < 1.0
        assert abs(s - softmax[1]) < 1e-13
    assert abs(ref.yes_no_score(d, IDS, 7, 11) + ref.yes_no_score(d, IDS, 11, 7) - 1.0) < 1e-15
    assert ref.yes_no_score(d, IDS, 4, 4) == 0.5
    with pytest.raises(ValueError, match="vocab_rows"):
        ref.yes_no_score(d, IDS, 7, qwen3_config()["vocab_size"])


def test_gguf_gives_what_its_safetensors_twin_gives(tmp_path):
    gguf, twin = tiny_pair(tmp_path, "qwen3", tied=True, seed=2)
    ids = [4, 9, 0, 31, 7]
    for p in ref.POOLING_TYPES:
        np.testing.assert_allclose(ref.embedding(gguf, ids, pooling=p),
                                   ref.embedding(twin, ids, pooling=p), rtol=0, atol=1e-12)
    assert abs(ref.yes_no_score(gguf, ids, 3, 8) - ref.yes_no_score(twin, ids, 3, 8)) < 1e-12
