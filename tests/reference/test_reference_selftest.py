"""Self-tests of the float64 reference (no ditto needed).

Run: /usr/bin/python3 -m pytest -q tests/reference/test_reference_selftest.py
"""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import reference as ref
from model_writer import encode, random_weights, write_model, write_safetensors_raw

HERE = os.path.dirname(os.path.abspath(__file__))


# ------------------------------------------------------------------------------------
# tiny configs
# ------------------------------------------------------------------------------------

def qwen3_config(**over):
    c = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "vocab_size": 37, "hidden_size": 16, "intermediate_size": 24,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 8, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "attention_bias": False, "hidden_act": "silu",
        "max_position_embeddings": 4096, "rope_scaling": None,
    }
    c.update(over)
    return c


def llama_config(**over):
    c = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": 41, "hidden_size": 16, "intermediate_size": 24,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "head_dim": 8, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": True, "attention_bias": False, "mlp_bias": False,
        "hidden_act": "silu", "max_position_embeddings": 131072,
        # head_dim 8, theta 1e4 -> wavelengths 6.3, 63, 628, 6283: with old_ctx 1024 and
        # factors (1, 4) these fall in the high / high / medium / low regimes.
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 1024},
    }
    c.update(over)
    return c


def qwen3_moe_config(**over):
    c = qwen3_config(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe",
                     num_experts=6, num_experts_per_tok=2, moe_intermediate_size=12,
                     decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True)
    c.update(over)
    return c


def make_model(tmp_path, config, dtype="BF16", seed=0, num_shards=1, std=0.3, **kw):
    d = str(tmp_path)
    weights = random_weights(config, seed=seed, std=std, random_norms=True, **kw)
    exact = write_model(d, config, weights, dtype=dtype, num_shards=num_shards)
    return d, exact


# ------------------------------------------------------------------------------------
# an independent scalar (pure Python) implementation of the same semantics
# ------------------------------------------------------------------------------------

