#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests, kernel_suite of the experiment build):
# the deterministic scan with a look-back warp (GPUSCAN_EXP_LOOKWARP=1) against without (=0),
# same binary; GPUSCAN_EXP_CARRY_SPINS: the look-back warp's polls for C_b before it folds C_b
# itself; GPUSCAN_EXP_POLL_NS: the look-back warp's sleep between polls. Kernel tests with the warp (TEST_LW), sanitizers on the canonical tests (TOOLS), then
# the VARIANTS alternating, ROUNDS rounds.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for lw in ${TEST_LW:-1 0}; do
  step kernel tests, look-back warp $lw
  GPUSCAN_EXP_LOOKWARP=$lw timeout 300 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tail -4
done
for tool in ${TOOLS:-memcheck racecheck synccheck}; do
  step $tool, canonical tests, look-back warp
  GPUSCAN_EXP_LOOKWARP=1 timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_kernel_tests \
    --gtest_brief=1 --gtest_filter='Canonical*' 2>&1 | tail -3
done
for r in $(seq 1 ${ROUNDS:-3}); do
  for v in ${VARIANTS:-0:8:32 1:8:32}; do  # look-back warp : carry spins : poll ns
    IFS=: read -r lw sp pn <<<"$v"
    step look-back warp $lw carry spins $sp poll $pn ns round $r
    GPUSCAN_EXP_LOOKWARP=$lw GPUSCAN_EXP_CARRY_SPINS=$sp GPUSCAN_EXP_POLL_NS=$pn timeout 200 $B/kernel_suite --ops scan \
      --algorithms decoupled_lookback,deterministic --dtypes ${DTYPES:-float32,float64} \
      --sizes ${SIZES:-2^16,2^20,2^24,2^26,2^28,2^30} >"$out/ks_lw${lw}_sp${sp}_pn${pn}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^(scan|reduce) +determ" "$out/ks_lw${lw}_sp${sp}_pn${pn}_$r.txt" | awk '{printf "%s %s %s %s %s | ", $3, $4, $5, $7, $8} NR%6==0 {print ""}'
  done
done
grep -hE "^scan +decoupled" "$out"/ks_lw0_*.txt | awk '$4=="2^28" {print "look-back", $3, $4, $7}'
