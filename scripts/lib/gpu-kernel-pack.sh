# The pack and unpack steps of the device scripts that carry kernel binaries only
# (scripts/gpu-axis.sh, scripts/gpu-widen.sh). Sourced; run from the repository root.

# gpu_kernel_pack DIR BUILD TARGET...: builds the targets in BUILD (configured with the CUDA
# engine: a tree `make` configured without a GPU has none), strips them and packs DIR/gpu.tar.xz.
# The kernel binaries link cudart statically, so no shared library travels with them.
gpu_kernel_pack() {
  local dir=$1 build=$2
  shift 2
  cmake -S . -B "$build" -DGPUSCAN_ENABLE_CUDA=ON >/dev/null
  cmake --build "$build" -j2 --target "$@"
  local stage=$dir/stage b
  rm -rf "$stage" && mkdir -p "$stage/bin"
  for b in "$@"; do strip -o "$stage/bin/$b" "$(find "$build" -name "$b" -type f -perm -u+x | head -1)"; done
  tar -C "$stage" -cf - bin | xz -T2 -6 >"$dir/gpu.tar.xz"
  rm -rf "$stage"
  du -h "$dir/gpu.tar.xz"
}

# gpu_kernel_unpack DIR WORK: on the device, unpacks DIR/gpu.tar.xz into WORK; B names its binaries.
gpu_kernel_unpack() {
  mkdir -p "$2" && tar -C "$2" -xJf "$1/gpu.tar.xz"
  B=$2/bin
}
