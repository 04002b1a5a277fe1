#!/usr/bin/env bash
# llama.cpp beside ditto: builds llama.cpp from the source bundled in the npm package
# node-llama-cpp@3.21.1, writes a ditto model directory as GGUF with `ditto export-gguf`, then
# benchmarks it with llama-bench or checks the GGUF against ditto (see bench/llama_cpp.md).
#
#   bench/llama_cpp.sh build               fetch and build llama.cpp only
#   bench/llama_cpp.sh bench MODEL_DIR     llama-bench -p 512 -n 128: prefill/decode tokens/s as JSON
#                                          (-p PREFILL_TOKENS -n DECODE_TOKENS when set; 0: that phase skipped)
#   bench/llama_cpp.sh validate MODEL_DIR  next-token log-probabilities and tokenization vs ditto
#   bench/llama_cpp.sh compare MODEL_DIR   ditto bench, llama-bench, ditto bench again: ditto ÷ llama.cpp
#                                          (MODEL_DIR may be a GGUF file: both engines run that file)
#   bench/llama_cpp.sh quantize MODEL_DIR TYPE  the model as a quantized GGUF (cached), its path on stdout:
#                                          q8_0/q4_0/q4_1/q4_k/q6_k by ditto export-gguf --outtype,
#                                          llama-quantize's types (Q4_K_M, Q8_0, ...) from the exported GGUF
#   bench/llama_cpp.sh batched MODEL_DIR   ditto bench --scenario offline, llama-batched-bench, ditto again
#   bench/llama_cpp.sh gguf MODEL_DIR      ditto export-gguf (cached, ditto not rebuilt); prints the path
#   bench/llama_cpp.sh agree FILE.gguf     tokenization and greedy completions of both engines on one GGUF
#   bench/llama_cpp.sh tokens FILE.gguf    tests/tokenizer's corpus (6,000 texts) tokenized by both engines
#
# Environment: DITTO_BENCH_CACHE (llama.cpp source, build and GGUF files; default
# ~/.cache/ditto-bench), BUILD_DIR (ditto's build, default build), THREADS (llama-bench -t,
# default 2), REPETITIONS (llama-bench -r, default 5), JOBS (compile jobs, default 2); for bench and
# compare: PREFILL_TOKENS (default 512; e.g. 8192, or 32768 for a long prompt's time to first token)
# and DECODE_TOKENS (default 128; 0 skips decode); for batched:
# NUM_SEQS (default 32), PROMPT_TOKENS (per sequence, default 256), OUTPUT_TOKENS (default 128);
# for agree: PROMPTS (default bench/agree_prompts.jsonl), MAX_TOKENS (default 32), REFERENCE=1
# (also ask the float64 reference, tests/reference, at each divergence: minutes more); for compare
# and batched: PLOT=FILE.svg (also draw the JSON with bench/plot.py: ditto beside llama.cpp, the
# ratio and the CPU; relative paths from the repo's root, like MODEL_DIR).
# Every step is skipped when its output is already there; nothing is written inside the repo
# except ditto's own build.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

NODE_LLAMA_CPP_VERSION=3.21.1
CACHE=${DITTO_BENCH_CACHE:-$HOME/.cache/ditto-bench}
BUILD_DIR=${BUILD_DIR:-build}
THREADS=${THREADS:-2}
REPETITIONS=${REPETITIONS:-5}
JOBS=${JOBS:-2}
PYTHON=/usr/bin/python3  # has numpy (validate)

LLAMA=$CACHE/llama.cpp-node-llama-cpp-$NODE_LLAMA_CPP_VERSION
LLAMA_SRC=$LLAMA/src
LLAMA_BUILD=$LLAMA/build
LLAMA_BIN=$LLAMA_BUILD/bin
PROBE=$LLAMA_BIN/llama_cpp_probe

