# Sourced by the scripts/gpu-*.sh suites that run ON the GPU machine (device `run`, repo root):
# unpacks .gpu-pack once, and sets out (the logs' folder, $OUT), B (binaries), R (their shared
# libraries) and step (a section heading). Prints the device to $out/device.txt.
set -uo pipefail
out=${OUT:-/tmp/gpuscan-out}
mkdir -p "$out"
[ -d .gpu-bin ] || tar -xJf .gpu-pack/gpu.tar.xz
B=$PWD/.gpu-bin R=$PWD/.gpu-rt
step() { echo; echo "=== $* ==="; }
nvidia-smi -L | tee "$out/device.txt"
