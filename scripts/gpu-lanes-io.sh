#!/usr/bin/env bash
# Runs ON the GPU machine (device `run`, repo root): striped lanes reading the input and writing
# the results by position (SourceAt/SinkAt: each lane copies at once) against the plain, ordered
# Source and Sink (lanes take turns reading, one thread takes results in order; `--plain-io`),
# same binaries, same run, the Transport ceiling beside each row. Then the Python client's
# native path (ScanInto through the C API) at 1 and 8 lanes.
#   carry: .gpu-lanes (lanes.tar.xz: .gpu-bin/{gpuscan-server,gpuscan,integration_tests}, .gpu-rt,
#   optionally .gpu-old/gpuscan, the CLI of the commit before) and .gpu-small/pkg (the Python
#   package with its C API library).
#   run(command="bash scripts/gpu-lanes-io.sh", carry=[".gpu-lanes", ".gpu-small"], timeout_s=590)
# LANES_STEPS picks steps (default bench,python): bench (the rows above), chunks (8 lanes with 1, 2
# and 4 MiB chunks), cli (file to file on tmpfs, this CLI against .gpu-old's), tests (the lanes
# integration tests on the cuda engine, Python's native, lanes and retries suites), peer (issue
# 12's rows: Python one stream beside the grpcio + CuPy peer, 8 lanes, shared memory, and the CLI).
# LANES_ROUNDS (default "1 2 3"), LANES_SPECS (";"-separated bench arguments). Logs in $OUT/lanes-logs.tgz.
GPU_PACK=.gpu-lanes/lanes.tar.xz GPU_LOGS_TGZ=lanes-logs.tgz source "$(dirname "$0")/gpu-common.sh"
export LD_LIBRARY_PATH=$R
port=50631
$B/gpuscan-server --address 127.0.0.1:$port --engine cuda >"$out/server.log" 2>&1 &
spid=$!
for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:$port >/dev/null 2>&1 && break; sleep 0.2; done
want() { [[ ",${LANES_STEPS:-bench,python}," == *",$1,"* ]]; }
specs=${LANES_SPECS:-"--lanes 1;--lanes 1 --check;--lanes 8 --plain-io;--lanes 8;--lanes 8 --check --plain-io;--lanes 8 --check;--lanes 4;--lanes 16"}
IFS=';' read -ra list <<<"$specs"
want bench && step "1 GiB int32 scan, GB/s of input: by position vs --plain-io, ceiling in the same run"
want bench && for round in ${LANES_ROUNDS:-1 2 3}; do
  for spec in "${list[@]}"; do
    f="$out/scan_r${round}_$(echo "$spec" | tr -d ' -')"
    # shellcheck disable=SC2086
    timeout 100 $B/gpuscan -s 127.0.0.1:$port bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) $spec \
      --concurrency 1 --requests 3 --json "$f.json" >"$f.txt" 2>&1
    printf "round %s %-32s " "$round" "$spec"
    grep -E "^ +1 " "$f.txt" | awk '{print "GB/s", $3, "ceiling", $(NF-1), "share", $NF}'
    grep -iE "error|wrong" "$f.txt" | head -2
  done
  for spec in "--lanes 8 --plain-io" "--lanes 8"; do
    f="$out/compact_r${round}_$(echo "$spec" | tr -d ' -')"
    # shellcheck disable=SC2086
    timeout 100 $B/gpuscan -s 127.0.0.1:$port bench --e2e --op compact --dtype int32 --bytes $((1 << 30)) $spec \
      --concurrency 1 --requests 3 --json "$f.json" >"$f.txt" 2>&1
    printf "round %s compact %-24s " "$round" "$spec"
    grep -E "^ +1 " "$f.txt" | awk '{print "GB/s", $3, "ceiling", $(NF-1), "share", $NF}'
  done
done

if want chunks; then
  step "1 GiB int32 scan at 8 lanes by chunk size, ceiling at the same chunks"
  for round in ${LANES_ROUNDS:-1 2 3}; do
    for c in 1048576 2097152 4194304; do
      for check in "" --check; do
        f="$out/chunks_r${round}_c${c}${check:+_check}"
        timeout 100 $B/gpuscan -s 127.0.0.1:$port --chunk-bytes $c bench --e2e --op scan --dtype int32 \
          --bytes $((1 << 30)) --lanes 8 $check --concurrency 1 --requests 3 --json "$f.json" >"$f.txt" 2>&1
        printf "round %s chunk %-8s %-8s " "$round" "$c" "$check"
        grep -E "^ +1 " "$f.txt" | awk '{print "GB/s", $3, "ceiling", $(NF-1), "share", $NF}'
      done
    done
  done
