#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, AddressSanitizer + UndefinedBehaviorSanitizer, tests/fuzz/)
# in their own build folder and runs each for FUZZ_SECONDS from its committed seed corpus
# (tests/fuzz/corpus/<target>/, read only) plus a working corpus in the build folder, which keeps
# what the fuzzer discovers between runs. Fails on the first crash, leak, timeout, out-of-memory or
# sanitizer report; the input that caused it is written to $FUZZ_BUILD_DIR/findings/<target>/.
#
# Usage: scripts/fuzz.sh [--list] [target...]   (default: every target)
# Environment: FUZZ_SECONDS (60 per target), FUZZ_RUNS (instead: this many executions per target),
#              FUZZ_BUILD_DIR (build-fuzz), FUZZ_JOBS (build jobs),
#              FUZZ_TIMEOUT (seconds one input may take, 30), FUZZ_RSS_MB (memory per process, 4096),
#              FUZZ_KEEP_CONFIG (1: use FUZZ_BUILD_DIR as it is configured).
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=$(sed -n 's/^set(DITTO_FUZZ_TARGETS \(.*\))$/\1/p' tests/fuzz/CMakeLists.txt)
if [[ "${1:-}" == "--list" ]]; then
  tr ' ' '\n' <<<"$TARGETS"
  exit 0
fi
SECONDS_EACH=${FUZZ_SECONDS:-60}
LIMIT=(-max_total_time="$SECONDS_EACH")
[[ -n "${FUZZ_RUNS:-}" ]] && LIMIT=(-runs="$FUZZ_RUNS")
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
SELECTED=${*:-$TARGETS}
for t in $SELECTED; do
  grep -qw -- "$t" <<<"$TARGETS" || { echo "fuzz.sh: unknown target '$t' (targets: $TARGETS)" >&2; exit 2; }
done

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (scripts/install-deps.sh installs it)" >&2; exit 2; }
# FUZZ_KEEP_CONFIG=1: the build folder is configured already (scripts/ci-sanitize.sh builds the
# tests in it too); otherwise the fuzz targets alone.
if [[ "${FUZZ_KEEP_CONFIG:-0}" != 1 ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DDITTO_FUZZ=ON -DDITTO_TESTS=OFF \
    -DDITTO_WERROR=ON >/dev/null
fi
cmake --build "$BUILD" -j "${FUZZ_JOBS:-$(nproc)}" --target $(printf 'fuzz_%s ' $SELECTED) -- --no-print-directory

# Leaks are findings; an ASan or UBSan report ends the run (halt_on_error; UBSan is built
# with -fno-sanitize-recover).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
printf '%-20s %12s %10s %8s  %s\n' target executions "exec/s" corpus result
for t in $SELECTED; do
  work="$BUILD/corpus/$t"
  findings="$BUILD/findings/$t"
  log="$BUILD/fuzz-$t.log"
  mkdir -p "$work" "$findings"
  status=ok
  "$BUILD/tests/fuzz/fuzz_$t" "$work" "tests/fuzz/corpus/$t" "${LIMIT[@]}" \
    -timeout="${FUZZ_TIMEOUT:-30}" -rss_limit_mb="${FUZZ_RSS_MB:-4096}" -print_final_stats=1 \
    -artifact_prefix="$findings/" >"$log" 2>&1 || status=FAILED
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  units=$(find "$work" -type f | wc -l)
  printf '%-20s %12s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$units" "$status"
  if [[ $status != ok ]]; then
    echo "--- $log (last 60 lines) ---" >&2
    tail -60 "$log" >&2
    echo "fuzz.sh: $t failed; the input is in $findings/" >&2
    exit 1
  fi
done
