"""Test helper: a small GGUF writer, Q8_0 / Q4_K block builders, and layer truncation.

Written from the GGUF specification (ggml's gguf.h), separately from gguf_reader.py (it keeps
its own type tables), so that the reader's tests do not just read back their own mistakes.
Used by the reference self-tests (tiny GGUF models next to their safetensors twins) and by the
GGUF parity suite (a real GGUF cut to its first layers).
"""

from __future__ import annotations

import struct
from typing import Iterable, List, Sequence, Tuple

import numpy as np

# GGUF value types (gguf.h enum gguf_type) and their little-endian struct formats
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, \
    FLOAT64 = range(13)
_FMT = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
        FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}

# ggml types: name -> (id, values per block, bytes per block)
GGML = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20),
        "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144), "Q6_K": (14, 256, 210),
        "F64": (28, 1, 8), "BF16": (30, 1, 2)}

KV = Tuple[str, int, object]               # (key, value type, value); arrays: see _value
Tensor = Tuple[str, Sequence[int], str, bytes]  # (name, NumPy-order shape, ggml type, data)


def _string(s) -> bytes:
    b = s if isinstance(s, bytes) else s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(vtype: int, value) -> bytes:
    """One value; an ARRAY's value is (element type, list of elements)."""
    if vtype == STRING:
        return _string(value)
    if vtype == ARRAY:
        etype, items = value
        return (struct.pack("<IQ", etype, len(items))
                + b"".join(_value(etype, v) for v in items))
    return struct.pack(_FMT[vtype], value)


def kv(key: str, value) -> KV:
    """A metadata entry with the type llama.cpp's writer would choose: str -> STRING,
    bool -> BOOL, int -> UINT32 (INT64 if negative or >= 2^32), float -> FLOAT32,
    list of str / int / float -> ARRAY of that."""
    def vt(v):
        if isinstance(v, str):
            return STRING
        if isinstance(v, (bool, np.bool_)):
            return BOOL
        if isinstance(v, (int, np.integer)):
            return UINT32 if 0 <= v < 2 ** 32 else INT64
        if isinstance(v, (float, np.floating)):
            return FLOAT32
        raise TypeError(f"{key}: cannot infer a GGUF type for {type(v)}")
    if isinstance(value, (list, tuple)):
        et = vt(value[0]) if value else STRING
        return key, ARRAY, (et, list(value))
    return key, vt(value), value