log() { echo "llama_cpp.sh: $*" >&2; }
die() { echo "error: llama_cpp.sh: $*" >&2; exit 1; }
usage() { sed -n '6,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# The llama.cpp source: node-llama-cpp's tarball (npm pack: no install scripts run) holds
# llama/gitRelease.bundle, a git bundle of the llama.cpp release it was built against.
fetch_llama_cpp() {
  if [[ -f $LLAMA_SRC/CMakeLists.txt ]]; then return; fi
  command -v npm >/dev/null || die "npm is needed to fetch node-llama-cpp (apt-get install npm)"
  command -v git >/dev/null || die "git is needed to clone llama.cpp's bundle"
  local npm_dir=$LLAMA/npm
  mkdir -p "$npm_dir"
  local tgz=$npm_dir/node-llama-cpp-$NODE_LLAMA_CPP_VERSION.tgz
  if [[ ! -f $tgz ]]; then
    log "fetching node-llama-cpp@$NODE_LLAMA_CPP_VERSION (npm pack) into $npm_dir"
    (cd "$npm_dir" && npm pack --silent "node-llama-cpp@$NODE_LLAMA_CPP_VERSION" >/dev/null) ||
      die "npm pack node-llama-cpp@$NODE_LLAMA_CPP_VERSION failed (network? npm registry?)"
  fi
  tar -xzf "$tgz" -C "$npm_dir" package/llama/gitRelease.bundle ||
    die "$tgz has no package/llama/gitRelease.bundle"
  log "cloning llama.cpp from the bundle into $LLAMA_SRC"
  rm -rf "$LLAMA_SRC.partial"
  git clone --quiet "$npm_dir/package/llama/gitRelease.bundle" "$LLAMA_SRC.partial" 2>/dev/null ||
    die "git clone of $npm_dir/package/llama/gitRelease.bundle failed"
  mv "$LLAMA_SRC.partial" "$LLAMA_SRC"
}

build_llama_cpp() {
  fetch_llama_cpp
  if [[ -x $LLAMA_BIN/llama-bench && -x $LLAMA_BIN/llama-server ]]; then
    log "llama.cpp already built in $LLAMA_BIN"
  else
    command -v cmake >/dev/null || die "cmake is needed to build llama.cpp"
    log "configuring llama.cpp (Release, GGML_NATIVE=ON) in $LLAMA_BUILD"
    cmake -S "$LLAMA_SRC" -B "$LLAMA_BUILD" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
      -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
      >"$LLAMA/configure.log" 2>&1 || die "cmake configure failed; see $LLAMA/configure.log"
    log "building llama-bench, llama-server, llama-tokenize with -j$JOBS (about 6-9 minutes on 2 cores)"
    cmake --build "$LLAMA_BUILD" -j"$JOBS" --target llama-bench llama-server llama-tokenize \
      >"$LLAMA/build.log" 2>&1 || die "llama.cpp build failed; see $LLAMA/build.log"
  fi
  # Added for `batched` after the build above existed: an incremental build on top of it.
  if [[ ! -x $LLAMA_BIN/llama-batched-bench ]]; then
    log "building llama-batched-bench with -j$JOBS"
    cmake --build "$LLAMA_BUILD" -j"$JOBS" --target llama-batched-bench \
      >>"$LLAMA/build.log" 2>&1 || die "llama-batched-bench build failed; see $LLAMA/build.log"
  fi
  if [[ ! -x $LLAMA_BIN/llama-quantize ]]; then
    log "building llama-quantize with -j$JOBS"
    cmake --build "$LLAMA_BUILD" -j"$JOBS" --target llama-quantize \
      >>"$LLAMA/build.log" 2>&1 || die "llama-quantize build failed; see $LLAMA/build.log"
  fi
  # The probe (libllama's C API) is ours: rebuilt when its source is newer.
  if [[ ! -x $PROBE || $REPO/bench/llama_cpp_probe.cc -nt $PROBE ]]; then
    log "building $PROBE"
    g++ -std=c++17 -O2 "$REPO/bench/llama_cpp_probe.cc" -I"$LLAMA_SRC/include" \
      -I"$LLAMA_SRC/ggml/include" -L"$LLAMA_BIN" -lllama -lggml -lggml-base \
      -Wl,-rpath,"$LLAMA_BIN" -o "$PROBE" || die "building the probe failed"
  fi
}

build_ditto() {
  if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  cmake --build "$BUILD_DIR" -j"$JOBS" --target ditto >/dev/null || die "building ditto failed"
  DITTO=$REPO/$BUILD_DIR/tools/ditto
}

# Writes $GGUF for model directory $1, unless a GGUF newer than every file of it exists.
export_gguf() {
  local model=$1
  if [[ -f $model && $model == *.gguf ]]; then GGUF=$model; return; fi  # a GGUF file runs as it is
  [[ -f $model/config.json ]] || die "$model is not a model directory (no config.json)"
  local abs; abs=$(cd "$model" && pwd)
  mkdir -p "$CACHE/gguf"
  GGUF=$CACHE/gguf/$(basename "$abs")-$(printf %s "$abs" | sha1sum | cut -c1-8).gguf
  if [[ -f $GGUF && -z $(find "$abs" -newer "$GGUF" -type f -print -quit) ]]; then
    log "using $GGUF (newer than $abs)"
    return
  fi
  log "exporting $abs to $GGUF"
  "$DITTO" export-gguf --model "$abs" --output "$GGUF" >&2
}

# Writes $GGUF: model directory $1 quantized as $2 — ditto's round-to-nearest types (lower case:
# q8_0, q4_0, q4_1, q4_k, q6_k) by export-gguf --outtype, llama-quantize's (upper case: Q4_K_M,
# Q8_0, ...) from the model's GGUF, as people make the files they download. Cached like export_gguf.
quantize_gguf() {
  local model=$1 type=$2
  [[ -f $model/config.json ]] || die "$model is not a model directory (no config.json)"
  local abs; abs=$(cd "$model" && pwd)
  local out=$CACHE/gguf/$(basename "$abs")-$(printf %s "$abs" | sha1sum | cut -c1-8)-$type.gguf
  mkdir -p "$CACHE/gguf"
  if [[ -f $out && -z $(find "$abs" -newer "$out" -type f -print -quit) ]]; then
    log "using $out (newer than $abs)"
  elif [[ $type == "${type,,}" ]]; then
    log "exporting $abs to $out (--outtype $type)"
    "$DITTO" export-gguf --model "$abs" --output "$out" --outtype "$type" >&2
  else
    export_gguf "$model"
    log "llama-quantize $GGUF -> $out ($type)"
    "$LLAMA_BIN/llama-quantize" "$GGUF" "$out" "$type" "$THREADS" >"$LLAMA/llama-quantize.log" 2>&1 ||
      die "llama-quantize failed; see $LLAMA/llama-quantize.log"
  fi
  GGUF=$out
}

# PLOT=FILE.svg: the JSON just printed ($1) drawn by bench/plot.py.
plot() {
  [[ -n ${PLOT:-} ]] || return 0
  printf '%s\n' "$1" | "$PYTHON" bench/plot.py - --out "$PLOT" --measured-here || die "bench/plot.py failed"
  log "plot: $PLOT"
}

is_moe() {
  "$PYTHON" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get("num_experts", 0) else 1)' \
    "$1/config.json"
}

