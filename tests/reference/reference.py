#!/usr/bin/python3
"""Independent float64 reference ("oracle") for Hugging Face causal-LM checkpoints.

Supported architectures: ``Qwen3ForCausalLM``, ``LlamaForCausalLM`` (dense) and
``Qwen3MoeForCausalLM`` (Qwen3-30B-A3B family).

This file is written from the Hugging Face ``transformers`` semantics (modeling_qwen3.py,
modeling_qwen3_moe.py, modeling_llama.py, modeling_rope_utils.py), NOT from ditto's
C++ code, so that it can catch errors in ditto rather than reproduce them.
Everything is computed in float64 NumPy; the weights are decoded exactly from
their stored dtype (BF16 / F16 / F32 / F64) to float64.

GGUF: every entry point also takes the path of a llama.cpp GGUF file (llama, qwen3,
qwen3moe) instead of a model directory: the config comes from its metadata and the
tensors from their llama.cpp names, exactly dequantized to float64 (F32, F16, BF16, Q8_0,
Q4_0, Q4_1, Q4_K, Q6_K; llama's q/k rows put back in Hugging Face order) -- see
gguf_checkpoint.py and gguf_reader.py. The forward pass is the same.

Activation quantization (variant option ``quantize_activations=True``): emulates, in
float64, the one approximation ditto's GEMM on GGML-quantized weights makes
(docs/NUMERICS.md, "Quantized weights"): each input row of a matmul whose weight is
Q8_0/Q4_0/Q4_1 (blocks of 32) or Q4_K/Q6_K (blocks of 256) is replaced, block by block, by
d * q with d = amax/127, q = round-half-even(x * (1/d)) clamped to [-127, 127] (a block with
d < 2^-126 becomes 0); the product with the dequantized weights is then exact (float64).
See quantize_activation_rows. Variant option ``bf16_activations=True`` emulates ditto's GEMM
on BF16 weights: each input row of such a matmul is rounded to bf16 (round to nearest even;
round_to_bf16), after which the products are exact in float64 and ditto's float32 pair chain
differs from the float64 sum only by its own roundings.

Forward pass (per token row, causal):

    h = embed_tokens[ids]
    for each layer:
        x  = RMSNorm(h; input_layernorm)
        q, k, v = x Wq^T (+bq), x Wk^T (+bk), x Wv^T (+bv)      split into heads
        Qwen3 / Qwen3-MoE: q, k = RMSNorm_head(q; q_norm), RMSNorm_head(k; k_norm)
        q, k = RoPE(q), RoPE(k)     rotate-half convention, angle = pos * inv_freq
        [kv_cache_dtype="bfloat16": k, v rounded to bf16, round-to-nearest-even]
        a  = softmax(q k^T * head_dim**-0.5 + causal mask) v    (GQA: kv head = h // group)
        h  = h + a Wo^T (+bo)
        x  = RMSNorm(h; post_attention_layernorm)
        h  = h + down(silu(gate(x)) * up(x))                    dense layers, or
        h  = h + MoE(x)                                          Qwen3-MoE sparse layers
    logits = RMSNorm(h; norm) lm_head^T     (lm_head = embed_tokens when tied)

RMSNorm(x; w) = x / sqrt(mean(x^2) + eps) * w.

Qwen3-MoE (Qwen3MoeSparseMoeBlock). A layer is sparse iff it is not in mlp_only_layers,
num_experts > 0 and (layer + 1) % decoder_sparse_step == 0; other layers use the dense
MLP above (mlp.{gate,up,down}_proj, intermediate_size). For a sparse layer, per token x:

    router_logits = x Wgate^T                       Wgate = mlp.gate.weight [E, hidden]
    p = softmax(router_logits)                      float64, over all E experts
    S = the k = num_experts_per_tok experts of largest p; equal p -> the LOWER expert id
        is ranked first (ditto's canonical rule; HF leaves it to torch.topk)
    w_e = p_e, or p_e / sum_{j in S} p_j when norm_topk_prob
    MoE(x) = sum_{e in S, ascending e} w_e * down_e(silu(gate_e(x)) * up_e(x))
             (accumulated from 0; expert weights mlp.experts.{e}.{gate,up,down}_proj.weight,
              moe_intermediate_size)

Pass ``routing=[]`` to ``log_softmax_variants`` / ``Model.forward_variants`` to get the
router logits, probabilities, selected experts and weights of every sparse layer, and
``Routing.kth_margin()`` for the gap between the k-th and (k+1)-th expert (near-ties are
where a float32 computation may legitimately choose a different expert).

Memory: tensors (safetensors or GGUF) are memory-mapped and converted to float64 one at a time; the
embedding is gathered for the requested token rows only and the lm_head is applied
in chunks of ``LM_HEAD_CHUNK`` vocabulary rows, so a 2-layer Qwen3-8B (151936x4096
embedding + untied lm_head) runs with a peak of roughly 1-2 GB.

Public API:
    (model_dir: a Hugging Face model directory or a .gguf file)
    load_model(model_dir) -> Model
    logits(model_dir, token_ids, kv_cache_dtype="float64") -> float64 [T, vocab]
    log_softmax(model_dir, token_ids, kv_cache_dtype="float64",
                quantize_activations=False) -> float64 [T, vocab]
    log_softmax_variants(model_dir, token_ids, variants, routing=None) -> list of [T, vocab]
    round_to_bf16(x) -> float64 array holding bf16-representable values (RNE)
    quantize_activation_rows(x, block) -> x rounded to int8 per block, as ditto does

The keyword arguments starting with ``_debug_`` are TEST-ONLY deliberate bugs used
by the parity suite's sensitivity check (to prove the comparison can fail). Never
use them for anything else. ``_emulate_float32`` runs the same algorithm in float32
(diagnostic: estimates the size of float32 rounding effects); it is not a reference.

CLI:
    /usr/bin/python3 tests/reference/reference.py MODEL_DIR|FILE.gguf 1,2,3
        [--kv-cache-dtype bfloat16] [--quantize-activations] [--top 5]
        [--routing]     (--routing: MoE experts, weights and k-th margins per token)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import sys
import warnings
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional, Sequence

import numpy as np

import gguf_checkpoint
from gguf_reader import GGUFFile

LM_HEAD_CHUNK = 8192  # vocabulary rows of lm_head converted to float64 at a time

DEBUG_FLAGS = (
    "_debug_disable_rope",       # skip RoPE entirely
    "_debug_skip_qk_norm",       # Qwen3: skip q_norm / k_norm
    "_debug_interleaved_rope",   # rotate pairs (2i, 2i+1) instead of (i, i + d/2)
    "_debug_no_rope_scaling",    # ignore rope_scaling (llama3) -> plain inv_freq
    "_debug_no_causal_mask",     # let every position attend to every position
    "_debug_moe_no_topk_renorm",  # MoE: ignore norm_topk_prob (never renormalise)
    "_debug_moe_swap_kth_expert",  # MoE: take the (k+1)-th expert instead of the k-th
    "_emulate_float32",          # diagnostic: compute in float32 instead of float64
    "_debug_activation_scale_per_row",  # quantize_activations: one int8 scale per row, not block
) + gguf_checkpoint.WEIGHT_BUGS  # GGUF only: Q4_1 min ignored, Q4_K min sign, q/k permutation

# Activation block of ditto's quantized GEMM for each GGML weight type (docs/NUMERICS.md).
ACTIVATION_BLOCK = {"Q8_0": 32, "Q4_0": 32, "Q4_1": 32, "Q4_K": 256, "Q6_K": 256}
FLT_MIN = 2.0 ** -126
# activation_dither_seed: relative size of the random perturbation of each rounded input
# (about a float32 GEMM's rounding error), to draw further samples of the rounding noise
DITHER = 1e-6


# --------------------------------------------------------------------------------------
# safetensors
# --------------------------------------------------------------------------------------

_ST_DTYPES = {
    "BF16": (np.uint16, 2),
    "F16": (np.float16, 2),
    "F32": (np.float32, 4),
    "F64": (np.float64, 8),
}


@dataclass
class _TensorInfo:
    path: str
    dtype: str
    shape: tuple
    offset: int  # absolute byte offset in the file


def _parse_safetensors_header(path: str) -> Dict[str, _TensorInfo]:
    with open(path, "rb") as f:
        raw_len = f.read(8)
        if len(raw_len) != 8:
            raise ValueError(f"{path}: too short for a safetensors file")
        (header_len,) = struct.unpack("<Q", raw_len)
        header = json.loads(f.read(header_len).decode("utf-8"))
    data_start = 8 + header_len
    file_size = os.path.getsize(path)
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        dtype = meta["dtype"]
        if dtype not in _ST_DTYPES:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dtype}")
        shape = tuple(int(s) for s in meta["shape"])
        start, end = (int(o) for o in meta["data_offsets"])
        nbytes = int(np.prod(shape, dtype=np.int64)) * _ST_DTYPES[dtype][1]
        if end - start != nbytes:
            raise ValueError(f"{path}: tensor {name}: data_offsets {start}..{end} "
                             f"do not match shape {shape} dtype {dtype}")
        if data_start + end > file_size:
            raise ValueError(f"{path}: tensor {name} runs past the end of the file")
        out[name] = _TensorInfo(path, dtype, shape, data_start + start)
    return out


def decode_to_f64(raw: np.ndarray, dtype: str) -> np.ndarray:
    """Exact conversion of a raw stored array (as read from the file) to float64."""
    if dtype == "BF16":
        bits = np.asarray(raw, dtype=np.uint16).astype(np.uint32) << np.uint32(16)
        return bits.view(np.float32).astype(np.float64)
    return np.asarray(raw).astype(np.float64)


class SafeTensors:
    """Lazy reader for model.safetensors or a sharded model.safetensors.index.json."""

    def __init__(self, model_dir: str):
        self.model_dir = model_dir
        self.tensors: Dict[str, _TensorInfo] = {}
        index = os.path.join(model_dir, "model.safetensors.index.json")
        single = os.path.join(model_dir, "model.safetensors")
        if os.path.exists(index):
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
            headers = {}
            for shard in sorted(set(weight_map.values())):
                headers[shard] = _parse_safetensors_header(os.path.join(model_dir, shard))
            for name, shard in weight_map.items():
                if name not in headers[shard]:
                    raise KeyError(f"{shard} does not contain {name} (index says it does)")
                self.tensors[name] = headers[shard][name]
        elif os.path.exists(single):
            self.tensors = _parse_safetensors_header(single)
        else:
            raise FileNotFoundError(f"{model_dir}: no model.safetensors[.index.json]")

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def shape(self, name: str) -> tuple:
        return self.tensors[name].shape

    def ggml_type(self, name: str) -> str:
        """The stored dtype ("BF16", "F16", "F32", "F64"): never a quantized type."""
        return self.tensors[name].dtype

    def raw(self, name: str) -> np.ndarray:
        """Memory map of the stored data (BF16 as uint16)."""
        info = self.tensors[name]
        np_dtype = _ST_DTYPES[info.dtype][0]
        if int(np.prod(info.shape, dtype=np.int64)) == 0:
            return np.zeros(info.shape, dtype=np_dtype)
        return np.memmap(info.path, dtype=np_dtype, mode="r", offset=info.offset,
                         shape=info.shape)

    def f64(self, name: str, rows=None) -> np.ndarray:
        """float64 copy of a tensor, or of the given rows (index array / slice) only."""
        raw = self.raw(name)
        if rows is not None:
            raw = raw[rows]
        return decode_to_f64(raw, self.tensors[name].dtype)


# --------------------------------------------------------------------------------------
# config
# --------------------------------------------------------------------------------------

@dataclass
class Config:
    arch: str                      # "qwen3", "qwen3_moe" or "llama"
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: Optional[dict]
    tie_word_embeddings: bool
    attention_bias: bool
    mlp_bias: bool
    # Qwen3-MoE only (num_experts == 0 for dense models)
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    decoder_sparse_step: int = 1
    mlp_only_layers: tuple = ()
    norm_topk_prob: bool = False
    # GGUF llama3 scaling as llama.cpp stores it (rope_freqs.weight): inv_freq / factor
    rope_freq_factors: Optional[np.ndarray] = None
    raw: dict = field(default_factory=dict)

    @property
    def qk_norm(self) -> bool:
        """Qwen3 and Qwen3-MoE RMS-normalise every q and k head before RoPE."""
        return self.arch in ("qwen3", "qwen3_moe")

    def is_moe_layer(self, layer: int) -> bool:
        """transformers' Qwen3MoeDecoderLayer: sparse block iff the layer is not in
        mlp_only_layers, num_experts > 0 and (layer + 1) % decoder_sparse_step == 0."""
        return (layer not in self.mlp_only_layers and self.num_experts > 0
                and (layer + 1) % self.decoder_sparse_step == 0)


def load_config(model_dir: str) -> Config:
    """config.json with the Hugging Face class defaults for missing keys; for a GGUF file,
    its metadata (gguf_checkpoint.config_fields).

    Defaults (from transformers' Qwen3Config / Qwen3MoeConfig / LlamaConfig):
      - head_dim: Qwen3Config default 128; LlamaConfig default hidden_size // num_heads;
        Qwen3MoeConfig has no default (the attention uses hidden_size // num_heads).
        (null -> hidden_size // num_attention_heads for all)
      - num_key_value_heads: null -> num_attention_heads (Llama absent -> same);
        the class default when the key is absent is 32 (Qwen3Config), 4 (Qwen3MoeConfig).
      - rms_norm_eps 1e-6, rope_theta 10000, tie_word_embeddings False,
        attention_bias False, mlp_bias False (Llama only; Qwen3 MLP has no bias).
      - rope_theta / rope_scaling may also come from the newer ``rope_parameters`` dict.
      - Qwen3MoeConfig: hidden_size 2048, intermediate_size 6144 (the dense MLP of
        mlp_only layers), num_hidden_layers 24, num_experts 128, num_experts_per_tok 8,
        moe_intermediate_size 768, decoder_sparse_step 1, mlp_only_layers None -> [],
        norm_topk_prob False (the Qwen3-30B-A3B config.json sets it true).
    """
    if gguf_checkpoint.is_gguf(model_dir):
        return Config(**gguf_checkpoint.config_fields(GGUFFile(model_dir)))
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    archs = c.get("architectures") or []
    model_type = c.get("model_type", "")
    if "Qwen3MoeForCausalLM" in archs or model_type == "qwen3_moe":
        arch = "qwen3_moe"
    elif "Qwen3ForCausalLM" in archs or model_type == "qwen3":
        arch = "qwen3"
    elif "LlamaForCausalLM" in archs or model_type == "llama":
        arch = "llama"
    else:
        raise ValueError(f"unsupported architecture {archs} / model_type {model_type!r}")

    moe = arch == "qwen3_moe"
    hidden = int(c.get("hidden_size", 2048 if moe else 4096))
    heads = int(c.get("num_attention_heads", 32))
    if "head_dim" in c and c["head_dim"] is not None:
        head_dim = int(c["head_dim"])
    elif "head_dim" not in c and arch == "qwen3":
        head_dim = 128
    else:
        head_dim = hidden // heads
    if c.get("num_key_value_heads") is not None:
        kv_heads = int(c["num_key_value_heads"])
    elif "num_key_value_heads" not in c and arch in ("qwen3", "qwen3_moe"):
        kv_heads = 4 if moe else 32
    else:
        kv_heads = heads

    rope_params = c.get("rope_parameters") or {}
    rope_theta = float(c.get("rope_theta", rope_params.get("rope_theta", 10000.0)))
    rope_scaling = c.get("rope_scaling")
    if rope_scaling is None and rope_params:
        rope_scaling = rope_params
    if rope_scaling is not None:
        rtype = rope_scaling.get("rope_type", rope_scaling.get("type", "default"))
        if rtype == "default":
            rope_scaling = None
        elif rtype != "llama3":
            raise NotImplementedError(f"rope_type {rtype!r} is not implemented")
    if float(c.get("partial_rotary_factor", 1.0)) != 1.0:
        raise NotImplementedError("partial_rotary_factor != 1")
    if c.get("hidden_act", "silu") != "silu":
        raise NotImplementedError(f"hidden_act {c.get('hidden_act')!r}")
    if arch != "llama" and c.get("use_sliding_window", False):
        raise NotImplementedError("use_sliding_window=true")

    moe_kw = {}
    if moe:
        mlp_only = c.get("mlp_only_layers")
        moe_kw = dict(
            num_experts=int(c.get("num_experts", 128)),
            num_experts_per_tok=int(c.get("num_experts_per_tok", 8)),
            moe_intermediate_size=int(c.get("moe_intermediate_size", 768)),
            decoder_sparse_step=int(c.get("decoder_sparse_step", 1)),
            mlp_only_layers=tuple(int(i) for i in (mlp_only or [])),
            norm_topk_prob=bool(c.get("norm_topk_prob", False)),
        )
        if moe_kw["num_experts"] < 0 or moe_kw["decoder_sparse_step"] < 1:
            raise ValueError("num_experts must be >= 0 and decoder_sparse_step >= 1")
        if moe_kw["num_experts"] > 0 and not (
                1 <= moe_kw["num_experts_per_tok"] <= moe_kw["num_experts"]):
            raise ValueError(f"num_experts_per_tok {moe_kw['num_experts_per_tok']} must be in "
                             f"[1, num_experts={moe_kw['num_experts']}]")

    return Config(
        arch=arch,
        vocab_size=int(c.get("vocab_size", 151936 if arch != "llama" else 32000)),
        hidden_size=hidden,
        intermediate_size=int(c.get("intermediate_size", 6144 if moe else
                                    22016 if arch == "qwen3" else 11008)),
        num_hidden_layers=int(c.get("num_hidden_layers", 24 if moe else 32)),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=float(c.get("rms_norm_eps", 1e-6)),
        rope_theta=rope_theta,
        rope_scaling=rope_scaling,
        tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
        attention_bias=bool(c.get("attention_bias", False)),
        mlp_bias=bool(c.get("mlp_bias", False)) if arch == "llama" else False,
        raw=c,
        **moe_kw,
    )


# --------------------------------------------------------------------------------------
# numerics
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# Qwen3-MoE routing
# --------------------------------------------------------------------------------------

@dataclass
class Routing:
    """What one sparse MoE layer decided for one variant (all arrays float64 / int64).

    router_logits [T, num_experts]; probs = softmax(router_logits) [T, num_experts];
    experts [T, k]: the selected ids in rank order (highest probability first, ties to the
    lower id); weights [T, k]: the mixing weights (renormalised when norm_topk_prob).
    """
    layer: int
    router_logits: np.ndarray
    probs: np.ndarray
    experts: np.ndarray
    weights: np.ndarray

    def kth_margin(self):
        """(prob_margin [T], logit_gap [T]): how far the k-th choice is from the (k+1)-th.

        prob_margin = p_(k) - p_(k+1) and logit_gap = log p_(k) - log p_(k+1) for the sorted
        routing probabilities. A computation whose router logits differ from these by more
        than about logit_gap / 2 may legitimately pick a different expert set. Infinite when
        k == num_experts (every expert is taken, nothing to flip)."""
        T, E = self.probs.shape
        k = self.experts.shape[1]
        if k >= E:
            return np.full(T, np.inf), np.full(T, np.inf)
        order = _topk_order(self.probs)
        rows = np.arange(T)
        pk, pk1 = self.probs[rows, order[:, k - 1]], self.probs[rows, order[:, k]]
        lk = self.router_logits[rows, order[:, k - 1]]
        lk1 = self.router_logits[rows, order[:, k]]
        return pk - pk1, lk - lk1


def _topk_order(probs: np.ndarray) -> np.ndarray:
    """Expert ids of each row sorted by probability descending, equal probabilities by
    ascending id (ditto's canonical tie rule; a stable sort keeps ids ascending)."""
    return np.argsort(-probs, axis=-1, kind="stable")


def _route(router_logits: np.ndarray, k: int, norm_topk_prob: bool, swap_kth: bool):
    """transformers' Qwen3MoeSparseMoeBlock routing, with the tie rule made explicit:
    probs = softmax(router_logits); the k most probable experts; weights = their probs,
    divided by their sum when norm_topk_prob. Returns (probs, experts [T,k], weights [T,k])."""
    z = router_logits - np.max(router_logits, axis=-1, keepdims=True)
    e = np.exp(z)
    probs = e / np.sum(e, axis=-1, keepdims=True)
    order = _topk_order(probs)
    if swap_kth:  # TEST-ONLY bug: ranks 0..k-2 and k
        if k >= probs.shape[-1]:
            raise ValueError("_debug_moe_swap_kth_expert needs num_experts_per_tok < num_experts")
        experts = np.concatenate([order[:, :k - 1], order[:, k:k + 1]], axis=1)
    else:
        experts = order[:, :k]
    weights = np.take_along_axis(probs, experts, axis=1)
    if norm_topk_prob:
        weights = weights / np.sum(weights, axis=-1, keepdims=True)
    return probs, experts, weights


# --------------------------------------------------------------------------------------
# model
# --------------------------------------------------------------------------------------

@dataclass
class _Group:
    """Variants that share one matmul treatment."""
    quantize: bool                 # quantize_activations
    bf16: bool                     # bf16_activations
    per_row: bool                  # TEST-ONLY _debug_activation_scale_per_row
    dither: Optional[np.random.Generator]  # activation_dither_seed's generator, or None
    bugs: FrozenSet[str]           # TEST-ONLY weight bugs (gguf_checkpoint.WEIGHT_BUGS)
    variants: np.ndarray           # int: the variant ids


@dataclass
class _Pass:
    """What one forward pass needs to apply each variant's options to its rows.

    Rows of every activation matrix are (variant, token) pairs flattened variant-major;
    `groups` partitions the variants by matmul treatment, so that each weight is converted
    once per call and each group's rows are rounded (or not) together."""
    dt: type                       # np.float64, or np.float32 under _emulate_float32
    num_tokens: int                # T: row id = variant * T + token
    groups: List[_Group]
    rounding_log: Optional[list]   # receives ActivationRounding records, or None

    def rows_of(self, rid: np.ndarray):
        """(group, bool mask over rid or None for all) for each group owning some rows."""
        if len(self.groups) == 1:
            return [(self.groups[0], None)]
        out = []
        for g in self.groups:
            m = np.isin(rid // self.num_tokens, g.variants)
            if m.any():
                out.append((g, m))
        return out


@dataclass
class ActivationRounding:
    """One matmul's int8 input rounding (quantize_activations): for each rounded row,
    rho = ||x' - x|| / ||x|| (0 for a zero row). Rows are (variant, token) = divmod(row, T)."""
    weight: str                    # the weight's (Hugging Face) name
    rows: np.ndarray               # int [N]: row ids, variant * T + token
    rho: np.ndarray                # float64 [N]


def rounding_noise(log: List[ActivationRounding], variant: int, num_tokens: int) -> np.ndarray:
    """sum of rho^2 [T] over the distinct rounded inputs of each token row of one variant.

    k_proj / v_proj read the same rounded input as q_proj, and up_proj the same as gate_proj:
    they are counted once. (MoE: every expert's down_proj input counts, an overestimate.)"""
    s = np.zeros(num_tokens)
    for r in log:
        if r.weight.endswith(("k_proj.weight", "v_proj.weight", "up_proj.weight")):
            continue
        v, t = np.divmod(r.rows, num_tokens)
        np.add.at(s, t[v == variant], r.rho[v == variant] ** 2)
    return s


class Model:
    def __init__(self, model_dir: str):
        self.model_dir = model_dir
        if gguf_checkpoint.is_gguf(model_dir):
            g = GGUFFile(model_dir)
            self.cfg = Config(**gguf_checkpoint.config_fields(g))
            self.st = gguf_checkpoint.GGUFTensors(
                g, self.cfg.arch, self.cfg.num_attention_heads, self.cfg.num_key_value_heads,
                self.cfg.head_dim)
            self.gguf = True
        else:
            self.cfg = load_config(model_dir)
            self.st = SafeTensors(model_dir)
            self.gguf = False
        cfg = self.cfg
        emb = "model.embed_tokens.weight"
        if emb not in self.st:
            raise KeyError(f"{model_dir}: missing {emb}")
        if self.st.shape(emb) != (cfg.vocab_size, cfg.hidden_size):
            raise ValueError(f"{emb} shape {self.st.shape(emb)} != "
                             f"({cfg.vocab_size}, {cfg.hidden_size})")
        if cfg.tie_word_embeddings or "lm_head.weight" not in self.st:
            if not cfg.tie_word_embeddings:
                raise KeyError("lm_head.weight missing and tie_word_embeddings is false")
            self.lm_head_name = emb
        else:
            self.lm_head_name = "lm_head.weight"

    # -- weights -------------------------------------------------------------------
    def _w(self, name: str, dt, rows=None, bugs: FrozenSet[str] = frozenset()) -> np.ndarray:
        if bugs:
            return self.st.f64(name, rows=rows, bugs=bugs).astype(dt, copy=False)
        return self.st.f64(name, rows=rows).astype(dt, copy=False)

    def _opt_bias(self, name: str, enabled: bool, dt,
                  bugs: FrozenSet[str] = frozenset()) -> Optional[np.ndarray]:
        if name in self.st:
            if not enabled:
                # transformers builds the Linear without a bias and ignores the stored one
                warnings.warn(f"{name} present but the config disables that bias: ignored")
                return None
            return self._w(name, dt, bugs=bugs)
        if enabled:
            raise KeyError(f"config enables a bias but {name} is missing")
        return None

    def _linear(self, x: np.ndarray, rid: np.ndarray, wname: str, bname: Optional[str],
                bias_enabled: bool, ps: _Pass, rows=None) -> np.ndarray:
        """x: [..., in] -> [..., out] with W [out, in] from the checkpoint (or its `rows`).

        rid: int [prod(x.shape[:-1])], the row id (variant * T + token) of each row of x.
        Rows of variants with quantize_activations are rounded as ditto's GEMM rounds them
        when W is GGML-quantized (int8 blocks), rows of variants with bf16_activations when
        W is stored BF16 (to bf16, round to nearest even); variants with TEST-ONLY weight bugs get their own (buggy)
        copy of W."""
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])
        block = ACTIVATION_BLOCK.get(self.st.ggml_type(wname))
        y = None
        weights = {}  # by the weight bugs that change this tensor: converted once per call
        for g, mask in ps.rows_of(rid):
            xs = x2 if mask is None else x2[mask]
            wtype = self.st.ggml_type(wname)
            if (g.quantize and block is not None) or (g.bf16 and wtype == "BF16"):
                if g.dither is not None:
                    xs = xs * (1.0 + DITHER * g.dither.standard_normal(xs.shape))
                if block is not None:
                    xq = quantize_activation_rows(xs, xs.shape[1] if g.per_row else block)
                else:
                    xq = round_to_bf16(xs).astype(ps.dt, copy=False)
                if ps.rounding_log is not None:
                    norm = np.sqrt(np.sum(xs.astype(np.float64) ** 2, axis=1))
                    err = np.sqrt(np.sum((xq - xs).astype(np.float64) ** 2, axis=1))
                    ps.rounding_log.append(ActivationRounding(
                        wname, rid if mask is None else rid[mask],
                        np.divide(err, norm, out=np.zeros_like(err), where=norm > 0)))
                xs = xq
            bugs = self.st.bugs_affecting(wname, g.bugs) if g.bugs else g.bugs
            if bugs not in weights:
                weights[bugs] = self._w(wname, ps.dt, rows=rows, bugs=bugs)
            ys = (weights[bugs] @ xs.T).T  # (this orientation is faster with netlib BLAS)
            if bname is not None:
                b = self._opt_bias(bname, bias_enabled, ps.dt, bugs=bugs)
                if b is not None:
                    ys = ys + (b if rows is None else b[rows])
            if mask is None:
                y = ys
            else:
                if y is None:
                    y = np.empty((x2.shape[0], ys.shape[1]), dtype=ps.dt)
                y[mask] = ys
        return y.reshape(*lead, -1)

    def _dense_mlp(self, x: np.ndarray, rid: np.ndarray, p: str, intermediate: int, bias: bool,
                   ps: _Pass) -> np.ndarray:
        """down(silu(gate(x)) * up(x)); x [..., hidden] -> [..., hidden]. p ends in "mlp."."""
        g = self._linear(x, rid, p + "gate_proj.weight", p + "gate_proj.bias", bias, ps)
        if g.shape[-1] != intermediate:
            raise ValueError(f"{p}gate_proj.weight has {g.shape[-1]} rows, expected "
                             f"{intermediate}")
        u = self._linear(x, rid, p + "up_proj.weight", p + "up_proj.bias", bias, ps)
        a = _silu(g) * u
        del g, u
        return self._linear(a, rid, p + "down_proj.weight", p + "down_proj.bias", bias, ps)

    def _sparse_moe(self, x: np.ndarray, li: int, variants: List[dict], ps: _Pass,
                    routing_out: Optional[List[List[Routing]]]) -> np.ndarray:
        """Qwen3MoeSparseMoeBlock. x [V, T, hidden] (one slab per variant) -> [V, T, hidden].

        out[t] = sum over the selected experts e of token t, in ascending e, of
                 weight[t, e] * down_e(silu(gate_e(x_t)) * up_e(x_t)),  starting from 0.
        Each expert's weights are converted once and applied to the rows routed to it."""
        cfg = self.cfg
        dt = ps.dt
        p = f"model.layers.{li}.mlp."
        V, T, H = x.shape
        E, k = cfg.num_experts, cfg.num_experts_per_tok
        if self.st.shape(p + "gate.weight") != (E, H):
            raise ValueError(f"{p}gate.weight shape {self.st.shape(p + 'gate.weight')} != "
                             f"({E}, {H})")
        rid = np.arange(V * T)
        router_logits = self._linear(x, rid, p + "gate.weight", None, False, ps)
        # sel[v, t, e]: mixing weight of expert e for token t of variant v (0 if unselected)
        sel = np.zeros((V, T, E), dtype=dt)
        chosen = np.zeros((V, T, E), dtype=bool)
        picked = []  # experts [T, k] per variant
        for vi, var in enumerate(variants):
            logits_v = router_logits[vi]
            renorm = cfg.norm_topk_prob and not var.get("_debug_moe_no_topk_renorm", False)
            probs, experts, weights = _route(logits_v, k, renorm,
                                             var.get("_debug_moe_swap_kth_expert", False))
            if var.get("moe_experts_from") is not None:
                # same expert sets as an earlier variant, weights from this variant's probs
                experts = picked[var["moe_experts_from"]]
                weights = np.take_along_axis(probs, experts, axis=1)
                if renorm:
                    weights = weights / np.sum(weights, axis=-1, keepdims=True)
            picked.append(experts)
            np.put_along_axis(sel[vi], experts, weights, axis=1)
            np.put_along_axis(chosen[vi], experts, True, axis=1)
            if routing_out is not None:
                routing_out[vi].append(Routing(
                    li, logits_v.astype(np.float64), probs.astype(np.float64),
                    experts.astype(np.int64), weights.astype(np.float64)))
        xf = x.reshape(V * T, H)
        sel = sel.reshape(V * T, E)
        chosen = chosen.reshape(V * T, E)
        out = np.zeros((V * T, H), dtype=dt)
        for e in range(E):  # ascending expert id: each row accumulates its experts in order
            rows = np.nonzero(chosen[:, e])[0]
            if len(rows) == 0:
                continue
            y = self._dense_mlp(xf[rows], rid[rows], p + f"experts.{e}.",
                                cfg.moe_intermediate_size, False, ps)
            out[rows] += sel[rows, e:e + 1] * y
        return out.reshape(V, T, H)

    # -- forward -------------------------------------------------------------------
    def forward_variants(self, token_ids: Sequence[int], variants: List[dict],
                         routing: Optional[list] = None,
                         rounding_log: Optional[list] = None) -> List[np.ndarray]:
        """Logits [T, vocab] (float64) for each variant, sharing one pass over the weights.

        A variant is a dict of keyword options: kv_cache_dtype ("float64" | "bfloat16"),
        quantize_activations (bool: round every input row of a matmul on GGML-quantized
        weights to int8 per block, as ditto's GEMM does; no effect on unquantized weights),
        bf16_activations (bool: round every input row of a matmul on BF16 weights to bf16,
        round to nearest even, as ditto's GEMM does; no effect on other weights),
        activation_dither_seed (int: with quantize_activations, first multiply each rounded
        input by 1 + DITHER * N(0, 1) from this seed -- another sample of the rounding noise,
        as a float32 computation would draw it; a diagnostic for the parity suite),
        moe_experts_from (index of an EARLIER variant: every sparse layer takes that
        variant's expert sets, while the mixing weights come from this variant's own
        probabilities -- isolates smooth numerical effects from routing flips), and the
        TEST-ONLY flags in DEBUG_FLAGS. All variants must agree on _emulate_float32.
        routing: if a list is given, one list per variant is appended to it, holding a
        `Routing` record per sparse MoE layer (in layer order); empty lists for dense models.
        rounding_log: if a list is given, every int8 input rounding (quantize_activations)
        appends an `ActivationRounding` record to it (see rounding_noise).
        """
        cfg = self.cfg
        ids = np.asarray(list(token_ids), dtype=np.int64)
        if ids.ndim != 1 or len(ids) == 0:
            raise ValueError("token_ids must be a non-empty 1-D sequence")
        if ids.min() < 0 or ids.max() >= cfg.vocab_size:
            raise ValueError(f"token id out of range [0, {cfg.vocab_size})")
        for vi, v in enumerate(variants):
            for k in v:
                if (k not in ("kv_cache_dtype", "moe_experts_from", "quantize_activations",
                              "bf16_activations", "activation_dither_seed")
                        and k not in DEBUG_FLAGS):
                    raise TypeError(f"unknown option {k!r}")
                if k in gguf_checkpoint.WEIGHT_BUGS and v[k] and not self.gguf:
                    raise ValueError(f"{k} applies to GGUF files only")
            src = v.get("moe_experts_from")
            if src is not None and not (isinstance(src, int) and 0 <= src < vi):
                raise ValueError(f"variant {vi}: moe_experts_from must name an earlier variant")
            if v.get("kv_cache_dtype", "float64") not in ("float64", "bfloat16"):
                raise ValueError(f"kv_cache_dtype {v.get('kv_cache_dtype')!r}")
        emu = {bool(v.get("_emulate_float32", False)) for v in variants}
        if len(emu) != 1:
            raise ValueError("all variants must agree on _emulate_float32")
        dt = np.float32 if emu.pop() else np.float64

        T, V, H = len(ids), len(variants), cfg.hidden_size
        nh, nkv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        if nh % nkv != 0:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        group = nh // nkv
        eps = cfg.rms_norm_eps
        scale = d ** -0.5

        keys = [(bool(v.get("quantize_activations", False)),
                 bool(v.get("bf16_activations", False)),
                 bool(v.get("_debug_activation_scale_per_row", False)),
                 v.get("activation_dither_seed"),
                 frozenset(b for b in gguf_checkpoint.WEIGHT_BUGS if v.get(b))) for v in variants]
        groups = [_Group(aq, ab, per_row, None if seed is None else np.random.default_rng(seed),
                         bugs, np.array([i for i, kk in enumerate(keys)
                                         if kk == (aq, ab, per_row, seed, bugs)]))
                  for aq, ab, per_row, seed, bugs in dict.fromkeys(keys)]
        rid = np.arange(V * T)
        ps = _Pass(dt, T, groups, rounding_log)

        # RoPE tables per variant (angles in float64, as HF's "pos * inv_freq").
        pos = np.arange(T, dtype=np.float64)
        rope = []
        for v in variants:
            inv = rope_inv_freq(cfg, apply_scaling=not v.get("_debug_no_rope_scaling", False))
            ang = pos[:, None] * inv[None, :]
            rope.append((np.cos(ang).astype(dt), np.sin(ang).astype(dt)))
        causal = np.tril(np.ones((T, T), dtype=bool))

        per_variant = [[] for _ in variants] if routing is not None else None
        h = np.empty((V, T, H), dtype=dt)
        for g in groups:  # embedding rows gathered per token (exact lookup)
            h[g.variants] = self._w("model.embed_tokens.weight", dt, rows=ids, bugs=g.bugs)

        for li in range(cfg.num_hidden_layers):
            p = f"model.layers.{li}."
            # ---- attention block ----
            x = _rms_norm(h, self._w(p + "input_layernorm.weight", dt), eps)
            ab = cfg.attention_bias
            a = p + "self_attn."
            q = self._linear(x, rid, a + "q_proj.weight", a + "q_proj.bias", ab, ps)
            k = self._linear(x, rid, a + "k_proj.weight", a + "k_proj.bias", ab, ps)
            vv = self._linear(x, rid, a + "v_proj.weight", a + "v_proj.bias", ab, ps)
            q = q.reshape(V, T, nh, d)
            k = k.reshape(V, T, nkv, d)
            vv = vv.reshape(V, T, nkv, d)
            if cfg.qk_norm:
                qn = self._w(a + "q_norm.weight", dt)
                kn = self._w(a + "k_norm.weight", dt)
            attn = np.empty((V, T, nh, d), dtype=dt)
            for vi, var in enumerate(variants):
                qi, ki, vi_ = q[vi], k[vi], vv[vi]
                if cfg.qk_norm and not var.get("_debug_skip_qk_norm", False):
                    qi = _rms_norm(qi, qn, eps)
                    ki = _rms_norm(ki, kn, eps)
                if not var.get("_debug_disable_rope", False):
                    cos, sin = rope[vi]
                    inter = var.get("_debug_interleaved_rope", False)
                    qi = _apply_rope(qi, cos, sin, inter)
                    ki = _apply_rope(ki, cos, sin, inter)
                if var.get("kv_cache_dtype", "float64") == "bfloat16":
                    ki = round_to_bf16(ki.astype(np.float64)).astype(dt)
                    vi_ = round_to_bf16(vi_.astype(np.float64)).astype(dt)
                # GQA: query head hq uses kv head hq // group
                kr = np.repeat(ki, group, axis=1)     # [T, nh, d]
                vr = np.repeat(vi_, group, axis=1)
                s = np.einsum("thd,shd->hts", qi, kr) * dt(scale)   # [nh, Tq, Tk]
                if not var.get("_debug_no_causal_mask", False):
                    s = np.where(causal[None], s, -np.inf)
                s = s - np.max(s, axis=-1, keepdims=True)
                e = np.exp(s)
                prob = e / np.sum(e, axis=-1, keepdims=True)
                attn[vi] = np.einsum("hts,shd->thd", prob, vr)
            o = self._linear(attn.reshape(V, T, nh * d), rid, a + "o_proj.weight",
                             a + "o_proj.bias", ab, ps)
            h = h + o
            # ---- MLP block: Qwen3-MoE's sparse block on the layers the config selects ----
            x = _rms_norm(h, self._w(p + "post_attention_layernorm.weight", dt), eps)
            if cfg.is_moe_layer(li):
                h = h + self._sparse_moe(x, li, variants, ps, per_variant)
            else:
                h = h + self._dense_mlp(x, rid, p + "mlp.", cfg.intermediate_size,
                                        cfg.mlp_bias, ps)
            del x

        hn = _rms_norm(h, self._w("model.norm.weight", dt), eps).reshape(V * T, H)
        logits = np.empty((V * T, cfg.vocab_size), dtype=np.float64)
        for r0 in range(0, cfg.vocab_size, LM_HEAD_CHUNK):
            r1 = min(r0 + LM_HEAD_CHUNK, cfg.vocab_size)
            logits[:, r0:r1] = self._linear(hn, rid, self.lm_head_name, None, False, ps,
                                            rows=slice(r0, r1))
        if routing is not None:
            routing.extend(per_variant)
        return [logits[i * T:(i + 1) * T] for i in range(V)]


_MODEL_CACHE: Dict[str, Model] = {}


def load_model(model_dir: str) -> Model:
    key = os.path.abspath(model_dir)
    if key not in _MODEL_CACHE:
        _MODEL_CACHE[key] = Model(model_dir)
    return _MODEL_CACHE[key]


def logits(model_dir: str, token_ids: Sequence[int], kv_cache_dtype: str = "float64",
           quantize_activations: bool = False, bf16_activations: bool = False,
           **debug) -> np.ndarray:
    """float64 logits [len(token_ids), vocab_size]; row i predicts the token after 0..i."""
    return load_model(model_dir).forward_variants(
        token_ids, [dict(kv_cache_dtype=kv_cache_dtype, quantize_activations=quantize_activations,
                         bf16_activations=bf16_activations, **debug)])[0]


def log_softmax(model_dir: str, token_ids: Sequence[int], kv_cache_dtype: str = "float64",
                quantize_activations: bool = False, bf16_activations: bool = False,
                **debug) -> np.ndarray:
    """float64 log-probabilities [len(token_ids), vocab_size].

    model_dir: a Hugging Face model directory or a GGUF file.
    Row i is log-softmax of the next-token distribution after tokens 0..i (positions 0..i).
    kv_cache_dtype="bfloat16" rounds K (after k_norm and RoPE) and V to bfloat16 (RNE)
    before attention, like ditto's bf16 KV cache. quantize_activations=True rounds the input
    rows of every matmul on GGML-quantized weights to int8 per block, as ditto's GEMM does
    (quantize_activation_rows); bf16_activations=True rounds the input rows of every matmul
    on BF16 weights to bf16 (round to nearest even), as ditto's GEMM does.
    ``**debug``: TEST-ONLY flags (DEBUG_FLAGS).
    """
    return _log_softmax_rows(logits(model_dir, token_ids, kv_cache_dtype,
                                    quantize_activations, bf16_activations, **debug))


def log_softmax_variants(model_dir: str, token_ids: Sequence[int],
                         variants: List[dict], routing: Optional[list] = None,
                         rounding_log: Optional[list] = None) -> List[np.ndarray]:
    """log_softmax for several option dicts at once (one pass over the weights).

    routing: optional list that receives, per variant, the list of `Routing` records of the
    sparse MoE layers; rounding_log: optional list that receives the `ActivationRounding`
    records (see Model.forward_variants)."""
    out = load_model(model_dir).forward_variants(token_ids, variants, routing=routing,
                                                 rounding_log=rounding_log)
    return [_log_softmax_rows(z) for z in out]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir", help="model directory or .gguf file")
    ap.add_argument("token_ids", help="comma-separated token ids, e.g. 1,2,3")
    ap.add_argument("--kv-cache-dtype", default="float64", choices=["float64", "bfloat16"])
    ap.add_argument("--quantize-activations", action="store_true",
                    help="round matmul inputs on GGML-quantized weights to int8, as ditto")
    ap.add_argument("--bf16-activations", action="store_true",
                    help="round matmul inputs on BF16 weights to bf16, as ditto")
    ap.add_argument("--top", type=int, default=1, help="top-k tokens to print per position")
    ap.add_argument("--routing", action="store_true",
                    help="MoE: print each sparse layer's experts, weights and k-th margin")
    args = ap.parse_args(argv)
    ids = [int(t) for t in args.token_ids.replace(" ", "").split(",") if t]
    routing: list = []
    lp = log_softmax_variants(args.model_dir, ids,
                              [{"kv_cache_dtype": args.kv_cache_dtype,
                                "quantize_activations": args.quantize_activations,
                                "bf16_activations": args.bf16_activations}],
                              routing=routing)[0]
    for i, tok in enumerate(ids):
        order = np.argsort(-lp[i], kind="stable")[:args.top]
        best = "  ".join(f"{int(j)}:{lp[i, j]:.6f}" for j in order)
        print(f"pos {i} token {tok} -> {best}")
    if args.routing:
        for r in routing[0]:
            pm, gap = r.kth_margin()
            for i in range(len(ids)):
                ex = " ".join(f"{int(e)}:{w:.4f}" for e, w in zip(r.experts[i], r.weights[i]))
                print(f"layer {r.layer} pos {i} experts {ex}  k-th margin p {pm[i]:.3e} "
                      f"logit {gap[i]:.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
