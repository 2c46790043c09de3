#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: .gpu-bin/{gpuscan, gpuscan-server, gpuscan-old,
# gpuscan-server-old, integration_tests, cli_tests}, .gpu-rt): the client's side of the raw
# streaming RPCs (Histogram, SegmentedScan, ReduceByKey, Sort, Scan2D send their Sources' slices
# and read responses in place). "before": the CLI and server of 5dae0b7; "server": that CLI
# against the raw server; "both": this CLI and server. File to file on tmpfs, three rounds, the
# order turned each round. Prints the CLI's wall seconds and the server's own total (ms).
# RUN2=1 (run2.sh): "before" and "both" only, four rounds, after EncodeMessage lost its second copy.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
if [ -z "${RUN2:-}" ]; then
step integration and CLI suites on cuda
GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 2>&1 \
  | grep -v '\[info\]' | grep -v ' -> ' | tee "$out/integration.log" | tail -3
mkdir -p /work/main/build/bin  # the CLI suite runs the binaries at their build paths
for b in gpuscan gpuscan-server; do ln -sf $B/$b /work/main/build/bin/$b; done
GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/cli_tests --gtest_brief=1 2>&1 | grep -v '\[info\]' | tee "$out/cli.log" | tail -3
fi
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
combos="before:gpuscan-old:50701 server:gpuscan-old:50702 both:gpuscan:50702"
rounds="1 2 3"
[ -n "${RUN2:-}" ] && combos="before:gpuscan-old:50701 both:gpuscan:50702" && rounds="1 2 3 4"
for r in $rounds; do
  [ $((r % 2)) = 0 ] && order=$(echo $combos | tr ' ' '\n' | tac | tr '\n' ' ') || order=$combos
  for op in segmented reduce_by_key sort histogram scan2d; do
    for c in $order; do
      IFS=: read -r name cli port <<<"$c"
      f="$out/${op}_${name}_$r.txt"
      t0=$(date +%s.%N)
      timeout 60 $B/$cli -s 127.0.0.1:$port ${cmd[$op]} >"$f" 2>&1
      rc=$?
      t1=$(date +%s.%N)
      printf "round %s %-14s %-7s rc %s wall %.3f s server %s ms %s\n" $r $op $name $rc "$(awk "BEGIN{print $t1 - $t0}")" \
        "$(awk '/^  total/{printf "%.1f", $2/1000}' "$f")" "$(md5sum $d/out.npy | cut -c1-8)"
    done
  done
done
kill -TERM $(cat "$out/pid_old") $(cat "$out/pid_new"); wait
