# Sourced by the scripts/gpu-*.sh suites that run ON the GPU machine (device `run`, repo root):
# unpacks the pack (again whenever it changed), and sets out (the logs' folder), B (binaries),
# R (their shared libraries) and step (a section heading). Prints the device to $out/device.txt.
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
# A warm machine keeps the last call's .gpu-bin: unpack again whenever the pack has changed.
pack=${GPU_PACK:-.gpu-pack/gpu.tar.xz}
if [ -f "$pack" ]; then
  sum=$(cksum <"$pack")
  if [ "$(cat .gpu-bin/.pack-sum 2>/dev/null)" != "$sum" ]; then
    rm -rf .gpu-bin .gpu-rt
    xz -dc "$pack" | tar -xf - && echo "$sum" >.gpu-bin/.pack-sum
  fi
fi
B=$PWD/.gpu-bin R=$PWD/.gpu-rt
step() { echo; echo "=== $* ==="; }
nvidia-smi -L | tee "$out/device.txt"
