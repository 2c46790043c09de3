#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite, gpu_engine_tests): the 2-D scan's 16-byte
# path (copies in, row folds and stores out four float32 / two float64 an access, rows padded by
# a vector). The engine's Scan2D tests and memcheck on the default (vector) build, then the
# kernel suite alternating the element path (GPUSCAN_EXP_SCAN2D_VEC=0) and the vector path (1),
# then stress launches of the vector path.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
step engine Scan2D tests
timeout 240 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='*Scan2D*' 2>&1 | tee "$out/engine.log" | tail -3
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step memcheck
timeout 240 $san --tool memcheck $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='*Scan2D*' 2>&1 | tee "$out/memcheck.txt" | tail -3
for r in 1 2 3; do
  for v in 0 1; do
    step round $r variant $v
    GPUSCAN_EXP_SCAN2D_VEC=$v timeout 150 $B/kernel_suite --ops scan2d --dtypes float32,int32,float64 \
      --sizes 2^24,2^26,2^28,2^30 --json "$out/ks_v${v}_$r.json" >"$out/ks_v${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^scan2d|^copy" "$out/ks_v${v}_$r.txt" | awk '{print $1, $3, $4, $5, $7, $9}'
  done
done
for cell in "float32 2^28 2000" "float32 2^30 400" "float32 2^26 4000" "float64 2^28 1000"; do
  set -- $cell
  step "stress variant 1 $1 $2 x $3"
  GPUSCAN_EXP_SCAN2D_VEC=1 timeout 60 $B/kernel_suite --ops scan2d --dtypes $1 --sizes $2 --reps $3 \
    >"$out/stress_$1_$2_$3.txt" 2>&1
  echo "rc $?"; grep -E "tile_wavefront|gpuscan scan2d|rror" "$out/stress_$1_$2_$3.txt" | sort | uniq -c | sort -rn | head -8
done
