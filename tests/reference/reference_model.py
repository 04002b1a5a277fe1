"""The forward pass of the float64 reference (reference.py): `Model` (weights, matmuls with
ditto's activation rounding emulated, dense MLP, Qwen3-MoE sparse block, and forward_variants)
and the activation-rounding log (`ActivationRounding`, `rounding_noise`).

reference.Model subclasses `Model` so that the hooks `_router` and `_lm_head_chunk` read
reference._route and reference.LM_HEAD_CHUNK at call time: callers patch those attributes of
the reference module (bench/moe_routing.py, the self-tests).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import FrozenSet, List, Optional, Sequence

import numpy as np

import gguf_checkpoint
from gguf_reader import GGUFFile
from reference_checkpoint import Config, SafeTensors, load_config
from reference_moe import Routing, _route
from reference_numerics import (_apply_rope, _gelu_tanh, _rms_norm, _silu,
                                quantize_activation_rows, round_to_bf16, rope_inv_freq)

LM_HEAD_CHUNK = 8192  # vocabulary rows of lm_head converted to float64 at a time

DEBUG_FLAGS = (
    "_debug_disable_rope",       # skip RoPE entirely
    "_debug_skip_qk_norm",       # Qwen3: skip q_norm / k_norm
    "_debug_skip_qkv_bias",      # q/k/v_proj biases (Qwen2) left out
    "_debug_interleaved_rope",   # rotate pairs (2i, 2i+1) instead of (i, i + d/2)
    "_debug_no_rope_scaling",    # ignore rope_scaling (llama3) -> plain inv_freq
    "_debug_no_causal_mask",     # let every position attend to every position
    "_debug_no_sliding_window",  # Gemma 3: sliding layers attend to every earlier position
    "_debug_moe_no_topk_renorm",  # MoE: ignore norm_topk_prob (never renormalise)
    "_debug_moe_swap_kth_expert",  # MoE: take the (k+1)-th expert instead of the k-th
    "_emulate_float32",          # diagnostic: compute in float32 instead of float64
    "_debug_activation_scale_per_row",  # quantize_activations: one int8 scale per row, not block
) + gguf_checkpoint.WEIGHT_BUGS  # GGUF only: Q4_1 min ignored, Q4_K min sign, q/k permutation

# Activation block of ditto's quantized GEMM for each GGML weight type (docs/NUMERICS.md).
ACTIVATION_BLOCK = {"Q8_0": 32, "Q4_0": 32, "Q4_1": 32, "Q5_0": 32, "Q5_1": 32, "IQ4_NL": 32,
                    "Q4_K": 256, "Q5_K": 256, "Q6_K": 256, "Q3_K": 256, "Q2_K": 256, "IQ4_XS": 256}
# activation_dither_seed: relative size of the random perturbation of each rounded input
# (about a float32 GEMM's rounding error), to draw further samples of the rounding noise
DITHER = 1e-6


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
    """One checkpoint (a Hugging Face model directory or a GGUF file) and its forward pass.

    Use reference.Model (via reference.load_model): it overrides the hooks `_router` and
    `_lm_head_chunk` to read the reference module's patchable `_route` and `LM_HEAD_CHUNK`."""

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

    # -- hooks (overridden by reference.Model) ---------------------------------------
    def _router(self):
        """The MoE routing function, called as _route(router_logits, k, norm_topk_prob,
        swap_kth) -> (probs, experts, weights) once per sparse layer and variant."""
        return _route

    def _lm_head_chunk(self) -> int:
        """Vocabulary rows of lm_head converted to float64 at a time."""
        return LM_HEAD_CHUNK

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

    def _norm_w(self, name: str, dt) -> np.ndarray:
        """A norm weight as the forward pass multiplies by it: Gemma's RMSNorm multiplies by
        (1 + w) (Gemma3RMSNorm: `(1.0 + self.weight.float())`); llama.cpp's converter stores
        1 + w in GGUF files, so a GGUF weight is used as it is."""
        w = self._w(name, dt)
        return 1.0 + w if self.cfg.gemma and not self.gguf else w

    def _dense_mlp(self, x: np.ndarray, rid: np.ndarray, p: str, intermediate: int, bias: bool,
                   ps: _Pass) -> np.ndarray:
        """down(act(gate(x)) * up(x)), act = silu (GELU(tanh) for Gemma 3); x [..., hidden] ->
        [..., hidden]. p ends in "mlp."."""
        g = self._linear(x, rid, p + "gate_proj.weight", p + "gate_proj.bias", bias, ps)
        if g.shape[-1] != intermediate:
            raise ValueError(f"{p}gate_proj.weight has {g.shape[-1]} rows, expected "
                             f"{intermediate}")
        u = self._linear(x, rid, p + "up_proj.weight", p + "up_proj.bias", bias, ps)
        a = (_gelu_tanh(g) if self.cfg.gemma else _silu(g)) * u
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
        route = self._router()
        # sel[v, t, e]: mixing weight of expert e for token t of variant v (0 if unselected)
        sel = np.zeros((V, T, E), dtype=dt)
        chosen = np.zeros((V, T, E), dtype=bool)
        picked = []  # experts [T, k] per variant
        for vi, var in enumerate(variants):
            logits_v = router_logits[vi]
            renorm = cfg.norm_topk_prob and not var.get("_debug_moe_no_topk_renorm", False)
            probs, experts, weights = route(logits_v, k, renorm,
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
                         rounding_log: Optional[list] = None,
                         vocab_rows: Optional[Sequence[int]] = None) -> List[np.ndarray]:
        """Logits [T, vocab] (float64) for each variant, sharing one pass over the weights.

        vocab_rows: only these vocabulary rows of the LM head, in this order: [T, len(vocab_rows)]
        (a reranker's yes / no logits without the whole vocabulary).

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
        hn, ps = self._final_hidden(token_ids, variants, routing, rounding_log)
        V, T = len(variants), ps.num_tokens
        rid = np.arange(V * T)
        vocab = self.cfg.vocab_size
        if vocab_rows is not None:
            rows = np.asarray(list(vocab_rows), dtype=np.int64)
            if rows.ndim != 1 or (len(rows) and (rows.min() < 0 or rows.max() >= vocab)):
                raise ValueError(f"vocab_rows must be ids in [0, {vocab})")
            logits = self._linear(hn, rid, self.lm_head_name, None, False, ps, rows=rows)
            logits = logits.astype(np.float64, copy=False)
        else:
            logits = np.empty((V * T, vocab), dtype=np.float64)
            chunk = self._lm_head_chunk()
            for r0 in range(0, vocab, chunk):
                r1 = min(r0 + chunk, vocab)
                logits[:, r0:r1] = self._linear(hn, rid, self.lm_head_name, None, False, ps,
                                                rows=slice(r0, r1))
        return [logits[i * T:(i + 1) * T] for i in range(V)]

    def hidden_states_variants(self, token_ids: Sequence[int], variants: List[dict],
                               routing: Optional[list] = None,
                               rounding_log: Optional[list] = None) -> List[np.ndarray]:
        """The final hidden states [T, hidden_size] (float64) for each variant: the output of the
        last RMSNorm (model.norm), the rows the LM head multiplies -- what an embedding model pools
        (sentence-transformers' token_embeddings, transformers' last_hidden_state). Options and
        arguments as forward_variants'."""
        hn, ps = self._final_hidden(token_ids, variants, routing, rounding_log)
        T = ps.num_tokens
        return [hn[i * T:(i + 1) * T].astype(np.float64) for i in range(len(variants))]

    def _final_hidden(self, token_ids: Sequence[int], variants: List[dict],
                      routing: Optional[list], rounding_log: Optional[list]):
        """The pass up to model.norm: (hn [V * T, hidden] in the pass's dtype, the _Pass)."""
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
        scale = (cfg.query_pre_attn_scalar if cfg.gemma else d) ** -0.5

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
        rope_local, window = rope, causal
        if cfg.sliding_layers:
            # Sliding layers: a query at p sees keys k with p - sliding_window < k <= p
            # (transformers' sliding_window_overlay: kv_idx > q_idx - sliding_window); Gemma 3
            # rotates them with rope_local_base_freq (never scaled).
            qpos, kpos = np.arange(T)[:, None], np.arange(T)[None, :]
            window = causal & (kpos > qpos - cfg.sliding_window)
        if cfg.rope_local_base_freq > 0:
            inv = 1.0 / (cfg.rope_local_base_freq ** (np.arange(0, d, 2, dtype=np.float64) / d))
            ang = pos[:, None] * inv[None, :]
            rope_local = [(np.cos(ang).astype(dt), np.sin(ang).astype(dt))] * V

        per_variant = [[] for _ in variants] if routing is not None else None
        h = np.empty((V, T, H), dtype=dt)
        for g in groups:  # embedding rows gathered per token (exact lookup)
            h[g.variants] = self._w("model.embed_tokens.weight", dt, rows=ids, bugs=g.bugs)
        if cfg.gemma:
            # Gemma3TextScaledWordEmbedding: times sqrt(hidden_size), the normaliser being a
            # float32 number in a float32 model (it is cast to the weights' dtype) -- as ditto
            # and llama.cpp (sqrtf) multiply by it.
            h = h * dt(np.float32(math.sqrt(H)))

        for li in range(cfg.num_hidden_layers):
            p = f"model.layers.{li}."
            # ---- attention block ----
            sliding = bool(cfg.sliding_layers) and cfg.sliding_layers[li]
            x = _rms_norm(h, self._norm_w(p + "input_layernorm.weight", dt), eps)
            qkvb = cfg.qkv_bias
            a = p + "self_attn."
            q = self._linear(x, rid, a + "q_proj.weight", a + "q_proj.bias", qkvb, ps)
            k = self._linear(x, rid, a + "k_proj.weight", a + "k_proj.bias", qkvb, ps)
            vv = self._linear(x, rid, a + "v_proj.weight", a + "v_proj.bias", qkvb, ps)
            if qkvb:
                for vi, var in enumerate(variants):
                    if var.get("_debug_skip_qkv_bias", False):  # q, k, vv: [V, T, out]
                        q[vi] -= self._w(a + "q_proj.bias", dt)
                        k[vi] -= self._w(a + "k_proj.bias", dt)
                        vv[vi] -= self._w(a + "v_proj.bias", dt)
            q = q.reshape(V, T, nh, d)
            k = k.reshape(V, T, nkv, d)
            vv = vv.reshape(V, T, nkv, d)
            if cfg.qk_norm:
                qn = self._norm_w(a + "q_norm.weight", dt)
                kn = self._norm_w(a + "k_norm.weight", dt)
            attn = np.empty((V, T, nh, d), dtype=dt)
            for vi, var in enumerate(variants):
                qi, ki, vi_ = q[vi], k[vi], vv[vi]
                if cfg.qk_norm and not var.get("_debug_skip_qk_norm", False):
                    qi = _rms_norm(qi, qn, eps)
                    ki = _rms_norm(ki, kn, eps)
                if not var.get("_debug_disable_rope", False):
                    cos, sin = (rope_local if sliding else rope)[vi]
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
                    no_window = var.get("_debug_no_sliding_window", False)
                    s = np.where((window if sliding and not no_window else causal)[None], s, -np.inf)
                s = s - np.max(s, axis=-1, keepdims=True)
                e = np.exp(s)
                prob = e / np.sum(e, axis=-1, keepdims=True)
                attn[vi] = np.einsum("hts,shd->thd", prob, vr)
            o = self._linear(attn.reshape(V, T, nh * d), rid, a + "o_proj.weight",
                             a + "o_proj.bias", cfg.o_bias, ps)
            if cfg.gemma:  # Gemma3DecoderLayer: the attention output normalised first
                o = _rms_norm(o, self._norm_w(p + "post_attention_layernorm.weight", dt), eps)
            h = h + o
            # ---- MLP block: Qwen3-MoE's sparse block on the layers the config selects ----
            if cfg.gemma:
                x = _rms_norm(h, self._norm_w(p + "pre_feedforward_layernorm.weight", dt), eps)
                y = self._dense_mlp(x, rid, p + "mlp.", cfg.intermediate_size, False, ps)
                h = h + _rms_norm(y, self._norm_w(p + "post_feedforward_layernorm.weight", dt), eps)
                del x, y
                continue
            x = _rms_norm(h, self._w(p + "post_attention_layernorm.weight", dt), eps)
            if cfg.is_moe_layer(li):
                h = h + self._sparse_moe(x, li, variants, ps, per_variant)
            else:
                h = h + self._dense_mlp(x, rid, p + "mlp.", cfg.intermediate_size,
                                        cfg.mlp_bias, ps)
            del x

        hn = _rms_norm(h, self._norm_w("model.norm.weight", dt), eps).reshape(V * T, H)
        if routing is not None:
            routing.extend(per_variant)
        return hn, ps
