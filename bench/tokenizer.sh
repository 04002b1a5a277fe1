#!/usr/bin/env bash
# Tokenizer encode throughput: ditto vs the JavaScript tokenizer (@lenml/tokenizers), same run,
# same inputs (the parity corpus and ~10 MB of mixed text), single thread, printed as a ratio.
#   bench/tokenizer.sh [--repeat N] [--models qwen3,llama3_1] [--mixed-mb 10]
# Environment: BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$BUILD_DIR" -j "$(nproc)" --target tokenizer_bench >/dev/null
exec /usr/bin/python3 bench/tokenizer.py --build-dir "$BUILD_DIR" "$@"
