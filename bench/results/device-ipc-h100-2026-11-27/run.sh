#!/usr/bin/env bash
# Issue 45 part 3 (arrays already on the GPU, CUDA IPC) on the GPU machine: the engine's and the
# server's device-memory tests (gpu_engine_tests Device*), the Python client's on CuPy arrays
# (python/tests/test_device_ipc*.py), and the figures: a 1 GiB int32 scan of a CuPy array through
# the server end to end beside cupy.cumsum of the same array, and 1K-element calls through device
# memory beside the streamed call (gpuscan.bench's device rows), one server, one run; then the
# CLI's --shm from a 1 GiB file to a file (issue 45 part 1) beside one stream.
#   here:    scripts/gpu pack --targets "gpuscan-server gpuscan gpu_engine_tests" --python
#   device:  run(command="bash bench/results/device-ipc-h100-2026-11-27/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, gpu_engine_device.log, pytest_device.log, bench_device.txt/.json,
# cli_shm.txt, server logs. IPC_BENCH_ARGS replaces the bench's arguments.
source scripts/lib/gpu-common.sh
gpu_setup
export LD_LIBRARY_PATH=$R PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1
python3 -c 'import cupy; print("cupy", cupy.__version__)' 2>&1 | tee -a "$out/device.txt"

step "engine and server tests on device memory"
GPUSCAN_BIN_DIR=$B timeout 240 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='DeviceSession*:DeviceIpc*' 2>&1 \
  | grep -v '\[info\]' | tee "$out/gpu_engine_device.log" | tail -8
step "Python client on CuPy arrays"
gpu_pytest 240 python/tests/test_device_ipc*.py 2>&1 | tee "$out/pytest_device.log" | tail -8

step "figures: 1 GiB int32 through device memory vs cupy.cumsum, 1K calls vs the streamed call"
sock=/tmp/gpuscan-ipc.sock
rm -f "$sock"
gpu_server ipc "unix:$sock" --engine cuda --allow-device-ipc
timeout 200 python3 -m gpuscan.bench ${IPC_BENCH_ARGS:---target unix:$sock --device --peer off --json $out/bench_device.json} 2>&1 \
  | tee "$out/bench_device.txt" | tail -20
gpu_stop ipc

step "CLI --shm: a 1 GiB int32 raw file to a file through one-shot regions, beside one stream"
shm=/dev/shm/gpuscan-cli
mkdir -p "$shm"
rm -f "$sock"
gpu_server cli "unix:$sock" --engine cuda --shm-dir "$shm"
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
