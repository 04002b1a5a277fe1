"""A llama.cpp GGUF file seen as a Hugging Face checkpoint, for the float64 reference.

`config_fields(gguf)` reads the model hyper-parameters from the GGUF metadata and
`GGUFTensors` serves the tensors under their Hugging Face names, exactly dequantized to
float64 (gguf_reader.py), with the same interface as reference.SafeTensors. Written from
llama.cpp's conventions (gguf-py's tensor names and keys, convert_hf_to_gguf.py), not from
ditto's C++.

Metadata (`<arch>` = general.architecture: llama, qwen3, qwen3moe, qwen2 or gemma3):

    hidden_size          <arch>.embedding_length
    num_hidden_layers    <arch>.block_count
    num_attention_heads  <arch>.attention.head_count
    num_key_value_heads  <arch>.attention.head_count_kv       (default: head_count)
    head_dim             <arch>.attention.key_length          (default: hidden / heads)
    intermediate_size    <arch>.feed_forward_length           (qwen3moe: 0 if absent)
    rms_norm_eps         <arch>.attention.layer_norm_rms_epsilon
    rope_theta           <arch>.rope.freq_base                (default 10000)
    num_experts, num_experts_per_tok, moe_intermediate_size
                         <arch>.expert_count, expert_used_count, expert_feed_forward_length
    norm_topk_prob       <arch>.expert_weights_norm if present, else true for qwen3moe
                         (llama.cpp's qwen3moe graph always renormalises the top-k weights)
    vocab_size           rows of token_embd.weight
    tie_word_embeddings  output.weight absent
    attention_bias       blk.0.attn_q.bias present;  mlp_bias (llama): blk.0.ffn_gate.bias
    mlp_only_layers      qwen3moe layers without ffn_gate_inp (llama.cpp's files: none)
    llama3 rope scaling  rope_freqs.weight [head_dim/2] F32: llama.cpp divides each inverse
                         frequency by its factor (rope.scaling.type other than "none": refused)
    sliding_window       gemma3.attention.sliding_window (gemma3; the sliding layers, their RoPE
                         base and the attention scale are llama.cpp's fixed rules, config_fields)

Tensors (llama.cpp name -> Hugging Face name, per layer N):

    token_embd.weight        model.embed_tokens.weight        [vocab, hidden]
    output_norm.weight       model.norm.weight
    output.weight            lm_head.weight                   (absent when tied)
    blk.N.attn_norm          model.layers.N.input_layernorm
    blk.N.attn_q / _k / _v / _output (.weight, .bias)
                             model.layers.N.self_attn.{q,k,v,o}_proj
    blk.N.attn_q_norm / attn_k_norm     ...self_attn.q_norm / k_norm
    blk.N.ffn_norm           model.layers.N.post_attention_layernorm
    blk.N.ffn_gate / _up / _down        ...mlp.{gate,up,down}_proj
    blk.N.ffn_gate_inp       ...mlp.gate (router)             [E, hidden]
    blk.N.ffn_{gate,up,down}_exps  [E, out, in]   ...mlp.experts.{e}.{gate,up,down}_proj = slice e

llama only: convert_hf_to_gguf.py permutes the rows of q_proj / k_proj (weights and biases)
within each head for llama.cpp's interleaved RoPE: gguf = hf.reshape(n_head, 2, head_dim/2,
...).swapaxes(1, 2). Here they are put back: hf row h*hd + p*hd/2 + j = gguf row h*hd + 2j + p
(n_head = head_count for q, head_count_kv for k). Row permutations and expert slices keep
GGML blocks whole (a block lies within one row), so both are exact.

TEST-ONLY weight bugs for the parity suite's sensitivity check (`bugs` in f64): see WEIGHT_BUGS.
"""

from __future__ import annotations

import re
from typing import FrozenSet, Optional, Tuple

import numpy as np

from gguf_reader import GGUFError, GGUFFile, dequantize

ARCHITECTURES = {"llama": "llama", "qwen3": "qwen3", "qwen3moe": "qwen3_moe", "qwen2": "qwen2",
                 "gemma3": "gemma3"}

# Gemma 3's sandwich norms (llama.cpp's tensor_mapping.py): their GGUF names where they differ from
# _LAYER_NAMES. Its norms are stored as 1 + w (convert_hf_to_gguf.py Gemma3Model), which the
# forward pass uses as they are (reference_model.Model._norm_w).
_GEMMA3_LAYER_NAMES = {
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
}

WEIGHT_BUGS = (
    "_debug_gguf_q4_1_no_min",      # Q4_1: x = d * q (the block's min m ignored)
    "_debug_gguf_q4_k_min_sign",    # Q4_K: x = d*sc*q + dmin*m (the min's sign flipped)
    "_debug_gguf_no_unpermute",     # llama: q/k rows left in llama.cpp's order
)

_LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.bias": "attn_output.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.gate_proj.bias": "ffn_gate.bias",
    "mlp.up_proj.bias": "ffn_up.bias",
    "mlp.down_proj.bias": "ffn_down.bias",
    "mlp.gate.weight": "ffn_gate_inp.weight",
}
_GLOBAL_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
_LAYER_RE = re.compile(r"model\.layers\.(\d+)\.(.+)$")
_EXPERT_RE = re.compile(r"mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight$")


