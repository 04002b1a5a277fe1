"""Where ditto and llama.cpp disagree on a Qwen3-MoE model: routing flips against a float64 reference.

Called by bench/llama_cpp.sh validate on a Qwen3-MoE model (after llama_cpp_compare.py), or by
hand:

    /usr/bin/python3 bench/moe_routing.py --model DIR --ids 1,2,3 --ditto-rows D.f32 \\
        --llama-rows L.f32 --llama-routing R.jsonl

Inputs: both engines' log-softmax rows for the ids (as llama_cpp_compare.py reads them) and the
experts llama.cpp chose per layer and token (`llama_cpp_probe score ... ROUTING.jsonl`). The
float64 reference of tests/reference/reference.py runs the same ids and gives, per sparse layer
and token, the expert set transformers' routing picks and the k-th margin: the gap between the
k-th and (k+1)-th router logit. A float32 engine may legitimately pick the (k+1)-th expert when
its router logits are off by about half that gap; such a flip changes that token's MoE output
(and, through attention, every later position) by far more than rounding does.

Prints one JSON object: each engine's max |Δ logprob| against the reference; the (layer,
position) pairs where llama.cpp's expert sets differ from the reference's, with the margins; the
reference rerun with llama.cpp's expert sets (`replay`), against llama.cpp's rows. ditto's routing
is not dumped, so its flips are inferred (`find_ditto_flips`: the k-th/(k+1)-th swap that brings a
far position back to the reference) and replayed the same way. When both replays agree with their
engine at the level of a dense model, every difference beyond rounding is a routing near-tie.
Needs the MoE float64 reference (Routing records, _route) of tests/reference/reference.py.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import reference  # noqa: E402  (float64 reference; tests/reference/reference.py)


def replay(model, ids, overrides):
    """Reference log-softmax rows for each entry of `overrides`, a list (one per variant) of
    {(sparse layer index, position): expert ids}: those tokens take the given experts instead of
    their own top-k (mixing weights from the reference's own probabilities, renormalised when
    norm_topk_prob) -- what the reference computes if it routed as an engine did. Wraps the
    reference's _route for the duration; _sparse_moe calls it layer by layer, variant by variant."""
    original = reference._route
    calls = [0]

    def route(router_logits, k, norm_topk_prob, swap_kth):
        probs, experts, weights = original(router_logits, k, norm_topk_prob, swap_kth)
        layer, vi = divmod(calls[0], len(overrides))
        calls[0] += 1
        changed = {t: e for (li, t), e in overrides[vi].items() if li == layer}
        if changed:
            experts = experts.copy()
            for t, e in changed.items():
                experts[t] = e
            weights = np.take_along_axis(probs, experts, axis=1)
            if norm_topk_prob:
                weights = weights / np.sum(weights, axis=-1, keepdims=True)
        return probs, experts, weights

    reference._route = route
    try:
        return reference.log_softmax_variants(model, ids, [{} for _ in overrides])
    finally:
        reference._route = original


