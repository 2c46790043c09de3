#!/usr/bin/env bash
# Runs ON the GPU machine (device `run`, from the repo root) after scripts/gpu-check.sh packed the
# binaries: the data-path and reproducible-float measurements of issues 10 and 11.
#   - striped lanes: 1 GiB int32 scan at --lanes 1,2,4,8,16 through the CUDA server, result checked,
#     each beside the plain Transport ceiling on the same K connections (same run); reduce and
#     compact at 8 lanes; a CLI file-to-file scan at 8 lanes, checked against one call;
#   - shards: the same scan split over 1, 2 and 4 local CUDA servers (one GPU), and 4 x 2 lanes;
#   - reproducible floats: the GPU tests of the canonical scan and the kernel suite's
#     deterministic rows beside decoupled look-back and CUB.
#   run(command="bash scripts/gpu-data-path.sh", carry=[".gpu-pack"], timeout_s=590)
# Logs in $OUT/data-path-logs.tgz: lanes_K.{txt,json}, lanes_cli.txt, shards_N.{txt,json}, det_tests.log, det_suite.{txt,json}, server.log.
set -uo pipefail
# Logs are written to a scratch folder and come back as one archive (the device returns few files).
final=${OUT:-/tmp/gpuscan-out}
out=$(mktemp -d)
mkdir -p "$final"
trap 'tar -czf "$final/data-path-logs.tgz" -C "$out" .' EXIT
[ -d .gpu-bin ] || tar -xJf .gpu-pack/gpu.tar.xz
export LD_LIBRARY_PATH=$PWD/.gpu-rt
B=.gpu-bin
step() { echo; echo "=== $* ==="; }
# DP_STEPS picks steps (default all): det,shm,lanes,shards,cpu-shards.
want() { [[ ",${DP_STEPS:-det,shm,lanes,shards,cpu-shards}," == *",$1,"* ]]; }
nvidia-smi -L | tee "$out/device.txt"

if want det; then
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

if want shm; then
step shared memory: tests on the cuda engine
{ GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 --gtest_filter='SharedMemory*:*Shm*'
  timeout 60 $B/shm_region_test --gtest_brief=1
} 2>&1 | grep -v '\[info\]' | tee "$out/shm_tests.log" | grep -E "PASSED|FAILED|tests ran|SKIPPED|Failure" | head -20
step shared memory: 1 GiB int32 region to region through a cuda server
mkdir -p /dev/shm/gpuscan-bench
$B/gpuscan-server --address 127.0.0.1:50579 --engine cuda --shm-dir /dev/shm/gpuscan-bench >"$out/server_shm.log" 2>&1 &
spid=$!
for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:50579 >/dev/null 2>&1 && break; sleep 0.2; done
H="$B/gpuscan -s 127.0.0.1:50579"
for spec in "scan --check" "scan" "reduce" "compact"; do
  set -- $spec
  for c in ${DP_SHM_CONC:-1 4}; do
    echo "--- $spec, concurrency $c"
    timeout 100 $H bench --e2e --op $1 --dtype int32 --bytes $((1 << 30)) --shm ${2:-} --concurrency $c \
      --requests ${DP_SHM_REQUESTS:-10} --json "$out/shm_$1${2:+_check}_c$c.json" >"$out/shm_$1${2:+_check}_c$c.txt" 2>&1
    grep -E "first call|^ +[0-9]" "$out/shm_$1${2:+_check}_c$c.txt" | head -3
  done
done
echo "--- CLI file to file, 1 GiB int32: --shm vs --lanes 8"
head -c $((1 << 30)) /dev/urandom >/tmp/in.bin
{ /usr/bin/time -f "shm: wall %e s, max RSS %M kB" $H scan --format raw --dtype int32 -i /tmp/in.bin -o /tmp/out_shm.bin --shm --no-progress
  /usr/bin/time -f "lanes 8: wall %e s, max RSS %M kB" $H scan --format raw --dtype int32 -i /tmp/in.bin -o /tmp/out8.bin --lanes 8 --no-progress
  cmp /tmp/out_shm.bin /tmp/out8.bin && echo "shm output identical to lanes 8"
} 2>&1 | tee "$out/shm_cli.txt"
rm -f /tmp/in.bin /tmp/out_shm.bin /tmp/out8.bin
ls -la /dev/shm/gpuscan-bench | tee -a "$out/shm_cli.txt"
kill -TERM $spid; wait $spid
fi

