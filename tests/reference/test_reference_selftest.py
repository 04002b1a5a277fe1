"""Self-tests of the float64 reference's storage and numerics (no ditto needed, < 1 s): bf16 /
f16 / f32 decoding of known bit patterns, safetensors headers and their validation, bf16
round-to-nearest-even (against the float32 path), config.json defaults, and the llama3 inv_freq
rule on Llama-3.2's numbers. The forward pass: test_reference_forward.py; Qwen3-MoE:
test_reference_moe.py.

Run: /usr/bin/python3 -m pytest -q tests/reference/test_reference_selftest.py
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

import reference as ref
from model_writer import encode, write_safetensors_raw
from selftest_models import llama_config


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