cmd_bench() {
  local model=$1
  build_llama_cpp
  build_ditto
  export_gguf "$model"
  local p=${PREFILL_TOKENS:-512} n=${DECODE_TOKENS:-128} warmup=()
  # A long prompt's warm-up would be one more full prompt: WARMUP=0 skips it.
  [[ ${WARMUP:-1} == 0 ]] && warmup=(--no-warmup)
  log "llama-bench -p $p -n $n -t $THREADS -r $REPETITIONS ${warmup[*]} (minutes for a 0.6B model on 2 cores)"
  local out; out=$("$LLAMA_BIN/llama-bench" -m "$GGUF" -p "$p" -n "$n" -t "$THREADS" \
    -r "$REPETITIONS" "${warmup[@]}" -o json 2>"$LLAMA/llama-bench.log") ||
    die "llama-bench failed; see $LLAMA/llama-bench.log"
  local commit; commit=$(git -C "$LLAMA_SRC" rev-parse --short HEAD)
  LLAMA_BENCH_JSON=$out "$PYTHON" - "$model" "$GGUF" "$THREADS" "$commit" <<'EOF'
import json, os, statistics, sys
model, gguf, threads, commit = sys.argv[1:]
runs = json.loads(os.environ["LLAMA_BENCH_JSON"])
prefill = next((r for r in runs if r["n_prompt"] > 0 and r["n_gen"] == 0), None)
decode = next((r for r in runs if r["n_gen"] > 0 and r["n_prompt"] == 0), None)
first = prefill or decode
# The median beside llama-bench's mean: on a shared machine one slow repetition moves the mean.
result = {
    "model": model, "gguf": gguf, "engine": "llama.cpp (node-llama-cpp 3.21.1, " + commit + ")",
    "cpu": first.get("cpu_info"), "threads": int(threads), "type": first.get("model_type"),
    "repetitions": len(first["samples_ts"]),
}
if prefill:
    result.update({
        "prefill_tokens": prefill["n_prompt"], "prefill_tokens_per_s": round(prefill["avg_ts"], 2),
        "prefill_median": round(statistics.median(prefill["samples_ts"]), 2),
        "prefill_stddev": round(prefill["stddev_ts"], 2),
        # A prompt's time to first token: llama-bench times the prompt's evaluation alone.
        "prefill_seconds_median": round(prefill["n_prompt"] / statistics.median(prefill["samples_ts"]), 2),
    })
if decode:
    result.update({
        "decode_tokens": decode["n_gen"], "decode_tokens_per_s": round(decode["avg_ts"], 2),
        "decode_median": round(statistics.median(decode["samples_ts"]), 2),
        "decode_stddev": round(decode["stddev_ts"], 2),
    })
print(json.dumps(result))
EOF
}