def build_gguf(metadata: Iterable[KV], tensors: Iterable[Tensor], alignment: int = 32,
               version: int = 3) -> bytes:
    """The bytes of a GGUF file. Tensor data are laid out in order, each padded to
    `alignment` (general.alignment is NOT added here: pass it in metadata if not 32)."""
    metadata, tensors = list(metadata), list(tensors)
    out = [b"GGUF", struct.pack("<IQQ", version, len(tensors), len(metadata))]
    for key, vtype, value in metadata:
        out += [_string(key), struct.pack("<I", vtype), _value(vtype, value)]
    offset, blobs = 0, []
    for name, shape, tname, data in tensors:
        tid, bs, bb = GGML[tname]
        ne = list(reversed([int(s) for s in shape]))
        expect = int(np.prod(ne[1:], dtype=np.int64)) * (ne[0] // bs) * bb
        if ne[0] % bs or len(data) != expect:
            raise ValueError(f"{name}: {len(data)} bytes for {tname} shape {tuple(shape)}")
        out += [_string(name), struct.pack("<I", len(ne)),
                struct.pack(f"<{len(ne)}Q", *ne), struct.pack("<IQ", tid, offset)]
        pad = -len(data) % alignment
        blobs.append(data + b"\0" * pad)
        offset += len(data) + pad
    head = b"".join(out)
    head += b"\0" * (-len(head) % alignment)
    return head + b"".join(blobs)


def write_gguf(path: str, metadata: Iterable[KV], tensors: Iterable[Tensor], **kw) -> None:
    with open(path, "wb") as f:
        f.write(build_gguf(metadata, tensors, **kw))


# --------------------------------------------------------------------------------------
# float data and quantized blocks
# --------------------------------------------------------------------------------------

def f32_bytes(x) -> bytes:
    return np.asarray(x, dtype="<f4").tobytes()


def f16_bits(x) -> np.ndarray:
    return np.asarray(x, dtype="<f2").view("<u2")


def q8_0_blocks(x: np.ndarray) -> Tuple[bytes, np.ndarray]:
    """Round-to-nearest Q8_0 of rows x [n, cols] (cols % 32 == 0): (bytes, exact values).
    d = f16(amax / 127), q = round(x / d) clamped to [-127, 127]."""
    x = np.asarray(x, dtype=np.float64)
    n, cols = x.shape
    b = x.reshape(n, cols // 32, 32)
    d = (np.max(np.abs(b), axis=-1) / 127).astype(np.float16)
    dd = d.astype(np.float64)
    q = np.clip(np.rint(np.divide(b, dd[..., None], out=np.zeros_like(b),
                                  where=dd[..., None] > 0)), -127, 127).astype(np.int8)
    raw = np.concatenate([d[..., None].view(np.uint8).reshape(n, -1, 2),
                          q.view(np.uint8)], axis=-1)
    return raw.tobytes(), (dd[..., None] * q).reshape(n, cols)


def q4_k_block(d: float, dmin: float, sc: Sequence[int], m: Sequence[int],
               q: Sequence[int]) -> bytes:
    """One Q4_K block from its fields: d, dmin (as f16), 6-bit sc[8] and m[8], 4-bit q[256]
    in value order (value 64c + i is the low nibble of qs[32c + i] for i < 32, the high
    nibble of qs[32c + i - 32] for i >= 32)."""
    sc, m, q = list(sc), list(m), np.asarray(q, dtype=np.uint8)
    assert len(sc) == len(m) == 8 and q.shape == (256,) and max(sc + m) < 64 and q.max() < 16
    s = [0] * 12
    for j in range(4):
        s[j] = sc[j] | ((sc[j + 4] >> 4) << 6)
        s[j + 4] = m[j] | ((m[j + 4] >> 4) << 6)
        s[j + 8] = (sc[j + 4] & 15) | ((m[j + 4] & 15) << 4)
    qs = bytearray(128)
    for c in range(4):
        for i in range(32):
            qs[32 * c + i] = int(q[64 * c + i]) | (int(q[64 * c + 32 + i]) << 4)
    return (f16_bits([d, dmin]).tobytes() + bytes(s) + bytes(qs))


def q6_k_block(d: float, sc: Sequence[int], q: Sequence[int]) -> bytes:
    """One Q6_K block: int8 sc[16], unsigned 6-bit q[256] in value order, f16 d."""
    q = np.asarray(q, dtype=np.int64)
    assert q.shape == (256,) and q.min() >= 0 and q.max() < 64 and len(sc) == 16
    ql, qh = bytearray(128), bytearray(64)
    for h in range(2):
        for l in range(32):
            v = [int(q[128 * h + 32 * k + l]) for k in range(4)]
            ql[64 * h + l] = (v[0] & 15) | ((v[2] & 15) << 4)
            ql[64 * h + 32 + l] = (v[1] & 15) | ((v[3] & 15) << 4)
            qh[32 * h + l] = (v[0] >> 4) | ((v[1] >> 4) << 2) | ((v[2] >> 4) << 4) | \
                ((v[3] >> 4) << 6)
    return bytes(ql) + bytes(qh) + np.asarray(sc, dtype=np.int8).tobytes() + \
        f16_bits([d]).tobytes()


# --------------------------------------------------------------------------------------
# a real GGUF cut to its first layers
# --------------------------------------------------------------------------------------

def truncate_layers(src, dst: str, num_layers: int) -> None:
    """Copy GGUF file `src` (a gguf_reader.GGUFFile) to `dst` keeping blk.0 .. blk.{n-1}:
    every other tensor and every metadata key as stored (re-encoded from the value types the
    reader reports), <arch>.block_count = num_layers."""
    arch = src.metadata["general.architecture"]
    meta: List[KV] = []
    for key, value in src.metadata.items():
        vtype, etype = src.metadata_types[key]
        if key == f"{arch}.block_count":
            value = num_layers
        if vtype == ARRAY:
            if etype == ARRAY:
                raise NotImplementedError(f"{key}: nested arrays")
            items = value.tolist() if isinstance(value, np.ndarray) else list(value)
            value = (etype, items)
        meta.append((key, vtype, value))
    tensors: List[Tensor] = []
    for name, t in src.tensors.items():
        if name.startswith("blk.") and int(name.split(".")[1]) >= num_layers:
            continue
        data = bytes(np.asarray(src.mm[t.offset:t.offset + t.nbytes]))
        tensors.append((name, t.shape, t.type_name, data))
    write_gguf(dst, meta, tensors, alignment=src.alignment)
