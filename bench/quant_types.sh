#!/usr/bin/env bash
# The GGML types of llama.cpp's usual files, both ways between ditto and llama.cpp (bench/llama_cpp.md,
# "Quantized types"), on one model directory (default: models/demo-qwen3-0.6b):
#  1. llama-quantize's own files (Q5_0, Q5_1, Q5_K_M, Q3_K_M, Q2_K, IQ4_XS, IQ4_NL, Q4_K_M) load in
#     ditto and pass `ditto check-invariance` (a short run: CHECK_ARGS);
#  2. ditto's own exports (export-gguf --outtype q5_0 ... iq4_xs, and the mixes) load in llama.cpp and
#     agree with ditto (bench/llama_cpp.sh agree on the first AGREE_PROMPTS prompts, MAX_TOKENS tokens:
#     tokenization, greedy completions, each first difference against the two engines' noise).
# Prints one summary line per file; the full outputs go to $OUT (default /tmp/ditto-quant-types).
#
#   bench/quant_types.sh [MODEL_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-models/demo-qwen3-0.6b}
out=${OUT:-/tmp/ditto-quant-types}
check_args=${CHECK_ARGS:---num-prompts 8 --max-prompt-tokens 96 --max-tokens 16}
mkdir -p "$out"
head -n "${AGREE_PROMPTS:-12}" bench/agree_prompts.jsonl >"$out/prompts.jsonl"
for type in Q5_0 Q5_1 Q5_K_M Q3_K_M Q2_K IQ4_XS IQ4_NL Q4_K_M; do
  gguf=$(bench/llama_cpp.sh quantize "$model" "$type" 2>>"$out/log")
  # shellcheck disable=SC2086
  if build/tools/ditto check-invariance --model "$gguf" $check_args >"$out/check-$type.txt" 2>&1; then
    echo "llama-quantize $type: ditto check-invariance $(tail -n 1 "$out/check-$type.txt")"
  else
    echo "llama-quantize $type: ditto check-invariance FAILED (see $out/check-$type.txt)"
  fi
done
for type in q5_0 q5_1 iq4_nl q5_k q3_k q2_k iq4_xs q4_k_m q5_k_m q3_k_m; do
  gguf=$(bench/llama_cpp.sh quantize "$model" "$type" 2>>"$out/log")
  PROMPTS=$out/prompts.jsonl MAX_TOKENS=${MAX_TOKENS:-16} bench/llama_cpp.sh agree "$gguf" \
    >"$out/agree-$type.json" 2>"$out/agree-$type.txt" || { echo "ditto $type: llama.cpp agree FAILED"; continue; }
  echo "ditto export $type in llama.cpp: $(grep -E 'tokenization|completions identical|gap at' "$out/agree-$type.txt" |
    sed 's/^ *//' | tr '\n' ';')"
done
