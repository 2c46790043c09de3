#!/usr/bin/env bash
# Runs ON the two-GPU machine (device kind nvidia-h200-x2; repo root): host memory registered
# through the DeviceSet (the payload pool, shared-memory regions) reaches every device, so device
# 1's copies skip staging too. The engine test, the lanes and shared-memory integration tests on
# the two-device cuda server, and shared-memory scans at concurrency 2 (calls alternate over the
# devices) against the commit before's server (which registered on device 0 only).
#   carry: .gpu-two (two.tar.xz: .gpu-bin/{gpu_engine_tests,integration_tests,gpuscan-server,gpuscan},
#   .gpu-rt, .gpu-old/gpuscan-server)
#   run(command="bash scripts/gpu-two-register.sh", carry=[".gpu-two"], kind="nvidia-h200-x2", timeout_s=590)
# Logs in $OUT/two-logs.tgz.
GPU_PACK=.gpu-two/two.tar.xz GPU_LOGS_TGZ=two-logs.tgz source "$(dirname "$0")/gpu-common.sh"
export LD_LIBRARY_PATH=$R
step "CudaDeviceSet: registration reaches every device"
timeout 120 $B/gpu_engine_tests --gtest_filter='CudaDeviceSet.*' 2>&1 | tee "$out/set.log" | tail -4
step "lanes and shared-memory integration tests on the two-device cuda server"
GPUSCAN_TEST_ENGINE=cuda timeout 240 $B/integration_tests --gtest_brief=1 \
  --gtest_filter='LanesTest.*:SharedMemory*:*TypedRpc*' 2>&1 | grep -v '\[info\]' | grep -v ' -> ' \
  | tee "$out/integration.log" | tail -4
step "1 GiB int32 scans from shared memory, concurrency 2 (both devices), old vs new server, three rounds"
mkdir -p /dev/shm/gpuscan-two
for name in old new; do
  bin=$B/gpuscan-server port=50641
  [ $name = old ] && bin=.gpu-old/gpuscan-server port=50642
  $bin --address 127.0.0.1:$port --engine cuda --shm-dir /dev/shm/gpuscan-two >"$out/server_$name.log" 2>&1 &
  echo $! >"$out/pid_$name"
  for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:$port >/dev/null 2>&1 && break; sleep 0.2; done
done
for round in 1 2 3; do
  for name in old new; do
    port=50641
    [ $name = old ] && port=50642
    for spec in "--shm --concurrency 2" "--lanes 8 --concurrency 2"; do
      f="$out/${name}_r${round}_$(echo "$spec" | tr -d ' -')"
      # shellcheck disable=SC2086
      timeout 120 $B/gpuscan -s 127.0.0.1:$port bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) $spec \
        --requests 8 --check --json "$f.json" >"$f.txt" 2>&1
      printf "round %s %-4s %-26s " "$round" "$name" "$spec"
      grep -E "^ +2 " "$f.txt" | awk '{print "GB/s", $3, "p50 ms", $4, "h2d us", $10, "d2h us", $12, "total us", $14}'
      grep -iE "error|wrong" "$f.txt" | head -2
    done
  done
done
grep -h "device" "$out"/server_new.log | head -3
for name in old new; do kill -TERM "$(cat "$out/pid_$name")"; done
wait
