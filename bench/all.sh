#!/usr/bin/env bash
# Every row of the README's model-speed table against llama.cpp, on this machine, in one sitting
# (`make bench` runs it): each row is one of the existing bench commands, run one after the other;
# one table of ratios with the targets of issue 28, the CPU by name and the limits ditto measured
# in the same sitting (read bandwidth, FMA and bf16-dot peaks), and everything as JSON.
#
#   bench/all.sh [MODEL_DIR]     (default: the qwen3-0.6b preset with all 28 layers, bf16, seeded
#                                 random weights, generated once into $DITTO_BENCH_CACHE/models/)
#
# Rows (ROWS=a,b,... runs some of them; the default is all, about an hour on 2 cores):
#   prefill512   bench/llama_cpp.sh compare: 512-token prefill and batch-1 decode (128 tokens)
#   prefill8192  the same with an 8,192-token prompt, no decode, one repetition
#   q8_0, q4_k_m decode of the model quantized by llama-quantize (Q8_0, Q4_K_M), both engines on it
#   q5_k_m, iq4_xs prefill 512 and decode of llama-quantize's Q5_K_M and IQ4_XS files, both engines
#   batched      bench/llama_cpp.sh batched: 32 sequences x (256 + 128)
#   speculative  ditto bench --scenario speculative on the demo model (SmolLM2-135M-Instruct Q4_1):
#                prompt lookup on / off, on a copying workload (no peer: the ratio is on ÷ off)
#   tp2          bench/tensor_parallel.sh: mpirun -np 2 ÷ one process (no peer)
#   serve        bench/serve.sh --json: 16 clients, ditto serve ÷ llama-server
#   startup      bench/startup.py: launch to first answered request, ditto serve ÷ llama-server
#   embed        bench/embed.py: /v1/embeddings throughput of the qwen3-embedding-0.6b preset (28
#                layers, its sentence-transformers files) exported to Q8_0, ditto serve ÷
#                llama-server --embeddings, 128 documents of 64-192 tokens
#   structured   bench/structured.py: decode tokens/s with a JSON Schema vs without, batch 1 and 32,
#                on the demo model (SmolLM2-135M-Instruct Q4_1), ditto serve ÷ llama-server's
#                json_schema; the constraint's overhead in each engine
#
# Environment: OUT (folder for the JSON; default $DITTO_BENCH_CACHE/results/<UTC time>), THREADS
# (default 2), BUILD_DIR (default build; built by llama_cpp.sh when stale), DITTO_BENCH_CACHE
# (default ~/.cache/ditto-bench), DEMO_MODEL (default models/SmolLM2-135M-Instruct.Q4_1.gguf).
# A row that fails is reported as failed with the tail of its log; the others still run. Exit
# status 1 when any row failed. Nothing is written inside the repo except ditto's own build.
# Beside the JSON, bench/plot.py draws summary.svg (every row's ratio against its target, the CPU
# and the date) and one SVG per row it knows (prefill512.svg, speculative.svg, tp2.svg, serve.svg,
# ...: ditto beside its peer); a plot that fails (no matplotlib?) is a warning, not a failed row.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
CACHE=${DITTO_BENCH_CACHE:-$HOME/.cache/ditto-bench}
BUILD_DIR=${BUILD_DIR:-build}
THREADS=${THREADS:-2}
DITTO=$REPO/$BUILD_DIR/tools/ditto
DEMO_MODEL=${DEMO_MODEL:-$REPO/models/SmolLM2-135M-Instruct.Q4_1.gguf}
ALL_ROWS=prefill512,prefill8192,q8_0,q4_k_m,q5_k_m,iq4_xs,batched,speculative,tp2,serve,startup,embed,structured
ROWS=${ROWS:-$ALL_ROWS}
OUT=${OUT:-$CACHE/results/$(date -u +%Y%m%dT%H%M%SZ)}
DATE=$(date -u +%Y-%m-%d)
PYTHON=/usr/bin/python3
export THREADS BUILD_DIR DITTO_BENCH_CACHE=$CACHE
unset PLOT  # the rows' own plots: drawn below from their JSON, not by each script

log() { echo "all.sh: $*" >&2; }
die() { echo "error: all.sh: $*" >&2; exit 1; }

