#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: .gpu-bin/{gpuscan,gpuscan-server,gpuscan-server-old,
# integration_tests}, .gpu-rt): Histogram, SegmentedScan, ReduceByKey, Sort and Scan2D read raw
# (and SegmentedScan and Scan2D answer raw) on the server. The RPC suites on the cuda engine,
# then the CLI (this commit's, typed on these RPCs) file to file on tmpfs against the server
# before the change (gpuscan-server-old) and after, alternating, three rounds. Seconds a call.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
step integration on cuda
GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 2>&1 \
  | grep -v '\[info\]' | grep -v ' -> ' | tee "$out/integration.log" | tail -3
step inputs
d=/dev/shm/gs; mkdir -p $d
python3 - "$d" <<'PY'
import sys, numpy as np
d = sys.argv[1]; rng = np.random.default_rng(7); n = 1 << 28
np.save(f"{d}/x.npy", rng.integers(-100, 100, n, dtype=np.int32))
np.save(f"{d}/k.npy", (np.arange(n, dtype=np.int64) // 1000).astype(np.int32))
np.save(f"{d}/f.npy", rng.random(n, dtype=np.float32))
np.save(f"{d}/u.npy", rng.integers(0, 1 << 32, n >> 2, dtype=np.uint32))
np.save(f"{d}/m.npy", rng.random((16384, 16384), dtype=np.float32))
PY
ls -la $d
start() {  # name binary port
  $2 --address 127.0.0.1:$3 --engine cuda >"$out/server_$1.log" 2>&1 &
  echo $! >"$out/pid_$1"
  for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:$3 >/dev/null 2>&1 && return; sleep 0.2; done
  echo "server $1 did not start"
}
start old $B/gpuscan-server-old 50701
start new $B/gpuscan-server 50702
declare -A cmd=(
  [segmented]="scan -i $d/x.npy --keys $d/k.npy -o $d/out.npy"
  [reduce_by_key]="reduce -i $d/x.npy --by-key $d/k.npy -o $d/out.npy --keys-out $d/out_keys.npy"
  [sort]="sort -i $d/u.npy -o $d/out.npy"
  [histogram]="histogram -i $d/f.npy --bins 256 --range 0,1 -o $d/out.npy"
  [scan2d]="scan2d -i $d/m.npy -o $d/out.npy"
)
for r in 1 2 3; do
  for op in segmented reduce_by_key sort histogram scan2d; do
    for s in old:50701 new:50702; do
      IFS=: read -r name port <<<"$s"
      t0=$(date +%s.%N)
      timeout 60 $B/gpuscan -s 127.0.0.1:$port ${cmd[$op]} >"$out/${op}_${name}_$r.txt" 2>&1
      rc=$?
      t1=$(date +%s.%N)
      printf "round %s %-14s %-4s rc %s %.3f s  %s\n" $r $op $name $rc "$(awk "BEGIN{print $t1 - $t0}")" \
        "$(md5sum $d/out.npy | cut -c1-8)"
    done
  done
done
kill -TERM $(cat "$out/pid_old") $(cat "$out/pid_new"); wait
