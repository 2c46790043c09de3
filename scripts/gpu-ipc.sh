#!/usr/bin/env bash
# Issue 45 part 3 (arrays already on the GPU, CUDA IPC) on the GPU machine: the engine's and the
# server's device-memory tests (gpu_engine_tests Device*), the Python client's on CuPy arrays
# (python/tests/test_device_ipc.py), and the figures: a 1 GiB int32 scan of a CuPy array through
# the server end to end beside cupy.cumsum of the same array, and 1K-element calls through device
# memory beside the streamed call (gpuscan.bench's device rows), one server, one run; then the
# CLI's --shm from a 1 GiB file to a file (issue 45 part 1) beside one stream.
#   here:    scripts/gpu-ipc.sh pack     builds and packs into .gpu-ipc/gpu.tar.xz (BUILD_DIR, default build)
#   device:  run(command="bash scripts/gpu-ipc.sh", carry=[".gpu-ipc"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, gpu_engine_device.log, pytest_device.log, bench_device.txt/.json, cli_shm.txt, server logs.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = pack ]; then
  set -e
  build=${BUILD_DIR:-build}
  cmake -S . -B "$build" -DGPUSCAN_ENABLE_CUDA=ON >/dev/null  # a tree `make` configured without a GPU has none
  cmake --build "$build" -j"$(nproc)" --target gpuscan-server gpuscan gpu_engine_tests gpuscan_python
  stage=.gpu-ipc/stage
  rm -rf "$stage" && mkdir -p "$stage/.gpu-bin" "$stage/.gpu-py" "$stage/.gpu-rt"
  for b in gpuscan-server gpuscan gpu_engine_tests; do strip -o "$stage/.gpu-bin/$b" "$build/bin/$b"; done
  tar -C "$build/python/pkg" --exclude=__pycache__ -cf - gpuscan | tar -C "$stage/.gpu-py" -xf -
  ../shared/device/bundle-libs.sh "$stage/.gpu-rt" "$stage/.gpu-bin/gpuscan-server" "$stage/.gpu-bin/gpuscan" "$stage/.gpu-bin/gpu_engine_tests" \
    "$stage/.gpu-py/gpuscan/libgpuscan_capi.so"
  tar -C "$stage" -cf - .gpu-bin .gpu-py .gpu-rt | xz -T2 --lzma2=preset=6,dict=256MiB >.gpu-ipc/gpu.tar.xz
  rm -rf "$stage"
  du -h .gpu-ipc/gpu.tar.xz
  exit 0
fi

out=${OUT:-/tmp/gpuscan-out}
mkdir -p "$out"
work=/tmp/gpuscan-ipc
mkdir -p "$work" && tar -C "$work" -xJf .gpu-ipc/gpu.tar.xz
export LD_LIBRARY_PATH=$work/.gpu-rt PYTHONPATH=$work/.gpu-py PYTHONDONTWRITEBYTECODE=1
B=$work/.gpu-bin
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader;
  python3 -c 'import cupy; print("cupy", cupy.__version__)'; } 2>&1 | tee "$out/device.txt"

step() { echo; echo "=== $* ==="; }
step "engine and server tests on device memory"
GPUSCAN_BIN_DIR=$B timeout 240 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='DeviceSession*:DeviceIpc*' 2>&1 \
  | grep -v '\[info\]' | tee "$out/gpu_engine_device.log" | tail -8
step "Python client on CuPy arrays"
GPUSCAN_SERVER=$B/gpuscan-server timeout 240 python3 -m pytest -q -p no:cacheprovider python/tests/test_device_ipc.py 2>&1 \
  | tee "$out/pytest_device.log" | tail -8
step "figures: 1 GiB int32 through device memory vs cupy.cumsum, 1K calls vs the streamed call"
sock=/tmp/gpuscan-ipc.sock
rm -f "$sock"
$B/gpuscan-server --address "unix:$sock" --engine cuda --allow-device-ipc >"$out/server.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
sleep 1
timeout 200 python3 -m gpuscan.bench ${IPC_BENCH_ARGS:---target unix:$sock --device --peer off --json $out/bench_device.json} 2>&1 \
  | tee "$out/bench_device.txt" | tail -20

step "CLI --shm: a 1 GiB int32 raw file to a file through one-shot regions, beside one stream"
shm=/dev/shm/gpuscan-cli
mkdir -p "$shm"
$B/gpuscan-server --address "unix:$sock" --engine cuda --shm-dir "$shm" >"$out/server_cli.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
sleep 1
G="$B/gpuscan -s unix:$sock"
head -c $((1 << 30)) /dev/urandom >/tmp/in.bin
{
  for i in 1 2 3; do
    /usr/bin/time -f "--shm run $i: wall %e s" $G scan --shm --format raw --dtype int32 -i /tmp/in.bin -o /tmp/out.bin --no-progress
  done
  echo "last element $(tail -c 4 /tmp/out.bin | od -An -t d4) vs reduce $($G reduce --format raw --dtype int32 -i /tmp/in.bin 2>/dev/null)"
  cp /tmp/in.bin "$shm/in.bin"
  for i in 1 2 3; do
    /usr/bin/time -f "--shm on files under --shm-dir, run $i: wall %e s" $G scan --shm --format raw --dtype int32 \
      -i "$shm/in.bin" -o "$shm/out.bin" --no-progress
  done
  cmp /tmp/out.bin "$shm/out.bin" && echo "the files under --shm-dir got the same bytes"
  /usr/bin/time -f "one stream: wall %e s" $G scan --format raw --dtype int32 -i /tmp/in.bin -o /tmp/out2.bin --no-progress
  cmp /tmp/out.bin /tmp/out2.bin && echo "--shm and the stream wrote the same bytes"
} 2>&1 | grep -v '^\[' | tee "$out/cli_shm.txt"
