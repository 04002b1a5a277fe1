"""Self-tests of the GGUF side of the float64 reference (no ditto needed, < 10 s).

Run: /usr/bin/python3 -m pytest -q tests/reference/test_gguf_selftest.py

* gguf_reader: hand-built blocks of every quantized type against hand-computed values (all
  eight Q4_K scale/min encodings, Q6_K's ql/qh planes), F16/BF16 bit patterns, metadata of
  every value type, and header errors (every truncation of a valid file is a GGUFError).
* gguf_checkpoint + reference.py: tiny llama / qwen3 / qwen3moe GGUF files whose tensors are
  random blocks of every supported type give the same float64 logits as a safetensors twin
  holding the exactly dequantized weights (llama's q/k rows written permuted as
  convert_hf_to_gguf.py does; experts stacked), and the config keys and defaults.
* quantize_activation_rows against hand-computed blocks; the TEST-ONLY weight bugs.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import gguf_reader as gr
import gguf_writer as gw
import reference as ref
from model_writer import encode, write_model

# --------------------------------------------------------------------------------------
# hand-built blocks
# --------------------------------------------------------------------------------------


def f16(x) -> bytes:
    return np.asarray(x, dtype="<f2").tobytes()


def test_q8_0_block():
    qs = np.arange(-16, 16, dtype=np.int8) * 4          # -64 .. 60
    qs[0], qs[1] = -128, 127
    raw = np.frombuffer(f16(0.5) + qs.tobytes(), np.uint8)[None]
    want = 0.5 * qs.astype(np.float64)
    assert want[0] == -64.0 and want[1] == 63.5
    np.testing.assert_array_equal(gr.dequantize(raw, "Q8_0", 32), want[None])


def test_q4_0_and_q4_1_blocks():
    # byte i: low nibble i (value i), high nibble 15 - i (value 16 + i)
    qs = bytes((i | ((15 - i) << 4)) for i in range(16))
    nib = np.array(list(range(16)) + [15 - i for i in range(16)], dtype=np.float64)
    raw0 = np.frombuffer(f16(0.25) + qs, np.uint8)[None]
    np.testing.assert_array_equal(gr.dequantize(raw0, "Q4_0", 32), (0.25 * (nib - 8))[None])
    assert gr.dequantize(raw0, "Q4_0", 32)[0, 0] == -2.0       # nibble 0 -> -8 * d
    raw1 = np.frombuffer(f16(0.5) + f16(-1.25) + qs, np.uint8)[None]
    np.testing.assert_array_equal(gr.dequantize(raw1, "Q4_1", 32), (0.5 * nib - 1.25)[None])
    assert gr.dequantize(raw1, "Q4_1", 32)[0, 16] == 0.5 * 15 - 1.25


# Q4_K: sc and m for the eight sub-blocks; the j >= 4 entries need their high two bits
# (values >= 16) stored in the top bits of bytes 0..3 (sc) and 4..7 (m).
Q4K_SC = [1, 7, 16, 31, 33, 47, 62, 63]
Q4K_M = [0, 5, 63, 17, 48, 1, 32, 60]
# worked out by hand from ggml's get_scale_min_k4:
#   byte j   (j<4) = sc[j] | (sc[j+4] >> 4) << 6      1|2<<6, 7|2<<6, 16|3<<6, 31|3<<6
#   byte j+4 (j<4) = m[j]  | (m[j+4]  >> 4) << 6      0|3<<6, 5|0<<6, 63|2<<6, 17|3<<6
#   byte j+8       = (sc[j+4] & 15) | (m[j+4] & 15) << 4   1|0, 15|1<<4, 14|0, 15|12<<4
Q4K_SCALES = bytes([0x81, 0x87, 0xD0, 0xDF, 0xC0, 0x05, 0xBF, 0xD1, 0x01, 0x1F, 0x0E, 0xCF])


def test_q4_k_scale_min_packing_all_eight_sub_blocks():
    sc, m = gr.q4k_scales_mins(np.frombuffer(Q4K_SCALES, np.uint8))
    assert sc.tolist() == Q4K_SC and m.tolist() == Q4K_M
    # the writer's packing (written separately) produces the same bytes
    assert gw.q4_k_block(1.0, 1.0, Q4K_SC, Q4K_M, [0] * 256)[4:16] == Q4K_SCALES


def test_q4_k_block_values():
    q = [(i * 7 + 3) % 16 for i in range(256)]           # value order
    qs = bytearray(128)
    for c in range(4):                                  # 64 values per 32 bytes
        for i in range(32):
            qs[32 * c + i] = q[64 * c + i] | (q[64 * c + 32 + i] << 4)
    raw = np.frombuffer(f16([0.5, 0.25]) + Q4K_SCALES + bytes(qs), np.uint8)[None]
    want = [0.5 * Q4K_SC[i // 32] * q[i] - 0.25 * Q4K_M[i // 32] for i in range(256)]
    np.testing.assert_array_equal(gr.dequantize(raw, "Q4_K", 256)[0], want)
    # a few by hand: value 0 -> sub-block 0, q 3: 0.5*1*3 - 0; value 32 -> sub-block 1,
    # q = (32*7+3) % 16 = 3: 0.5*7*3 - 0.25*5; value 255 -> sub-block 7, q = 12: 0.5*63*12 - 15
    y = gr.dequantize(raw, "Q4_K", 256)[0]
    assert (y[0], y[32], y[255]) == (1.5, 10.5 - 1.25, 378.0 - 15.0)
    assert bytes(raw[0]) == gw.q4_k_block(0.5, 0.25, Q4K_SC, Q4K_M, q)


def test_q6_k_ql_qh_layout():
    ql, qh = bytearray(128), bytearray(64)
    ql[0] = 0xA5            # value 0: low 5; value 64: high 10
    qh[0] = 0xE4            # 0b11_10_01_00: values 0, 32, 64, 96 get high bits 0, 1, 2, 3
    ql[64 + 32 + 1] = 0x3C  # second half, l = 1: value 161 low 12, value 225 high 3
    qh[32 + 1] = 0x48       # 0b01_00_10_00: values 129, 161, 193, 225 get 0, 2, 0, 1
    sc = [1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, -14, 127, -128]
    raw = np.frombuffer(bytes(ql) + bytes(qh) + np.array(sc, np.int8).tobytes() + f16(0.125),
                        np.uint8)[None]
    q = np.zeros(256, dtype=np.int64)
    q[0], q[32], q[64], q[96] = 5, 16, 10 | 32, 48
    q[161], q[225] = 12 | 32, 3 | 16
    assert (gr.q6k_values(raw[:, :128], raw[:, 128:192])[0] == q).all()
    want = [0.125 * sc[i // 16] * (q[i] - 32) for i in range(256)]
    np.testing.assert_array_equal(gr.dequantize(raw, "Q6_K", 256)[0], want)
    y = gr.dequantize(raw, "Q6_K", 256)[0]
    # value 0: sc[0] = 1, q 5; value 64: sc[4] = 5, q 42; value 161: sc[10] = 11, q 44;
    # value 255: sc[15] = -128, q 0
    assert (y[0], y[64], y[161], y[255]) == (0.125 * 1 * -27, 0.125 * 5 * 10,
                                             0.125 * 11 * 12, 0.125 * -128 * -32)
    assert bytes(raw[0]) == gw.q6_k_block(0.125, sc, q)


def test_float_types_known_bits():
    f16_raw = np.array([0x3C00, 0xC000, 0x0001, 0x7BFF], "<u2").view(np.uint8).reshape(1, 8)
    np.testing.assert_array_equal(gr.dequantize(f16_raw, "F16", 4),
                                  [[1.0, -2.0, 2.0 ** -24, 65504.0]])
    bf16_raw = np.array([0x3F80, 0xC049, 0x0001, 0x7F7F], "<u2").view(np.uint8).reshape(1, 8)
    np.testing.assert_array_equal(gr.dequantize(bf16_raw, "BF16", 4),
                                  [[1.0, -3.140625, 2.0 ** -133, 3.3895313892515355e38]])
    f32_raw = np.array([1.5, -0.1], "<f4").view(np.uint8).reshape(1, 8)
    np.testing.assert_array_equal(gr.dequantize(f32_raw, "F32", 2),
                                  [[1.5, float(np.float32(-0.1))]])


def test_multi_block_rows_and_row_selection(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 96))
    data, exact = gw.q8_0_blocks(x)
    p = str(tmp_path / "m.gguf")
    gw.write_gguf(p, [gw.kv("general.architecture", "llama")], [("w", (5, 96), "Q8_0", data)])
    g = gr.GGUFFile(p)
    assert g.info("w").shape == (5, 96) and g.info("w").block_size == 32
    np.testing.assert_array_equal(g.f64("w"), exact)
    np.testing.assert_array_equal(g.f64("w", rows=np.array([4, 1])), exact[[4, 1]])
    np.testing.assert_array_equal(g.f64("w", rows=slice(2, 4)), exact[2:4])
    assert np.max(np.abs(exact - x)) <= np.max(np.abs(x)) / 127  # a sane quantizer


# --------------------------------------------------------------------------------------
# metadata and header errors
# --------------------------------------------------------------------------------------

ALL_TYPES = [
    ("u8", gw.UINT8, 255), ("i8", gw.INT8, -128), ("u16", gw.UINT16, 65535),
    ("i16", gw.INT16, -32768), ("u32", gw.UINT32, 2 ** 32 - 1), ("i32", gw.INT32, -2 ** 31),
    ("f32", gw.FLOAT32, 0.5), ("bool", gw.BOOL, True), ("str", gw.STRING, "héllo ✓"),
    ("u64", gw.UINT64, 2 ** 64 - 1), ("i64", gw.INT64, -2 ** 63), ("f64", gw.FLOAT64, 0.1),
    ("arr_i32", gw.ARRAY, (gw.INT32, [1, -2, 3])),
    ("arr_str", gw.ARRAY, (gw.STRING, ["a", "", "ü"])),
    ("arr_bool", gw.ARRAY, (gw.BOOL, [True, False])),
    ("arr_f64", gw.ARRAY, (gw.FLOAT64, [0.25, -1e300])),
    ("arr_nested", gw.ARRAY, (gw.ARRAY, [(gw.UINT8, [1, 2]), (gw.STRING, ["x"])])),
    ("arr_empty", gw.ARRAY, (gw.UINT16, [])),
]


def test_metadata_every_value_type(tmp_path):
    p = str(tmp_path / "m.gguf")
    gw.write_gguf(p, ALL_TYPES, [("t", (2,), "F32", gw.f32_bytes([1, 2]))])
    g = gr.GGUFFile(p)
    assert g.version == 3 and g.alignment == 32 and g.data_offset % 32 == 0
    for key, vtype, value in ALL_TYPES:
        got = g.metadata[key]
        assert g.metadata_types[key][0] == vtype, key
        if vtype != gw.ARRAY:
            assert got == value, key
            continue
        etype, items = value
        assert g.metadata_types[key][1] == etype, key
        if key == "arr_nested":
            assert got[0].tolist() == [1, 2] and got[1] == ["x"]
        else:
            assert list(got) == items, key
    assert g.metadata["arr_i32"].dtype == np.int32 and g.metadata["arr_f64"].dtype == np.float64


def test_alignment_key_and_version_2(tmp_path):
    p = str(tmp_path / "a.gguf")
    gw.write_gguf(p, [("general.alignment", gw.UINT32, 64)],
                  [("a", (3,), "F32", gw.f32_bytes([1, 2, 3])),
                   ("b", (2,), "F16", f16([0.5, 2]))], alignment=64, version=2)
    g = gr.GGUFFile(p)
    assert g.version == 2 and g.alignment == 64 and g.data_offset % 64 == 0
    assert g.info("b").offset % 64 == 0
    np.testing.assert_array_equal(g.f64("b"), [0.5, 2.0])


def _valid_file() -> bytes:
    return gw.build_gguf([gw.kv("general.architecture", "llama"), gw.kv("k.list", ["ab", "c"])],
                         [("w", (2, 32), "Q8_0", gw.q8_0_blocks(np.ones((2, 32)))[0])])


def _write(tmp_path, data: bytes) -> str:
    p = str(tmp_path / "x.gguf")
    with open(p, "wb") as f:
        f.write(data)
    return p


def test_every_truncation_is_a_gguf_error(tmp_path):
    data = _valid_file()
    g = gr.GGUFFile(_write(tmp_path, data))
    end = g.info("w").offset + g.info("w").nbytes  # then only the padding to 32 bytes
    assert end < len(data)
    for n in range(1, len(data)):  # (np.memmap refuses an empty file before any parsing)
        if n >= end:
            gr.GGUFFile(_write(tmp_path, data[:n]))
            continue
        with pytest.raises(gr.GGUFError):
            gr.GGUFFile(_write(tmp_path, data[:n]))


def _header(version=3, n_tensors=0, kvs=b"", n_kv=None, tensors=b""):
    n_kv = kvs.count(b"\x00") if n_kv is None else n_kv
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv) + kvs + tensors


def _s(text: str) -> bytes:
    return struct.pack("<Q", len(text)) + text.encode()


@pytest.mark.parametrize("data,message", [
    (b"GGUX" + bytes(20), "not a GGUF file"),
    (_header(version=1), "unsupported GGUF version 1"),
    (_header(version=4), "unsupported GGUF version 4"),
    (_header(n_kv=1, kvs=_s("key") + struct.pack("<I", 13) + bytes(8)), "unknown value type 13"),
    (_header(n_kv=1, kvs=_s("key") + struct.pack("<IIQ", 9, 99, 1) + bytes(8)),
     "unknown array element type 99"),
    (_header(n_kv=2, kvs=(_s("k") + struct.pack("<IB", 0, 1)) * 2), "duplicate key 'k'"),
    (_header(n_kv=1, kvs=_s("general.alignment") + struct.pack("<II", 4, 24)),
     "power of two"),
    (_header(n_kv=1, kvs=_s("general.alignment") + struct.pack("<IQ", 10, 32)),
     "power of two"),
    (_header(n_kv=1, kvs=struct.pack("<Q", 2) + b"\xff\xfe" + struct.pack("<IB", 0, 1)),
     "not valid UTF-8"),
    (_header(n_tensors=1, tensors=_s("w") + struct.pack("<IQIQ", 1, 32, 77, 0) + bytes(64)),
     "unsupported ggml type 77"),
    (_header(n_tensors=1, tensors=_s("w") + struct.pack("<IQIQ", 1, 33, 8, 0) + bytes(64)),
     "multiple of Q8_0's block of 32"),
    (_header(n_tensors=1, tensors=_s("w") + struct.pack("<IQIQ", 1, 0, 0, 0) + bytes(64)),
     "positive multiple"),
    (_header(n_tensors=1, tensors=_s("w") + struct.pack("<I", 0) + struct.pack("<IQ", 0, 0)
             + bytes(64)), "n_dims 0"),
    (_header(n_tensors=1, tensors=_s("w") + struct.pack("<IQIQ", 1, 4, 0, 16) + bytes(64)),
     "not a multiple of the alignment"),
    (_header(n_tensors=1, tensors=_s("w") + struct.pack("<IQIQ", 1, 1024, 0, 0) + bytes(64)),
     "runs past the end of the file"),
    (_header(n_tensors=2, tensors=(_s("w") + struct.pack("<IQIQ", 1, 4, 0, 0)) * 2 + bytes(64)),
     "duplicate tensor 'w'"),
    (_header(n_kv=2 ** 40), "larger than the file allows"),
])
def test_header_errors(tmp_path, data, message):
    with pytest.raises(gr.GGUFError, match=message):
        gr.GGUFFile(_write(tmp_path, data))


# --------------------------------------------------------------------------------------
# GGUF models vs their safetensors twins
# --------------------------------------------------------------------------------------

# f16 field positions (byte offsets in a block) that must hold finite scales
_F16_FIELDS = {"Q8_0": [0], "Q4_0": [0], "Q4_1": [0, 2], "Q4_K": [0, 2], "Q6_K": [208]}


def random_blocks(type_name: str, rows: int, cols: int, rng, scale: float) -> bytes:
    """Random bytes of `rows` rows of a quantized type, with finite f16 scales ~ scale.
    (For F32 / F16: the float values directly.)"""
    if type_name in ("F32", "F16"):
        x = rng.standard_normal((rows, cols)) * scale * 8
        return x.astype("<f4" if type_name == "F32" else "<f2").tobytes()
    _, bs, bb = gw.GGML[type_name]
    raw = rng.integers(0, 256, size=(rows, cols // bs, bb), dtype=np.uint8)
    for off in _F16_FIELDS[type_name]:
        vals = (scale * (0.5 + rng.random((rows, cols // bs)))).astype("<f2")
        raw[..., off:off + 2] = vals.view(np.uint8).reshape(rows, cols // bs, 2)
    return raw.tobytes()


def _type_scale(type_name):
    # a per-type f16 scale keeping the dequantized weights ~ N(0, 0.05^2)-sized
    return {"Q8_0": 0.05 / 70, "Q4_0": 0.05 / 4, "Q4_1": 0.05 / 6, "Q4_K": 0.05 / 120,
            "Q6_K": 0.05 / 600, "F32": 0.05 / 8, "F16": 0.05 / 8}[type_name]


# HF suffix -> (gguf suffix, ggml type): every supported type appears
TYPES = {
    "self_attn.q_proj.weight": ("attn_q.weight", "Q4_K"),
    "self_attn.k_proj.weight": ("attn_k.weight", "Q6_K"),
    "self_attn.v_proj.weight": ("attn_v.weight", "Q4_0"),
    "self_attn.o_proj.weight": ("attn_output.weight", "Q4_1"),
    "mlp.gate_proj.weight": ("ffn_gate.weight", "Q6_K"),
    "mlp.up_proj.weight": ("ffn_up.weight", "Q4_K"),
    "mlp.down_proj.weight": ("ffn_down.weight", "Q8_0"),
}


def tiny_pair(tmp_path, arch: str, tied: bool = False, seed: int = 0, moe_mlp_only=()):
    """A tiny GGUF model (hidden 256 so that K-quants fit) and its safetensors twin (F64,
    the exact dequantized values). Returns (gguf path, model dir)."""
    rng = np.random.default_rng(seed)
    H, nh, nkv, d, I, V, L = 256, 4, 2, 64, 64, 50, 2
    E, k, Im = 4, 2, 32
    moe = arch == "qwen3moe"
    hf_arch = {"llama": ("LlamaForCausalLM", "llama"), "qwen3": ("Qwen3ForCausalLM", "qwen3"),
               "qwen3moe": ("Qwen3MoeForCausalLM", "qwen3_moe")}[arch]
    config = {"architectures": [hf_arch[0]], "model_type": hf_arch[1], "vocab_size": V,
              "hidden_size": H, "intermediate_size": I, "num_hidden_layers": L,
              "num_attention_heads": nh, "num_key_value_heads": nkv, "head_dim": d,
              "rms_norm_eps": 2.0 ** -17, "rope_theta": 50000.0, "tie_word_embeddings": tied,
              "attention_bias": False, "hidden_act": "silu", "max_position_embeddings": 512}
    if moe:
        config.update(num_experts=E, num_experts_per_tok=k, moe_intermediate_size=Im,
                      decoder_sparse_step=1, mlp_only_layers=list(moe_mlp_only),
                      norm_topk_prob=True)
    meta = [gw.kv("general.architecture", arch), gw.kv(f"{arch}.block_count", L),
            gw.kv(f"{arch}.embedding_length", H), gw.kv(f"{arch}.feed_forward_length", I),
            gw.kv(f"{arch}.attention.head_count", nh),
            gw.kv(f"{arch}.attention.head_count_kv", nkv),
            gw.kv(f"{arch}.attention.key_length", d), gw.kv(f"{arch}.attention.value_length", d),
            gw.kv(f"{arch}.rope.freq_base", 50000.0), gw.kv(f"{arch}.context_length", 512),
            gw.kv(f"{arch}.attention.layer_norm_rms_epsilon", 2.0 ** -17),
            gw.kv("tokenizer.ggml.tokens", [f"t{i}" for i in range(V)])]
    if moe:
        meta += [gw.kv(f"{arch}.expert_count", E), gw.kv(f"{arch}.expert_used_count", k),
                 gw.kv(f"{arch}.expert_feed_forward_length", Im)]
    tensors, hf = [], {}

    def quant(hf_name, gg_name, tname, rows, cols, permute_heads=None):
        data = random_blocks(tname, rows, cols, rng, _type_scale(tname))
        exact = gr.dequantize(np.frombuffer(data, np.uint8).reshape(rows, -1), tname, cols)
        hf[hf_name] = exact
        if permute_heads is not None:
            # convert_hf_to_gguf.py's LlamaModel.permute, applied to the stored rows
            r = np.frombuffer(data, np.uint8).reshape(rows, -1)
            r = (r.reshape(permute_heads, 2, rows // permute_heads // 2, r.shape[1])
                 .swapaxes(1, 2).reshape(r.shape))
            data = r.tobytes()
        tensors.append((gg_name, (rows, cols), tname, data))

    def norm(hf_name, gg_name, n):
        w = 1.0 + 0.2 * rng.standard_normal(n)
        data, hf[hf_name] = encode(w, "F32")
        tensors.append((gg_name, (n,), "F32", data))

    quant("model.embed_tokens.weight", "token_embd.weight", "Q8_0", V, H)
    for li in range(L):
        p, b = f"model.layers.{li}.", f"blk.{li}."
        norm(p + "input_layernorm.weight", b + "attn_norm.weight", H)
        norm(p + "post_attention_layernorm.weight", b + "ffn_norm.weight", H)
        if arch != "llama":
            norm(p + "self_attn.q_norm.weight", b + "attn_q_norm.weight", d)
            norm(p + "self_attn.k_norm.weight", b + "attn_k_norm.weight", d)
        shapes = {"q": (nh * d, H), "k": (nkv * d, H), "v": (nkv * d, H), "o": (H, nh * d)}
        for n, (rows, cols) in shapes.items():
            suffix = f"self_attn.{n}_proj.weight"
            heads = {"q": nh, "k": nkv}.get(n) if arch == "llama" else None
            quant(p + suffix, b + TYPES[suffix][0], TYPES[suffix][1], rows, cols, heads)
        if moe and li not in moe_mlp_only:
            rw = 0.3 * rng.standard_normal((E, H))
            data, hf[p + "mlp.gate.weight"] = encode(rw, "F32")
            tensors.append((b + "ffn_gate_inp.weight", (E, H), "F32", data))
            for part, (rows, cols), tname in (("gate", (Im, H), "Q4_K"), ("up", (Im, H), "Q8_0"),
                                              ("down", (H, Im), "Q4_1")):
                datas = []
                for e in range(E):
                    dat = random_blocks(tname, rows, cols, rng, _type_scale(tname))
                    hf[p + f"mlp.experts.{e}.{part}_proj.weight"] = gr.dequantize(
                        np.frombuffer(dat, np.uint8).reshape(rows, -1), tname, cols)
                    datas.append(dat)
                tensors.append((b + f"ffn_{part}_exps.weight", (E, rows, cols), tname,
                                b"".join(datas)))
            continue
        for suffix, (rows, cols) in (("mlp.gate_proj.weight", (I, H)),
                                     ("mlp.up_proj.weight", (I, H)),
                                     ("mlp.down_proj.weight", (H, I))):
            quant(p + suffix, b + TYPES[suffix][0], TYPES[suffix][1], rows, cols)
    norm("model.norm.weight", "output_norm.weight", H)
    if not tied:
        quant("lm_head.weight", "output.weight", "Q4_1", V, H)
    if moe:
        config["intermediate_size"] = I
    path = str(tmp_path / f"{arch}.gguf")
    gw.write_gguf(path, meta, tensors)
    model_dir = str(tmp_path / f"{arch}-hf")
    write_model(model_dir, config, hf, dtype="F64")
    return path, model_dir


IDS = [3, 17, 42, 0, 49, 17, 8, 30]


@pytest.mark.parametrize("arch,tied", [("llama", True), ("llama", False), ("qwen3", True),
                                       ("qwen3moe", False)])
def test_gguf_model_equals_its_safetensors_twin(tmp_path, arch, tied):
    path, model_dir = tiny_pair(tmp_path, arch, tied=tied, seed=1)
    a = ref.load_config(path)
    b = ref.load_config(model_dir)
    for f in ("arch", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta",
              "tie_word_embeddings", "num_experts", "num_experts_per_tok",
              "moe_intermediate_size", "norm_topk_prob", "mlp_only_layers"):
        assert getattr(a, f) == getattr(b, f), f  # (eps 2^-17: exact in GGUF's FLOAT32)
    for kv in ("float64", "bfloat16"):
        ga = ref.log_softmax(path, IDS, kv_cache_dtype=kv)
        hb = ref.log_softmax(model_dir, IDS, kv_cache_dtype=kv)
        assert np.max(np.abs(ga - hb)) < 1e-11, kv
    assert np.ptp(ga) > 1.0  # not a degenerate model
    if arch == "llama":  # the un-permutation matters
        bad = ref.log_softmax(path, IDS, _debug_gguf_no_unpermute=True)
        assert np.max(np.abs(bad - ga)) > 1e-3


def test_moe_layers_without_router_are_dense(tmp_path):
    path, model_dir = tiny_pair(tmp_path, "qwen3moe", seed=2, moe_mlp_only=(1,))
    assert ref.load_config(path).mlp_only_layers == (1,)
    assert np.max(np.abs(ref.log_softmax(path, IDS) - ref.log_softmax(model_dir, IDS))) < 1e-11


def test_weight_bugs_change_only_their_type(tmp_path):
    path, _ = tiny_pair(tmp_path, "qwen3", seed=3)
    st = ref.load_model(path).st
    q41 = "model.layers.0.self_attn.o_proj.weight"     # Q4_1
    q4k = "model.layers.0.self_attn.q_proj.weight"     # Q4_K
    q8 = "model.layers.0.mlp.down_proj.weight"         # Q8_0
    no_min = frozenset(["_debug_gguf_q4_1_no_min"])
    sign = frozenset(["_debug_gguf_q4_k_min_sign"])
    assert st.bugs_affecting(q41, no_min) == no_min and not st.bugs_affecting(q8, no_min)
    assert st.bugs_affecting(q4k, sign) == sign and not st.bugs_affecting(q41, sign)
    assert not st.bugs_affecting(q4k, frozenset(["_debug_gguf_no_unpermute"]))  # qwen3
    raw = st.g.raw_rows("blk.0.attn_output.weight").reshape(-1, 20)
    m = raw[:, 2:4].copy().view("<f2").astype(np.float64).reshape(-1)
    d = raw[:, 0:2].copy().view("<f2").astype(np.float64).reshape(-1)
    good, bad = st.f64(q41), st.f64(q41, bugs=no_min)
    np.testing.assert_allclose((good - bad).reshape(-1, 32), np.repeat(m[:, None], 32, 1),
                               rtol=0, atol=0)
    k_good, k_bad = st.f64(q4k), st.f64(q4k, bugs=sign)
    raw_k = st.g.raw_rows("blk.0.attn_q.weight").reshape(-1, 144)
    dmin = raw_k[:, 2:4].copy().view("<f2").astype(np.float64).reshape(-1)
    _, mins = gr.q4k_scales_mins(raw_k[:, 4:16])
    np.testing.assert_array_equal((k_bad - k_good).reshape(-1, 8, 32),
                                  np.repeat((2 * dmin[:, None] * mins)[..., None], 32, 2))
    assert np.all(d > 0)


def test_weight_bugs_refused_on_safetensors(tmp_path):
    _, model_dir = tiny_pair(tmp_path, "qwen3", seed=4)
    with pytest.raises(ValueError, match="GGUF files only"):
        ref.log_softmax(model_dir, IDS, _debug_gguf_q4_1_no_min=True)


def _meta_file(tmp_path, arch, extra=(), tensors_extra=(), drop=()):
    meta = [gw.kv("general.architecture", arch), gw.kv(f"{arch}.block_count", 1),
            gw.kv(f"{arch}.embedding_length", 64), gw.kv(f"{arch}.feed_forward_length", 96),
            gw.kv(f"{arch}.attention.head_count", 4),
            gw.kv(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)] + list(extra)
    meta = [m for m in meta if m[0] not in drop]
    tensors = [("token_embd.weight", (10, 64), "F32", gw.f32_bytes(np.zeros((10, 64))))]
    p = str(tmp_path / "c.gguf")
    gw.write_gguf(p, meta, tensors + list(tensors_extra))
    return p


def test_config_defaults_and_keys(tmp_path):
    c = ref.load_config(_meta_file(tmp_path, "llama"))
    assert (c.arch, c.num_key_value_heads, c.head_dim, c.rope_theta, c.vocab_size) == \
        ("llama", 4, 16, 10000.0, 10)
    assert c.tie_word_embeddings and not c.attention_bias and c.rope_freq_factors is None
    c = ref.load_config(_meta_file(tmp_path, "qwen3moe", extra=[
        gw.kv("qwen3moe.expert_count", 8), gw.kv("qwen3moe.expert_used_count", 2),
        gw.kv("qwen3moe.expert_feed_forward_length", 32)]))
    assert c.arch == "qwen3_moe" and c.norm_topk_prob and c.num_experts == 8
    assert c.mlp_only_layers == (0,)  # no blk.0.ffn_gate_inp in this file
    c = ref.load_config(_meta_file(tmp_path, "qwen3moe", extra=[
        gw.kv("qwen3moe.expert_count", 8), gw.kv("qwen3moe.expert_used_count", 2),
        gw.kv("qwen3moe.expert_feed_forward_length", 32),
        gw.kv("qwen3moe.expert_weights_norm", False)]))
    assert not c.norm_topk_prob


def test_rope_freqs_divide_inverse_frequencies(tmp_path):
    factors = np.array([1.0, 1.0, 2.5, 8.0, 8.0, 8.0, 8.0, 8.0], np.float32)
    p = _meta_file(tmp_path, "llama", tensors_extra=[
        ("rope_freqs.weight", (8,), "F32", gw.f32_bytes(factors))])
    c = ref.load_config(p)
    base = 1.0 / 10000.0 ** (np.arange(0, 16, 2) / 16)
    np.testing.assert_array_equal(ref.rope_inv_freq(c), base / factors.astype(np.float64))
    np.testing.assert_array_equal(ref.rope_inv_freq(c, apply_scaling=False), base)


@pytest.mark.parametrize("extra,drop,message", [
    ([gw.kv("llama.rope.scaling.type", "linear")], (), "rope.scaling.type"),
    ([], ("llama.embedding_length",), "missing metadata key 'llama.embedding_length'"),
    ([gw.kv("llama.rope.dimension_count", 8)], (), "partial rotary"),
])
def test_config_errors(tmp_path, extra, drop, message):
    with pytest.raises((gr.GGUFError, NotImplementedError), match=message):
        ref.load_config(_meta_file(tmp_path, "llama", extra=extra, drop=drop))


def test_unknown_architecture(tmp_path):
    p = str(tmp_path / "g.gguf")
    gw.write_gguf(p, [gw.kv("general.architecture", "gpt2")], [])
    with pytest.raises(NotImplementedError, match="gpt2"):
        ref.load_config(p)


# --------------------------------------------------------------------------------------
# activation rounding (docs/NUMERICS.md)
# --------------------------------------------------------------------------------------

def test_quantize_activation_rows_by_hand():
    u = 2.0 ** -8
    x = np.zeros((1, 64))
    # block 0: amax = 127 * 2^-7 -> d = 2^-7 exactly, 1/d = 128: x * 128 = 127, 64, 0.5 (tie ->
    # even 0), 1.5 (-> 2), -2.5 (-> -2), 38.4 (-> 38)
    x[0, :6] = [127 * 2 * u, 0.5, u, 3 * u, -5 * u, 0.3]
    x[0, 32] = 1e-40                        # block 1: d < 2^-126 -> all zero
    y = ref.quantize_activation_rows(x, 32)
    assert y[0, :6].tolist() == [127 * 2 * u, 0.5, 0.0, 4 * u, -4 * u, 38 * 2 * u]
    assert np.all(y[0, 6:] == 0)
    # block of 256: one scale for all; a NaN row stays NaN
    w = ref.quantize_activation_rows(np.array([np.linspace(-1, 1, 256), [np.nan] * 256]), 256)
    assert np.max(np.abs(w[0] - np.linspace(-1, 1, 256))) <= 0.5 / 127 + 1e-15
    assert np.all(np.isnan(w[1]))
    # error bound d/2 on random data
    r = np.random.default_rng(0).standard_normal((50, 256))
    e = np.abs(ref.quantize_activation_rows(r, 32) - r).reshape(50, 8, 32)
    assert np.all(e <= np.max(np.abs(r.reshape(50, 8, 32)), axis=2, keepdims=True) / 254
                  * (1 + 1e-12))


def test_quantize_activations_option(tmp_path):
    path, model_dir = tiny_pair(tmp_path, "qwen3", seed=5)
    plain = ref.log_softmax(path, IDS)
    log = []
    lps = ref.log_softmax_variants(path, IDS, [dict(quantize_activations=True),
                                               dict(quantize_activations=True,
                                                    activation_dither_seed=1),
                                               dict(quantize_activations=True,
                                                    _debug_activation_scale_per_row=True)],
                                   rounding_log=log)
    q, dith, per_row = lps
    assert 1e-4 < np.max(np.abs(q - plain)) < 0.5
    assert 0 < np.max(np.abs(dith - q)) and np.max(np.abs(per_row - q)) > 1e-4
    # one record per quantized matmul per group (3 groups): q, k, v, o, gate, up, down per
    # layer and lm_head (tied: the Q8_0 embedding)
    assert len(log) == 3 * (7 * 2 + 1)
    s = ref.rounding_noise(log, 0, len(IDS))
    assert s.shape == (len(IDS),) and np.all(s > 0) and np.all(s < 1e-2)
    # a safetensors model has no quantized weights: the option changes nothing
    np.testing.assert_array_equal(ref.log_softmax(model_dir, IDS, quantize_activations=True),
                                  ref.log_softmax(model_dir, IDS))


def test_cli_reads_gguf(tmp_path):
    path, _ = tiny_pair(tmp_path, "llama", seed=6)
    out = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "reference.py"),
                          path, "1,2,3", "--quantize-activations"], capture_output=True,
                         text=True, check=True).stdout
    lp = ref.log_softmax(path, [1, 2, 3], quantize_activations=True)
    top, val = out.strip().splitlines()[2].split("-> ")[1].split(":")
    assert int(top) == int(np.argmax(lp[2])) and abs(float(val) - lp[2].max()) < 1e-6
