"""Self-tests of the float64 reference's forward pass (no ditto needed, < 1 s): agreement to
1e-11 with the separate pure-Python scalar implementation (selftest_models.scalar_forward) on
tiny Qwen3 / Llama / Qwen3-MoE models (GQA, biases, tied/untied heads, llama3 scaling, sparse and
dense MoE layers), causality, sharded and F16/F32 storage, lm_head chunking, the bf16 KV cache
and variants, the TEST-ONLY debug flags, the CLI, and stored biases the config disables.

Run: /usr/bin/python3 -m pytest -q tests/reference/test_reference_forward.py
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import reference as ref
from model_writer import random_weights, write_model
from selftest_models import (llama_config, make_model, qwen3_config, qwen3_moe_config,
                             scalar_forward)

HERE = os.path.dirname(os.path.abspath(__file__))


# ------------------------------------------------------------------------------------
# the forward pass
# ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["qwen3", "qwen3_bias_tied", "llama_llama3", "llama_bias_untied",
                                  "qwen3_moe", "qwen3_moe_mixed_layers", "qwen2", "mistral"])
def test_matches_scalar_implementation(tmp_path, kind):
    if kind == "qwen3":
        cfg = qwen3_config()
    elif kind == "qwen3_moe":
        cfg = qwen3_moe_config()
    elif kind == "qwen3_moe_mixed_layers":
        # layers 1 and 3 sparse by the step, 3 forced dense: sparse {1}; no renormalisation
        cfg = qwen3_moe_config(num_hidden_layers=4, decoder_sparse_step=2, mlp_only_layers=[3],
                               num_experts=5, num_experts_per_tok=3, norm_topk_prob=False,
                               tie_word_embeddings=True)
    elif kind == "qwen3_bias_tied":
        cfg = qwen3_config(attention_bias=True, tie_word_embeddings=True)
    elif kind == "qwen2":  # q/k/v biases, no o_proj bias, no q/k norm, tied
        cfg = qwen3_config(architectures=["Qwen2ForCausalLM"], model_type="qwen2",
                           tie_word_embeddings=True)
        cfg.pop("attention_bias")
    elif kind == "mistral":  # Llama without biases; sliding_window null
        cfg = llama_config(architectures=["MistralForCausalLM"], model_type="mistral",
                           rope_scaling=None, tie_word_embeddings=False, sliding_window=None)
        cfg.pop("attention_bias")
        cfg.pop("mlp_bias")
    elif kind == "llama_llama3":
        cfg = llama_config()
    else:
        cfg = llama_config(attention_bias=True, mlp_bias=True, tie_word_embeddings=False,
                           num_key_value_heads=2, rope_scaling=None)
    d, W = make_model(tmp_path, cfg, dtype="BF16", seed=3)
    ids = [3, 0, 17, 5, 36, 1, 9]
    got = ref.log_softmax(d, ids)
    want = scalar_forward(cfg, W, ids)
    assert got.shape == (len(ids), cfg["vocab_size"])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-11)
    # rows are normalised distributions
    np.testing.assert_allclose(np.log(np.exp(got).sum(-1)), 0.0, atol=1e-13)


def test_causal_prefix_invariance(tmp_path):
    d, _ = make_model(tmp_path, qwen3_config(), seed=4)
    ids = [1, 7, 30, 2, 2, 11, 35, 0, 19]
    full = ref.log_softmax(d, ids)
    for n in (1, 4, 8):
        part = ref.log_softmax(d, ids[:n])
        np.testing.assert_allclose(part, full[:n], rtol=0, atol=1e-12)
    # changing a later token does not change earlier rows but does change later ones
    alt = ref.log_softmax(d, ids[:5] + [3] + ids[6:])
    np.testing.assert_allclose(alt[:5], full[:5], rtol=0, atol=1e-12)
    assert np.max(np.abs(alt[5:] - full[5:])) > 1e-3


def test_sharded_and_f32_storage(tmp_path):
    cfg = qwen3_config()
    d1, _ = make_model(tmp_path / "one", cfg, seed=5)
    d3, _ = make_model(tmp_path / "three", cfg, seed=5, num_shards=3)
    ids = [4, 8, 15, 16, 23, 36]
    assert os.path.exists(os.path.join(d3, "model.safetensors.index.json"))
    np.testing.assert_array_equal(ref.log_softmax(d1, ids), ref.log_softmax(d3, ids))
    d32, W32 = make_model(tmp_path / "f32", cfg, dtype="F32", seed=5)
    np.testing.assert_allclose(ref.log_softmax(d32, ids), scalar_forward(cfg, W32, ids),
                               rtol=0, atol=1e-11)
    d16, W16 = make_model(tmp_path / "f16", cfg, dtype="F16", seed=5)
    np.testing.assert_allclose(ref.log_softmax(d16, ids), scalar_forward(cfg, W16, ids),
                               rtol=0, atol=1e-11)


def test_lm_head_chunking(tmp_path, monkeypatch):
    d, _ = make_model(tmp_path, llama_config(tie_word_embeddings=False), seed=6)
    ids = [1, 2, 3, 40]
    base = ref.logits(d, ids)
    monkeypatch.setattr(ref, "LM_HEAD_CHUNK", 7)  # 41 = 5*7 + 6: ragged last chunk
    np.testing.assert_allclose(ref.logits(d, ids), base, rtol=0, atol=1e-13)


def test_bf16_kv_cache_and_variants(tmp_path):
    d, _ = make_model(tmp_path, qwen3_config(), seed=7)
    ids = [5, 6, 7, 8, 9, 10, 11, 12]
    f64 = ref.log_softmax(d, ids)
    bf = ref.log_softmax(d, ids, kv_cache_dtype="bfloat16")
    diff = np.max(np.abs(bf - f64))
    assert 1e-6 < diff < 0.1, diff
    many = ref.log_softmax_variants(d, ids, [{}, {"kv_cache_dtype": "bfloat16"},
                                             {"_debug_disable_rope": True}])
    np.testing.assert_allclose(many[0], f64, rtol=0, atol=1e-12)
    np.testing.assert_allclose(many[1], bf, rtol=0, atol=1e-12)
    # float32 emulation is close to float64 (it is the same algorithm)
    e32 = ref.log_softmax(d, ids, _emulate_float32=True)
    assert np.max(np.abs(e32 - f64)) < 1e-4


@pytest.mark.parametrize("flag", ["_debug_disable_rope", "_debug_skip_qk_norm",
                                  "_debug_interleaved_rope", "_debug_no_causal_mask"])
def test_debug_flags_change_output(tmp_path, flag):
    d, _ = make_model(tmp_path, qwen3_config(), seed=8)
    ids = [5, 6, 7, 8, 9, 10, 11, 12]
    good = ref.log_softmax(d, ids)
    bad = ref.log_softmax(d, ids, **{flag: True})
    assert np.max(np.abs(good - bad)) > 1e-2
    with pytest.raises(TypeError):
        ref.log_softmax(d, ids, _debug_typo=True)


def test_qwen2_biases_and_their_debug_flag(tmp_path):
    cfg = qwen3_config(architectures=["Qwen2ForCausalLM"], model_type="qwen2")
    cfg.pop("attention_bias")
    d, W = make_model(tmp_path, cfg, seed=10)
    assert "model.layers.0.self_attn.q_proj.bias" in W
    assert "model.layers.0.self_attn.o_proj.bias" not in W
    ids = [5, 6, 7, 8, 9]
    good = ref.log_softmax(d, ids)
    assert np.max(np.abs(good - ref.log_softmax(d, ids, _debug_skip_qkv_bias=True))) > 1e-2


def test_mistral_sliding_window_binds_on_every_layer(tmp_path):
    """A Mistral window of 4: the rows of positions 0..3 (whose keys all lie in the window) equal
    the same weights without a window, and every later row differs."""
    ids = list(range(3, 15))
    lps = {}
    for window in (4, None):
        cfg = llama_config(architectures=["MistralForCausalLM"], model_type="mistral",
                           rope_scaling=None, sliding_window=window, max_position_embeddings=32768)
        d, _ = make_model(tmp_path / str(window), cfg, seed=11)
        assert ref.load_config(d).sliding_window == (window or 0)
        lps[window] = ref.log_softmax(d, ids)
    assert np.array_equal(lps[4][:4], lps[None][:4])
    assert np.min(np.max(np.abs(lps[4][4:] - lps[None][4:]), axis=1)) > 1e-6


def test_no_rope_scaling_flag_matters_for_llama3(tmp_path):
    d, _ = make_model(tmp_path, llama_config(), seed=9)
    ids = list(range(20))
    assert np.max(np.abs(ref.log_softmax(d, ids) -
                         ref.log_softmax(d, ids, _debug_no_rope_scaling=True))) > 1e-3


def test_cli(tmp_path):
    d, _ = make_model(tmp_path, qwen3_config(), seed=10)
    out = subprocess.run([sys.executable, os.path.join(HERE, "reference.py"), d, "1,2,3",
                          "--kv-cache-dtype", "bfloat16"], capture_output=True, text=True,
                         check=True).stdout
    lines = out.strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("pos 0 token 1 -> ")
    lp = ref.log_softmax(d, [1, 2, 3], kv_cache_dtype="bfloat16")
    top, val = lines[2].split("-> ")[1].split(":")
    assert int(top) == int(np.argmax(lp[2])) and abs(float(val) - lp[2].max()) < 1e-6


def test_stored_bias_ignored_when_config_disables_it(tmp_path):
    cfg_b = qwen3_config(attention_bias=True)
    w = random_weights(cfg_b, seed=11, std=0.3, random_norms=True)
    d_with = str(tmp_path / "with")
    write_model(d_with, qwen3_config(attention_bias=False), w)
    d_without = str(tmp_path / "without")
    write_model(d_without, qwen3_config(), {k: v for k, v in w.items() if not k.endswith(".bias")})
    ids = [1, 2, 3]
    with pytest.warns(UserWarning, match="ignored"):
        got = ref.log_softmax(d_with, ids)
    np.testing.assert_array_equal(got, ref.log_softmax(d_without, ids))
    # a bias the config asks for must exist
    write_model(str(tmp_path / "missing"), cfg_b, {k: v for k, v in w.items()
                                                   if not k.endswith("q_proj.bias")})
    with pytest.raises(KeyError):
        ref.log_softmax(str(tmp_path / "missing"), ids)