# ditto ÷ llama.cpp, measured in one run on the same weights and thread count. ditto runs before
# and after llama-bench so a change in the machine's load shows up as a gap between its two runs.
cmd_compare() {
  local model=$1
  build_llama_cpp
  build_ditto
  local d1 d2 l
  local args=(bench --model "$model" --threads "$THREADS" --json --prompt-tokens "${PREFILL_TOKENS:-512}"
              --decode-tokens "${DECODE_TOKENS:-128}")
  log "ditto ${args[*]} (1/2)"
  d1=$("$REPO/$BUILD_DIR/tools/ditto" "${args[@]}")
  l=$(cmd_bench "$model")
  log "ditto bench (2/2)"
  d2=$("$REPO/$BUILD_DIR/tools/ditto" "${args[@]}")
  local result
  result=$(DITTO1=$d1 DITTO2=$d2 LLAMA=$l "$PYTHON" - <<'EOF'
import json, os
d = [json.loads(os.environ["DITTO1"]), json.loads(os.environ["DITTO2"])]
l = json.loads(os.environ["LLAMA"])
def mean(key):
    return sum(r[key] for r in d) / len(d)
prefill = mean("prefill_tokens_per_s_median")
result = {
    "model": d[0]["model"], "threads": d[0]["threads"], "isa": d[0]["isa"],
    "prompt_tokens": d[0]["prompt_tokens"],
    "read_bandwidth_gbps": [round(r["read_bandwidth_gbps"], 1) for r in d],
    "fma_gflops": [round(r["fma_gflops"], 1) for r in d],
    "bf16_dot_gflops": [round(r["bf16_dot_gflops"], 1) for r in d],
    "ditto_prefill_tokens_per_s": [round(r["prefill_tokens_per_s_median"], 1) for r in d],
    "ditto_prefill_bf16_dot_peak_ratio": [round(r["prefill_bf16_dot_peak_ratio"], 3) for r in d],
    "llama_cpp_prefill_tokens_per_s": l["prefill_median"],
    "prefill_ratio": round(prefill / l["prefill_median"], 3),
    # The prompt's time to first token, ditto ÷ llama.cpp (medians; ditto's two runs averaged).
    "time_to_first_token_ratio": round(mean("prefill_seconds_median") / l["prefill_seconds_median"], 3),
}
if "decode_median" not in l:
    print(json.dumps(result))
    raise SystemExit
decode = mean("decode_tokens_per_s_median")
result.update({
    # Bytes one batch-1 decode step must read (MoE: router and the top-k experts only); the
    # roofline is bandwidth ÷ these, for either engine (llama.cpp reads the same weights, its
    # F32 router aside).
    "decode_weight_bytes": d[0]["decode_weight_bytes"],
    "decode_roofline_tokens_per_s": [round(r["decode_roofline_tokens_per_s"], 2) for r in d],
    "ditto_decode_tokens_per_s": [round(r["decode_tokens_per_s_median"], 2) for r in d],
    "ditto_decode_roofline_ratio": [round(r["decode_roofline_ratio"], 3) for r in d],
    "llama_cpp_decode_tokens_per_s": l["decode_median"],
    # Against each ditto run's roofline: the bandwidth llama-bench saw is not measured.
    "llama_cpp_decode_roofline_ratio": [round(l["decode_median"] / r["decode_roofline_tokens_per_s"], 3)
                                        for r in d],
    "decode_ratio": round(decode / l["decode_median"], 3),
})
print(json.dumps(result))
EOF
  )
  echo "$result"
  plot "$result"
}

