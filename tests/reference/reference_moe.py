"""Qwen3-MoE routing of the float64 reference (reference.py): softmax over the router logits,
top-k with ties to the lower expert id, optional renormalisation, and the per-layer `Routing`
record. reference.py re-exports `Routing` and `_route`; the forward pass calls `_route` through
reference's module attribute, so that a caller may wrap it (bench/moe_routing.py does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
