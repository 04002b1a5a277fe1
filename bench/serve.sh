#!/usr/bin/env bash
# The OpenAI server under load, beside the engine's offline throughput and beside llama-server,
# in one run on one model directory (see bench/serve.md):
#
#   bench/serve.sh MODEL_DIR [--num-clients N] [--num-requests M] [--prompt-tokens P]
#                  [--output-tokens O] [--temperature T] [--seed S] [--chat] [--json]
#                  [--no-ditto] [--no-llama-cpp]
#
# 1. `ditto bench --scenario offline` with the same number of requests and token counts;
# 2. `ditto serve MODEL_DIR --port 0` under bench/serve.py (N clients, M streamed requests);
# 3. llama-server (built by bench/llama_cpp.sh, on the GGUF `ditto export-gguf` writes) with
#    -np N under the same load; then one table (or one JSON object) of both servers' numbers,
#    ditto serve ÷ ditto offline and ditto ÷ llama-server, and for every phase the share of the
#    machine's CPU that other processes took meanwhile (a shared machine's noise, measured).
#
# Defaults: 16 clients, 64 requests, prompts of ~128 tokens, 32 output tokens, temperature 0.8
# (as the offline scenario samples): under a minute per phase on two cores with a 4-layer model.
# Environment: THREADS (compute threads of every engine, default 2), BUILD_DIR (ditto's build,
# default build; used as it is, not rebuilt), DITTO_BENCH_CACHE (as bench/llama_cpp.sh),
# STARTUP_TIMEOUT (seconds a server may take to answer /health with 200, default 600),
# KEEP_LOGS=1 (keep the work directory: server logs, each phase's JSON and CPU counts),
# PLOT=FILE.svg (also draw the JSON with bench/plot.py: throughput and latencies of both servers,
# their ratios and the CPU; relative paths from the repo's root, like MODEL_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

BUILD_DIR=${BUILD_DIR:-build}
THREADS=${THREADS:-2}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-600}
PYTHON=/usr/bin/python3
DITTO=$REPO/$BUILD_DIR/tools/ditto
CACHE=${DITTO_BENCH_CACHE:-$HOME/.cache/ditto-bench}
LLAMA_BIN=$CACHE/llama.cpp-node-llama-cpp-3.21.1/build/bin  # where bench/llama_cpp.sh builds
CLK_TCK=$(getconf CLK_TCK)

log() { echo "serve.sh: $*" >&2; }
die() { echo "error: serve.sh: $*" >&2; exit 1; }
usage() { sed -n '5,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

[[ $# -ge 1 && $1 != -* ]] || usage
MODEL=$1
shift
NUM_CLIENTS=16 NUM_REQUESTS=64 PROMPT_TOKENS=128 OUTPUT_TOKENS=32 TEMPERATURE=0.8 SEED=0
CHAT=() JSON=0 RUN_DITTO=1 RUN_LLAMA=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --num-clients) NUM_CLIENTS=${2:?}; shift 2 ;;
    --num-requests) NUM_REQUESTS=${2:?}; shift 2 ;;
    --prompt-tokens) PROMPT_TOKENS=${2:?}; shift 2 ;;
    --output-tokens) OUTPUT_TOKENS=${2:?}; shift 2 ;;
    --temperature) TEMPERATURE=${2:?}; shift 2 ;;
    --seed) SEED=${2:?}; shift 2 ;;
    --chat) CHAT=(--chat); shift ;;
    --json) JSON=1; shift ;;
    --no-ditto) RUN_DITTO=0; shift ;;
    --no-llama-cpp) RUN_LLAMA=0; shift ;;
    *) usage ;;
  esac
done
[[ -f $MODEL/config.json ]] || die "$MODEL is not a model directory (no config.json)"
[[ -x $DITTO ]] || die "$DITTO not found; build ditto first (cmake --build $BUILD_DIR --target ditto)"

WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
  if [[ -n $SERVER_PID ]]; then kill "$SERVER_PID" 2>/dev/null || true; fi
  if [[ ${KEEP_LOGS:-0} == 1 ]]; then log "logs and JSON kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# CPU accounting, in clock ticks: the whole machine's busy time (user, nice, system, irq,
# softirq, steal; all cores) and one process's (utime + stime, all its threads).
machine_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
process_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
now() { date +%s.%N; }