for row in ${ROWS//,/ }; do
  [[ ,$ALL_ROWS, == *,$row,* ]] || die "unknown row '$row' in ROWS (rows: $ALL_ROWS)"
done
mkdir -p "$OUT"

bench/llama_cpp.sh build
[[ -f $BUILD_DIR/CMakeCache.txt ]] || cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j2 --target ditto >/dev/null || die "building ditto failed"
MODEL=${1:-$CACHE/models/qwen3-0.6b-28}
if [[ -z ${1:-} && ! -f $MODEL/config.json ]]; then
  log "generating $MODEL (qwen3-0.6b preset, 28 layers, seed 0)"
  "$DITTO" make-test-model --preset qwen3-0.6b --seed 0 --out "$MODEL" >/dev/null
fi
[[ -e $MODEL ]] || die "$MODEL: no such model"
LLAMA_BIN=$CACHE/llama.cpp-node-llama-cpp-3.21.1/build/bin

# run ROW COMMAND...: the command's last line of standard output (a JSON object) into OUT/ROW.json;
# its standard error into OUT/ROW.log.
FAILED=()
run() {
  local row=$1
  shift
  [[ ,$ROWS, == *,$row,* ]] || return 0
  log "$row: $*"
  local start=$SECONDS
  if "$@" 2>"$OUT/$row.log" | tail -1 >"$OUT/$row.json" && $PYTHON -c 'import json,sys; json.load(open(sys.argv[1]))' \
    "$OUT/$row.json" 2>/dev/null; then
    log "$row: done in $((SECONDS - start)) s"
  else
    log "$row: FAILED after $((SECONDS - start)) s; last lines of $OUT/$row.log:"
    tail -5 "$OUT/$row.log" >&2 || true
    rm -f "$OUT/$row.json"
    FAILED+=("$row")
  fi
}

run prefill512 bench/llama_cpp.sh compare "$MODEL"
run prefill8192 env PREFILL_TOKENS=8192 DECODE_TOKENS=0 REPETITIONS=1 WARMUP=0 bench/llama_cpp.sh compare "$MODEL"
for q in q8_0 q4_k_m q5_k_m iq4_xs; do
  [[ ,$ROWS, == *,$q,* ]] || continue
  if gguf=$(bench/llama_cpp.sh quantize "$MODEL" "${q^^}" 2>"$OUT/$q.log"); then
    prefill=16  # decode rows; the newer types' rows time a 512-token prefill too
    [[ $q == q5_k_m || $q == iq4_xs ]] && prefill=512
    run "$q" env PREFILL_TOKENS=$prefill bench/llama_cpp.sh compare "$gguf"
  else
    log "$q: FAILED to quantize; see $OUT/$q.log"
    FAILED+=("$q")
  fi
done
run batched bench/llama_cpp.sh batched "$MODEL"
run speculative "$DITTO" bench --scenario speculative --model "$DEMO_MODEL" --threads "$THREADS" --json
run tp2 bench/tensor_parallel.sh "$MODEL"
run serve bench/serve.sh "$MODEL" --json
if [[ ,$ROWS, == *,startup,* ]]; then
  gguf=$(bench/llama_cpp.sh gguf "$MODEL")
  run startup "$PYTHON" bench/startup.py --json \
    --ditto "$DITTO serve $MODEL --host 127.0.0.1 --port 0 --threads $THREADS" \
    --llama-server "$LLAMA_BIN/llama-server -m $gguf --host 127.0.0.1 --port 0 -t $THREADS -tb $THREADS --no-webui"
fi

if [[ ,$ROWS, == *,embed,* ]]; then
  EMBED_MODEL=$CACHE/models/qwen3-embedding-0.6b-28
  [[ -f $EMBED_MODEL/config.json ]] || "$DITTO" make-test-model --preset qwen3-embedding-0.6b --seed 0 \
    --out "$EMBED_MODEL" >/dev/null
  EMBED_GGUF=$CACHE/gguf/qwen3-embedding-0.6b-q8_0.gguf
  mkdir -p "$CACHE/gguf"
  [[ -f $EMBED_GGUF ]] || "$DITTO" export-gguf --model "$EMBED_MODEL" --outtype q8_0 --output "$EMBED_GGUF" >/dev/null
  run embed "$PYTHON" bench/embed.py --gguf "$EMBED_GGUF" --threads "$THREADS" --json
fi

if [[ ,$ROWS, == *,structured,* ]]; then
  run structured "$PYTHON" bench/structured.py --model "$DEMO_MODEL" --threads "$THREADS" --json
fi

CPU=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
"$PYTHON" - "$OUT" "$MODEL" "$CPU" "$THREADS" "$(git rev-parse --short HEAD)" "$ROWS" <<'EOF'
import json, os, sys
out, model, cpu, threads, commit, rows_run = sys.argv[1:7]
rows_run = rows_run.split(",")

def load(row):
    path = os.path.join(out, row + ".json")
    return json.load(open(path)) if os.path.exists(path) else None

def mean(v):
    return sum(v) / len(v) if isinstance(v, list) else v

r = {row: load(row) for row in
     ["prefill512", "prefill8192", "q8_0", "q4_k_m", "q5_k_m", "iq4_xs", "batched", "speculative", "tp2", "serve",
      "startup", "embed", "structured"]}
table = []  # (row, measured, target, met, why it has no figure)

def add(name, value, target, higher_is_better=True, what=""):
    if value is None:
        table.append((name, None, target, None, "failed" if what in rows_run else "not run"))
        return
    met = value >= target if higher_is_better else value <= target
    table.append((name, round(value, 3), target, met, ""))

p = r["prefill512"]
add("decode batch 1, bf16, ÷ llama.cpp", p and p.get("decode_ratio"), 1.15, what="prefill512")
add("decode batch 1, bf16, of the roofline", p and mean(p.get("ditto_decode_roofline_ratio")), 0.9, what="prefill512")
add("prefill 512, ÷ llama.cpp", p and p.get("prefill_ratio"), 2.0, what="prefill512")
add("prefill 512, of the bf16-dot peak", p and mean(p.get("ditto_prefill_bf16_dot_peak_ratio")), 0.9, what="prefill512")
p = r["prefill8192"]
add("prefill 8192, ÷ llama.cpp", p and p.get("prefill_ratio"), 2.0, what="prefill8192")
add("prefill 8192, of the bf16-dot peak", p and mean(p.get("ditto_prefill_bf16_dot_peak_ratio")), 0.6, what="prefill8192")
for q, name in (("q8_0", "Q8_0"), ("q4_k_m", "Q4_K_M")):
    p = r[q]
    add(f"decode {name}, ÷ llama.cpp", p and p.get("decode_ratio"), 1.3, what=q)
    add(f"decode {name}, of the quantized roofline", p and mean(p.get("ditto_decode_roofline_ratio")), 0.85, what=q)
# The newer types (issue 31): reported, ahead of llama.cpp is the bar.
for q, name in (("q5_k_m", "Q5_K_M"), ("iq4_xs", "IQ4_XS")):
    p = r[q]
    add(f"decode {name}, ÷ llama.cpp", p and p.get("decode_ratio"), 1.0, what=q)
    add(f"prefill 512 {name}, ÷ llama.cpp", p and p.get("prefill_ratio"), 1.0, what=q)
p = r["batched"]
add("batched 32 x (256 + 128), ÷ llama.cpp", p and p.get("generated_ratio"), 2.0, what="batched")
p = r["speculative"]
copying = p and next((w for w in p["workloads"] if w["workload"] == "copying"), None)
add("speculative, copying workload, on ÷ off", copying and copying["speedup"], 2.0, what="speculative")
p = r["tp2"]
add("TP 2 prefill ÷ one process", p and p.get("prefill_ratio"), 0.95, what="tp2")
p = r["serve"]
o = p and p.get("ditto_over_llama_server")
add("serve 16 clients, output tokens/s ÷ llama-server", o and o.get("output_tokens_per_s"), 2.5, what="serve")
add("serve 16 clients, TTFT p50 ÷ llama-server", o and o.get("ttft_ms_p50"), 0.5, higher_is_better=False, what="serve")
p = r["startup"]
add("time to first answer ÷ llama-server", p and p.get("ratio"), 1.0, higher_is_better=False, what="startup")
p = r["embed"]
add("embeddings tokens/s (Q8_0), ÷ llama-server", p and p.get("ratio"), 1.5, what="embed")
p = r["structured"]
add("JSON Schema decode, batch 1, ÷ llama-server", p and p.get("batch1_json_ratio"), 1.0, what="structured")
add("JSON Schema decode, batch 32, ÷ llama-server", p and p.get("batch32_json_ratio"), 1.0, what="structured")
add("JSON Schema overhead vs free, batch 1", p and p.get("ditto_batch1_overhead"), 0.10, higher_is_better=False,
    what="structured")
add("JSON Schema overhead vs free, batch 32", p and p.get("ditto_batch32_overhead"), 0.10, higher_is_better=False,
    what="structured")

limits = r["prefill512"] or r["prefill8192"] or {}
summary = {
    "cpu": cpu, "threads": int(threads), "commit": commit, "model": model,
    "isa": limits.get("isa"),
    "read_bandwidth_gbps": limits.get("read_bandwidth_gbps"),
    "fma_gflops": limits.get("fma_gflops"), "bf16_dot_gflops": limits.get("bf16_dot_gflops"),
    "rows": [{"row": n, "measured": v, "target": t, "met": m, **({"status": w} if w else {})}
             for n, v, t, m, w in table],
    "raw": r,
}
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(summary, f, indent=1)
print(f"CPU: {cpu}; {threads} threads; ditto {commit}; isa {summary['isa']}")
print(f"limits measured in the sitting: read bandwidth {summary['read_bandwidth_gbps']} GB/s, "
      f"FMA {summary['fma_gflops']} GFLOP/s, bf16 dot {summary['bf16_dot_gflops']} GFLOP/s")
print(f"model: {model}")
print(f"{'row':52}{'measured':>10}{'target':>9}  met")
for n, v, t, m, w in table:
    shown = w if v is None else f"{v:.3f}"
    print(f"{n:52}{shown:>10}{t:>9}  {'-' if m is None else ('yes' if m else 'no')}")
print(f"JSON: {os.path.join(out, 'summary.json')}")
EOF
for name in summary prefill512 prefill8192 q8_0 q4_k_m q5_k_m iq4_xs batched speculative tp2 serve; do
  [[ -f $OUT/$name.json ]] || continue
  "$PYTHON" bench/plot.py "$OUT/$name.json" --out "$OUT/$name.svg" --cpu "$CPU" --date "$DATE" \
    2>>"$OUT/plot.log" || log "warning: bench/plot.py could not draw $OUT/$name.svg; see $OUT/plot.log"
done
log "plots: $OUT/summary.svg and one per row"
((${#FAILED[@]} == 0)) || die "rows failed: ${FAILED[*]} (logs in $OUT)"
