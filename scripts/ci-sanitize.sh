#!/usr/bin/env bash
# CI's sanitizer pass (.ci/run, issue 17). One clang build with AddressSanitizer +
# UndefinedBehaviorSanitizer (+ LeakSanitizer), the flags of the fuzz build, serves both halves:
#   1. the C++ tests under the sanitizers: every GoogleTest case (each ISA path this machine has),
#      the generated-model check and `ditto serve`'s limits test (the server binary built with them);
#      a memory error, a leak or undefined behaviour fails the test that met it;
#   2. a short fuzz pass: each libFuzzer target for FUZZ_SECONDS (10) from its committed corpus
#      (scripts/fuzz.sh), failing on any crash, leak, timeout or sanitizer report.
# The long end-to-end suites stay in `make test` (and `make test-sanitize` runs all of them under
# GCC's ASan + UBSan); here they would double CI's time.
# Usage: scripts/ci-sanitize.sh        Environment: CI_SANITIZE_BUILD_DIR (build-ci-sanitize),
#        FUZZ_SECONDS (10), SANITIZE_JOBS (parallel builds and tests, default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${CI_SANITIZE_BUILD_DIR:-build-ci-sanitize}
jobs=${SANITIZE_JOBS:-$(nproc)}

command -v clang++ >/dev/null || { echo "ci-sanitize.sh: clang++ not found (scripts/install-deps.sh installs it)" >&2; exit 2; }
start=$(date +%s)
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDITTO_FUZZ=ON -DDITTO_TESTS=ON \
  -DDITTO_WERROR=ON >/dev/null
cmake --build "$build" -j "$jobs" -- --no-print-directory
built=$(date +%s)

export DITTO_SANITIZER=address
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=1:detect_odr_violation=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0"
# The GoogleTest cases are named Suite.Case[/isa]; the CTest tests without a dot are end-to-end
# scripts, of which these run here.
(cd "$build" && ctest --output-on-failure -j "$jobs" -R '\.|^make_test_model_cli|^server_limits$')
tested=$(date +%s)

FUZZ_SECONDS=${FUZZ_SECONDS:-10} FUZZ_BUILD_DIR="$build" FUZZ_KEEP_CONFIG=1 scripts/fuzz.sh
echo "ci-sanitize.sh: build $((built - start)) s, tests $((tested - built)) s, fuzz $(($(date +%s) - tested)) s"
