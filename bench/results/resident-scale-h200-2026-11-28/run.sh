#!/usr/bin/env bash
# 100,000 resident arrays on one server of the cuda engine (one H200).
#   here:    scripts/gpu pack --build build-gpu --targets "gpuscan-server" --python
#   device:  run(command="bash bench/results/resident-scale-h200-2026-11-28/run.sh", carry=[".gpu-pack/gpu.tar.xz"], kind="nvidia-h200")
# Writes scale.json (scale_bench.py) and the server's log.
source scripts/lib/gpu-common.sh
gpu_setup
here=bench/results/resident-scale-h200-2026-11-28
step 100000 arrays of 16 int32: Put each, check, Drop each
gpu_server scale 127.0.0.1:50895 --engine cuda --resident-bytes $((1 << 30))
PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1 timeout 500 python3 $here/scale_bench.py 127.0.0.1:50895 100000 "$out/scale.json"
gpu_stop scale
# The server's log has a line a call: keep its last lines only.
tail -5 "$out/server_scale.log" >"$out/server_tail.log" && rm -f "$out/server_scale.log"
exit 0
