#!/usr/bin/env bash
# Tensor parallelism's cost on one machine: `ditto bench` as one process with THREADS threads
# against `mpirun -np N ditto bench --tensor-parallel-size N` with THREADS / N threads per rank,
# alternating REPEATS times, best of each. Prints prefill and decode tokens/s of both, their ratio
# (the communication overhead; the outputs are the same bits), and the bytes rank 0 received per
# token against docs/SCALING.md's arithmetic for this model's config.
#
#   bench/tensor_parallel.sh MODEL_DIR      (default: ~/.cache/ditto-bench/models/qwen3-0.6b,
#                                            generated with make-test-model when missing)
#
# Environment: N (ranks, default 2), THREADS (cores in all, default 2), PROMPT_TOKENS (default 512),
# DECODE_TOKENS (default 128), REPEATS (default 3), BUILD_DIR (default build), PLOT=FILE.svg (also
# draw the JSON with bench/plot.py: both configurations, their ratio and the CPU; relative paths
# from the repo's root, like MODEL_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
DITTO=$BUILD_DIR/tools/ditto
N=${N:-2}
THREADS=${THREADS:-2}
PROMPT_TOKENS=${PROMPT_TOKENS:-512}
DECODE_TOKENS=${DECODE_TOKENS:-128}
REPEATS=${REPEATS:-3}
MODEL=${1:-${DITTO_BENCH_CACHE:-$HOME/.cache/ditto-bench}/models/qwen3-0.6b}
if [ ! -f "$MODEL/config.json" ]; then
  echo "tensor_parallel.sh: generating $MODEL (qwen3-0.6b preset, seeded weights)" >&2
  "$DITTO" make-test-model --preset qwen3-0.6b --seed 0 --out "$MODEL" >&2
fi
# Root in containers; each rank bound to its own core(s).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Both configurations on the same bf16 kernel path: each process otherwise decides at start-up
# from a short measurement whether VDPBF16PS outpaces its FMA emulation (same bits either way),
# and two processes measuring at once may decide differently.
if [ -z "${DITTO_AVX512_BF16:-}" ]; then
  if "$DITTO" --version | grep -q "avx512_bf16 for bf16 weights"; then DITTO_AVX512_BF16=1; else DITTO_AVX512_BF16=0; fi
fi
export DITTO_AVX512_BF16
echo "tensor_parallel.sh: DITTO_AVX512_BF16=$DITTO_AVX512_BF16 for every process" >&2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
args=(--model "$MODEL" --json --prompt-tokens "$PROMPT_TOKENS" --decode-tokens "$DECODE_TOKENS")
for r in $(seq "$REPEATS"); do
  echo "tensor_parallel.sh: run $r/$REPEATS: one process, $THREADS threads" >&2
  "$DITTO" bench "${args[@]}" --threads "$THREADS" >>"$out/one.jsonl"
  echo "tensor_parallel.sh: run $r/$REPEATS: $N ranks, $((THREADS / N)) thread(s) each" >&2
  mpirun -np "$N" -x DITTO_AVX512_BF16 --bind-to core --map-by "core:PE=$((THREADS / N))" "$DITTO" bench "${args[@]}" \
    --threads "$((THREADS / N))" --tensor-parallel-size "$N" >>"$out/tp.jsonl"
done
report=$(/usr/bin/python3 - "$out/one.jsonl" "$out/tp.jsonl" "$MODEL/config.json" "$N" "$PROMPT_TOKENS" <<'PY'
import json, sys
one = [json.loads(l) for l in open(sys.argv[1])]
tp = [json.loads(l) for l in open(sys.argv[2])]
c = json.load(open(sys.argv[3]))
n, prompt = int(sys.argv[4]), int(sys.argv[5])
best = lambda runs, key: max(r[key] for r in runs)
# docs/SCALING.md's arithmetic: per layer and token the attention output (heads x head_dim) and
# the MLP activations (intermediate_size; MoE: experts_per_token x moe_intermediate_size), bf16 for
# bf16 weights and float32 otherwise, o_proj's and down_proj's outputs (hidden_size each, float32);
# plus the embedding row (float32); rank 0 receives (N - 1)/N of each, and of every logits row it
# samples from.
h, d = c["hidden_size"], c.get("head_dim", c["hidden_size"] // c["num_attention_heads"])
mlp = c["num_experts_per_tok"] * c["moe_intermediate_size"] if c.get("num_experts") else c["intermediate_size"]
act_bytes = 2 if c.get("torch_dtype") == "bfloat16" else 4
layer = act_bytes * (c["num_attention_heads"] * d + mlp) + 4 * 2 * h
share = (n - 1) / n
per_token = share * (c["num_hidden_layers"] * layer + 4 * h)
logits = share * 4 * c["vocab_size"]
rows = [
    ("prefill tokens/s", best(one, "prefill_tokens_per_s"), best(tp, "prefill_tokens_per_s")),
    ("decode tokens/s", best(one, "decode_tokens_per_s"), best(tp, "decode_tokens_per_s")),
]
print(f"model {sys.argv[3].rsplit('/', 2)[-2]}: {c['num_hidden_layers']} layers; runs: {len(one)} each, best of each")
print(f"{'':18}{'1 process':>12}{f'{n} ranks':>12}{'ratio':>8}")
for name, a, b in rows:
    print(f"{name:18}{a:12.2f}{b:12.2f}{b / a:8.3f}")
pb = tp[0].get("tensor_parallel_prefill_bytes_received_per_token", 0)
db = tp[0].get("tensor_parallel_decode_bytes_received_per_token", 0)
print(f"bytes rank 0 received per prefill token: {pb:12.0f}  (estimate {per_token + logits / prompt:12.0f})")
print(f"bytes rank 0 received per decode token:  {db:12.0f}  (estimate {per_token + logits:12.0f})")
print(json.dumps({"tensor_parallel_size": n, "prefill_ratio": rows[0][2] / rows[0][1],
                  "decode_ratio": rows[1][2] / rows[1][1], "prefill_bytes_per_token": pb,
                  "prefill_bytes_estimate": per_token + logits / prompt, "decode_bytes_per_token": db,
                  "decode_bytes_estimate": per_token + logits,
                  "one_process_prefill_tokens_per_s": rows[0][1], "tp_prefill_tokens_per_s": rows[0][2],
                  "one_process_decode_tokens_per_s": rows[1][1], "tp_decode_tokens_per_s": rows[1][2]}))
PY
)
echo "$report"
if [ -n "${PLOT:-}" ]; then
  tail -1 <<<"$report" | /usr/bin/python3 bench/plot.py - --out "$PLOT" --measured-here
  echo "tensor_parallel.sh: plot: $PLOT" >&2
fi
