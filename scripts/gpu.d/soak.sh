# scripts/gpu run soak: the bad input matrix on the CUDA engine, then the soak test against a CUDA
# server (gpuscan_soak: 64 clients, every operation and transport, every result checked, the
# server's live heap probed), 60 s as in CI and a longer run.
#   SOAK_SECONDS   the longer run (default 300; 0 skips it)
# Logs: device.txt, matrix_cuda.log, soak_cuda_60s.{txt,json}, soak_cuda_long.{txt,json} and the
# tail of each soak's server log.
source scripts/lib/gpu-common.sh
gpu_setup
export LD_LIBRARY_PATH=$R
long=${SOAK_SECONDS:-300}
step "bad input matrix on the cuda engine"
GPUSCAN_TEST_ENGINE=cuda timeout 120 "$B/integration_tests" --gtest_filter='*BadInputMatrix*' 2>&1 \
  | grep -v '\[info\]' >"$out/matrix_cuda.log"
grep -E '^\[  (PASSED|FAILED) ' "$out/matrix_cuda.log"; grep -cE '^\[       OK \]' "$out/matrix_cuda.log" | sed 's/^/rows and tests OK: /'

soak() {  # soak NAME SECONDS
  step "soak $2 s, 64 clients, cuda engine"
  timeout $(($2 + 120)) "$B/gpuscan_soak" --engine cuda --server-binary "$B/gpuscan-server" \
    --heap-probe "$B/libgpuscan_soak_heap_probe.so" --clients 64 --duration "$2" \
    --json "$out/$1.json" --server-log "/tmp/$1_server.log" 2>&1 | tee "$out/$1.txt" | grep -vE '^\[ *[0-9.]+ s\] [0-9]+ calls'
  tail -c 20000 "/tmp/$1_server.log" >"$out/$1_server.log"
}
soak soak_cuda_60s 60
[ "$long" -gt 0 ] && soak soak_cuda_long "$long"
exit 0
