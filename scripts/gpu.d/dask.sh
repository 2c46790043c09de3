# scripts/gpu run dask: issue 46's figures on a machine with two GPUs: gpuscan.dask against dask's
# own numpy on one dask cluster, in one run. Two gpuscan servers (one per GPU, CUDA engine, shared
# memory from a directory of /dev/shm), a distributed LocalCluster of two worker processes, an
# int64 dask array of DASK_GIB GiB persisted on the workers; cumsum, sum and histogram through
# gpuscan.dask with both servers (worker i -> GPU i) and with one (both workers -> GPU 0), and
# dask's own cumsum(axis=0), sum and histogram on the same array and cluster; every result checked
# against dask's (dask_bench.py); and the same calls on the blocks kept on the servers
# (gpuscan.dask.persist: each server gets --resident-bytes DASK_RESIDENT_BYTES, 32 GiB). Prints a table of GB/s (input bytes / best time) and the speedups.
# Pack with `--targets gpuscan-server --dask`: the GPU machine's Python has no dask, so a Python
# 3.11 with dask travels (.gpu-pack/python.tar.xz, scripts/lib/pack-dask-python.sh).
#   here, CPU servers, same steps: DASK_ENGINE=cpu DASK_GIB=0.25 DASK_THREADS=1 DASK_PYTHON=python3 scripts/gpu run dask
# DASK_GIB (8), DASK_CHUNK_MIB (128), DASK_THREADS (threads per worker, 8), DASK_REPS (timed runs
# after one warm-up, 3), DASK_BINS (256), DASK_ENGINE (cuda; cpu), DASK_PYTHON (an interpreter
# with dask to use instead of the carried one), DASK_PORT (50801: it and the next), DASK_TIMEOUT.
# Under $OUT: dask.txt (the table), dask.json, device.txt, dask-logs.tgz (servers' and the run's logs).
source scripts/lib/gpu-common.sh
gpu_setup
shm=$(mktemp -d /dev/shm/gpuscan-dask-XXXXXX 2>/dev/null || mktemp -d)
gpu_at_exit "rm -rf '$shm'"

if [ -n "${DASK_PYTHON:-}" ]; then
  py=$DASK_PYTHON
else
  gpu_unpack .gpu-pack/python.tar.xz .gpu-pyb pyb
  py=$PWD/.gpu-pyb/pyb/bin/python3
  [ -x "$py" ] || py=/usr/bin/python3
fi
export LD_LIBRARY_PATH=$R PYTHONPATH=$P PYTHONUNBUFFERED=1
"$py" -c 'import sys, dask, distributed, numpy, grpc, gpuscan.dask; print("python", sys.version.split()[0], sys.executable,
"dask", dask.__version__, "distributed", distributed.__version__, "numpy", numpy.__version__)' || {
  echo "no Python with dask and gpuscan: pack with scripts/gpu pack --dask and carry .gpu-pack"; exit 1; }

engine=${DASK_ENGINE:-cuda}
port=${DASK_PORT:-50801}
df -h "$shm" | tail -1 | awk '{print "shared memory in '"$shm"': " $4 " free of " $2}'
# One GPU: both servers on it (the rows then say two servers, one device).
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${ngpu:-0}" -ge 1 ] || ngpu=1
step "two gpuscan servers ($engine engine), one per GPU ($ngpu GPUs here)"
for dev in 0 1; do
  flags=()
  [ "$engine" = cuda ] && flags=(--device "$((dev % ngpu))")
  gpu_server "gpu$dev" "127.0.0.1:$((port + dev))" --engine "$engine" "${flags[@]}" --shm-dir "$shm" \
    --resident-bytes "${DASK_RESIDENT_BYTES:-$((32 << 30))}" || exit 1
  grep -m1 "listening on" "$out/server_gpu$dev.log"
done

step "dask: ${DASK_GIB:-8} GiB int64, LocalCluster of 2 workers x ${DASK_THREADS:-8} threads"
timeout "${DASK_TIMEOUT:-540}" "$py" scripts/gpu.d/dask_bench.py "127.0.0.1:$port" "127.0.0.1:$((port + 1))" \
  "$final/dask.json" "$final/dask.txt" 2>&1 | grep -v -E "DeprecationWarning|make_current|^  self\.|^$" | tee "$out/dask_run.log"
rc=${PIPESTATUS[0]}
echo "exit $rc"
exit "$rc"