# start_server NAME COMMAND...: runs it with its output in $WORK/NAME.log, reads the port from
# its "listening on http://HOST:PORT" line (both servers print one; --port 0 lets the kernel
# pick a free port) and waits until GET /health answers 200. Sets SERVER_PID and BASE_URL.
start_server() {
  local name=$1
  shift
  "$@" >"$WORK/$name.log" 2>&1 &
  SERVER_PID=$!
  local deadline=$((SECONDS + STARTUP_TIMEOUT)) address=
  while [[ -z $address ]]; do
    kill -0 "$SERVER_PID" 2>/dev/null ||
      die "$name exited before listening; last lines of its log:$(echo; tail -5 "$WORK/$name.log")"
    ((SECONDS < deadline)) || die "$name did not print 'listening on' within ${STARTUP_TIMEOUT}s"
    address=$(grep -a -o -E 'listening on http://[^ /]+:[0-9]+' "$WORK/$name.log" | head -1) || true
    [[ -n $address ]] || sleep 0.2
  done
  BASE_URL=http://127.0.0.1:${address##*:}  # the port; a server on all interfaces has loopback too
  until "$PYTHON" -c 'import sys, urllib.request
try: sys.exit(urllib.request.urlopen(sys.argv[1], timeout=5).status != 200)
except Exception: sys.exit(1)' "$BASE_URL/health"; do
    kill -0 "$SERVER_PID" 2>/dev/null || die "$name exited while loading; see its log"
    ((SECONDS < deadline)) || die "$name's /health did not answer 200 within ${STARTUP_TIMEOUT}s"
    sleep 0.5
  done
  log "$name ready at $BASE_URL (pid $SERVER_PID)"
}

stop_server() {
  kill "$SERVER_PID" 2>/dev/null || true
  local i
  for ((i = 0; i < 100; i++)); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
}

# run_load NAME [SERVE_PY_ARGS...]: bench/serve.py against $BASE_URL into $WORK/NAME.json, and
# "wall_s machine_cpu_s server_cpu_s" over the same span into $WORK/NAME.cpu.
run_load() {
  local name=$1
  shift
  log "$name: $NUM_CLIENTS clients, $NUM_REQUESTS requests, ~$PROMPT_TOKENS prompt + $OUTPUT_TOKENS output tokens"
  local t0 m0 p0
  t0=$(now) m0=$(machine_ticks) p0=$(process_ticks "$SERVER_PID")
  "$PYTHON" "$REPO/bench/serve.py" --base-url "$BASE_URL" --model bench --json "${CHAT[@]}" \
    --num-clients "$NUM_CLIENTS" --num-requests "$NUM_REQUESTS" --prompt-tokens "$PROMPT_TOKENS" \
    --output-tokens "$OUTPUT_TOKENS" --temperature "$TEMPERATURE" --seed "$SEED" "$@" \
    >"$WORK/$name.json" || true
  echo "$(now) $t0 $(machine_ticks) $m0 $(process_ticks "$SERVER_PID") $p0" |
    awk -v hz="$CLK_TCK" '{print $1 - $2, ($3 - $4) / hz, ($5 - $6) / hz}' >"$WORK/$name.cpu"
  [[ -s $WORK/$name.json ]] || die "serve.py against $name wrote nothing"
}

if ((RUN_DITTO)); then
  log "ditto bench --scenario offline (the same requests' token counts, all submitted at once)"
  t0=$(now) m0=$(machine_ticks)
  TIMEFORMAT='%U %S'
  { time "$DITTO" bench --model "$MODEL" --scenario offline --json --threads "$THREADS" \
      --num-requests "$NUM_REQUESTS" --prompt-tokens "$PROMPT_TOKENS" \
      --output-tokens "$OUTPUT_TOKENS" --seed "$SEED" >"$WORK/offline.json" 2>"$WORK/offline.log"; } \
    2>"$WORK/offline.time" || die "ditto bench --scenario offline failed; $(tail -3 "$WORK/offline.log")"
  echo "$(now) $t0 $(machine_ticks) $m0 $(cat "$WORK/offline.time")" |
    awk -v hz="$CLK_TCK" '{print $1 - $2, ($3 - $4) / hz, $5 + $6}' >"$WORK/offline.cpu"
  # (`ditto serve --help` exits 0 with the top-level help when there is no such subcommand.)
  if "$DITTO" --help 2>/dev/null | grep -q '^ *serve '; then
    start_server ditto "$DITTO" serve "$MODEL" --port 0 --served-model-name bench --threads "$THREADS"
    run_load ditto
    stop_server
  else
    log "this ditto has no 'serve' subcommand yet: the ditto server is skipped"
  fi
fi

if ((RUN_LLAMA)); then
  "$REPO/bench/llama_cpp.sh" build
  GGUF=$("$REPO/bench/llama_cpp.sh" gguf "$MODEL")
  # Each of the -np slots gets -c / -np positions: room for the longest prompt (chat template
  # included) and the output.
  CONTEXT=$((NUM_CLIENTS * (2 * PROMPT_TOKENS + OUTPUT_TOKENS + 64)))
  start_server llama-server "$LLAMA_BIN/llama-server" -m "$GGUF" --host 127.0.0.1 --port 0 \
    -t "$THREADS" -tb "$THREADS" -np "$NUM_CLIENTS" -c "$CONTEXT" -a bench --no-webui
  # llama-server (80fb11a) aborts a stream once its text is not valid UTF-8, which a random-weight
  # model's output often is; tokens that are not complete UTF-8 on their own are biased away.
  run_load llama-server --exclude-partial-utf8-tokens "$MODEL/tokenizer.json"
  stop_server
