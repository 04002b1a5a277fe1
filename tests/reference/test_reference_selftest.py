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
    qwen3 = config["model_type"] == "qwen3"

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
            gt = matvec(mat(p + "mlp.gate_proj.weight"), x2, getb(p + "mlp.gate_proj.bias"))
            up = matvec(mat(p + "mlp.up_proj.weight"), x2, getb(p + "mlp.up_proj.bias"))
            act = [a / (1 + math.exp(-a)) * b for a, b in zip(gt, up)]
            dn = matvec(mat(p + "mlp.down_proj.weight"), act, getb(p + "mlp.down_proj.bias"))
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

@pytest.mark.parametrize("kind", ["qwen3", "qwen3_bias_tied", "llama_llama3", "llama_bias_untied"])
def test_matches_scalar_implementation(tmp_path, kind):
    if kind == "qwen3":
        cfg = qwen3_config()
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