def scalar_forward(config, W, ids):
    """Plain-Python loops, written separately from reference.py (shares no code)."""
    H = config["hidden_size"]
    nh = config["num_attention_heads"]
    nkv = config["num_key_value_heads"]
    d = config["head_dim"]
    eps = config["rms_norm_eps"]
    qwen3 = config["model_type"] in ("qwen3", "qwen3_moe")

    def mat(name):
        return W[name].tolist()

    def matvec(M, x, bias=None):
        out = []
        for r, row in enumerate(M):
            acc = math.fsum(a * b for a, b in zip(row, x))
            out.append(acc + (bias[r] if bias is not None else 0.0))
        return out

    def rms(x, w):
        ms = math.fsum(t * t for t in x) / len(x)
        r = 1.0 / math.sqrt(ms + eps)
        return [t * r * wi for t, wi in zip(x, w)]

    # inverse frequencies, llama3 rule written branch by branch
    inv = []
    for i in range(d // 2):
        f = 1.0 / (config["rope_theta"] ** (2 * i / d))
        rs = config.get("rope_scaling")
        if rs:
            wl = 2 * math.pi / f
            lo_wl = rs["original_max_position_embeddings"] / rs["low_freq_factor"]
            hi_wl = rs["original_max_position_embeddings"] / rs["high_freq_factor"]
            if wl < hi_wl:
                pass
            elif wl > lo_wl:
                f = f / rs["factor"]
            else:
                sm = (rs["original_max_position_embeddings"] / wl - rs["low_freq_factor"]) / (
                    rs["high_freq_factor"] - rs["low_freq_factor"])
                f = (1 - sm) * f / rs["factor"] + sm * f
        inv.append(f)

    def rope(vec, p):
        half = d // 2
        out = [0.0] * d
        for i in range(half):
            c, s = math.cos(p * inv[i]), math.sin(p * inv[i])
            out[i] = vec[i] * c - vec[i + half] * s
            out[i + half] = vec[i + half] * c + vec[i] * s
        return out

    def getb(name):
        return W[name].tolist() if name in W else None

    def mlp(pre, x):
        gt = matvec(mat(pre + "gate_proj.weight"), x, getb(pre + "gate_proj.bias"))
        up = matvec(mat(pre + "up_proj.weight"), x, getb(pre + "up_proj.bias"))
        act = [a / (1 + math.exp(-a)) * b for a, b in zip(gt, up)]
        return matvec(mat(pre + "down_proj.weight"), act, getb(pre + "down_proj.bias"))

    def is_sparse(li):
        if config["model_type"] != "qwen3_moe":
            return False
        if li in (config.get("mlp_only_layers") or []):
            return False
        return config["num_experts"] > 0 and (li + 1) % config.get("decoder_sparse_step", 1) == 0

    def moe(pre, x):
        rl = matvec(mat(pre + "gate.weight"), x)
        m = max(rl)
        ex = [math.exp(v - m) for v in rl]
        z = math.fsum(ex)
        pr = [v / z for v in ex]
        # the k largest probabilities; an equal probability ranks the lower id first
        top = sorted(range(len(pr)), key=lambda e: (-pr[e], e))[:config["num_experts_per_tok"]]
        ws = {e: pr[e] for e in top}
        if config.get("norm_topk_prob", False):
            tot = math.fsum(ws.values())
            ws = {e: w / tot for e, w in ws.items()}
        acc = [0.0] * H
        for e in sorted(top):
            y = mlp(pre + f"experts.{e}.", x)
            acc = [a + ws[e] * b for a, b in zip(acc, y)]
        return acc

    emb = W["model.embed_tokens.weight"]
    hs = [emb[t].tolist() for t in ids]
    T = len(ids)
    for li in range(config["num_hidden_layers"]):
        p = f"model.layers.{li}."
        Wq, Wk, Wv, Wo = (mat(p + f"self_attn.{n}_proj.weight") for n in "qkvo")
        Ks, Vs, new = [], [], []
        xs = [rms(h, W[p + "input_layernorm.weight"].tolist()) for h in hs]
        Qs = []
        for t in range(T):
            q = matvec(Wq, xs[t], getb(p + "self_attn.q_proj.bias"))
            k = matvec(Wk, xs[t], getb(p + "self_attn.k_proj.bias"))
            v = matvec(Wv, xs[t], getb(p + "self_attn.v_proj.bias"))
            qh = [q[h * d:(h + 1) * d] for h in range(nh)]
            kh = [k[h * d:(h + 1) * d] for h in range(nkv)]
            vh = [v[h * d:(h + 1) * d] for h in range(nkv)]
            if qwen3:
                qh = [rms(x, W[p + "self_attn.q_norm.weight"].tolist()) for x in qh]
                kh = [rms(x, W[p + "self_attn.k_norm.weight"].tolist()) for x in kh]
            Qs.append([rope(x, t) for x in qh])
            Ks.append([rope(x, t) for x in kh])
            Vs.append(vh)
        for t in range(T):
            cat = []
            for h in range(nh):
                g = h // (nh // nkv)
                sc = [math.fsum(a * b for a, b in zip(Qs[t][h], Ks[s][g])) / math.sqrt(d)
                      for s in range(t + 1)]
                m = max(sc)
                e = [math.exp(x - m) for x in sc]
                z = math.fsum(e)
                cat += [math.fsum(e[s] / z * Vs[s][g][j] for s in range(t + 1)) for j in range(d)]
            o = matvec(Wo, cat, getb(p + "self_attn.o_proj.bias"))
            h1 = [a + b for a, b in zip(hs[t], o)]
            x2 = rms(h1, W[p + "post_attention_layernorm.weight"].tolist())
            if is_sparse(li):
                dn = moe(p + "mlp.", x2)
            else:
                dn = mlp(p + "mlp.", x2)
            new.append([a + b for a, b in zip(h1, dn)])
        hs = new
    head = W["lm_head.weight"] if "lm_head.weight" in W else W["model.embed_tokens.weight"]
    out = []
    for h in hs:
        lg = matvec(head.tolist(), rms(h, W["model.norm.weight"].tolist()))
        m = max(lg)
        lse = m + math.log(math.fsum(math.exp(x - m) for x in lg))
        out.append([x - lse for x in lg])
    return np.array(out)


# ------------------------------------------------------------------------------------
# safetensors / dtype tests
# ------------------------------------------------------------------------------------

def test_bf16_decoder_known_values(tmp_path):
    # (bit pattern, value)
    known = [(0x3F80, 1.0), (0xC000, -2.0), (0x4049, 3.140625), (0x3E20, 0.15625),
             (0x0000, 0.0), (0x8000, -0.0), (0x7F7F, 3.3895313892515355e38),
             (0x0080, 2.0 ** -126), (0x3C23, 0.0099487304687500), (0xBF81, -1.0078125)]
    bits = np.array([b for b, _ in known], dtype="<u2")
    f16 = np.array([0.5, -65504.0, 2.0 ** -24, 1.0009765625], dtype="<f2")
    f32 = np.array([1.5, -1e-30, 3.4028234663852886e38], dtype="<f4")
    p = tmp_path / "t.safetensors"
    write_safetensors_raw(str(p), {
        "a": ("BF16", (2, 5), bits.tobytes()),
        "h": ("F16", (4,), f16.tobytes()),
        "f": ("F32", (3,), f32.tobytes()),
    }, metadata={"format": "pt"}, header_pad=5 * 8)
    hdr = ref._parse_safetensors_header(str(p))
    assert hdr["a"].shape == (2, 5) and hdr["a"].dtype == "BF16"
    (hlen,) = struct.unpack("<Q", p.read_bytes()[:8])
    assert hdr["a"].offset == 8 + hlen
    a = ref.decode_to_f64(np.memmap(str(p), dtype=np.uint16, mode="r", offset=hdr["a"].offset,
                                    shape=(2, 5)), "BF16")
    want = np.array([v for _, v in known]).reshape(2, 5)
    assert np.array_equal(a, want)
    assert np.signbit(a[1, 0])  # -0.0 preserved
    (tmp_path / "config.json").write_text("{}")
    st = ref._parse_safetensors_header(str(p))
    h = ref.decode_to_f64(np.memmap(str(p), dtype=np.float16, mode="r", offset=st["h"].offset,
                                    shape=(4,)), "F16")
    assert np.array_equal(h, f16.astype(np.float64))
    f = ref.decode_to_f64(np.memmap(str(p), dtype=np.float32, mode="r", offset=st["f"].offset,
                                    shape=(3,)), "F32")
    assert np.array_equal(f, f32.astype(np.float64))


def test_bf16_encoder_decoder_roundtrip(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(1000) * 3
    data, exact = encode(x, "BF16")
    p = tmp_path / "model.safetensors"
    write_safetensors_raw(str(p), {"x": ("BF16", (1000,), data)})
    st = ref.SafeTensors(str(tmp_path))
    assert np.array_equal(st.f64("x"), exact)
    assert np.array_equal(st.f64("x", rows=np.array([5, 3, 5])), exact[[5, 3, 5]])
    # bf16 has an 8-bit significand: unit roundoff 2^-8
    assert np.max(np.abs(exact - x) / np.abs(x)) <= 2.0 ** -8


def test_round_to_bf16_ties_to_even_and_matches_float32_path():
    one = 1.0
    u = 2.0 ** -7  # bf16 ulp at 1
    cases = {
        one + u / 2: one,                      # tie -> even (1.0)
        one + 3 * u / 2: one + 2 * u,          # tie -> even (upwards)
        one + u / 2 + 2.0 ** -40: one + u,     # just above the tie -> up
        one + u / 2 - 2.0 ** -40: one,         # just below the tie -> down
        -(one + 3 * u / 2): -(one + 2 * u),
        0.0: 0.0,
        3.140625: 3.140625,
    }
    xs = np.array(list(cases))
    want = np.array(list(cases.values()))
    assert np.array_equal(ref.round_to_bf16(xs), want)
    # rounding float64 directly == rounding its float32 value, except where the float32
    # rounding itself lands exactly on a bf16 tie (double rounding; the direct one is right)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(100000) * 10.0 ** rng.integers(-5, 5, 100000)
    b32 = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r32 = ((b32 + 0x7FFF + ((b32 >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)
    tie = (b32 & 0xFFFF) == 0x8000
    assert 0 < tie.sum() < 10
    assert np.array_equal(ref.round_to_bf16(x)[~tie], r32.astype(np.float64)[~tie])
    assert np.all(np.abs(ref.round_to_bf16(x) - x) <= np.abs(r32 - x))


def test_header_validation(tmp_path):
    p = tmp_path / "bad.safetensors"
    hb = json.dumps({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 6]}}).encode()
    p.write_bytes(struct.pack("<Q", len(hb)) + hb + b"\0" * 8)
    with pytest.raises(ValueError):
        ref._parse_safetensors_header(str(p))


# ------------------------------------------------------------------------------------
# config
# ------------------------------------------------------------------------------------

def test_config_defaults(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
        "intermediate_size": 128, "num_hidden_layers": 1, "vocab_size": 10}))
    c = ref.load_config(str(tmp_path))
    assert (c.head_dim, c.num_key_value_heads, c.rms_norm_eps, c.rope_theta) == (16, 4, 1e-6, 1e4)
    assert (c.tie_word_embeddings, c.attention_bias, c.mlp_bias, c.rope_scaling) == (
        False, False, False, None)
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "qwen3", "hidden_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": None, "head_dim": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}))
    c = ref.load_config(str(tmp_path))
    assert (c.head_dim, c.num_key_value_heads, c.rope_theta, c.rope_scaling) == (16, 4, 1e6, None)