# Batched throughput: NUM_SEQS sequences of PROMPT_TOKENS random prompt tokens, each generating
# OUTPUT_TOKENS, through ditto's batching engine (bench --scenario offline: all submitted at once,
# continuous batching, at most 2048 tokens a step) and llama-batched-bench (-npl NUM_SEQS: the
# prompts prefilled in batches of 2048, then all sequences decoded together); ditto before and
# after llama.cpp. Both time the whole run, prefill included: generated tokens ÷ seconds and all
# tokens ÷ seconds.
cmd_batched() {
  local model=$1
  local seqs=${NUM_SEQS:-32} prompt=${PROMPT_TOKENS:-256} output=${OUTPUT_TOKENS:-128}
  build_llama_cpp
  build_ditto
  export_gguf "$model"
  local ditto_args=(bench --model "$model" --threads "$THREADS" --json --scenario offline
                    --num-requests "$seqs" --prompt-tokens "$prompt" --output-tokens "$output")
  local d1 d2 l
  log "ditto bench --scenario offline, $seqs x ($prompt + $output) tokens (1/2)"
  d1=$("$DITTO" "${ditto_args[@]}")
  log "llama-batched-bench -npp $prompt -ntg $output -npl $seqs -t $THREADS"
  l=$("$LLAMA_BIN/llama-batched-bench" -m "$GGUF" -c $((seqs * (prompt + output))) -b 2048 \
    -npp "$prompt" -ntg "$output" -npl "$seqs" -t "$THREADS" -tb "$THREADS" --output-format jsonl \
    2>"$LLAMA/llama-batched-bench.log" | grep '^{') ||
    die "llama-batched-bench failed; see $LLAMA/llama-batched-bench.log"
  log "ditto bench --scenario offline (2/2)"
  d2=$("$DITTO" "${ditto_args[@]}")
  local commit; commit=$(git -C "$LLAMA_SRC" rev-parse --short HEAD)
  local result
  result=$(DITTO1=$d1 DITTO2=$d2 LLAMA_JSON=$l "$PYTHON" - "$commit" <<'EOF'
import json, os, sys
d = [json.loads(os.environ["DITTO1"]), json.loads(os.environ["DITTO2"])]
l = json.loads(os.environ["LLAMA_JSON"])
llama_generated = l["pl"] * l["tg"] / l["t"]
def mean(key):
    return sum(r[key] for r in d) / len(d)
print(json.dumps({
    "model": d[0]["model"], "threads": d[0]["threads"], "isa": d[0]["isa"],
    "engine": "llama.cpp (node-llama-cpp 3.21.1, " + sys.argv[1] + ")",
    "num_seqs": d[0]["num_requests"], "prompt_tokens": d[0]["prompt_tokens"],
    "output_tokens": d[0]["output_tokens"],
    "ditto_seconds": [round(r["seconds"], 2) for r in d],
    "ditto_generated_tokens_per_s": [round(r["generated_tokens_per_s"], 2) for r in d],
    "ditto_total_tokens_per_s": [round(r["total_tokens_per_s"], 2) for r in d],
    "ditto_batch1_decode_tokens_per_s": [round(r["batch1_decode_tokens_per_s"], 2) for r in d],
    "ditto_throughput_ratio_to_batch1_decode": [round(r["throughput_ratio_to_batch1_decode"], 2) for r in d],
    "ditto_preemptions": [r["preemptions"] for r in d],
    "llama_cpp_seconds": round(l["t"], 2),
    "llama_cpp_prefill_tokens_per_s": round(l["speed_pp"], 2),
    "llama_cpp_decode_tokens_per_s": round(l["speed_tg"], 2),  # its decode phase alone
    "llama_cpp_generated_tokens_per_s": round(llama_generated, 2),
    "llama_cpp_total_tokens_per_s": round(l["speed"], 2),
    "generated_ratio": round(mean("generated_tokens_per_s") / llama_generated, 3),
    "total_ratio": round(mean("total_tokens_per_s") / l["speed"], 3),
}))
EOF
  )
  echo "$result"
  plot "$result"
}