def is_gguf(path: str) -> bool:
    """A file (not a directory) that starts with the GGUF magic."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except (IsADirectoryError, FileNotFoundError, PermissionError):
        return False


def _key(g: GGUFFile, key: str, default=None, required=False):
    if key in g.metadata:
        return g.metadata[key]
    if required:
        raise GGUFError(f"{g.path}: missing metadata key {key!r}")
    return default


def config_fields(g: GGUFFile) -> dict:
    """Keyword arguments for reference.Config (see the module docstring)."""
    arch_name = _key(g, "general.architecture", required=True)
    if arch_name not in ARCHITECTURES:
        raise NotImplementedError(f"{g.path}: general.architecture {arch_name!r} "
                                  f"(supported: {', '.join(ARCHITECTURES)})")
    arch = ARCHITECTURES[arch_name]
    p = arch_name + "."
    hidden = int(_key(g, p + "embedding_length", required=True))
    heads = int(_key(g, p + "attention.head_count", required=True))
    kv_heads = int(_key(g, p + "attention.head_count_kv", heads))
    head_dim = int(_key(g, p + "attention.key_length", hidden // heads))
    if int(_key(g, p + "attention.value_length", head_dim)) != head_dim:
        raise NotImplementedError(f"{g.path}: attention.value_length != key_length")
    if int(_key(g, p + "rope.dimension_count", head_dim)) != head_dim:
        raise NotImplementedError(f"{g.path}: rope.dimension_count != head_dim "
                                  f"(partial rotary embeddings)")
    scaling = _key(g, p + "rope.scaling.type", "none")
    if scaling != "none":
        raise NotImplementedError(f"{g.path}: {p}rope.scaling.type {scaling!r}")
    if "token_embd.weight" not in g:
        raise GGUFError(f"{g.path}: missing tensor 'token_embd.weight'")
    emb = g.info("token_embd.weight")
    if len(emb.shape) != 2 or emb.shape[1] != hidden:
        raise GGUFError(f"{g.path}: token_embd.weight shape {emb.shape} != (vocab, {hidden})")
    n_layers = int(_key(g, p + "block_count", required=True))
    freq_factors = None
    if "rope_freqs.weight" in g:
        freq_factors = g.f64("rope_freqs.weight").reshape(-1)
        if freq_factors.shape != (head_dim // 2,):
            raise GGUFError(f"{g.path}: rope_freqs.weight has {freq_factors.size} values, "
                            f"expected head_dim/2 = {head_dim // 2}")
    fields = dict(
        arch=arch,
        vocab_size=emb.shape[0],
        hidden_size=hidden,
        intermediate_size=int(_key(g, p + "feed_forward_length", 0 if arch == "qwen3_moe"
                                   else None, required=arch != "qwen3_moe")),
        num_hidden_layers=n_layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=float(_key(g, p + "attention.layer_norm_rms_epsilon", required=True)),
        rope_theta=float(_key(g, p + "rope.freq_base", 10000.0)),
        rope_scaling=None,
        rope_freq_factors=freq_factors,
        tie_word_embeddings="output.weight" not in g,
        # qwen2: q/k/v biases always, none on attn_output (Config.qkv_bias / o_bias)
        attention_bias="blk.0.attn_q.bias" in g and arch != "qwen2",
        mlp_bias=arch == "llama" and "blk.0.ffn_gate.bias" in g,
        raw={k: v for k, v in g.metadata.items() if not k.startswith("tokenizer.")},
    )
    if arch == "gemma3":
        # llama.cpp's llama-model.cpp fixes these for gemma3: set_swa_pattern(6) (layer i full
        # when (i + 1) % 6 == 0), rope_freq_base_train_swa = 10000, attention scale
        # 1/sqrt(key_length) (62 layers, the 27B: 1/sqrt(embedding_length / head_count)).
        fields.update(
            sliding_window=int(_key(g, p + "attention.sliding_window", required=True)),
            sliding_layers=tuple((i + 1) % 6 != 0 for i in range(n_layers)),
            rope_local_base_freq=10000.0,
            query_pre_attn_scalar=float(hidden // heads if n_layers == 62 else head_dim),
        )
    if arch == "qwen3_moe":
        n_exp = int(_key(g, p + "expert_count", required=True))
        fields.update(
            num_experts=n_exp,
            num_experts_per_tok=int(_key(g, p + "expert_used_count", required=True)),
            moe_intermediate_size=int(_key(g, p + "expert_feed_forward_length",
                                           required=True)),
            decoder_sparse_step=1,
            mlp_only_layers=tuple(i for i in range(n_layers)
                                  if f"blk.{i}.ffn_gate_inp.weight" not in g),
            norm_topk_prob=bool(_key(g, p + "expert_weights_norm", True)),
        )
    return fields


class GGUFTensors:
    """Hugging Face-named, exactly dequantized view of a GGUF file's tensors (the interface
    of reference.SafeTensors, plus `ggml_type` and `bugs`)."""

    def __init__(self, g: GGUFFile, arch: str, num_attention_heads: int,
                 num_key_value_heads: int, head_dim: int):
        self.g = g
        self.arch = arch
        self._heads = {"attn_q": num_attention_heads, "attn_k": num_key_value_heads}
        self.head_dim = head_dim

    # name -> (gguf name, expert index or None, heads to un-permute or None)
    def _resolve(self, name: str) -> Tuple[str, Optional[int], Optional[int]]:
        if name in _GLOBAL_NAMES:
            return _GLOBAL_NAMES[name], None, None
        m = _LAYER_RE.match(name)
        if m:
            layer, rest = m.group(1), m.group(2)
            e = _EXPERT_RE.match(rest)
            if e:
                return f"blk.{layer}.ffn_{e.group(2)}_exps.weight", int(e.group(1)), None
            names = dict(_LAYER_NAMES, **_GEMMA3_LAYER_NAMES) if self.arch == "gemma3" else _LAYER_NAMES
            if rest in names:
                gname = names[rest]
                base = gname.split(".")[0]
                heads = self._heads.get(base) if self.arch == "llama" else None
                return f"blk.{layer}.{gname}", None, heads
        raise KeyError(f"{self.g.path}: no GGUF tensor for {name!r}")

    def __contains__(self, name: str) -> bool:
        try:
            gname, expert, _ = self._resolve(name)
        except KeyError:
            return False
        if gname not in self.g:
            return False
        return expert is None or expert < self.g.info(gname).shape[0]

    def _info(self, name: str):
        gname, expert, heads = self._resolve(name)
        if gname not in self.g:
            raise KeyError(f"{self.g.path}: missing tensor {gname!r} (for {name})")
        info = self.g.info(gname)
        if expert is not None:
            if len(info.shape) != 3 or expert >= info.shape[0]:
                raise KeyError(f"{self.g.path}: {gname} shape {info.shape} has no expert "
                               f"{expert}")
        return gname, expert, heads, info

    def shape(self, name: str) -> tuple:
        _, expert, _, info = self._info(name)
        return info.shape[1:] if expert is not None else info.shape

    def ggml_type(self, name: str) -> str:
        return self._info(name)[3].type_name

    def bugs_affecting(self, name: str, bugs: FrozenSet[str]) -> FrozenSet[str]:
        """The TEST-ONLY weight bugs among `bugs` that change this tensor's values."""
        t = self.ggml_type(name)
        heads = self._resolve(name)[2]
        return frozenset(b for b in bugs if
                         (b == "_debug_gguf_q4_1_no_min" and t == "Q4_1")
                         or (b == "_debug_gguf_q4_k_min_sign" and t == "Q4_K")
                         or (b == "_debug_gguf_no_unpermute" and heads is not None))

    def f64(self, name: str, rows=None, bugs: FrozenSet[str] = frozenset()) -> np.ndarray:
        """float64 tensor (or the given rows of a matrix). `bugs`: TEST-ONLY WEIGHT_BUGS."""
        gname, expert, heads, info = self._info(name)
        raw = self.g.raw_rows(gname)              # [n_rows, row_bytes]
        if expert is not None:
            out_rows = info.shape[1]
            raw = raw[expert * out_rows:(expert + 1) * out_rows]
        vector = len(info.shape) == 1
        perm = None
        if heads is not None and "_debug_gguf_no_unpermute" not in bugs:
            n = info.shape[0]
            if n != heads * self.head_dim:
                raise GGUFError(f"{self.g.path}: {gname} has {n} rows, expected "
                                f"{heads} heads x {self.head_dim}")
            perm = (np.arange(n).reshape(heads, self.head_dim // 2, 2)
                    .swapaxes(1, 2).reshape(-1))
        if not vector:
            if perm is not None:
                raw = raw[perm]
            if rows is not None:
                raw = raw[rows]
        y = _dequantize(np.asarray(raw), info.type_name, info.cols, bugs)
        if vector:
            y = y.reshape(-1)
            if perm is not None:
                y = y[perm]
            if rows is not None:
                y = y[rows]
        return y


def _dequantize(raw: np.ndarray, type_name: str, cols: int, bugs: FrozenSet[str]) -> np.ndarray:
    """gguf_reader.dequantize, or with one of the TEST-ONLY weight bugs."""
    if type_name == "Q4_1" and "_debug_gguf_q4_1_no_min" in bugs:
        fixed = raw.reshape(raw.shape[0], -1, 20).copy()
        fixed[..., 2:4] = 0                       # m = +0.0
        return dequantize(fixed.reshape(raw.shape), type_name, cols)
    if type_name == "Q4_K" and "_debug_gguf_q4_k_min_sign" in bugs:
        fixed = raw.reshape(raw.shape[0], -1, 144).copy()
        fixed[..., 3] ^= 0x80                     # dmin -> -dmin (f16 sign bit)
        return dequantize(fixed.reshape(raw.shape), type_name, cols)
    return dequantize(raw, type_name, cols)
