"""Numerics of the float64 reference (reference.py): exact dtype decoding, bf16 and int8
rounding as ditto performs them, RoPE frequencies and rotation, RMSNorm, SiLU, log-softmax.

All functions work on NumPy arrays in the dtype they are given (float64, or float32 under the
diagnostic ``_emulate_float32``); none depends on a checkpoint.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from reference_checkpoint import Config

FLT_MIN = 2.0 ** -126


def decode_to_f64(raw: np.ndarray, dtype: str) -> np.ndarray:
    """Exact conversion of a raw stored array (as read from the file) to float64."""
    if dtype == "BF16":
        bits = np.asarray(raw, dtype=np.uint16).astype(np.uint32) << np.uint32(16)
        return bits.view(np.float32).astype(np.float64)
    return np.asarray(raw).astype(np.float64)


def rope_inv_freq(cfg: Config, apply_scaling: bool = True) -> np.ndarray:
    """inv_freq[i] = 1 / theta^(2i/head_dim), i < head_dim/2, with llama3 scaling if configured.

    llama3 rule (transformers' _compute_llama3_parameters), wavelen = 2*pi / inv_freq:
      wavelen < old_ctx / high_freq_factor  -> unchanged (high frequencies)
      wavelen > old_ctx / low_freq_factor   -> inv_freq / factor (low frequencies)
      otherwise  s = (old_ctx / wavelen - low) / (high - low),
                 inv_freq = (1 - s) * inv_freq / factor + s * inv_freq
    GGUF (llama.cpp): the factors come precomputed (rope_freqs.weight): inv_freq / factor.
    """
    d = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    if cfg.rope_freq_factors is not None:
        return inv / cfg.rope_freq_factors if apply_scaling else inv
    rs = cfg.rope_scaling
    if rs is None or not apply_scaling:
        return inv
    factor = float(rs["factor"])
    low = float(rs["low_freq_factor"])
    high = float(rs["high_freq_factor"])
    old_ctx = float(rs["original_max_position_embeddings"])
    low_freq_wavelen = old_ctx / low
    high_freq_wavelen = old_ctx / high
    wavelen = 2.0 * math.pi / inv
    out = np.where(wavelen > low_freq_wavelen, inv / factor, inv)
    smooth = (old_ctx / wavelen - low) / (high - low)
    smoothed = (1.0 - smooth) * out / factor + smooth * out
    medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(medium, smoothed, out)


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float64 values to the nearest bfloat16 (ties to even); returns float64.

    Done directly on the float64 bit pattern (keep 7 of 52 mantissa bits), so there is
    no double rounding. Valid for finite values in bf16's normal range (|x| >= 2^-126,
    below the overflow threshold); zeros are preserved. K/V values are O(1).
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    bits = x.view(np.uint64)
    shift = np.uint64(45)
    lsb = (bits >> shift) & np.uint64(1)
    bits = (bits + (np.uint64((1 << 44) - 1) + lsb)) & ~np.uint64((1 << 45) - 1)
    return bits.view(np.float64)


def quantize_activation_rows(x: np.ndarray, block: int) -> np.ndarray:
    """ditto's int8 activation rounding (docs/NUMERICS.md, "Quantized weights"), in x's dtype.

    x [N, K] (K a multiple of block) -> x' [N, K]: each block of `block` values of a row is
    replaced by d * q, amax = max |x_i|, d = amax / 127, q_i = round-half-even(x_i * (1/d))
    clamped to [-127, 127]; a block with d < FLT_MIN (2^-126, including 0) becomes 0.
    |x_i - x'_i| <= d/2 (+ rounding of x*(1/d)). A row holding NaN or inf becomes all NaN."""
    x = np.asarray(x)
    n, k = x.shape
    if k % block:
        raise ValueError(f"row length {k} is not a multiple of the activation block {block}")
    one = x.dtype.type(1)
    xb = x.reshape(n, k // block, block)
    amax = np.max(np.abs(xb), axis=-1, keepdims=True)
    d = amax / x.dtype.type(127)
    zero = ~(d >= FLT_MIN)  # also NaN
    safe = np.where(zero, one, d)
    q = np.clip(np.rint(xb * (one / safe)), -127, 127)
    out = np.where(zero, x.dtype.type(0), q * d).reshape(n, k)
    bad = ~np.all(np.isfinite(x), axis=1)
    if bad.any():
        out[bad] = np.nan
    return out


def _rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    var = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(var + eps) * w


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    """PyTorch's gelu(approximate="tanh") (transformers' "gelu_pytorch_tanh"), as written there:
    0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _log_softmax_rows(z: np.ndarray) -> np.ndarray:
    m = np.max(z, axis=-1, keepdims=True)
    s = np.sum(np.exp(z - m), axis=-1, keepdims=True)
    return z - (m + np.log(s))


def _apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: bool) -> np.ndarray:
    """x: [T, heads, d]; cos/sin: [T, d/2] for angle pos*inv_freq[i]."""
    c = cos[:, None, :]
    s = sin[:, None, :]
    if interleaved:  # TEST-ONLY bug: GPT-J style pairs (2i, 2i+1)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x1 * c - x2 * s
        out[..., 1::2] = x2 * c + x1 * s
        return out
    # HF rotate_half: out = x * [cos,cos] + [-x2, x1] * [sin,sin]
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