cmd_validate() {
  local model=$1
  build_llama_cpp
  build_ditto
  export_gguf "$model"
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  local work=$WORK
  # Logprobs: the same ids through both engines; ids from ditto's tokenizer on a fixed text.
  local text='The capital of France is Paris. It is known for the Eiffel Tower, museums such as the Louvre, and its cafés; 2 + 2 = 4.'
  local ids
  ids=$("$PYTHON" -c 'import json,sys; print(json.dumps({"text": sys.argv[1]}))' "$text" |
    "$DITTO" tokenize --model "$model" --input - |
    "$PYTHON" -c 'import json,sys; print(",".join(map(str, json.load(sys.stdin)["ids"])))')
  log "scoring $(tr ',' '\n' <<<"$ids" | wc -l) tokens with ditto and llama.cpp"
  "$DITTO" score --model "$model" --token-ids "$ids" --json --logprobs-out "$work/ditto.f32" >/dev/null
  local routing=()
  if is_moe "$model"; then
    # Routing near-ties flip experts in either engine: find them against the float64 reference.
    "$PROBE" score "$GGUF" "$ids" "$work/llama.f32" "$work/llama_routing.jsonl" >/dev/null
    log "MoE: routing of both engines against the float64 reference (tests/reference; a minute or two)"
    "$PYTHON" bench/moe_routing.py --model "$model" --ids "$ids" --ditto-rows "$work/ditto.f32" \
      --llama-rows "$work/llama.f32" --llama-routing "$work/llama_routing.jsonl" >"$work/routing.json"
    routing=(--moe-routing "$work/routing.json")
  else
    "$PROBE" score "$GGUF" "$ids" "$work/llama.f32" >/dev/null
  fi
  # Tokenization: ditto's tokenizer parity corpus through both.
  cat tests/tokenizer/corpus/*.jsonl >"$work/corpus.jsonl"
  "$DITTO" tokenize --model "$model" --input "$work/corpus.jsonl" >"$work/ditto.ids"
  "$PROBE" tokenize "$GGUF" <"$work/corpus.jsonl" >"$work/llama.ids"
  "$PYTHON" bench/llama_cpp_compare.py --model "$model" --gguf "$GGUF" \
    --ditto-rows "$work/ditto.f32" --llama-rows "$work/llama.f32" \
    --corpus "$work/corpus.jsonl" --ditto-ids "$work/ditto.ids" --llama-ids "$work/llama.ids" \
    ${routing[@]+"${routing[@]}"}
}

# Do ditto and llama.cpp agree on one GGUF file (tokenization, greedy completions and chat, where
# they part the logit gap in both)? JSON on stdout, a summary on stderr; bench/llama_cpp_agree.py.
# ditto's build is used as it is.
cmd_agree() {
  local gguf=$1
  [[ $gguf == /* || -f $gguf ]] || gguf=$OLDPWD/$gguf  # relative to where the script was called
  [[ -f $gguf ]] || die "$1: no such file"
  DITTO=$REPO/$BUILD_DIR/tools/ditto
  [[ -x $DITTO ]] || die "$DITTO not found; build ditto first (cmake --build $BUILD_DIR --target ditto)"
  build_llama_cpp
  local commit; commit=$(git -C "$LLAMA_SRC" rev-parse --short HEAD)
  local reference=()
  if [[ ${REFERENCE:-0} == 1 ]]; then reference=(--reference "$REPO/tests/reference"); fi
  "$PYTHON" bench/llama_cpp_agree.py --gguf "$gguf" --ditto "$DITTO" --probe "$PROBE" \
    --prompts "${PROMPTS:-bench/agree_prompts.jsonl}" --max-tokens "${MAX_TOKENS:-32}" --threads "$THREADS" \
    --engine "llama.cpp (node-llama-cpp $NODE_LLAMA_CPP_VERSION, $commit)" ${reference[@]+"${reference[@]}"}
}

case ${1:-} in
  build) [[ $# -eq 1 ]] || usage; build_llama_cpp; log "binaries in $LLAMA_BIN" ;;
  bench) [[ $# -eq 2 ]] || usage; cmd_bench "$2" ;;
  validate) [[ $# -eq 2 ]] || usage; cmd_validate "$2" ;;
  compare) [[ $# -eq 2 ]] || usage; cmd_compare "$2" ;;
  quantize)
    [[ $# -eq 3 ]] || usage
    build_llama_cpp
    build_ditto
    quantize_gguf "$2" "$3"
    echo "$GGUF" ;;
  batched) [[ $# -eq 2 ]] || usage; cmd_batched "$2" ;;
  agree) [[ $# -eq 2 ]] || usage; cmd_agree "$2" ;;
  tokens)
    [[ $# -eq 2 ]] || usage
    DITTO=$REPO/$BUILD_DIR/tools/ditto
    [[ -x $DITTO ]] || die "$DITTO not found; build ditto first (cmake --build $BUILD_DIR --target ditto)"
    build_llama_cpp
    "$PYTHON" bench/llama_cpp_tokens.py --gguf "$2" --ditto "$DITTO" --probe "$PROBE" ;;
  # For bench/serve.sh, which uses ditto's build as it is rather than rebuilding it.
  gguf)
    [[ $# -eq 2 ]] || usage
    DITTO=$REPO/$BUILD_DIR/tools/ditto
    [[ -x $DITTO ]] || die "$DITTO not found; build ditto first (cmake --build $BUILD_DIR --target ditto)"
    export_gguf "$2"
    echo "$GGUF" ;;
  *) usage ;;
esac
