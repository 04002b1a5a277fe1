#!/usr/bin/env bash
# Installs ditto from the build tree into a fresh prefix, builds the README's C++ program (its
# ```cpp block, as printed) as an outside project would (find_package(ditto) + ditto::ditto), and
# runs it twice on a generated model placed in a temporary Hugging Face cache under the id the
# program names (Qwen/Qwen3-8B): it must generate, and its seed must give the same text.
# Usage: run.sh BUILD_DIR DITTO_BIN
set -euo pipefail
build="$1"
ditto="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readme="$here/../../README.md"
work="$(mktemp -d "${TMPDIR:-/tmp}/ditto_install_test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
mkdir -p "$work/src"
cp "$here/CMakeLists.txt" "$work/src/"
awk '/^```cpp$/ {on = 1; next} on && /^```$/ {exit} on {print}' "$readme" >"$work/src/main.cc"
grep -q "int main" "$work/src/main.cc" || { echo "no C++ program found in $readme" >&2; exit 1; }
cmake -S "$work/src" -B "$work/app" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app" >/dev/null
# A one-layer qwen3-0.6b stands in for the program's Qwen/Qwen3-8B (the id is all it names).
snapshot="$work/hf/hub/models--Qwen--Qwen3-8B/snapshots/0000000000000000000000000000000000000000"
"$ditto" make-test-model --preset qwen3-0.6b --num-hidden-layers 1 --seed 3 --out "$snapshot" >/dev/null
export HF_HOME="$work/hf"
unset HF_HUB_CACHE
first="$("$work/app/app")"
second="$("$work/app/app")"
echo "$first"
[ -n "$first" ] || { echo "the program printed nothing" >&2; exit 1; }
[ "$first" = "$second" ] || { echo "the same seed gave different outputs" >&2; exit 1; }
# Only the public headers are installed.
[ -f "$work/prefix/include/ditto/llm.h" ] && [ ! -e "$work/prefix/include/engine" ] || { echo "bad header install" >&2; exit 1; }
