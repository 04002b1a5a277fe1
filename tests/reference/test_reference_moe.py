"""Self-tests of the float64 reference's Qwen3-MoE support (no ditto needed, < 1 s): config
defaults and sparse-layer selection (decoder_sparse_step, mlp_only_layers), agreement with the
scalar implementation, one expert = the dense model, permuting experts and router rows changes
nothing, norm_topk_prob, the Routing records and k-th margins, bitwise router ties going to the
lower expert id, variants (moe_experts_from, float32 emulation, debug flags) and the CLI's
--routing.

Run: /usr/bin/python3 -m pytest -q tests/reference/test_reference_moe.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import reference as ref
from model_writer import random_weights, write_model
from selftest_models import make_model, qwen3_config, qwen3_moe_config, scalar_forward

HERE = os.path.dirname(os.path.abspath(__file__))


# ------------------------------------------------------------------------------------
# Qwen3-MoE
# ------------------------------------------------------------------------------------

MOE_IDS = [3, 0, 17, 5, 36, 1, 9, 22, 30, 2, 14, 8]


def _write(tmp_path, name, cfg, W):
    d = str(tmp_path / name)
    write_model(d, cfg, W, dtype="F64")  # F64: the arrays given are stored exactly
    return d


def _moe_weights(cfg, seed):
    return {k: np.asarray(v, dtype=np.float64)
            for k, v in random_weights(cfg, seed=seed, std=0.3, random_norms=True).items()}


def test_moe_config_and_layer_selection(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3MoeForCausalLM"], "num_hidden_layers": 3, "num_experts": 8,
        "mlp_only_layers": None}))
    c = ref.load_config(str(tmp_path))
    assert c.arch == "qwen3_moe" and c.qk_norm
    # Qwen3MoeConfig class defaults
    assert (c.hidden_size, c.num_key_value_heads, c.head_dim, c.intermediate_size) == (
        2048, 4, 2048 // 32, 6144)
    assert (c.num_experts_per_tok, c.moe_intermediate_size, c.decoder_sparse_step,
            c.mlp_only_layers, c.norm_topk_prob) == (8, 768, 1, (), False)
    assert [c.is_moe_layer(i) for i in range(3)] == [True, True, True]
    cfg = qwen3_moe_config(num_hidden_layers=6, decoder_sparse_step=2, mlp_only_layers=[3])
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    c = ref.load_config(str(tmp_path))
    assert [i for i in range(6) if c.is_moe_layer(i)] == [1, 5]  # 3 is listed as MLP-only
    cfg0 = qwen3_moe_config(num_experts=0)
    (tmp_path / "config.json").write_text(json.dumps(cfg0))
    assert not any(ref.load_config(str(tmp_path)).is_moe_layer(i) for i in range(2))
    (tmp_path / "config.json").write_text(json.dumps(qwen3_moe_config(num_experts_per_tok=7)))
    with pytest.raises(ValueError, match="num_experts_per_tok"):
        ref.load_config(str(tmp_path))


def test_moe_mlp_only_layers_use_the_dense_tensors(tmp_path):
    cfg = qwen3_moe_config(num_hidden_layers=4, decoder_sparse_step=2, mlp_only_layers=[3])
    W = _moe_weights(cfg, seed=20)
    # layers 0, 2 (step) and 3 (mlp_only_layers) are dense, layer 1 sparse
    for li, sparse in enumerate([False, True, False, False]):
        p = f"model.layers.{li}.mlp."
        assert (p + "gate.weight" in W) == sparse
        assert (p + "experts.0.up_proj.weight" in W) == sparse
        assert (p + "gate_proj.weight" in W) == (not sparse)
    d = _write(tmp_path, "ok", cfg, W)
    np.testing.assert_allclose(ref.log_softmax(d, MOE_IDS), scalar_forward(cfg, W, MOE_IDS),
                               rtol=0, atol=1e-11)
    for missing in ("model.layers.3.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight"):
        dm = _write(tmp_path, missing, cfg, {k: v for k, v in W.items() if k != missing})
        with pytest.raises(KeyError, match=missing.replace(".", r"\.")):
            ref.log_softmax(dm, MOE_IDS)
    # the dense weights of the MLP-only layer 3 matter
    W2 = dict(W)
    W2["model.layers.3.mlp.up_proj.weight"] = W["model.layers.3.mlp.up_proj.weight"] * 1.5
    assert np.max(np.abs(ref.log_softmax(_write(tmp_path, "up", cfg, W2), MOE_IDS) -
                         ref.log_softmax(d, MOE_IDS))) > 1e-3


@pytest.mark.parametrize("norm", [True, False])
def test_moe_single_expert_equals_dense(tmp_path, norm):
    cfg = qwen3_moe_config(num_experts=1, num_experts_per_tok=1, norm_topk_prob=norm,
                           moe_intermediate_size=20)
    W = _moe_weights(cfg, seed=21)
    dense_cfg = qwen3_config(intermediate_size=20)
    Wd = {}
    for k, v in W.items():
        if ".mlp.gate.weight" in k:
            continue
        Wd[k.replace(".mlp.experts.0.", ".mlp.")] = v
    assert "model.layers.0.mlp.gate_proj.weight" in Wd
    got = ref.log_softmax(_write(tmp_path, "moe", cfg, W), MOE_IDS)
    want = ref.log_softmax(_write(tmp_path, "dense", dense_cfg, Wd), MOE_IDS)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_moe_permuting_experts_leaves_logits_unchanged(tmp_path):
    cfg = qwen3_moe_config(num_experts=6, num_experts_per_tok=3)
    W = _moe_weights(cfg, seed=22)
    d = _write(tmp_path, "orig", cfg, W)
    routing = []
    base = ref.log_softmax_variants(d, MOE_IDS, [{}], routing=routing)[0]
    # no routing ties: otherwise a permutation may legitimately change the choice
    assert min(r.kth_margin()[1].min() for r in routing[0]) > 1e-6
    perm = np.array([4, 2, 5, 0, 3, 1])  # new expert j is old expert perm[j]
    Wp = dict(W)
    for li in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{li}.mlp."
        Wp[p + "gate.weight"] = W[p + "gate.weight"][perm]
        for j, old in enumerate(perm):
            for proj in ("gate_proj", "up_proj", "down_proj"):
                Wp[p + f"experts.{j}.{proj}.weight"] = W[p + f"experts.{old}.{proj}.weight"]
    routing_p = []
    got = ref.log_softmax_variants(_write(tmp_path, "perm", cfg, Wp), MOE_IDS, [{}],
                                   routing=routing_p)[0]
    np.testing.assert_allclose(got, base, rtol=0, atol=1e-12)
    for r, rp in zip(routing[0], routing_p[0]):
        np.testing.assert_array_equal(perm[rp.experts], r.experts)


def test_moe_norm_topk_prob_changes_output(tmp_path):
    cfg_t = qwen3_moe_config(norm_topk_prob=True)
    W = _moe_weights(cfg_t, seed=23)
    on = ref.log_softmax(_write(tmp_path, "on", cfg_t, W), MOE_IDS)
    off_cfg = qwen3_moe_config(norm_topk_prob=False)
    off = ref.log_softmax(_write(tmp_path, "off", off_cfg, W), MOE_IDS)
    assert np.max(np.abs(on - off)) > 1e-2
    np.testing.assert_allclose(off, scalar_forward(off_cfg, W, MOE_IDS), rtol=0, atol=1e-11)
    # the TEST-ONLY flag reproduces "renormalisation forgotten"
    np.testing.assert_allclose(
        ref.log_softmax(_write(tmp_path, "on2", cfg_t, W), MOE_IDS,
                        _debug_moe_no_topk_renorm=True), off, rtol=0, atol=1e-12)


def test_moe_routing_record(tmp_path):
    cfg = qwen3_moe_config(num_experts=6, num_experts_per_tok=2, norm_topk_prob=False)
    W = _moe_weights(cfg, seed=24)
    routing = []
    ref.log_softmax_variants(_write(tmp_path, "m", cfg, W), MOE_IDS, [{}], routing=routing)
    assert [r.layer for r in routing[0]] == [0, 1]
    for r in routing[0]:
        T = len(MOE_IDS)
        assert r.router_logits.shape == (T, 6) and r.experts.shape == (T, 2)
        np.testing.assert_allclose(r.probs.sum(1), 1.0, atol=1e-15)
        srt = np.sort(r.probs, axis=1)[:, ::-1]
        np.testing.assert_array_equal(np.take_along_axis(r.probs, r.experts, 1), srt[:, :2])
        np.testing.assert_array_equal(r.weights, srt[:, :2])  # norm_topk_prob false
        pm, gap = r.kth_margin()
        np.testing.assert_allclose(pm, srt[:, 1] - srt[:, 2], rtol=0, atol=0)
        np.testing.assert_allclose(gap, np.log(srt[:, 1] / srt[:, 2]), rtol=1e-9)
    # dense models have no sparse layers
    dd, _ = make_model(tmp_path / "dense", qwen3_config(), seed=24)
    routing = []
    ref.log_softmax_variants(dd, MOE_IDS, [{}, {}], routing=routing)
    assert routing == [[], []]


def test_moe_tie_at_kth_place_goes_to_lower_id(tmp_path):
    """Router rows 1 and 2 are zero: their logits are exactly 0, between +s(x.r) (expert 0)
    and -s(x.r) (expert 3), so with k = 2 the second place is a bitwise tie, every token."""
    cfg = qwen3_moe_config(num_experts=4, num_experts_per_tok=2, norm_topk_prob=True)
    W = _moe_weights(cfg, seed=25)
    rng = np.random.default_rng(5)
    for li in range(cfg["num_hidden_layers"]):
        r = rng.standard_normal(cfg["hidden_size"])
        W[f"model.layers.{li}.mlp.gate.weight"] = np.stack([r, 0 * r, 0 * r, -r])
    routing = []
    d = _write(tmp_path, "tie", cfg, W)
    base = ref.log_softmax_variants(d, MOE_IDS, [{}], routing=routing)[0]
    for r in routing[0]:
        assert np.all(r.probs[:, 1] == r.probs[:, 2])
        assert np.all(r.experts[:, 1] == 1), r.experts       # the lower of the tied pair
        assert set(r.experts[:, 0].tolist()) <= {0, 3}
        assert np.all(r.kth_margin()[0] == 0)
    np.testing.assert_allclose(base, scalar_forward(cfg, W, MOE_IDS), rtol=0, atol=1e-11)
    # expert 2 is never used: changing it changes nothing; swapping 1 and 2 changes the output
    W2 = dict(W)
    W3 = dict(W)
    for li in range(cfg["num_hidden_layers"]):
        for proj in ("gate_proj", "up_proj", "down_proj"):
            n1 = f"model.layers.{li}.mlp.experts.1.{proj}.weight"
            n2 = f"model.layers.{li}.mlp.experts.2.{proj}.weight"
            W2[n2] = -W[n2]
            W3[n1], W3[n2] = W[n2], W[n1]
    np.testing.assert_array_equal(ref.log_softmax(_write(tmp_path, "e2", cfg, W2), MOE_IDS), base)
    assert np.max(np.abs(ref.log_softmax(_write(tmp_path, "sw", cfg, W3), MOE_IDS) - base)) > 1e-2


def test_moe_tie_between_equal_random_router_rows(tmp_path):
    """Experts 2 and 4 share a (random, nonzero) router row: wherever the pair straddles the
    k-th place, expert 2 is taken and expert 4 never is."""
    cfg = qwen3_moe_config(num_experts=6, num_experts_per_tok=3)
    W = _moe_weights(cfg, seed=32)
    for li in range(cfg["num_hidden_layers"]):
        g = W[f"model.layers.{li}.mlp.gate.weight"].copy()
        g[4] = g[2]
        W[f"model.layers.{li}.mlp.gate.weight"] = g
    routing = []
    d = _write(tmp_path, "tie2", cfg, W)
    base = ref.log_softmax_variants(d, MOE_IDS, [{}], routing=routing)[0]
    straddle = 0
    for r in routing[0]:
        assert np.array_equal(r.router_logits[:, 2], r.router_logits[:, 4])
        has2 = (r.experts == 2).any(1)
        has4 = (r.experts == 4).any(1)
        assert not np.any(has4 & ~has2)
        straddle += int(np.sum(has2 & ~has4))
    assert straddle >= 3, "the seed should give some ties at the k-th place"
    np.testing.assert_allclose(base, scalar_forward(cfg, W, MOE_IDS), rtol=0, atol=1e-11)


def test_moe_variants_emulation_and_debug_flags(tmp_path):
    cfg = qwen3_moe_config(num_experts=6, num_experts_per_tok=2)
    d, _ = make_model(tmp_path, cfg, seed=27)
    ids = MOE_IDS
    routing = []
    f64, bf, bf_forced, nonorm, swapk = ref.log_softmax_variants(d, ids, [
        {}, {"kv_cache_dtype": "bfloat16"}, {"kv_cache_dtype": "bfloat16", "moe_experts_from": 0},
        {"_debug_moe_no_topk_renorm": True}, {"_debug_moe_swap_kth_expert": True}],
        routing=routing)
    np.testing.assert_allclose(ref.log_softmax(d, ids), f64, rtol=0, atol=1e-12)
    assert 1e-6 < np.max(np.abs(bf - f64)) < 0.1
    for r0, r2 in zip(routing[0], routing[2]):
        np.testing.assert_array_equal(r2.experts, r0.experts)
    # layer 0 (same input): the swap bug keeps the first choice and replaces the second
    r0, r4 = routing[0][0], routing[4][0]
    np.testing.assert_array_equal(r4.experts[:, 0], r0.experts[:, 0])
    np.testing.assert_array_equal(r4.experts[:, 1], np.argsort(-r0.probs, 1, kind="stable")[:, 2])
    if all(np.array_equal(a.experts, b.experts) for a, b in zip(routing[0], routing[1])):
        np.testing.assert_allclose(bf_forced, bf, rtol=0, atol=1e-12)
    assert np.max(np.abs(nonorm - f64)) > 1e-2 and np.max(np.abs(swapk - f64)) > 1e-2
    e32 = ref.log_softmax(d, ids, _emulate_float32=True)
    assert np.max(np.abs(e32 - f64)) < 1e-4
    with pytest.raises(ValueError, match="earlier variant"):
        ref.log_softmax_variants(d, ids, [{"moe_experts_from": 0}])


def test_moe_cli_routing(tmp_path):
    d, _ = make_model(tmp_path, qwen3_moe_config(), seed=28)
    out = subprocess.run([sys.executable, os.path.join(HERE, "reference.py"), d, "1,2,3",
                          "--routing"], capture_output=True, text=True, check=True).stdout
    lines = out.strip().splitlines()
    assert len(lines) == 3 + 2 * 3
    assert lines[3].startswith("layer 0 pos 0 experts ") and "k-th margin p " in lines[3]
