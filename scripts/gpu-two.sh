#!/usr/bin/env bash
# Runs ON a GPU machine with two devices (device kind nvidia-h200-x2; repo root): issue 14's
# checks. Concurrent calls spread over both devices (CudaDeviceSet), a sticky fault on device 1
# leaves device 0 serving (DeviceDrainTest, its own process), the typed RPCs and the bad-input
# matrix on the two-device server, and the kernel-bound load on both devices at once against
# one: the kernel suite (scan int32 and sort uint32 at 2^28) on device 0 alone, then on devices
# 0 and 1 at the same time. Needs .gpu-pack (scripts/gpu-check.sh).
#   run(command="bash scripts/gpu-two.sh", carry=[".gpu-pack"], kind="nvidia-h200-x2", timeout_s=500)
# Logs under $OUT: device.txt, set.log, drain.log, integration.log, ks_alone.txt, ks_dev0.txt,
# ks_dev1.txt, aggregate.txt.
source "$(dirname "$0")/gpu-common.sh"
step concurrent sessions over every device
LD_LIBRARY_PATH=$R timeout 120 $B/gpu_engine_tests --gtest_filter='CudaDeviceSet.*' 2>&1 | tee "$out/set.log" | tail -4
step sticky fault on device 1, device 0 serving
LD_LIBRARY_PATH=$R timeout 120 $B/gpu_engine_tests --gtest_filter='DeviceDrainTest.*' 2>&1 | grep -v '\[info\]' \
  | tee "$out/drain.log" | tail -4
step typed RPCs, the bad-input matrix and concurrency on the two-device cuda server
GPUSCAN_TEST_ENGINE=cuda LD_LIBRARY_PATH=$R timeout 200 $B/integration_tests --gtest_brief=1 \
  --gtest_filter='*TypedRpcTest*:*BadInputMatrix*:*Concurrency*:*ServerInfo*' 2>&1 | grep -v '\[info\]' \
  | grep -v ' -> ' | tee "$out/integration.log" | tail -4
step kernel-bound load: one device, then both at once
ks() { timeout 150 $B/kernel_suite --device "$1" --ops scan,sort --algorithms decoupled_lookback,radix \
  --dtypes int32,uint32 --sizes 2^28 --reps 60 --warmup 5; }
ks 0 >"$out/ks_alone.txt" 2>&1
ks 0 >"$out/ks_dev0.txt" 2>&1 &
a=$!
ks 1 >"$out/ks_dev1.txt" 2>&1 &
b=$!
wait $a $b
# Aggregate throughput of both devices at once over one device alone, per row: t_alone * (1/t0 + 1/t1).
python3 - "$out" <<'PY' | tee "$out/aggregate.txt"
import sys, re
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
