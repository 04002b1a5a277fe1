#!/usr/bin/env bash
# `make test-sanitize`: the test suite under sanitizers, each in its own build folder.
#   address: AddressSanitizer + UndefinedBehaviorSanitizer (GCC), build-asan/: every unit and
#            end-to-end test (ctest), the ditto binary the Python suites start included; a memory
#            error, a leak or any undefined behaviour fails the test that met it.
#   thread:  ThreadSanitizer, build-tsan/: the thread pool, scheduler, engine and server tests (the
#            server's load test drives `ditto serve` built with TSan); a data race fails.
# Usage: scripts/test-sanitize.sh [address|thread|all]   (default all)
# Environment: SANITIZE_JOBS (parallel builds and tests, default nproc), CTEST_ARGS (extra ctest
#              arguments, e.g. "-R Tokenizer").
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
which=${1:-all}
jobs=${SANITIZE_JOBS:-$(nproc)}
read -r -a extra <<<"${CTEST_ARGS:-}"

# Tests that bound the RSS skip that bound when DITTO_SANITIZER is set: the shadow memory and
# quarantine of a sanitizer are in it. (The bits are still compared.)
# halt_on_error: the first report ends the process with an error, so the test fails.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=1:detect_odr_violation=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/sanitizers/tsan.supp"

# The tests that start ditto under mpirun (tensor parallelism).
MPI_TESTS='^(pytest_e2e_test_tensor_parallel|server_load_invariance_tp2)$'

configure() {  # folder, sanitizer
  cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=Release -DDITTO_SANITIZE="$2" -DDITTO_WERROR=ON >/dev/null
}

run_address() {
  export DITTO_SANITIZER=address
  configure build-asan address
  cmake --build build-asan -j "$jobs" -- --no-print-directory
  (cd build-asan && ctest --output-on-failure -j "$jobs" -E "$MPI_TESTS" "${extra[@]}")
  # The tests under mpirun: Open MPI unloads its components at MPI_Finalize, so what its threads
  # allocated there and keep has no module name left; a full unwind of each allocation reaches the
  # library frames the suppressions name (slower, so only here).
  (cd build-asan && ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0" \
    ctest --output-on-failure -j "$jobs" -R "$MPI_TESTS" "${extra[@]}")
}

run_thread() {
  export DITTO_SANITIZER=thread
  configure build-tsan thread
  cmake --build build-tsan -j "$jobs" --target ditto generated_model_check core_test scheduler_test server_test \
    engine_invariance_test -- --no-print-directory
  (cd build-tsan && ctest --output-on-failure -j "$jobs" "${extra[@]}" \
    -R '^(ThreadPoolTest|SchedulerTest|EngineSchedulingTest|EngineInvarianceTest|AsyncEngineTest|OpenAiApiTest|MetricsTest)\.|^server_load_invariance$')
}

case $which in
  address) run_address ;;
  thread) run_thread ;;
  all) run_address && run_thread ;;
  *) echo "test-sanitize.sh: '$which' is not address, thread or all" >&2; exit 2 ;;
esac
