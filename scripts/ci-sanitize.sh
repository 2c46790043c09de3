#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of the CPU engine, the service and their
# tests, plus the libFuzzer request fuzzer (docs/RELIABILITY.md). Runs the integration
# suites (and the fuzz corpus replay) under the sanitizers, then fuzzes for a bounded time over a
# copy of the seed corpus. Fails on any test failure, sanitizer report or fuzzer crash.
#   scripts/ci-sanitize.sh                      (make sanitize; .ci/run calls it after make test)
# Environment: SANITIZE_BUILD_DIR (build-asan), FUZZ_SECONDS (60), JOBS (nproc), SANITIZE_STEPS
# (all; "build": configure and build only, as .ci/run does beside `make test`).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${SANITIZE_BUILD_DIR:-build-asan}
fuzz_seconds=${FUZZ_SECONDS:-60}
jobs=${JOBS:-$(nproc)}
t0=$SECONDS
stamp() { echo "[ci-sanitize +$((SECONDS - t0)) s] $*"; }

# Leak detection stays on. Reports must fail the run and say where: halt on the first error,
# symbolized stacks. (No suppressions are needed: the suites shut their servers down cleanly.)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-}

# -O0 and line tables only: the sanitizer build is CI's longest step, and -O0 halves a TU's
# compile (scan_handler.cc 15.4 -> 7.4 s; the whole build 333 s on 2 cores) while the suites run
# as fast (254 s against 244 s at -O1; bench/notes/ci-time.md); stacks stay readable. CUDA is off: the sanitizers cover host code (the CUDA engine gets
# compute-sanitizer on the GPU machine, `scripts/gpu run suite`).
stamp "configure $build"
CC=${CC_SANITIZE:-clang} CXX=${CXX_SANITIZE:-clang++} cmake -S . -B "$build" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -gline-tables-only" \
  -DGPUSCAN_TEST_CXX_FLAGS= -DGPUSCAN_ENABLE_CUDA=OFF -DGPUSCAN_SANITIZE=address,undefined -DGPUSCAN_FUZZ=ON >/dev/null
# The integration suites drive the CPU engine through the whole service; the unit suites (same
# engine, called directly) run in `make test` and are left out here to keep CI well under 20 min.
# The corpus and the saved findings run under the sanitizers as the fuzzer's initial corpus
# below (every input once before fuzzing starts); their accept/reject expectations are checked by
# fuzz_corpus_replay in `make test`, so request_fuzz_replay is not built a second time here.
# isolation_tests run real gpuscan-server processes (a front and its workers), so the server is
# built here too: the front's proxy and worker pool run under the sanitizers as well.
stamp "build (integration_tests, isolation_tests, gpuscan-server, request_fuzzer)"
cmake --build "$build" -j"$jobs" --target integration_tests isolation_tests gpuscan-server request_fuzzer
if [ "${SANITIZE_STEPS:-all}" = build ]; then
  stamp "built (SANITIZE_STEPS=build)"
  exit 0
fi
stamp "ctest -L integration under ASan+UBSan"
ctest --test-dir "$build" -L integration -LE gpu --output-on-failure -j"$jobs" --timeout 600

stamp "fuzz for ${fuzz_seconds} s over a copy of tests/fuzz/corpus (and tests/fuzz/regressions, read only)"
work="$build/fuzz"
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
cp tests/fuzz/corpus/* "$work/corpus/"
set +e
"$build/bin/request_fuzzer" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=4096 -max_len=8192 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" tests/fuzz/regressions >"$work/fuzz.log" 2>&1
rc=$?
set -e
grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added|stat::peak_rss_mb)' \
  "$work/fuzz.log" || true
if [ "$rc" -ne 0 ]; then
  tail -60 "$work/fuzz.log"
  echo "request_fuzzer failed (exit $rc); the input is in $work/artifacts/:"
  ls -l "$work/artifacts/"
  echo "Reproduce: $build/bin/request_fuzzer $work/artifacts/<file>; keep it as a regression in tests/fuzz/regressions/."
  exit 1
fi
stamp "done: sanitizer suites and ${fuzz_seconds} s of fuzzing passed"
