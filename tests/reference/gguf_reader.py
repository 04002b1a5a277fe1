"""A NumPy reader for llama.cpp's GGUF files, with exact float64 dequantization.

Written from the GGUF specification (ggml's gguf.h / docs/gguf.md) and ggml's block layouts
(ggml-common.h, the ``dequantize_row_*`` functions of ggml-quants.c), NOT from ditto's C++, so
that the float64 reference (reference.py) can read the same files as ditto independently.

File layout (all little-endian; versions 2 and 3):

    "GGUF" | version u32 | tensor_count u64 | kv_count u64
    kv_count x  (key: string, value_type u32, value)
    tensor_count x  (name: string, n_dims u32, ne[n_dims] u64, ggml_type u32, offset u64)
    padding to `general.alignment` (default 32) | tensor data (each offset a multiple of it)

    string = length u64 + UTF-8 bytes (no terminator); bool = one byte; array = element type
    u32 + count u64 + elements (nested arrays allowed). ne[0] is the innermost (contiguous)
    dimension, so a matrix of `rows` x `cols` has ne = [cols, rows]: here `shape` is reversed
    to NumPy order, (rows, cols).

Dequantization (one row = ne[0] values, split into blocks; f16 fields -> float64 exactly):

    type  block bytes  values
    F32   4            the float32
    F16   2            the float16
    BF16  2            the top 16 bits of a float32
    F64   8            the float64
    Q8_0  32  34       d f16 | qs int8[32]                     x_i = d * qs_i
    Q4_0  32  18       d f16 | qs u8[16]                        x_i = d * (nib_i - 8)
    Q4_1  32  20       d f16 | m f16 | qs u8[16]                x_i = d * nib_i + m
        nib_i (i < 16) = qs[i] & 15, nib_{i+16} = qs[i] >> 4
    Q4_K  256 144      d f16 | dmin f16 | scales u8[12] | qs u8[128]
        sub-block j (32 values) has a 6-bit scale sc_j and a 6-bit min m_j:
          j < 4:  sc_j = scales[j] & 63,  m_j = scales[j+4] & 63
          j >= 4: sc_j = (scales[j+4] & 15) | (scales[j-4] >> 6) << 4
                  m_j  = (scales[j+4] >> 4) | (scales[j]   >> 6) << 4
        values 64c .. 64c+31 are the low nibbles of qs[32c .. 32c+31] (sub-block 2c),
        values 64c+32 .. 64c+63 their high nibbles (sub-block 2c+1), c < 4;
        x = d * sc_j * q - dmin * m_j
    Q6_K  256 210      ql u8[128] | qh u8[64] | scales int8[16] | d f16
        for half h < 2 (128 values, ql[64h..], qh[32h..]) and l < 32:
          value 128h +  0 + l: (ql[l]    & 15) | ((qh[l] >> 0) & 3) << 4
          value 128h + 32 + l: (ql[l+32] & 15) | ((qh[l] >> 2) & 3) << 4
          value 128h + 64 + l: (ql[l]    >> 4) | ((qh[l] >> 4) & 3) << 4
          value 128h + 96 + l: (ql[l+32] >> 4) | ((qh[l] >> 6) & 3) << 4
        x_i = d * scales[i // 16] * (q_i - 32)

Every product and sum above is EXACT in float64: f16 has an 11-bit significand and exponents
2^-24 .. 2^15, so d*sc*q has at most 11+8+6 bits and Q4_1's / Q4_K's two terms span at most
50 bits from the larger term's top bit to the smaller's lowest: no rounding anywhere.

Errors raise GGUFError naming the file and the key or tensor at fault.

Public API:
    GGUFFile(path)                        header parsed, data memory-mapped
      .version, .alignment, .data_offset
      .metadata: {key: value}            ints, floats, bools, str; arrays as lists
                                          (numeric arrays as NumPy arrays)
      .metadata_types: {key: (type, element type or None)}
      .tensors: {name: TensorInfo}        shape in NumPy order, ggml type name, absolute offset
      .f64(name, rows=None) -> float64 [rows, cols] (or the tensor's shape for rows=None)
      .raw_rows(name) -> uint8 memmap [n_rows, row_bytes]
    dequantize(raw: uint8 [n, row_bytes], type_name, cols) -> float64 [n, cols]
    GGML_TYPES: {name: (type id, values per block, bytes per block)}
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_DEFAULT_ALIGNMENT = 32

# name: (ggml_type id, values per block, bytes per block)
GGML_TYPES: Dict[str, Tuple[int, int, int]] = {
    "F32": (0, 1, 4),
    "F16": (1, 1, 2),
    "Q4_0": (2, 32, 18),
    "Q4_1": (3, 32, 20),
    "Q8_0": (8, 32, 34),
    "Q4_K": (12, 256, 144),
    "Q6_K": (14, 256, 210),
    "Q5_0": (6, 32, 22),
    "Q5_1": (7, 32, 24),
    "Q2_K": (10, 256, 84),
    "Q3_K": (11, 256, 110),
    "Q5_K": (13, 256, 176),
    "IQ4_NL": (20, 32, 18),
    "IQ4_XS": (23, 256, 136),
    "F64": (28, 1, 8),
    "BF16": (30, 1, 2),
}
_TYPE_BY_ID = {v[0]: k for k, v in GGML_TYPES.items()}
QUANTIZED_TYPES = ("Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q5_K",
                   "IQ4_NL", "IQ4_XS")

# ggml's kvalues_iq4nl (ggml-common.h): the 16 levels an IQ4_NL / IQ4_XS index selects.
IQ4NL_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113],
                        dtype=np.float64)

# GGUF value types: id -> (name, struct format or None)
_VT_UINT8, _VT_INT8, _VT_UINT16, _VT_INT16, _VT_UINT32, _VT_INT32 = 0, 1, 2, 3, 4, 5
_VT_FLOAT32, _VT_BOOL, _VT_STRING, _VT_ARRAY, _VT_UINT64, _VT_INT64, _VT_FLOAT64 = range(6, 13)
_SCALAR_FMT = {
    _VT_UINT8: "<B", _VT_INT8: "<b", _VT_UINT16: "<H", _VT_INT16: "<h", _VT_UINT32: "<I",
    _VT_INT32: "<i", _VT_FLOAT32: "<f", _VT_BOOL: "<B", _VT_UINT64: "<Q", _VT_INT64: "<q",
    _VT_FLOAT64: "<d",
}
_SCALAR_NP = {
    _VT_UINT8: "<u1", _VT_INT8: "<i1", _VT_UINT16: "<u2", _VT_INT16: "<i2", _VT_UINT32: "<u4",
    _VT_INT32: "<i4", _VT_FLOAT32: "<f4", _VT_UINT64: "<u8", _VT_INT64: "<i8", _VT_FLOAT64: "<f8",
}
VALUE_TYPE_NAMES = {
    _VT_UINT8: "UINT8", _VT_INT8: "INT8", _VT_UINT16: "UINT16", _VT_INT16: "INT16",
    _VT_UINT32: "UINT32", _VT_INT32: "INT32", _VT_FLOAT32: "FLOAT32", _VT_BOOL: "BOOL",
    _VT_STRING: "STRING", _VT_ARRAY: "ARRAY", _VT_UINT64: "UINT64", _VT_INT64: "INT64",
    _VT_FLOAT64: "FLOAT64",
}


class GGUFError(ValueError):
    """A malformed or unsupported GGUF file; the message names the file and what is wrong."""


@dataclass
class TensorInfo:
    name: str
    shape: tuple        # NumPy order: (ne[n-1], ..., ne[0]); the last entry is a row's length
    type_name: str      # key of GGML_TYPES
    offset: int         # absolute byte offset in the file
    nbytes: int

    @property
    def cols(self) -> int:
        return self.shape[-1]

    @property
    def rows(self) -> int:
        return int(np.prod(self.shape[:-1], dtype=np.int64))

    @property
    def quantized(self) -> bool:
        return self.type_name in QUANTIZED_TYPES

    @property
    def block_size(self) -> int:
        return GGML_TYPES[self.type_name][1]


class _Cursor:
    """Bounds-checked little-endian reads from the file's bytes."""

    def __init__(self, buf, path: str):
        self.buf, self.pos, self.path, self.size = buf, 0, path, len(buf)

    def take(self, n: int, what: str) -> int:
        if n < 0 or self.pos + n > self.size:
            raise GGUFError(f"{self.path}: {what} runs past the end of the file "
                            f"(offset {self.pos}, {n} bytes, file {self.size} bytes)")
        p = self.pos
        self.pos += n
        return p

    def scalar(self, vt: int, what: str):
        fmt = _SCALAR_FMT[vt]
        p = self.take(struct.calcsize(fmt), what)
        (v,) = struct.unpack_from(fmt, self.buf, p)
        return bool(v) if vt == _VT_BOOL else v

    def u32(self, what: str) -> int:
        return self.scalar(_VT_UINT32, what)

    def u64(self, what: str) -> int:
        return self.scalar(_VT_UINT64, what)

    def string(self, what: str) -> str:
        n = self.u64(what + " (length)")
        p = self.take(n, what)
        try:
            return bytes(self.buf[p:p + n]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise GGUFError(f"{self.path}: {what} is not valid UTF-8: {e}") from None

    def _strings(self, n: int, what: str) -> list:
        """n strings in a row (vocabularies hold 1e5 of them: one tight loop)."""
        buf, pos, size, out = self.buf, self.pos, self.size, []
        unpack = struct.Struct("<Q").unpack_from
        for i in range(n):
            if pos + 8 > size:
                self.pos = pos
                raise GGUFError(f"{self.path}: {what}[{i}] (length) runs past the end of the file")
            (m,) = unpack(buf, pos)
            if pos + 8 + m > size:
                raise GGUFError(f"{self.path}: {what}[{i}] runs past the end of the file "
                                f"(offset {pos + 8}, {m} bytes, file {size} bytes)")
            out.append(bytes(buf[pos + 8:pos + 8 + m]))
            pos += 8 + m
        self.pos = pos
        try:
            return [b.decode("utf-8") for b in out]
        except UnicodeDecodeError as e:
            raise GGUFError(f"{self.path}: {what}: a string is not valid UTF-8: {e}") from None

    def value(self, vt: int, what: str, depth: int = 0):
        if vt in _SCALAR_FMT:
            return self.scalar(vt, what)
        if vt == _VT_STRING:
            return self.string(what)
        if vt == _VT_ARRAY:
            if depth > 8:
                raise GGUFError(f"{self.path}: {what}: arrays nested too deeply")
            et = self.u32(what + " (array element type)")
            n = self.u64(what + " (array length)")
            if et in _SCALAR_NP and et != _VT_BOOL:
                item = np.dtype(_SCALAR_NP[et]).itemsize
                if n > (self.size - self.pos) // item:
                    raise GGUFError(f"{self.path}: {what}: array of {n} runs past the end of "
                                    f"the file")
                p = self.take(n * item, what)
                return np.frombuffer(self.buf, dtype=_SCALAR_NP[et], count=n, offset=p).copy()
            if et == _VT_BOOL:
                p = self.take(n, what)
                return [bool(b) for b in bytes(self.buf[p:p + n])]
            if et not in (_VT_STRING, _VT_ARRAY):
                raise GGUFError(f"{self.path}: {what}: unknown array element type {et}")
            if n > self.size - self.pos:  # every element takes at least one byte
                raise GGUFError(f"{self.path}: {what}: array of {n} runs past the end of the file")
            if et == _VT_STRING:
                return self._strings(n, what)
            return [self.value(et, f"{what}[{i}]", depth + 1) for i in range(n)]
        raise GGUFError(f"{self.path}: {what}: unknown value type {vt}")


class GGUFFile:
    """Header of a GGUF file and a read-only memory map of its tensor data."""

    def __init__(self, path: str):
        self.path = str(path)
        self.mm = np.memmap(self.path, dtype=np.uint8, mode="r")
        cur = _Cursor(memoryview(self.mm), self.path)
        p = cur.take(4, "magic")
        magic = bytes(self.mm[p:p + 4])
        if magic != GGUF_MAGIC:
            raise GGUFError(f"{self.path}: not a GGUF file (magic {magic!r}, expected b'GGUF')")
        self.version = cur.u32("version")
        if self.version not in (2, 3):
            raise GGUFError(f"{self.path}: unsupported GGUF version {self.version} "
                            f"(2 and 3 are supported)")
        n_tensors = cur.u64("tensor count")
        n_kv = cur.u64("metadata count")
        # each kv takes >= 12 bytes, each tensor info >= 24: reject absurd counts early
        if n_kv > cur.size // 12 or n_tensors > cur.size // 24:
            raise GGUFError(f"{self.path}: counts ({n_tensors} tensors, {n_kv} keys) are "
                            f"larger than the file allows")

        self.metadata: Dict[str, object] = {}
        self.metadata_types: Dict[str, Tuple[int, Optional[int]]] = {}
        for i in range(n_kv):
            key = cur.string(f"key #{i}")
            if key in self.metadata:
                raise GGUFError(f"{self.path}: duplicate key {key!r}")
            vt = cur.u32(f"key {key!r}: value type")
            elem = None
            if vt == _VT_ARRAY:  # peek the element type for metadata_types
                if cur.pos + 4 <= cur.size:
                    (elem,) = struct.unpack_from("<I", self.mm, cur.pos)
            self.metadata[key] = cur.value(vt, f"key {key!r}")
            self.metadata_types[key] = (vt, elem)

        self.alignment = GGUF_DEFAULT_ALIGNMENT
        if "general.alignment" in self.metadata:
            a = self.metadata["general.alignment"]
            if self.metadata_types["general.alignment"][0] != _VT_UINT32 or a == 0 or a & (a - 1):
                raise GGUFError(f"{self.path}: key 'general.alignment' must be a UINT32 power "
                                f"of two, got {a!r}")
            self.alignment = int(a)

        infos = []
        for i in range(n_tensors):
            name = cur.string(f"tensor #{i} name")
            n_dims = cur.u32(f"tensor {name!r}: n_dims")
            if not 1 <= n_dims <= 4:
                raise GGUFError(f"{self.path}: tensor {name!r}: n_dims {n_dims} not in 1..4")
            ne = [cur.u64(f"tensor {name!r}: ne[{d}]") for d in range(n_dims)]
            tid = cur.u32(f"tensor {name!r}: type")
            off = cur.u64(f"tensor {name!r}: offset")
            infos.append((name, ne, tid, off))
        self.data_offset = -(-cur.pos // self.alignment) * self.alignment

        self.tensors: Dict[str, TensorInfo] = {}
        for name, ne, tid, off in infos:
            if name in self.tensors:
                raise GGUFError(f"{self.path}: duplicate tensor {name!r}")
            if tid not in _TYPE_BY_ID:
                raise GGUFError(f"{self.path}: tensor {name!r}: unsupported ggml type {tid} "
                                f"(supported: {', '.join(GGML_TYPES)})")
            tname = _TYPE_BY_ID[tid]
            _, bs, bb = GGML_TYPES[tname]
            if any(n == 0 for n in ne) or ne[0] % bs:
                raise GGUFError(f"{self.path}: tensor {name!r}: shape {ne} (ne[0] must be a "
                                f"positive multiple of {tname}'s block of {bs})")
            if off % self.alignment:
                raise GGUFError(f"{self.path}: tensor {name!r}: offset {off} is not a multiple "
                                f"of the alignment {self.alignment}")
            nbytes = int(np.prod(ne[1:], dtype=np.int64)) * (ne[0] // bs) * bb
            start = self.data_offset + off
            if start + nbytes > cur.size:
                raise GGUFError(f"{self.path}: tensor {name!r}: data {start}..{start + nbytes} "
                                f"runs past the end of the file ({cur.size} bytes)")
            self.tensors[name] = TensorInfo(name, tuple(int(n) for n in reversed(ne)), tname,
                                            start, nbytes)

    # -- access ----------------------------------------------------------------------
    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def info(self, name: str) -> TensorInfo:
        if name not in self.tensors:
            raise KeyError(f"{self.path}: no tensor {name!r}")
        return self.tensors[name]

    def raw_rows(self, name: str) -> np.ndarray:
        """uint8 memory map [n_rows, row_bytes] of a tensor's stored blocks."""
        t = self.info(name)
        row_bytes = t.nbytes // t.rows
        return self.mm[t.offset:t.offset + t.nbytes].reshape(t.rows, row_bytes)

    def f64(self, name: str, rows=None) -> np.ndarray:
        """Exact float64 values of a tensor: all of it in its NumPy shape, or the given rows
        (index array or slice over the flattened leading dimensions) as [n, cols]."""
        t = self.info(name)
        raw = self.raw_rows(name)
        if rows is None:
            return dequantize(raw, t.type_name, t.cols).reshape(t.shape)
        return dequantize(raw[rows], t.type_name, t.cols)


# --------------------------------------------------------------------------------------
# dequantization (uint8 [n, row_bytes] -> float64 [n, cols])
# --------------------------------------------------------------------------------------

def _f16(b: np.ndarray) -> np.ndarray:
    """Two trailing bytes (little-endian) -> float64, exactly."""
    return np.ascontiguousarray(b).view("<f2")[..., 0].astype(np.float64)


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """[..., 16] bytes -> [..., 32]: the low nibbles then the high nibbles."""
    return np.concatenate([qs & 15, qs >> 4], axis=-1).astype(np.float64)


def q4k_scales_mins(scales: np.ndarray):
    """Q4_K's 12 scale bytes [..., 12] -> (sc [..., 8], m [..., 8]), 6-bit integers."""
    s = scales.astype(np.int64)
    lo, hi = s[..., 0:4], s[..., 4:8]  # bytes 0..3 and 4..7
    top = s[..., 8:12]
    sc = np.concatenate([lo & 63, (top & 15) | ((lo >> 6) << 4)], axis=-1)
    m = np.concatenate([hi & 63, (top >> 4) | ((hi >> 6) << 4)], axis=-1)
    return sc, m


def q6k_values(ql: np.ndarray, qh: np.ndarray) -> np.ndarray:
    """Q6_K's ql [..., 128] and qh [..., 64] -> the unsigned 6-bit values [..., 256]."""
    ql = ql.astype(np.int64)
    qh = qh.astype(np.int64)
    halves = []
    for h in range(2):
        a, b = ql[..., 64 * h:64 * h + 32], ql[..., 64 * h + 32:64 * h + 64]
        c = qh[..., 32 * h:32 * h + 32]
        halves += [(a & 15) | ((c & 3) << 4), (b & 15) | (((c >> 2) & 3) << 4),
                   (a >> 4) | (((c >> 4) & 3) << 4), (b >> 4) | (((c >> 6) & 3) << 4)]
    return np.concatenate(halves, axis=-1)


def _fifth_bits(qh: np.ndarray) -> np.ndarray:
    """Q5_0 / Q5_1's qh [..., 4] (a little-endian u32) -> bit i as [..., 32]."""
    word = np.ascontiguousarray(qh).view("<u4")[..., 0].astype(np.int64)
    return (word[..., None] >> np.arange(32)) & 1


def _two_bit_values(qs: np.ndarray) -> np.ndarray:
    """Q3_K / Q2_K's qs [..., 64] -> the 2-bit fields [..., 256]: value 128h + 32t + l is bits
    2t, 2t+1 of qs[32h + l]."""
    q = qs.astype(np.int64).reshape(qs.shape[:-1] + (2, 1, 32))
    return ((q >> (2 * np.arange(4))[:, None]) & 3).reshape(qs.shape[:-1] + (256,))


def q3k_scales(scales: np.ndarray) -> np.ndarray:
    """Q3_K's 12 scale bytes [..., 12] -> the 16 six-bit scales (before the - 32)."""
    s = scales.astype(np.int64)
    low = np.concatenate([s[..., 0:8] & 15, s[..., 0:8] >> 4], axis=-1)
    j = np.arange(16)
    top = (s[..., 8 + j % 4] >> (2 * (j // 4))) & 3
    return low | (top << 4)


def dequantize(raw: np.ndarray, type_name: str, cols: int) -> np.ndarray:
    """Exact float64 values of `n` stored rows (uint8 [n, row_bytes]) of `cols` values each."""
    if type_name not in GGML_TYPES:
        raise GGUFError(f"unsupported ggml type {type_name}")
    _, bs, bb = GGML_TYPES[type_name]
    raw = np.asarray(raw, dtype=np.uint8)
    n = raw.shape[0]
    if raw.ndim != 2 or cols % bs or raw.shape[1] != cols // bs * bb:
        raise GGUFError(f"{type_name}: {raw.shape} bytes do not hold rows of {cols} values")
    if n == 0:
        return np.zeros((0, cols))
    if type_name in ("F32", "F16", "F64"):
        dt = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}[type_name]
        return np.ascontiguousarray(raw).view(dt).astype(np.float64)
    if type_name == "BF16":
        u = np.ascontiguousarray(raw).view("<u2").astype(np.uint32) << np.uint32(16)
        return u.view(np.float32).astype(np.float64)
    b = raw.reshape(n, cols // bs, bb)
    if type_name == "Q8_0":
        y = _f16(b[..., 0:2])[..., None] * b[..., 2:34].view(np.int8).astype(np.float64)
    elif type_name == "Q4_0":
        y = _f16(b[..., 0:2])[..., None] * (_nibbles(b[..., 2:18]) - 8.0)
    elif type_name == "Q4_1":
        y = _f16(b[..., 0:2])[..., None] * _nibbles(b[..., 4:20]) + _f16(b[..., 2:4])[..., None]
    elif type_name == "Q4_K":
        d, dmin = _f16(b[..., 0:2]), _f16(b[..., 2:4])
        sc, m = q4k_scales_mins(b[..., 4:16])                    # [n, nb, 8]
        qs = b[..., 16:144].reshape(n, -1, 4, 32)               # 4 chunks of 32 bytes
        q = np.stack([qs & 15, qs >> 4], axis=3).reshape(n, -1, 8, 32).astype(np.float64)
        y = ((d[..., None] * sc)[..., None] * q - (dmin[..., None] * m)[..., None])
    elif type_name == "Q6_K":
        q = q6k_values(b[..., 0:128], b[..., 128:192]).astype(np.float64) - 32.0
        sc = b[..., 192:208].view(np.int8).astype(np.float64)   # [n, nb, 16]
        d = _f16(b[..., 208:210])
        y = (d[..., None] * sc)[..., None] * q.reshape(n, -1, 16, 16)
    elif type_name in ("Q5_0", "Q5_1"):
        off = 2 if type_name == "Q5_0" else 4
        q = _nibbles(b[..., off + 4:off + 20]) + 16.0 * _fifth_bits(b[..., off:off + 4])
        if type_name == "Q5_0":
            y = _f16(b[..., 0:2])[..., None] * (q - 16.0)
        else:
            y = _f16(b[..., 0:2])[..., None] * q + _f16(b[..., 2:4])[..., None]
    elif type_name == "IQ4_NL":
        y = _f16(b[..., 0:2])[..., None] * IQ4NL_VALUES[_nibbles(b[..., 2:18]).astype(np.int64)]
    elif type_name == "Q5_K":
        d, dmin = _f16(b[..., 0:2]), _f16(b[..., 2:4])
        sc, m = q4k_scales_mins(b[..., 4:16])
        qh = b[..., 16:48].astype(np.int64)                       # [n, nb, 32]
        qs = b[..., 48:176].reshape(n, -1, 4, 32).astype(np.int64)
        low = np.stack([qs & 15, qs >> 4], axis=3).reshape(n, -1, 8, 32)
        high = (qh[..., None, :] >> np.arange(8)[:, None]) & 1     # [n, nb, 8, 32]: bit j of qh[l]
        q = (low | (high << 4)).astype(np.float64)
        y = ((d[..., None] * sc)[..., None] * q - (dmin[..., None] * m)[..., None])
    elif type_name == "Q3_K":
        hmask = b[..., 0:32].astype(np.int64)
        high = ((hmask[..., None, :] >> np.arange(8)[:, None]) & 1).reshape(n, -1, 256)
        q = (_two_bit_values(b[..., 32:96]) | (high << 2)).astype(np.float64) - 4.0
        sc = q3k_scales(b[..., 96:108]).astype(np.float64) - 32.0
        d = _f16(b[..., 108:110])
        y = (d[..., None] * sc)[..., None] * q.reshape(n, -1, 16, 16)
    elif type_name == "Q2_K":
        s16 = b[..., 0:16].astype(np.int64)
        sc, m = (s16 & 15).astype(np.float64), (s16 >> 4).astype(np.float64)
        q = _two_bit_values(b[..., 16:80]).astype(np.float64).reshape(n, -1, 16, 16)
        d, dmin = _f16(b[..., 80:82]), _f16(b[..., 82:84])
        y = (d[..., None] * sc)[..., None] * q - (dmin[..., None] * m)[..., None]
    elif type_name == "IQ4_XS":
        d = _f16(b[..., 0:2])
        sh = np.ascontiguousarray(b[..., 2:4]).view("<u2")[..., 0].astype(np.int64)
        sl = b[..., 4:8].astype(np.int64)
        j = np.arange(8)
        ls = ((sl[..., j // 2] >> (4 * (j % 2))) & 15) | (((sh[..., None] >> (2 * j)) & 3) << 4)
        idx = _nibbles(b[..., 8:136].reshape(n, -1, 8, 16)).astype(np.int64)   # [n, nb, 8, 32]
        y = (d[..., None] * (ls - 32.0))[..., None] * IQ4NL_VALUES[idx]
    else:  # pragma: no cover
        raise GGUFError(f"unsupported ggml type {type_name}")
    return y.reshape(n, cols)