fi

"$PYTHON" - "$WORK" "$JSON" "$MODEL" "$THREADS" "$(nproc)" <<'EOF'
import json, os, sys
work, as_json, model = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
threads, ncpu = int(sys.argv[4]), int(sys.argv[5])

def load(name):
    """A phase's JSON, with its CPU accounting: the cores its engine kept busy on average, and the
    share of all the machine's cores that other processes (not the engine, not the load
    generator) took during it."""
    path = os.path.join(work, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        r = json.load(f)
    with open(os.path.join(work, name + ".cpu")) as f:
        wall, machine, own = map(float, f.read().split())
    other = machine - own - r.get("client_cpu_s", 0.0)
    r["engine_cpu_cores"] = round(own / wall, 2)
    r["other_cpu_share"] = round(max(other, 0.0) / (wall * ncpu), 3)
    return r

def ratio(a, b):
    return round(a / b, 3) if a is not None and b else None

offline, ditto, llama = load("offline"), load("ditto"), load("llama-server")
keys = ["requests_per_s", "output_tokens_per_s", "total_tokens_per_s", "ttft_ms_p50", "ttft_ms_p99",
        "itl_ms_p50", "itl_ms_p99", "tpot_ms_p50", "tpot_ms_p99", "e2e_ms_p50", "e2e_ms_p99"]
mix_keys = ["num_clients", "num_requests", "prompt_tokens_target", "output_tokens_target",
            "temperature", "endpoint"]
mix = next((r for r in (ditto, llama) if r), {})
summary = {
    "model": model, "threads": threads, **{k: mix.get(k) for k in mix_keys},
    "ditto_serve": ditto if ditto else "pending: this build has no 'ditto serve'",
    "llama_server": llama,
    "ditto_offline": offline and {k: offline[k] for k in (
        "num_requests", "prompt_tokens", "output_tokens", "seconds", "generated_tokens_per_s",
        "total_tokens_per_s", "batch1_decode_tokens_per_s", "engine_cpu_cores", "other_cpu_share")},
    "ditto_serve_over_offline_output_tokens_per_s":
        ratio(ditto and ditto["output_tokens_per_s"], offline and offline["generated_tokens_per_s"]),
    "ditto_over_llama_server": {k: ratio(ditto[k], llama[k]) for k in keys} if ditto and llama else None,
}
with open(os.path.join(work, "summary.json"), "w") as f:  # for PLOT
    json.dump(summary, f)
if as_json:
    print(json.dumps(summary))
    sys.exit(0)

print("model %s, %d threads: %s clients, %s requests, prompt ~%s tokens, output %s tokens, "
      "temperature %s (%s)" % (model, threads, *(mix.get(k) for k in mix_keys)))
fmt = lambda v: "-" if v is None else ("%.2f" % v if isinstance(v, float) else str(v))
print("%-22s %14s %14s %14s" % ("", "ditto serve", "llama-server", "ditto ÷ llama"))
for k in (["completed", "errors", "prompt_tokens_mean", "seconds"] + keys +
          ["engine_cpu_cores", "other_cpu_share"]):
    a, b = (r.get(k) if r else None for r in (ditto, llama))
    print("%-22s %14s %14s %14s" % (k, fmt(a), fmt(b), fmt(ratio(a, b) if k in keys else None)))
if offline:
    print("ditto offline          %.2f generated tokens/s, %.2f total tokens/s in %.2f s (batch-1 "
          "decode %.2f tokens/s; engine %.2f cores, other processes %.3f of the machine)" % (
              offline["generated_tokens_per_s"], offline["total_tokens_per_s"], offline["seconds"],
              offline["batch1_decode_tokens_per_s"], offline["engine_cpu_cores"],
              offline["other_cpu_share"]))
    print("ditto serve ÷ offline  %s (output tokens/s)" %
          fmt(summary["ditto_serve_over_offline_output_tokens_per_s"]))
if not ditto:
    print("ditto serve: pending (this build has no 'serve' subcommand)")
for name, r in (("ditto serve", ditto), ("llama-server", llama), ("ditto offline", offline)):
    if r and r.get("errors"):
        print("%s: %d errors, first: %s" % (name, r["errors"], r["error_examples"][0]))
    if r and r["other_cpu_share"] > 0.05:
        print("warning: other processes took %.0f%% of the machine's CPU during %s; its numbers "
              "may be low" % (100 * r["other_cpu_share"], name))
EOF
if [[ -n ${PLOT:-} ]]; then
  "$PYTHON" bench/plot.py "$WORK/summary.json" --out "$PLOT" --measured-here || die "bench/plot.py failed"
  log "plot: $PLOT"
fi
