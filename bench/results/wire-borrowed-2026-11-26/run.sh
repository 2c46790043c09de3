#!/usr/bin/env bash
# One stream and 8 lanes of a 1 GiB int32 call with the client sending the array from where it
# lies (borrowed slices) against --plain-io (a Source copied into each message, as every call did
# before), each beside its ceiling in the same run (the input in place / a pattern copied). ROUNDS
# rounds (default 4), the specs alternating; REQUESTS calls a row. Made run1/ and run2/ (SPECS with
# "--op scan --lanes 8" last).
# WB_MODES=1: every transport mode (one stream, 8 lanes, shared memory; scan and reduce), each
# beside its own ceiling (for --shm the host copying, or for reduce reading, the same bytes on 8
# threads), ROUNDS default 3: made modes/ and modes-no-warmup/, whose JSON feeds
# `bench/plot_transport_modes.py transport-modes.svg modes/*.json`.
#   here:    scripts/gpu pack --targets "gpuscan-server gpuscan"
#   device:  run(command="GPU_LOGS_TGZ=logs.tgz bash bench/results/wire-borrowed-2026-11-26/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
port=50641
if [ "${WB_MODES:-0}" = 1 ]; then
  mkdir -p /dev/shm/gpuscan-shm
  gpu_server main 127.0.0.1:$port --engine cuda --shm-dir /dev/shm/gpuscan-shm || exit 1
  gpu_at_exit "rm -rf /dev/shm/gpuscan-shm"
  specs=${SPECS:-"--op scan --lanes 1;--op scan --lanes 1 --plain-io;--op scan --lanes 8 --check;--op scan --lanes 8;--op scan --shm --check;--op scan --shm;--op reduce --lanes 1;--op reduce --lanes 8;--op reduce --shm"}
  prefix=modes rounds=${ROUNDS:-3}
else
  gpu_server main 127.0.0.1:$port --engine cuda || exit 1
  specs=${SPECS:-"--op scan --lanes 1;--op scan --lanes 1 --plain-io;--op scan --lanes 1 --check;--op scan --lanes 8 --check;--op scan --lanes 8 --check --plain-io"}
  prefix=scan rounds=${ROUNDS:-4}
fi
IFS=';' read -ra list <<<"$specs"
for round in $(seq 1 "$rounds"); do
  for spec in "${list[@]}"; do
    name=$spec
    [ "$prefix" = scan ] && name=${spec#--op scan }  # the first runs' file names had no --op
    f="$out/${prefix}_r${round}_$(echo "$name" | tr -d ' -')"
    # shellcheck disable=SC2086  # spec is a list of options
    LD_LIBRARY_PATH=$R timeout 120 "$B/gpuscan" -s 127.0.0.1:$port bench --e2e --dtype int32 --bytes $((1 << 30)) $spec \
      --concurrency 1 --requests "${REQUESTS:-5}" --json "$f.json" >"$f.txt" 2>&1
    printf "round %s %-30s " "$round" "$spec"
    grep -E "^ +1 " "$f.txt" | awk '{print "GB/s", $3, "p50", $4, "ceiling", $(NF-1), "share", $NF}'
    grep -iE "error|wrong|differs" "$f.txt" | head -2
  done
done
