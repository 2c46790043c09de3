#!/usr/bin/env bash
# Issue 10's wire goals on the build of 0cfdbf0, run 1 (host A): `scripts/gpu run lanes-io` with the
# bench rows (1 GiB int32 scan and compaction, one stream checked, 8 lanes checked and not, five
# rounds), the CLI file to file and the lanes integration tests. Run 2 (one-stream/) was
# LANES_STEPS=bench LANES_SPECS="--lanes 1;--lanes 1 --check" on the same pack.
#   here:    scripts/gpu pack --python --extra gpuscan_old=OLD_BUILD/bin/gpuscan
#   device:  run(command="bash bench/results/wire-status-h100-2026-11-26/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt and lanes-io-logs.tgz (scan_r*, compact_r*, integration_lanes.log).
export LANES_STEPS=${LANES_STEPS:-bench,cli,tests} LANES_ROUNDS=${LANES_ROUNDS:-"1 2 3 4 5"}
export LANES_SPECS=${LANES_SPECS:-"--lanes 1 --check;--lanes 8 --check;--lanes 8"}
exec bash scripts/gpu run lanes-io
