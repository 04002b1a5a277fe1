"""Test helper: a tiny safetensors writer and a random-model generator.

Independent of ditto (used by the reference self-tests and for tolerance estimates).
"""

from __future__ import annotations

import json
import os
import struct
from typing import Dict, Tuple

import numpy as np

from reference import round_to_bf16

_ITEMSIZE = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8}


def encode(values: np.ndarray, dtype: str) -> Tuple[bytes, np.ndarray]:
    """Round float64 values to `dtype`; return (little-endian bytes, exact float64 values)."""
    values = np.asarray(values, dtype=np.float64)
    if dtype == "BF16":
        exact = round_to_bf16(values)
        bits = (exact.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype("<u2")
        return bits.tobytes(), exact
    np_dtype = {"F16": "<f2", "F32": "<f4", "F64": "<f8"}[dtype]
    arr = values.astype(np_dtype)
    return arr.tobytes(), arr.astype(np.float64)


def write_safetensors_raw(path: str, tensors: Dict[str, Tuple[str, tuple, bytes]],
                          metadata: dict | None = None, header_pad: int = 0) -> None:
    """tensors: name -> (dtype, shape, raw little-endian bytes)."""
    _write_streaming(path, [(n, dt, shp, (lambda b=b: b)) for n, (dt, shp, b) in tensors.items()],
                     metadata, header_pad)


def _write_streaming(path, entries, metadata=None, header_pad=0):
    """entries: list of (name, dtype, shape, produce_bytes) -- bytes produced one at a time."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    off = 0
    for name, dtype, shape, _ in entries:
        n = int(np.prod(shape, dtype=np.int64)) * _ITEMSIZE[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    hb = json.dumps(header).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8 + header_pad)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for name, dtype, shape, produce in entries:
            data = produce()
            assert len(data) == header[name]["data_offsets"][1] - header[name]["data_offsets"][0]
            f.write(data)


class Lazy:
    """A tensor generated on demand: has .shape, and calling it returns the float64 array."""

    def __init__(self, shape, fn):
        self.shape = tuple(shape)
        self.fn = fn

    def __call__(self):
        arr = self.fn()
        assert arr.shape == self.shape
        return arr


def write_model(model_dir: str, config: dict, weights: Dict[str, object], dtype: str = "BF16",
                num_shards: int = 1, keep_exact: bool = True) -> Dict[str, np.ndarray]:
    """Write config.json + safetensors (optionally sharded).

    weights: name -> float64 array, or a `Lazy` (shape + generator, so big models need not
    be held in memory). Returns the exact stored values
    (float64) when keep_exact.
    """
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    exact = {}

    def producer(name):
        def produce():
            w = weights[name]
            arr = w() if callable(w) else w
            if keep_exact:
                data, exact[name] = encode(arr, dtype)
                return data
            # big tensors: encode in row blocks to bound the float64 temporaries
            rows = arr.reshape(arr.shape[0], -1) if arr.ndim > 1 else arr.reshape(1, -1)
            return b"".join(encode(rows[r:r + 4096], dtype)[0]
                            for r in range(0, rows.shape[0], 4096))
        return produce

    names = list(weights)
    groups = [names] if num_shards == 1 else [names[s::num_shards] for s in range(num_shards)]
    weight_map = {}
    for s, group in enumerate(groups):
        fname = ("model.safetensors" if num_shards == 1
                 else f"model-{s + 1:05d}-of-{num_shards:05d}.safetensors")
        entries = [(n, dtype, tuple(weights[n].shape), producer(n)) for n in group]
        _write_streaming(os.path.join(model_dir, fname), entries, metadata={"format": "pt"},
                         header_pad=8 * s)
        for n in group:
            weight_map[n] = fname
    if num_shards > 1:
        with open(os.path.join(model_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return exact


def sparse_layers(config: dict) -> list:
    """Qwen3-MoE: the layers that hold a sparse MoE block (written out here, independently of
    reference.py): not in mlp_only_layers, num_experts > 0, (layer+1) % decoder_sparse_step == 0."""
    if config.get("model_type") != "qwen3_moe":
        return []
    step = config.get("decoder_sparse_step", 1)
    only = config.get("mlp_only_layers") or []
    return [li for li in range(config["num_hidden_layers"])
            if li not in only and config["num_experts"] > 0 and (li + 1) % step == 0]


def random_weights(config: dict, seed: int = 0, std: float = 0.02,
                   random_norms: bool = False, lazy: bool = False) -> Dict[str, object]:
    """Random normal weights (std) in HF naming for a Qwen3 / Qwen3-MoE / Llama config; norms
    = 1 unless random_norms; biases (if the config enables them) std*10. Each tensor has its
    own seed derived from (seed, its index). lazy=True returns `Lazy` tensors.
    Qwen3-MoE sparse layers get mlp.gate.weight [E, H] and mlp.experts.{e}.{gate,up,down}_proj
    (moe_intermediate_size); its other layers the dense MLP (intermediate_size)."""
    qwen3 = config.get("model_type") in ("qwen3", "qwen3_moe")
    sparse = set(sparse_layers(config))
    H = config["hidden_size"]
    nh = config["num_attention_heads"]
    nkv = config.get("num_key_value_heads") or nh
    d = config.get("head_dim") or H // nh
    I = config["intermediate_size"]
    Vv = config["vocab_size"]
    specs = []  # (name, shape, kind)

    def add(name, shape, kind="normal"):
        specs.append((name, tuple(shape), kind))

    add("model.embed_tokens.weight", (Vv, H))
    for li in range(config["num_hidden_layers"]):
        p = f"model.layers.{li}."
        add(p + "input_layernorm.weight", (H,), "norm")
        add(p + "self_attn.q_proj.weight", (nh * d, H))
        add(p + "self_attn.k_proj.weight", (nkv * d, H))
        add(p + "self_attn.v_proj.weight", (nkv * d, H))
        add(p + "self_attn.o_proj.weight", (H, nh * d))
        # Qwen2: q/k/v biases always, o_proj none (attention_bias is not its key)
        qwen2 = config.get("model_type") == "qwen2"
        if config.get("attention_bias") or qwen2:
            for nm, size in (("q", nh * d), ("k", nkv * d), ("v", nkv * d)) + ((("o", H),) if not qwen2 else ()):
                add(p + f"self_attn.{nm}_proj.bias", (size,), "bias")
        if qwen3:
            add(p + "self_attn.q_norm.weight", (d,), "norm")
            add(p + "self_attn.k_norm.weight", (d,), "norm")
        add(p + "post_attention_layernorm.weight", (H,), "norm")
        if li in sparse:
            E, Im = config["num_experts"], config["moe_intermediate_size"]
            add(p + "mlp.gate.weight", (E, H))
            for e in range(E):
                add(p + f"mlp.experts.{e}.gate_proj.weight", (Im, H))
                add(p + f"mlp.experts.{e}.up_proj.weight", (Im, H))
                add(p + f"mlp.experts.{e}.down_proj.weight", (H, Im))
            continue
        add(p + "mlp.gate_proj.weight", (I, H))
        add(p + "mlp.up_proj.weight", (I, H))
        add(p + "mlp.down_proj.weight", (H, I))
        if config.get("mlp_bias"):
            add(p + "mlp.gate_proj.bias", (I,), "bias")
            add(p + "mlp.up_proj.bias", (I,), "bias")
            add(p + "mlp.down_proj.bias", (H,), "bias")
    add("model.norm.weight", (H,), "norm")
    if not config.get("tie_word_embeddings", False):
        add("lm_head.weight", (Vv, H))

    def gen(idx, shape, kind):
        rng = np.random.default_rng([seed, idx])
        if kind == "norm":
            return 1.0 + 0.3 * rng.standard_normal(shape) if random_norms else np.ones(shape)
        # float32 draws keep the memory of a 151936x4096 embedding at 2.5 GB
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(
            std * 10 if kind == "bias" else std)

    out = {}
    for idx, (name, shape, kind) in enumerate(specs):
        fn = (lambda i=idx, s=shape, k=kind: gen(i, s, k))
        out[name] = Lazy(shape, fn) if lazy else fn()
    return out