step cuda server
$B/gpuscan-server --address 127.0.0.1:50571 --engine cuda >"$out/server.log" 2>&1 &
pid=$!
for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:50571 >/dev/null 2>&1 && break; sleep 0.2; done
G="$B/gpuscan -s 127.0.0.1:50571"
if want lanes; then
step striped lanes through the cuda server
for k in ${DP_LANES:-1 2 4 8 16}; do
  echo "--- scan, 1 GiB int32, --lanes $k"
  timeout 100 $G bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) --lanes $k --check --concurrency 1 \
    --requests 3 --json "$out/lanes_$k.json" >"$out/lanes_$k.txt" 2>&1
  tail -4 "$out/lanes_$k.txt"
done
for op in reduce compact; do
  echo "--- $op, 1 GiB int32, --lanes 8"
  timeout 100 $G bench --e2e --op $op --dtype int32 --bytes $((1 << 30)) --lanes 8 --check --concurrency 1 \
    --requests 3 --json "$out/lanes_${op}_8.json" >"$out/lanes_${op}_8.txt" 2>&1
  tail -4 "$out/lanes_${op}_8.txt"
done
echo "--- CLI file to file, 1 GiB int32, --lanes 8 vs one call"
head -c $((1 << 30)) /dev/urandom >/tmp/in.bin
{ /usr/bin/time -f "lanes 8: wall %e s, max RSS %M kB" $G scan --format raw --dtype int32 -i /tmp/in.bin -o /tmp/out8.bin --lanes 8 --no-progress
  /usr/bin/time -f "lanes 1: wall %e s, max RSS %M kB" $G scan --format raw --dtype int32 -i /tmp/in.bin -o /tmp/out1.bin --lanes 1 --no-progress
  cmp /tmp/out8.bin /tmp/out1.bin && echo "lanes 8 output identical to one call"
} 2>&1 | tee "$out/lanes_cli.txt"
rm -f /tmp/in.bin /tmp/out8.bin /tmp/out1.bin
fi

if want shards; then
step shards across local servers
pids=()
for port in 50572 50573 50574; do
  $B/gpuscan-server --address 127.0.0.1:$port --engine cuda >"$out/server_$port.log" 2>&1 &
  pids+=($!)
done
for port in 50572 50573 50574; do
  for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:$port >/dev/null 2>&1 && break; sleep 0.2; done
done
S2="ipv4:127.0.0.1:50571,127.0.0.1:50572"
S4="$S2,127.0.0.1:50573,127.0.0.1:50574"
for spec in "1 127.0.0.1:50571" "2 $S2" "4 $S4"; do
  set -- $spec
  echo "--- scan, 1 GiB int32, --shards $1 over $1 servers"
  timeout 100 $B/gpuscan -s "$2" bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) --shards $1 --check \
    --concurrency 1 --requests 3 --json "$out/shards_$1.json" >"$out/shards_$1.txt" 2>&1
  tail -3 "$out/shards_$1.txt"
done
echo "--- scan, 1 GiB int32, --shards 4 --lanes 2 over 4 servers"
timeout 100 $B/gpuscan -s "$S4" bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) --shards 4 --lanes 2 --check \
  --concurrency 1 --requests 3 --json "$out/shards_4_lanes_2.json" >"$out/shards_4_lanes_2.txt" 2>&1
tail -3 "$out/shards_4_lanes_2.txt"
kill -TERM "${pids[@]}"
fi
kill -TERM $pid; wait
tail -2 "$out/server.log"

# The same split over CPU-engine servers: tells the client's own cost from several server
# processes sharing one GPU (their contexts time-slice).
want cpu-shards || exit 0
step shards across local CPU-engine servers
pids=()
for port in 50581 50582 50583 50584; do
  $B/gpuscan-server --address 127.0.0.1:$port --engine cpu >"$out/server_cpu_$port.log" 2>&1 &
  pids+=($!)
done
for port in 50581 50582 50583 50584; do
  for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:$port >/dev/null 2>&1 && break; sleep 0.2; done
done
C4="ipv4:127.0.0.1:50581,127.0.0.1:50582,127.0.0.1:50583,127.0.0.1:50584"
for n in 1 4; do
  echo "--- cpu engine: scan, 1 GiB int32, --shards $n"
  timeout 100 $B/gpuscan -s "$C4" bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) --shards $n --check \
    --concurrency 1 --requests 3 --json "$out/shards_cpu_$n.json" >"$out/shards_cpu_$n.txt" 2>&1
  tail -3 "$out/shards_cpu_$n.txt"
done
kill -TERM "${pids[@]}"; wait