def find_ditto_flips(model, ids, d, routing, threshold):
    """ditto's routing is not dumped; infer its flips. Position by position, where ditto is
    further than `threshold` from the reference replaying the flips found so far, try swapping the
    k-th and (k+1)-th expert of each sparse layer at that position (one variant per layer, one pass)
    and keep the swap that brings the position back under the threshold, if one does. The k-th
    and (k+1)-th are the unreplayed reference's (an approximation after an earlier flip)."""
    found = {}
    orders = [np.argsort(-r.probs, axis=-1, kind="stable") for r in routing]
    k = routing[0].experts.shape[1]
    start = 0
    while True:
        base = replay(model, ids, [found])[0]
        far = [t for t in range(start, len(ids)) if np.abs(d[t] - base[t]).max() > threshold]
        if not far:
            return found, base
        t = far[0]
        trials = []
        for li, order in enumerate(orders):
            swapped = np.concatenate([order[t, :k - 1], order[t, k:k + 1]])
            trials.append({**found, (li, t): swapped})
        rows = replay(model, ids, trials)
        errs = [np.abs(d[t] - r[t]).max() for r in rows]
        best = int(np.argmin(errs))
        if errs[best] <= threshold:
            found = trials[best]
        start = t + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True, help="comma-separated token ids")
    ap.add_argument("--ditto-rows", required=True)
    ap.add_argument("--llama-rows", required=True)
    ap.add_argument("--llama-routing", required=True)
    ap.add_argument("--threshold", type=float, default=0.05,
                    help="max |Δ logprob| at a position above which ditto is taken to have flipped")
    args = ap.parse_args()
    ids = [int(t) for t in args.ids.split(",") if t]

    routing = []
    ref = reference.log_softmax_variants(args.model, ids, [{}], routing=routing)[0]
    vocab = ref.shape[1]
    d = np.fromfile(args.ditto_rows, dtype=np.float32).reshape(-1, vocab).astype(np.float64)
    lc = np.fromfile(args.llama_rows, dtype=np.float32).reshape(-1, vocab).astype(np.float64)
    llama = {}
    for line in open(args.llama_routing):
        r = json.loads(line)
        llama[r["layer"]] = r

    flips = []
    for r in routing[0]:
        _, gap = r.kth_margin()
        lr = llama.get(r.layer)
        if lr is None:
            sys.exit(f"error: moe_routing: llama.cpp routing has no layer {r.layer}")
        for t in range(len(ids)):
            ref_set = set(int(e) for e in r.experts[t])
            llama_set = set(lr["experts"][t])
            if ref_set == llama_set:
                continue
            out_, in_ = sorted(ref_set - llama_set), sorted(llama_set - ref_set)
            logits = np.asarray(lr["router_logits"][t], dtype=np.float64) if lr["router_logits"] else None
            flips.append({
                "layer": r.layer, "position": t,
                "reference_only": out_, "llama_cpp_only": in_,
                "reference_kth_logit_gap": float(gap[t]),
                # How far llama.cpp's router logits are from the reference's for the swapped experts.
                "llama_cpp_logit_error": None if logits is None else float(
                    np.abs(logits[out_ + in_] - r.router_logits[t, out_ + in_]).max()),
            })
    gaps = np.stack([r.kth_margin()[1] for r in routing[0]])  # [sparse layers, positions]
    all_gaps = gaps.ravel()

    # Replays: the reference routed as llama.cpp routed, and as ditto must have routed.
    llama_sets = {(li, t): np.asarray(llama[r.layer]["experts"][t])
                  for li, r in enumerate(routing[0]) for t in range(len(ids))}
    as_llama = replay(args.model, ids, [llama_sets])[0]
    ditto_flips, as_ditto = find_ditto_flips(args.model, ids, d, routing[0], args.threshold)
    first = min([f["position"] for f in flips] + [t for (_, t) in ditto_flips], default=len(ids))
    llama_replayed = np.abs(lc - as_llama).max(axis=1)
    ditto_replayed = np.abs(d - as_ditto).max(axis=1)
    dl = np.abs(d - lc).max(axis=1)
    out = {
        "model": args.model,
        "positions": len(ids),
        "sparse_layers": len(routing[0]),
        "ditto_vs_reference_max_abs_diff": float(np.abs(d - ref).max()),
        "llama_cpp_vs_reference_max_abs_diff": float(np.abs(lc - ref).max()),
        "ditto_vs_llama_cpp_max_abs_diff": float(dl.max()),
        "llama_cpp_routing_flips": flips,
        "first_flip_position": first if first < len(ids) else None,  # either engine's
        "ditto_vs_llama_cpp_max_abs_diff_before_first_flip": float(dl[:first].max()) if first else None,
        "llama_cpp_vs_reference_with_llama_cpp_routing": float(llama_replayed.max()),
        "ditto_inferred_flips": [
            {"layer": routing[0][li].layer, "position": t, "reference_kth_logit_gap": float(gaps[li, t])}
            for (li, t) in sorted(ditto_flips, key=lambda x: x[1])],
        "ditto_vs_reference_with_inferred_routing": float(ditto_replayed.max()),
        "reference_kth_logit_gap_quantiles": {
            q: float(np.quantile(all_gaps, float(q))) for q in ("0.01", "0.05", "0.5")},
        "per_position": [
            {"position": t, "reference_min_kth_logit_gap": float(gaps[:, t].min()),
             "at_layer": routing[0][int(gaps[:, t].argmin())].layer,
             "ditto_vs_reference": float(np.abs(d[t] - ref[t]).max()),
             "llama_cpp_vs_reference": float(np.abs(lc[t] - ref[t]).max()),
             "ditto_vs_llama_cpp": float(dl[t]),
             "llama_cpp_vs_reference_with_llama_cpp_routing": float(llama_replayed[t]),
             "ditto_vs_reference_with_inferred_routing": float(ditto_replayed[t]),
             } for t in range(len(ids))],
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
