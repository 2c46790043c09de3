# scripts/gpu run data-path: the data-path and reproducible-float measurements of issues 10 and 11.
#   - striped lanes: 1 GiB int32 scan at --lanes 1,2,4,8,16 through the CUDA server, result checked,
#     each beside the plain Transport ceiling on the same K connections (same run); reduce and
#     compact at 8 lanes; a CLI file-to-file scan at 8 lanes, checked against one call;
#   - shared memory: the tests on the cuda engine, 1 GiB region to region, the CLI's --shm;
#   - shards: the same scan split over 1, 2 and 4 local CUDA servers (one GPU), and 4 x 2 lanes,
#     then over CPU-engine servers (the client's own cost apart from servers sharing one GPU);
#   - reproducible floats: the GPU tests of the canonical scan and the kernel suite's
#     deterministic rows beside decoupled look-back and CUB.
# DP_STEPS picks steps (default all): det,shm,lanes,shards,cpu-shards; DP_LANES, DP_SHM_CONC,
# DP_SHM_REQUESTS. Logs: lanes_K.{txt,json}, lanes_cli.txt, shm_*, shards_N.{txt,json},
# det_tests.log, det_suite.{txt,json}, server logs.
source scripts/lib/gpu-common.sh
gpu_setup
export LD_LIBRARY_PATH=$R
steps=${DP_STEPS:-det,shm,lanes,shards,cpu-shards}
bytes=$((1 << 30))

if gpu_want "$steps" det; then
  step reproducible floats: GPU tests
  { timeout 120 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*'
    timeout 120 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='CudaDeterministic*'
    GPUSCAN_TEST_ENGINE=cuda timeout 120 $B/integration_tests --gtest_brief=1 --gtest_filter='DeterministicRpc*:Lanes*'
  } 2>&1 | grep -v '\[info\]' | tee "$out/det_tests.log" | grep -E "PASSED|FAILED|tests ran|SKIPPED" | head -20

  step reproducible floats: kernel suite
  timeout 200 $B/kernel_suite --ops scan --dtypes float32,float64 --algorithms deterministic,decoupled_lookback,cub \
    --sizes 2^16,2^20,2^24,2^28 --json "$out/det_suite.json" >"$out/det_suite.txt" 2>&1
  grep -E "^ *(scan|copy)" "$out/det_suite.txt" | head -40
fi

if gpu_want "$steps" shm; then
  step shared memory: tests on the cuda engine
  { GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 --gtest_filter='SharedMemory*:*Shm*'
    timeout 60 $B/shm_region_test --gtest_brief=1
  } 2>&1 | grep -v '\[info\]' | tee "$out/shm_tests.log" | grep -E "PASSED|FAILED|tests ran|SKIPPED|Failure" | head -20
  step shared memory: 1 GiB int32 region to region through a cuda server
  mkdir -p /dev/shm/gpuscan-bench
  gpu_server shm 127.0.0.1:50579 --engine cuda --shm-dir /dev/shm/gpuscan-bench
  H="$B/gpuscan -s 127.0.0.1:50579"
  for spec in "scan --check" "scan" "reduce" "compact"; do
    set -- $spec
    for c in ${DP_SHM_CONC:-1 4}; do
      echo "--- $spec, concurrency $c"
      f="$out/shm_$1${2:+_check}_c$c"
      timeout 100 $H bench --e2e --op $1 --dtype int32 --bytes $bytes --shm ${2:-} --concurrency $c \
        --requests ${DP_SHM_REQUESTS:-10} --json "$f.json" >"$f.txt" 2>&1
      grep -E "first call|^ +[0-9]" "$f.txt" | head -3
    done
  done
  echo "--- CLI file to file, 1 GiB int32: --shm vs --lanes 8"
  head -c $bytes /dev/urandom >/tmp/in.bin
  { /usr/bin/time -f "shm: wall %e s, max RSS %M kB" $H scan --format raw --dtype int32 -i /tmp/in.bin -o /tmp/out_shm.bin --shm --no-progress
    /usr/bin/time -f "lanes 8: wall %e s, max RSS %M kB" $H scan --format raw --dtype int32 -i /tmp/in.bin -o /tmp/out8.bin --lanes 8 --no-progress
    cmp /tmp/out_shm.bin /tmp/out8.bin && echo "shm output identical to lanes 8"
  } 2>&1 | tee "$out/shm_cli.txt"
  rm -f /tmp/in.bin /tmp/out_shm.bin /tmp/out8.bin
  ls -la /dev/shm/gpuscan-bench | tee -a "$out/shm_cli.txt"
  gpu_stop shm
