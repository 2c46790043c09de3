# scripts/gpu run ab [kernel_suite options...]: builds of the kernel suite side by side, alternating
# within each round so that every build sees the same machine state (machines differ by about a
# point; bench/notes/suite.md). Pack the other builds with `scripts/gpu pack --extra
# kernel_suite_main=PATH` (one --extra per build). A bench/results run script calls this after its
# own tests rather than writing the loop again.
#   e.g. ROUNDS=3 scripts/gpu run ab --ops scan --algorithms deterministic
#   VARIANTS  builds, in order (default "main new"): .gpu-bin/kernel_suite_<v>, and "new" is
#             .gpu-bin/kernel_suite (the working tree's)
#   ROUNDS    rounds (default 3)
# Logs: <v>_<round>.txt, summary.txt. Printed (bench/ab_summary.py): each round's rows, copy / CUB
# / ours (us), ours / CUB's time, % of copy; then the medians over the rounds.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
for r in $(seq 1 "${ROUNDS:-3}"); do
  for v in ${VARIANTS:-main new}; do
    bin=$B/kernel_suite_$v
    [ "$v" = new ] && bin=$B/kernel_suite
    step "$v round $r"
    timeout 300 "$bin" "$@" >"$out/${v}_$r.txt" 2>&1
    echo "rc $?"
    python3 bench/ab_summary.py --rows "$out/${v}_$r.txt"
  done
done
step summary
python3 bench/ab_summary.py "$out" ${VARIANTS:-main new} | tee "$out/summary.txt"
