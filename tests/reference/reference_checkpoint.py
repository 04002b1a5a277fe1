"""Checkpoint side of the float64 reference (reference.py): a lazy safetensors reader (single
file or sharded, BF16 / F16 / F32 / F64, memory-mapped, decoded exactly to float64) and the model
configuration (config.json with the Hugging Face class defaults, or a GGUF file's metadata).
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from typing import Dict, Optional

import numpy as np

import gguf_checkpoint
from gguf_reader import GGUFFile
from reference_numerics import decode_to_f64

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
    arch: str                      # "qwen3", "qwen3_moe", "llama", "qwen2" or "mistral"
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
    attention_bias: bool           # q/k/v/o_proj biases (Llama/Qwen3's config key)
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
    # A sliding window on the layers marked True (Mistral: all; Gemma 3: layer_types), whose RoPE
    # base is rope_local_base_freq when set (Gemma 3; else rope_theta's); Gemma 3's attention scale
    # is query_pre_attn_scalar ** -0.5 and its MLP GELU(tanh).
    sliding_window: int = 0
    sliding_layers: tuple = ()
    rope_local_base_freq: float = 0.0
    query_pre_attn_scalar: float = 0.0
    raw: dict = field(default_factory=dict)

    @property
    def gemma(self) -> bool:
        """Gemma 3: (1 + w) norms, four norms per layer, embedding times sqrt(hidden),
        gelu_pytorch_tanh."""
        return self.arch == "gemma3"

    @property
    def qk_norm(self) -> bool:
        """Qwen3, Qwen3-MoE and Gemma 3 RMS-normalise every q and k head before RoPE."""
        return self.arch in ("qwen3", "qwen3_moe", "gemma3")

    @property
    def qkv_bias(self) -> bool:
        """q/k/v_proj have biases: attention_bias, or always (Qwen2Attention: bias=True)."""
        return self.attention_bias or self.arch == "qwen2"

    @property
    def o_bias(self) -> bool:
        """o_proj has a bias: attention_bias only (never for Qwen2 and Mistral)."""
        return self.attention_bias

    def is_moe_layer(self, layer: int) -> bool:
        """transformers' Qwen3MoeDecoderLayer: sparse block iff the layer is not in
        mlp_only_layers, num_experts > 0 and (layer + 1) % decoder_sparse_step == 0."""
        return (layer not in self.mlp_only_layers and self.num_experts > 0
                and (layer + 1) % self.decoder_sparse_step == 0)


def _gemma3_config(c: dict) -> Config:
    """transformers' Gemma3TextConfig (4.55): its defaults for missing keys; layer_types, else
    every sliding_window_pattern-th (default 6th) layer full attention."""
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        if c.get(key) is not None:
            raise NotImplementedError(f"{key} {c[key]!r}")
    if c.get("rope_scaling") is not None:
        raise NotImplementedError("rope_scaling on Gemma 3")
    act = c.get("hidden_activation", c.get("hidden_act", "gelu_pytorch_tanh"))
    if act != "gelu_pytorch_tanh":
        raise NotImplementedError(f"hidden_activation {act!r}")
    layers = int(c.get("num_hidden_layers", 26))
    if c.get("layer_types") is not None:
        sliding = tuple(t == "sliding_attention" for t in c["layer_types"])
    else:
        pattern = int(c.get("sliding_window_pattern", 6))
        sliding = tuple((i + 1) % pattern != 0 for i in range(layers))
    heads = int(c.get("num_attention_heads", 8))
    return Config(
        arch="gemma3",
        vocab_size=int(c.get("vocab_size", 262208)),
        hidden_size=int(c.get("hidden_size", 2304)),
        intermediate_size=int(c.get("intermediate_size", 9216)),
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=int(c.get("num_key_value_heads", 4)),
        head_dim=int(c.get("head_dim", 256)),
        rms_norm_eps=float(c.get("rms_norm_eps", 1e-6)),
        rope_theta=float(c.get("rope_theta", 1e6)),
        rope_scaling=None,
        tie_word_embeddings=bool(c.get("tie_word_embeddings", True)),
        attention_bias=bool(c.get("attention_bias", False)),
        mlp_bias=False,
        sliding_window=int(c.get("sliding_window", 4096)),
        sliding_layers=sliding,
        rope_local_base_freq=float(c.get("rope_local_base_freq", 10000.0)),
        query_pre_attn_scalar=float(c.get("query_pre_attn_scalar", 256)),
        raw=c,
    )


def load_config(model_dir: str) -> Config:
    """config.json with the Hugging Face class defaults for missing keys; for a GGUF file,
    its metadata (gguf_checkpoint.config_fields).

    Defaults (from transformers' Qwen3Config / Qwen3MoeConfig / LlamaConfig / Qwen2Config /
    MistralConfig; Qwen2 is Qwen3 without q/k norms and head_dim default, with q/k/v biases;
    Mistral is Llama without biases, num_key_value_heads 8, intermediate_size 14336 and a
    sliding_window on every layer (4096 when absent, null: none); Gemma 3: _gemma3_config):
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
    elif "Qwen2ForCausalLM" in archs or model_type == "qwen2":
        arch = "qwen2"
    elif "MistralForCausalLM" in archs or model_type == "mistral":
        arch = "mistral"
    elif "Gemma3ForCausalLM" in archs or model_type == "gemma3_text":
        return _gemma3_config(c)
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
    elif "num_key_value_heads" not in c and arch in ("qwen3", "qwen3_moe", "qwen2", "mistral"):
        kv_heads = 4 if moe else 8 if arch == "mistral" else 32
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
    if arch not in ("llama", "mistral") and c.get("use_sliding_window", False):
        raise NotImplementedError("use_sliding_window=true")
    window_kw = {}
    if arch == "mistral":
        # MistralConfig: sliding_window 4096 when absent, null: none; it applies to every layer
        window = c.get("sliding_window", 4096)
        if window is not None:
            layers = int(c.get("num_hidden_layers", 32))
            window_kw = dict(sliding_window=int(window), sliding_layers=(True,) * layers)

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
        vocab_size=int(c.get("vocab_size", 32000 if arch in ("llama", "mistral") else 151936)),
        hidden_size=hidden,
        intermediate_size=int(c.get("intermediate_size", 6144 if moe else
                                    22016 if arch in ("qwen3", "qwen2") else
                                    14336 if arch == "mistral" else 11008)),
        num_hidden_layers=int(c.get("num_hidden_layers", 24 if moe else 32)),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=float(c.get("rms_norm_eps", 1e-6)),
        rope_theta=rope_theta,
        rope_scaling=rope_scaling,
        tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
        # Qwen2 and Mistral do not read attention_bias (Config.qkv_bias / o_bias)
        attention_bias=bool(c.get("attention_bias", False)) if arch in ("qwen3", "qwen3_moe", "llama") else False,
        mlp_bias=bool(c.get("mlp_bias", False)) if arch == "llama" else False,
        raw=c,
        **moe_kw,
        **window_kw,
    )