fi

step cuda server
gpu_server main 127.0.0.1:50571 --engine cuda
G="$B/gpuscan -s 127.0.0.1:50571"
if gpu_want "$steps" lanes; then
  step striped lanes through the cuda server
  for k in ${DP_LANES:-1 2 4 8 16}; do
    echo "--- scan, 1 GiB int32, --lanes $k"
    timeout 100 $G bench --e2e --op scan --dtype int32 --bytes $bytes --lanes $k --check --concurrency 1 \
      --requests 3 --json "$out/lanes_$k.json" >"$out/lanes_$k.txt" 2>&1
    tail -4 "$out/lanes_$k.txt"
  done
  for op in reduce compact; do
    echo "--- $op, 1 GiB int32, --lanes 8"
    timeout 100 $G bench --e2e --op $op --dtype int32 --bytes $bytes --lanes 8 --check --concurrency 1 \
      --requests 3 --json "$out/lanes_${op}_8.json" >"$out/lanes_${op}_8.txt" 2>&1
    tail -4 "$out/lanes_${op}_8.txt"
  done
  echo "--- CLI file to file, 1 GiB int32, --lanes 8 vs one call"
  head -c $bytes /dev/urandom >/tmp/in.bin
  { /usr/bin/time -f "lanes 8: wall %e s, max RSS %M kB" $G scan --format raw --dtype int32 -i /tmp/in.bin -o /tmp/out8.bin --lanes 8 --no-progress
    /usr/bin/time -f "lanes 1: wall %e s, max RSS %M kB" $G scan --format raw --dtype int32 -i /tmp/in.bin -o /tmp/out1.bin --lanes 1 --no-progress
    cmp /tmp/out8.bin /tmp/out1.bin && echo "lanes 8 output identical to one call"
  } 2>&1 | tee "$out/lanes_cli.txt"
  rm -f /tmp/in.bin /tmp/out8.bin /tmp/out1.bin
fi

# shards NAME N TARGETS [flags...]: the 1 GiB scan split N ways over the servers of TARGETS.
shards() {
  local name=$1 n=$2 targets=$3
  shift 3
  echo "--- scan, 1 GiB int32, --shards $n $* ($name)"
  timeout 100 $B/gpuscan -s "$targets" bench --e2e --op scan --dtype int32 --bytes $bytes --shards $n "$@" --check \
    --concurrency 1 --requests 3 --json "$out/shards_$name.json" >"$out/shards_$name.txt" 2>&1
  tail -3 "$out/shards_$name.txt"
}

if gpu_want "$steps" shards; then
  step shards across local servers
  for port in 50572 50573 50574; do gpu_server "cuda_$port" 127.0.0.1:$port --engine cuda; done
  S2="ipv4:127.0.0.1:50571,127.0.0.1:50572"
  S4="$S2,127.0.0.1:50573,127.0.0.1:50574"
  shards 1 1 127.0.0.1:50571
  shards 2 2 "$S2"
  shards 4 4 "$S4"
  shards 4_lanes_2 4 "$S4" --lanes 2
  for port in 50572 50573 50574; do gpu_stop "cuda_$port"; done
fi
gpu_stop main
tail -2 "$out/server_main.log"

# The same split over CPU-engine servers: tells the client's own cost from several server
# processes sharing one GPU (their contexts time-slice).
if gpu_want "$steps" cpu-shards; then
  step shards across local CPU-engine servers
  for port in 50581 50582 50583 50584; do gpu_server "cpu_$port" 127.0.0.1:$port --engine cpu; done
  C4="ipv4:127.0.0.1:50581,127.0.0.1:50582,127.0.0.1:50583,127.0.0.1:50584"
  shards cpu_1 1 "$C4"
  shards cpu_4 4 "$C4"
fi
