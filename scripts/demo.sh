#!/usr/bin/env bash
# `make demo`: starts gpuscan-server on the best engine available, runs the CLI on a sample
# array (info, scan, reduce, compact) and stops the server.
set -euo pipefail
build=${1:-build}
bin="$build/bin"
port=${GPUSCAN_DEMO_PORT:-50551}
addr="127.0.0.1:$port"
work=$(mktemp -d)
log="$work/server.log"

"$bin/gpuscan-server" --address "$addr" --engine auto >"$log" 2>&1 &
server_pid=$!
cleanup() {
  kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  echo "--- server log ---"; cat "$log"
  rm -rf "$work"
}
trap cleanup EXIT

for _ in $(seq 1 50); do
  "$bin/gpuscan" health --server "$addr" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { echo "server failed to start"; exit 1; }
  sleep 0.1
done

run() { echo; echo "\$ gpuscan $*"; "$bin/gpuscan" "$@"; }

# A sample array: 1..10 with a few negatives, as text.
printf '3, 1, 4, 1, -5, 9, 2, -6, 5, 3\n' >"$work/sample.txt"

run info --server "$addr"
run scan --server "$addr" --dtype int32 -i "$work/sample.txt"
run scan --server "$addr" --dtype int32 --op max --exclusive -i "$work/sample.txt"
run reduce --server "$addr" --dtype int32 --op sum -i "$work/sample.txt"
run compact --server "$addr" --dtype int32 --predicate gt --threshold 2 --output-kind both \
  -i "$work/sample.txt" -o "$work/kept.txt" --indices-output "$work/kept_idx.txt"
echo "kept values and their indices:"; paste "$work/kept.txt" "$work/kept_idx.txt"

# A larger one: 16 Mi random int32 through the pipeline in 1 MiB chunks.
head -c $((64 << 20)) /dev/urandom >"$work/big.bin"
run scan --server "$addr" --format raw --dtype int32 -i "$work/big.bin" -o "$work/big.scan.npy"
echo; echo "demo done"
