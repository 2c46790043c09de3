# Sourced by the scripts/gpu-*.sh suites that run ON the GPU machine (device `run`, repo root):
# unpacks the pack once, and sets out (the logs' folder), B (binaries), R (their shared libraries)
# and step (a section heading). Prints the device to $out/device.txt.
#   GPU_PACK      the pack (default .gpu-pack/gpu.tar.xz)
#   GPU_LOGS_TGZ  when set, logs go to a temporary folder that comes back as $OUT/$GPU_LOGS_TGZ
#                 (many files travel as one); else out is $OUT itself
set -uo pipefail
final=${OUT:-/tmp/gpuscan-out}
mkdir -p "$final"
if [ -n "${GPU_LOGS_TGZ:-}" ]; then
  out=$(mktemp -d)
  trap "tar -czf '$final/$GPU_LOGS_TGZ' -C '$out' ." EXIT  # expanded now: the caller's GPU_* are temporary
else
  out=$final
fi
[ -d .gpu-bin ] || xz -dc "${GPU_PACK:-.gpu-pack/gpu.tar.xz}" | tar -xf -
B=$PWD/.gpu-bin R=$PWD/.gpu-rt
step() { echo; echo "=== $* ==="; }
nvidia-smi -L | tee "$out/device.txt"
