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
    hidden_states(model_dir, token_ids, ...) -> float64 [T, hidden] (model.norm's output)
    embedding(model_dir, token_ids, pooling="LAST"|"MEAN"|"CLS", normalize=True,
              dimensions=None, ...) -> float64 [hidden or dimensions]
    yes_no_score(model_dir, token_ids, yes_id, no_id, ...) -> float, sigmoid(yes - no) at the end
    round_to_bf16(x) -> float64 array holding bf16-representable values (RNE)
    quantize_activation_rows(x, block) -> x rounded to int8 per block, as ditto does

The keyword arguments starting with ``_debug_`` are TEST-ONLY deliberate bugs used
by the parity suite's sensitivity check (to prove the comparison can fail). Never
use them for anything else. ``_emulate_float32`` runs the same algorithm in float32
(diagnostic: estimates the size of float32 rounding effects); it is not a reference.

Files: this module is the entry point (the public API, the CLI, and every name below
re-exported); the code lives in reference_numerics.py (dtype decoding, bf16 / int8 rounding,
RoPE, RMSNorm), reference_checkpoint.py (safetensors reader, Config, load_config),
reference_moe.py (Routing, _route) and reference_model.py (Model, the forward pass).

CLI:
    /usr/bin/python3 tests/reference/reference.py MODEL_DIR|FILE.gguf 1,2,3
        [--kv-cache-dtype bfloat16] [--quantize-activations] [--top 5]
        [--routing]     (--routing: MoE experts, weights and k-th margins per token)
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List, Optional, Sequence

import numpy as np

import gguf_checkpoint  # noqa: F401
import reference_model
from gguf_reader import GGUFFile  # noqa: F401
from reference_checkpoint import (Config, SafeTensors, _parse_safetensors_header,  # noqa: F401
                                  _ST_DTYPES, _TensorInfo, load_config)
from reference_model import (ACTIVATION_BLOCK, DEBUG_FLAGS, DITHER, LM_HEAD_CHUNK,  # noqa: F401
                             ActivationRounding, _Group, _Pass, rounding_noise)
from reference_moe import Routing, _route, _topk_order  # noqa: F401
from reference_numerics import (FLT_MIN, _apply_rope, _log_softmax_rows,  # noqa: F401
                                _rms_norm, _silu, decode_to_f64, quantize_activation_rows,
                                rope_inv_freq, round_to_bf16)


class Model(reference_model.Model):
    """reference_model.Model whose MoE routing function and lm_head chunk size are this
    module's `_route` and `LM_HEAD_CHUNK`, read at call time, so that patching them here
    (reference._route = f; monkeypatch.setattr(reference, "LM_HEAD_CHUNK", n)) takes effect."""

    def _router(self):
        return _route

    def _lm_head_chunk(self) -> int:
        return LM_HEAD_CHUNK


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


def hidden_states(model_dir: str, token_ids: Sequence[int], kv_cache_dtype: str = "float64",
                  quantize_activations: bool = False, bf16_activations: bool = False,
                  **debug) -> np.ndarray:
    """float64 final hidden states [len(token_ids), hidden_size]: the output of the last RMSNorm
    (model.norm), i.e. the rows the LM head multiplies. Options as log_softmax's."""
    return load_model(model_dir).hidden_states_variants(
        token_ids, [dict(kv_cache_dtype=kv_cache_dtype, quantize_activations=quantize_activations,
                         bf16_activations=bf16_activations, **debug)])[0]


POOLING_TYPES = ("LAST", "MEAN", "CLS")
NORMALIZE_EPS = 1e-12  # torch.nn.functional.normalize's default eps


def embedding(model_dir: str, token_ids: Sequence[int], pooling: str = "LAST",
              normalize: bool = True, dimensions: Optional[int] = None,
              kv_cache_dtype: str = "float64", quantize_activations: bool = False,
              bf16_activations: bool = False, **debug) -> np.ndarray:
    """float64 embedding [hidden_size] (or [dimensions]) of one prompt.

    pooling (case-insensitive): "LAST" the last token's final hidden state (sentence-transformers
    pooling_mode_lasttoken: Qwen3-Embedding, whose tokenizer appends <|endoftext|>, so pass the ids
    with it), "MEAN" the mean over every token (pooling_mode_mean_tokens with every token attended),
    "CLS" the first token's. dimensions (Matryoshka): keep the first `dimensions` values, THEN
    normalise -- vLLM's order (its pooler truncates before F.normalize). normalize: x / max(||x||_2,
    1e-12), as sentence-transformers' Normalize module and torch.nn.functional.normalize compute it.
    Other options as log_softmax's."""
    name = str(pooling).upper()
    if name not in POOLING_TYPES:
        raise ValueError(f"pooling {pooling!r} is not one of {', '.join(POOLING_TYPES)}")
    h = hidden_states(model_dir, token_ids, kv_cache_dtype, quantize_activations,
                      bf16_activations, **debug)
    v = h[-1] if name == "LAST" else h[0] if name == "CLS" else np.mean(h, axis=0)
    if dimensions is not None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, (int, np.integer)) \
                or not 1 <= dimensions <= len(v):
            raise ValueError(f"dimensions must be an integer in [1, {len(v)}], got {dimensions!r}")
        v = v[:dimensions]
    if normalize:
        v = v / max(float(np.sqrt(np.sum(v * v))), NORMALIZE_EPS)
    return np.array(v, dtype=np.float64)


def yes_no_score(model_dir: str, token_ids: Sequence[int], yes_id: int, no_id: int,
                 kv_cache_dtype: str = "float64", quantize_activations: bool = False,
                 bf16_activations: bool = False, **debug) -> float:
    """Qwen3-Reranker's relevance score of a formatted (query, document) prompt, float64:
    sigmoid(logit[yes_id] - logit[no_id]) at the last token, which equals the official
    softmax over [logit_no, logit_yes] taken at "yes" (and vLLM's classifier from the two lm_head
    rows). Only those two vocabulary rows of the LM head are computed. Options as log_softmax's."""
    z = load_model(model_dir).forward_variants(
        token_ids, [dict(kv_cache_dtype=kv_cache_dtype, quantize_activations=quantize_activations,
                         bf16_activations=bf16_activations, **debug)],
        vocab_rows=[yes_id, no_id])[0][-1]
    d = float(z[0] - z[1])
    return 1.0 / (1.0 + np.exp(-d)) if d >= 0 else float(np.exp(d) / (1.0 + np.exp(d)))


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
