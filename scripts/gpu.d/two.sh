# scripts/gpu run two: ON a machine with two GPUs (kind nvidia-h100-x2 or nvidia-h200-x2): issue
# 14's checks. Concurrent calls spread over both devices (CudaDeviceSet in one process; the default
# server, a front of one worker process per device, through the CLI and its /metrics), a sticky
# fault on device 1 leaves device 0 serving (DeviceDrainTest: real worker processes), the front's
# own suite, the typed RPCs and the bad-input matrix on the two-device in-process server, and the
# kernel-bound load on both devices at once against one: the kernel suite (scan int32 and sort
# uint32 at 2^28) on device 0 alone, then on devices 0 and 1 at the same time.
# Logs: device.txt, set.log, drain.log, isolation.log, front_e2e.log, integration.log,
# ks_alone.txt, ks_dev0.txt, ks_dev1.txt, aggregate.txt.
source scripts/lib/gpu-common.sh
gpu_setup
export LD_LIBRARY_PATH=$R
step concurrent sessions over every device "(one process)"
timeout 120 $B/gpu_engine_tests --gtest_filter='CudaDeviceSet.*' 2>&1 | tee "$out/set.log" | tail -4
step "sticky fault on device 1, device 0 serving (a front with a worker process per device)"
GPUSCAN_BIN_DIR=$B timeout 200 $B/gpu_engine_tests --gtest_filter='DeviceDrainTest.*' 2>&1 \
  | grep -v '\[info\]' | tee "$out/drain.log" | tail -6
step "the front's suite (cpu engine workers) on this host"
GPUSCAN_BIN_DIR=$B timeout 150 $B/isolation_tests --gtest_brief=1 2>&1 | tee "$out/isolation.log" | tail -3
step "the default server on two GPUs (a front): concurrent checked scans, calls by device"
{
  gpu_server front 127.0.0.1:50610 --engine cuda --metrics-address 127.0.0.1:50611 --log-level info
  grep -m1 "isolating" "$out/server_front.log"
  G="$B/gpuscan -s 127.0.0.1:50610"
  $G info 2>&1 | grep -i -E "device|engine" | head -6
  timeout 120 $G bench --e2e --op scan --dtype int32 --bytes $((64 << 20)) --concurrency 1,8 --requests 24 --check 2>&1 | tail -6
  python3 - <<'PY'
import urllib.request
text = urllib.request.urlopen("http://127.0.0.1:50611/metrics", timeout=5).read().decode()
for line in text.splitlines():
    if line.startswith(("gpuscan_requests_total{", "gpuscan_device_healthy")) and ('op="scan"' in line or "healthy" in line):
        print(line)
PY
  gpu_stop front; echo "server exit $?"
} 2>&1 | tee "$out/front_e2e.log"
step typed RPCs, the bad-input matrix and concurrency on the two-device cuda server "(in-process)"
GPUSCAN_TEST_ENGINE=cuda timeout 150 $B/integration_tests --gtest_brief=1 \
  --gtest_filter='*TypedRpcTest*:*BadInputMatrix*:*Concurrency*:*ServerInfo*' 2>&1 | grep -v '\[info\]' \
  | grep -v ' -> ' | tee "$out/integration.log" | tail -4
step "kernel-bound load: one device, then both at once"
ks() { timeout 100 $B/kernel_suite --device "$1" --ops scan,sort --algorithms decoupled_lookback,radix \
  --dtypes int32,uint32 --sizes 2^28 --reps 60 --warmup 5; }
ks 0 >"$out/ks_alone.txt" 2>&1
ks 0 >"$out/ks_dev0.txt" 2>&1 &
a=$!
ks 1 >"$out/ks_dev1.txt" 2>&1 &
b=$!
wait $a $b
# Aggregate throughput of both devices at once over one device alone, per row: t_alone * (1/t0 + 1/t1).
python3 - "$out" <<'PY' | tee "$out/aggregate.txt"
import sys
out = sys.argv[1]
def rows(name):
    r = {}
    for line in open(f"{out}/{name}"):
        f = line.split()
        if len(f) >= 5 and f[0] in ("scan", "sort") and f[1] in ("decoupled_lookback", "radix"):
            r[(f[0], f[1], f[2], f[3])] = float(f[4])
    return r
alone, d0, d1 = rows("ks_alone.txt"), rows("ks_dev0.txt"), rows("ks_dev1.txt")
for k, t in alone.items():
    if k in d0 and k in d1:
        print(f"{' '.join(k)}: alone {t:.1f} us; at once {d0[k]:.1f} us (dev 0) and {d1[k]:.1f} us (dev 1): "
              f"{t * (1 / d0[k] + 1 / d1[k]):.2f}x one device")
PY
