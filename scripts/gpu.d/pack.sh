# scripts/gpu pack [options]: HERE (no GPU needed). Configures BUILD with the CUDA engine, builds
# the GPU binaries by name, strips them, bundles the shared libraries they need
# (../shared/device/bundle-libs.sh) and packs everything into .gpu-pack/gpu.tar.xz, the one pack
# every `scripts/gpu run` suite and bench/results run script unpacks (a device call carries at
# most 64 MiB: the binaries hold ~40 MB of device code each, so they travel compressed).
#   --build DIR          the build folder (default build; configured with GPUSCAN_ENABLE_CUDA=ON and
#                        CMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS:-90})
#   --targets "T ..."    the binaries to pack instead of the suites' default set (GPU_TARGETS in
#                        scripts/lib/gpu-common.sh), e.g. "gpu_kernel_tests kernel_suite"
#   --add T              one more target (e.g. tune_bench)
#   --extra NAME=PATH    one more binary, built elsewhere, packed as .gpu-bin/NAME: another build
#                        for an A/B, e.g. kernel_suite_main=../main/build/bin/kernel_suite or
#                        gpuscan-server_old=../old/build/bin/gpuscan-server
#   --python             the Python package (target gpuscan_python) with its C API's libraries
#   --dask               --python, and a Python 3.11 with dask for the dask suite as
#                        .gpu-pack/python.tar.xz (scripts/lib/pack-dask-python.sh, made once into
#                        .gpu-cache/ and reused; delete it to make it again)
#   --proxies            HAProxy and nginx from this machine (the net suite)
#   --image NAME         the image NAME (make image) as .gpu-pack/image.tar.xz, its root
#                        filesystem, and .gpu-pack/image.json, its config (the image suite)
#   --no-build           pack what BUILD holds
#   --dry-run            print the steps, run none
source scripts/lib/gpu-common.sh
set -euo pipefail

build=build targets=("${GPU_TARGETS[@]}") extras=() python=0 dask=0 proxies=0 image= make=1 dry=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift ;;
    --targets) read -ra targets <<<"$2"; shift ;;
    --add) targets+=("$2"); shift ;;
    --extra) extras+=("$2"); shift ;;
    --python) python=1 ;;
    --dask) python=1 dask=1 ;;
    --proxies) proxies=1 ;;
    --image) image=$2; shift ;;
    --no-build) make=0 ;;
    --dry-run) dry=1 ;;
    *) echo "scripts/gpu pack: unknown option $1 (scripts/gpu help)" >&2; exit 2 ;;
  esac
  shift
done
[ "$python" = 1 ] && targets+=(gpuscan_python)

# act CMD...: runs a step, or prints it with --dry-run.
act() {
  echo "+ $*"
  [ "$dry" = 1 ] || "$@"
}

# Only binaries that load more than the C/C++ runtime have libraries to carry (bundle-libs.sh
# stops at one that has none).
needs_libs() { ldd "$1" 2>/dev/null | awk '/=> \//{print $3}' | grep -Evq "$GPU_SYSTEM_LIBS"; }

stage_binary() {  # stage_binary NAME PATH
  act strip -o ".gpu-pack/stage/.gpu-bin/$1" "$2"
}

if [ "$make" = 1 ]; then
  act cmake -S . -B "$build" -DGPUSCAN_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}"
  act cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
fi
act rm -rf .gpu-pack/stage .gpu-pack/gpu.tar.xz .gpu-pack/python.tar.xz .gpu-pack/image.tar.xz .gpu-pack/image.json
act mkdir -p .gpu-pack/stage/.gpu-bin .gpu-pack/stage/.gpu-rt
for t in "${targets[@]}"; do
  case $t in
    gpuscan_python)
      act mkdir -p .gpu-pack/stage/.gpu-py
      act cp -r "$build/python/pkg/gpuscan" .gpu-pack/stage/.gpu-py/
      act find .gpu-pack/stage/.gpu-py -name __pycache__ -prune -exec rm -rf {} + ;;
    gpuscan_soak)
      stage_binary "$t" "$build/bin/$t"
      act cp "$build/tests/soak/libgpuscan_soak_heap_probe.so" .gpu-pack/stage/.gpu-bin/ ;;  # preloaded into the soak's server
    *)
      bin=$build/bin/$t
      [ -f "$bin" ] || [ "$dry" = 1 ] || bin=$(find "$build" -name "$t" -type f -perm -u+x | head -1)
      stage_binary "$t" "$bin" ;;
  esac
done
for e in "${extras[@]}"; do stage_binary "${e%%=*}" "${e#*=}"; done
[ "$proxies" = 1 ] && act cp /usr/sbin/haproxy /usr/sbin/nginx .gpu-pack/stage/.gpu-bin/

if [ "$dry" = 1 ]; then
  echo "+ ../shared/device/bundle-libs.sh .gpu-pack/stage/.gpu-rt <every staged binary that loads more than the C/C++ runtime>"
else
  libs=()
  for f in .gpu-pack/stage/.gpu-bin/* .gpu-pack/stage/.gpu-py/gpuscan/*.so; do
    [ -f "$f" ] && needs_libs "$f" && libs+=("$f")
  done
  [ ${#libs[@]} = 0 ] || ../shared/device/bundle-libs.sh .gpu-pack/stage/.gpu-rt "${libs[@]}"
fi
# One xz stream with a dictionary larger than a binary: the binaries share their device code,
# which a window of 256 MiB finds (66 MB at -6's 8 MiB window, 22 MB so; ~3 min on 2 cores).
# shellcheck disable=SC2046  # the staged folders, one word each
pack() { tar -C .gpu-pack/stage -cf - $(ls -A .gpu-pack/stage) | xz -T1 --lzma2=preset=6,dict=256MiB >.gpu-pack/gpu.tar.xz; }
if [ "$dry" = 1 ]; then
  echo "+ tar -C .gpu-pack/stage -cf - .gpu-bin .gpu-rt [.gpu-py] | xz -T1 --lzma2=preset=6,dict=256MiB >.gpu-pack/gpu.tar.xz"
else
  pack
fi
act rm -rf .gpu-pack/stage
if [ -n "$image" ]; then
  # The image's root filesystem as the container would see it (owners kept), and its config
  # (Entrypoint, Env, User) for the suite to run it as a container runtime would.
  ctr=$(buildah from --pull-never "$image")
  mnt=$(buildah mount "$ctr")
  act sh -c "tar -C '$mnt' --numeric-owner -cf - . | xz -T2 -6 >.gpu-pack/image.tar.xz"
  buildah inspect --type image "$image" >.gpu-pack/image.json
  buildah umount "$ctr" >/dev/null && buildah rm "$ctr" >/dev/null
fi
if [ "$dask" = 1 ]; then
  [ -f .gpu-cache/python.tar.xz ] || act bash scripts/lib/pack-dask-python.sh .gpu-cache/python.tar.xz
  act cp .gpu-cache/python.tar.xz .gpu-pack/
fi
[ "$dry" = 1 ] || du -ch .gpu-pack/*.tar.xz | awk '{print "packed " $1 " " $2 " (a device call carries at most 64M)"}'
echo
bash scripts/gpu help | sed -n '/^On the GPU machine/,$p'