fi

if want cli; then
  step "CLI file to file, 1 GiB int32 raw on tmpfs: this CLI (pread/pwrite by lane) vs the commit before"
  head -c $((1 << 30)) /dev/urandom >/dev/shm/in.bin
  for round in 1 2 3; do
    for cli in old new; do
      bin=$B/gpuscan
      [ "$cli" = old ] && bin=.gpu-old/gpuscan
      [ -x "$bin" ] || continue
      for k in 1 8; do
        rm -f /dev/shm/out_${cli}_$k.bin
        /usr/bin/time -f "$cli lanes $k: wall %e s" $bin -s 127.0.0.1:$port scan --format raw --dtype int32 \
          -i /dev/shm/in.bin -o /dev/shm/out_${cli}_$k.bin --lanes $k --no-progress 2>&1 | tail -1
      done
    done
  done
  cmp /dev/shm/out_new_1.bin /dev/shm/out_new_8.bin && { [ ! -f /dev/shm/out_old_1.bin ] || cmp /dev/shm/out_old_1.bin /dev/shm/out_new_8.bin; } &&
    echo "outputs identical"
  rm -f /dev/shm/in.bin /dev/shm/out_*.bin
fi

if want tests; then
  step "lanes, shards and retries integration tests on the cuda engine"
  GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 --gtest_filter='LanesTest.*:*Shard*:*Retr*' 2>&1 |
    grep -v '\[info\]' | tee "$out/integration_lanes.log" | tail -4
  if [ -d .gpu-small/pkg ]; then
    step "Python native, lanes and retries suites against the cuda server"
    printf '#!/bin/sh\nexec %s "$@"\n' "$B/gpuscan-server" >"$B/server-wrapped"  # as gpu-wire.sh
    chmod +x "$B/server-wrapped"
    PYTHONPATH=$PWD/.gpu-small/pkg PYTHONDONTWRITEBYTECODE=1 GPUSCAN_TARGET=127.0.0.1:$port GPUSCAN_TEST_ENGINE=cuda \
      GPUSCAN_SERVER=$B/server-wrapped timeout 200 python3 -m pytest -q -p no:cacheprovider python/tests/test_native.py \
      python/tests/test_lanes.py python/tests/test_retries.py 2>&1 | tee "$out/python_tests.log" | tail -4
  fi
fi

if want peer && [ -d .gpu-small/pkg ]; then
  step "issue 12's rows in one run: Python one stream beside the grpcio + CuPy peer, 8 lanes, shared memory; the C++ CLI"
  mkdir -p /dev/shm/gpuscan-shm
  $B/gpuscan-server --address 127.0.0.1:50632 --engine cuda --shm-dir /dev/shm/gpuscan-shm >"$out/server_shm.log" 2>&1 &
  shm_pid=$!
  for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:50632 >/dev/null 2>&1 && break; sleep 0.2; done
  for k in 1 8; do
    peer=off shared=off
    [ $k = 1 ] && peer=on shared=on
    PYTHONPATH=$PWD/.gpu-small/pkg PYTHONDONTWRITEBYTECODE=1 timeout 200 python3 -m gpuscan.bench \
      --target 127.0.0.1:50632 --lanes $k --repeat 3 --peer $peer --shared $shared --native on \
      --json "$out/py12_k$k.json" 2>&1 | tee "$out/py12_k$k.txt" | sed -n '/^operation/,$p'
  done
  for spec in "--lanes 1 --check" "--lanes 8 --check" "--shm --check"; do
    f="$out/cli12_$(echo "$spec" | tr -d ' -')"
    # shellcheck disable=SC2086
    timeout 100 $B/gpuscan -s 127.0.0.1:50632 bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) $spec \
      --concurrency 1 --requests 3 --json "$f.json" >"$f.txt" 2>&1
    printf "C++ CLI %-20s " "$spec"
    grep -E "^ +1 " "$f.txt" | awk '{print "GB/s", $3, "ceiling", $(NF-1), "share", $NF}'
  done
  kill -TERM $shm_pid
  wait $shm_pid
fi

if want python && [ -d .gpu-small/pkg ]; then
  step "Python native path (ScanInto through the C API), 1 GiB int32"
  for k in 1 8; do
    PYTHONPATH=$PWD/.gpu-small/pkg PYTHONDONTWRITEBYTECODE=1 timeout 120 python3 -m gpuscan.bench \
      --target 127.0.0.1:$port --lanes $k --repeat 3 --peer off --shared off --native on \
      --json "$out/python_k$k.json" 2>&1 | tee "$out/python_k$k.txt" | tail -6
  done
fi
kill -TERM $spid
wait $spid
