"""Routed experts (vLLM's enable_return_routed_experts) vs the independent float64 reference.

    /usr/bin/python3 -m pytest -s -p no:cacheprovider tests/reference/test_routed_experts_parity.py

`ditto generate --prompts ... --enable-return-routed-experts` runs three greedy requests together on
a 2-layer qwen3-30b-a3b cut to 16 experts (test_parity.py's MoE model and seed): QWEN_IDS, another
prompt, and QWEN_IDS again (a prefix-cache hit). Each choice's routed_experts has one row per token
that went through the model (prompt + output - 1), every MoE layer, top-8 expert ids in the router's
order. The two QWEN_IDS requests must carry the same ints (invariance), and the rows must be the
experts the float64 reference (reference.py, with ditto's two bf16 roundings: the same "rounded"
variant test_parity.py compares logprobs with) picks over the finished sequence.

Tolerance rule (ties and near-ties): ditto routes in float32 from bf16-rounded inputs, so where two
experts' router logits are closer than the rounding noise their order may legitimately differ (see
test_parity.py's docstring: the k-th/(k+1)-th logit gap moves by up to ~1.2e-2 between draws of the
noise; ROUTING_GAP_MIN = 2.5e-2 is twice that). Per (token, layer) the reference's ranked experts are
cut into groups where neighbouring ranks' logit gap is below ROUTING_GAP_MIN; the k-th and (k+1)-th
joined means the set itself may differ. ditto must hold, rank by rank, the same group contents
(exact int equality of the group's ids as sets, and of the whole row where no group has two
members) — and wherever no near-tie is involved, the same ids in the same order. A near-tie where
ditto's choice differs from the reference's (a legitimate flip) changes what follows: its token is
left out for the last layer, it and every later token for an earlier layer (their inputs then differ
by more than rounding). At least two thirds of the rows must be compared.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference as ref  # noqa: E402

REPO = HERE.parents[1]
DITTO_BIN = os.environ.get("DITTO_BIN") or str(REPO / "build" / "tools" / "ditto")
pytestmark = pytest.mark.skipif(not os.path.exists(DITTO_BIN),
                                reason=f"ditto binary not found at {DITTO_BIN} (build it, or set DITTO_BIN)")

SEED_MOE = 4  # test_parity.py's qwen3-30b-a3b seed
ROUTING_GAP_MIN = 2.5e-2  # test_parity.py's near-tie threshold on router logits
QWEN_IDS = [785, 3974, 13876, 151643, 38835, 34208, 916, 279, 15678, 100000, 5562, 13,
            0, 123456, 65535, 3974, 151935, 77777, 140000, 111111, 2, 99999, 131071, 50000]
OTHER_IDS = [9707, 11, 1879, 0, 42, 7, 100, 2000, 30000]
MAX_TOKENS = 8


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("routed")
    model = base / "model"
    subprocess.run([DITTO_BIN, "make-test-model", "--preset", "qwen3-30b-a3b", "--num-hidden-layers", "2",
                    "--num-experts", "16", "--seed", str(SEED_MOE), "--out", str(model)],
                   check=True, capture_output=True, text=True)
    prompts = base / "prompts.jsonl"
    lines = [{"prompt_token_ids": ids, "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True}
             for ids in (QWEN_IDS, OTHER_IDS, QWEN_IDS)]
    prompts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = base / "out.jsonl"
    p = subprocess.run([DITTO_BIN, "generate", "--model", str(model), "--prompts", str(prompts), "--output", str(out),
                        "--enable-return-routed-experts", "--quiet"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-4000:]
    results = [json.loads(line) for line in out.read_text().splitlines()]
    return {"model": model, "results": results, "cfg": ref.load_config(str(model))}


def _rows(result):
    choice = result["outputs"][0]
    return np.asarray(choice["routed_experts"], dtype=np.int64), result["prompt_token_ids"] + choice["token_ids"]


def test_shape_and_invariance(run):
    cfg = run["cfg"]
    for result in run["results"]:
        rows, seq = _rows(result)
        assert rows.shape == (len(seq) - 1, cfg.num_hidden_layers, cfg.num_experts_per_tok)
        assert rows.min() >= 0 and rows.max() < cfg.num_experts
        assert all(len(set(r)) == cfg.num_experts_per_tok for r in rows.reshape(-1, cfg.num_experts_per_tok))
    first, again = _rows(run["results"][0]), _rows(run["results"][2])
    assert first[1] == again[1]
    assert np.array_equal(first[0], again[0])  # the second was served from the prefix cache


def _groups(ranked_logits, k):
    """Rank groups [(start, end)] over ranks 0..k (k+1 entries: the (k+1)-th decides the set):
    neighbours closer than ROUTING_GAP_MIN share a group."""
    groups, start = [], 0
    for j in range(1, k + 1):
        if ranked_logits[j - 1] - ranked_logits[j] >= ROUTING_GAP_MIN:
            groups.append((start, j))
            start = j
    groups.append((start, k + 1))
    return groups


@pytest.mark.parametrize("which", [0, 1])
def test_matches_float64_reference(run, which):
    cfg = run["cfg"]
    rows, seq = _rows(run["results"][which])
    tokens = seq[:-1]  # the last sampled token never ran
    routing = []
    ref.log_softmax_variants(str(run["model"]), tokens, [{"kv_cache_dtype": "bfloat16", "bf16_activations": True}],
                             routing=routing)
    k = cfg.num_experts_per_tok
    keep = np.ones(len(tokens), dtype=bool)
    compared = exact = 0
    notes = []
    for m, r in enumerate(routing[0]):  # sparse layers in order: m is the MoE layer's index in the rows
        order = np.argsort(-r.probs, axis=-1, kind="stable")  # the reference's rank order (ties: lower id)
        assert np.array_equal(order[:, :k], r.experts)
        for t in range(len(tokens)):
            if not keep[t]:
                continue
            ranked = order[t]
            logits = r.router_logits[t, ranked]
            got = rows[t, m]
            ok = True
            for g0, g1 in _groups(logits, k):
                lo, hi = min(g0, k), min(g1, k)  # ditto holds ranks 0..k-1
                if lo == hi:
                    continue
                if g1 == k + 1 and g1 - g0 > 1:  # the k-th is near the (k+1)-th: which one is taken may flip
                    ok = ok and set(got[lo:hi]) <= set(ranked[g0:g1].tolist())
                else:
                    ok = ok and set(got[lo:hi]) == set(ranked[lo:hi].tolist())
            if ok:
                compared += 1
                exact += int(np.array_equal(got, ranked[:k]))
                continue
            near = any(g1 - g0 > 1 for g0, g1 in _groups(logits, k))
            assert near, (f"layer {r.layer} token {t}: ditto {got.tolist()} vs reference {ranked[:k].tolist()} "
                          f"(logits {np.round(logits[:k + 1], 4).tolist()}) with no near-tie")
            notes.append(f"layer {r.layer} token {t}: a near-tie flipped")
            if r.layer == cfg.num_hidden_layers - 1:
                keep[t] = False
            else:
                keep[t:] = False
    print(f"\nrouted experts vs float64 reference: {compared} (token, layer) rows agree, {exact} in exactly the "
          f"reference's order; {'; '.join(notes) or 'no near-tie flipped'}")
    assert keep.sum() >= 2 * len(tokens) / 3, notes
    assert exact >= compared // 2 > 0
