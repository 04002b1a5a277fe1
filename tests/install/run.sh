#!/usr/bin/env bash
# Installs ditto from the build tree into a fresh prefix, builds tests/install/ (an outside
# project: find_package(ditto) + ditto::ditto) against it, and runs it on a generated model twice:
# it must generate, and the same seed must give the same text.
# Usage: run.sh BUILD_DIR DITTO_BIN
set -euo pipefail
build="$1"
ditto="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/ditto_install_test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$here" -B "$work/app" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app" >/dev/null
"$ditto" make-test-model --preset qwen3-0.6b --num-hidden-layers 1 --seed 3 --out "$work/model" >/dev/null
first="$("$work/app/app" "$work/model")"
second="$("$work/app/app" "$work/model")"
echo "$first"
grep -q "^8 tokens: " <<<"$first" || { echo "expected 8 generated tokens, got: $first" >&2; exit 1; }
[ "$first" = "$second" ] || { echo "the same seed gave different outputs" >&2; exit 1; }
# Only the public headers are installed.
[ -f "$work/prefix/include/ditto/llm.h" ] && [ ! -e "$work/prefix/include/engine" ] || { echo "bad header install" >&2; exit 1; }