def test_llama3_inv_freq_llama32_numbers(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(llama_config(
        hidden_size=2048, num_attention_heads=32, head_dim=64, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})))
    c = ref.load_config(str(tmp_path))
    got = ref.rope_inv_freq(c)
    base = ref.rope_inv_freq(c, apply_scaling=False)
    assert np.array_equal(base, 1.0 / 500000.0 ** (np.arange(0, 64, 2) / 64))
    wl = 2 * np.pi / base
    hi = wl < 2048
    lo = wl > 8192
    assert hi.sum() > 0 and lo.sum() > 0 and (~hi & ~lo).sum() > 0
    assert np.array_equal(got[hi], base[hi])
    assert np.allclose(got[lo], base[lo] / 32, rtol=1e-15, atol=0)
    med = ~hi & ~lo
    s = (8192 / wl[med] - 1.0) / 3.0
    assert np.allclose(got[med], (1 - s) * base[med] / 32 + s * base[med], rtol=1e-15, atol=0)
    assert np.all((got[med] < base[med]) & (got[med] > base[med] / 32))


# ------------------------------------------------------------------------------------
# the forward pass
# ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["qwen3", "qwen3_bias_tied", "llama_llama3", "llama_bias_untied",
                                  "qwen3_moe", "qwen3_moe_mixed_layers"])
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
