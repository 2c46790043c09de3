#!/usr/bin/env bash
# Issue 55 (the house, second pass): main before the moves (7605c86) against after, one pack, one
# H100. OLD is a CUDA build of 7605c86 (kernel_suite, gpuscan-server, gpuscan).
#   here:    scripts/gpu pack --build build-gpu --python --extra kernel_suite_main=OLD/bin/kernel_suite \
#              --extra gpuscan-server_old=OLD/bin/gpuscan-server --extra gpuscan_old=OLD/bin/gpuscan
#   device:  run(command="bash bench/results/house-h100-2026-11-28/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Each part is a driver suite; HOUSE_PARTS picks (default all; the 2026-11-28 run made them in three
# device calls: suite, then ab and python, then soak and wire).
source scripts/lib/gpu-common.sh
set -u
parts=${HOUSE_PARTS:-suite,ab,python,soak,wire}
gpu_want "$parts" suite && GPU_LOGS_TGZ=suite-logs.tgz timeout 450 bash scripts/gpu run suite
gpu_want "$parts" ab && ROUNDS=3 GPU_LOGS_TGZ=ab-logs.tgz timeout 200 bash scripts/gpu run ab --ops scan,reduce,compact --sizes 2^16,2^28
gpu_want "$parts" python && WIRE_STEPS=python GPU_LOGS_TGZ=py-logs.tgz timeout 280 bash scripts/gpu run wire
gpu_want "$parts" soak && SOAK_SECONDS=0 GPU_LOGS_TGZ=soak-logs.tgz timeout 230 bash scripts/gpu run soak
gpu_want "$parts" wire && WIRE_STEPS=ab,reduce GPU_LOGS_TGZ=wire-logs.tgz timeout 300 bash scripts/gpu run wire
exit 0
