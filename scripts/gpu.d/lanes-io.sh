# scripts/gpu run lanes-io: striped lanes reading the input and writing the results by position
# (SourceAt/SinkAt: each lane copies at once) against the plain, ordered Source and Sink (lanes take
# turns reading, one thread takes results in order; `--plain-io`), same binaries, same run, the
# Transport ceiling beside each row. Then the Python client's native path (ScanInto through the C
# API) at 1 and 8 lanes. Pack with --python (and --extra gpuscan_old=PATH for the cli step).
# LANES_STEPS picks steps (default bench,python): bench (the rows above), chunks (8 lanes with 1, 2
# and 4 MiB chunks), cli (file to file on tmpfs, this CLI against gpuscan_old), tests (the lanes
# integration tests on the cuda engine, Python's native, lanes and retries suites), peer (issue
# 12's rows: Python one stream beside the grpcio + CuPy peer, 8 lanes, shared memory, and the
# CLI), join (where a striped array's time goes: the lane join's debug lines per lane count).
# LANES_ROUNDS (default "1 2 3"), LANES_SPECS (";"-separated bench arguments).
source scripts/lib/gpu-common.sh
gpu_setup
export LD_LIBRARY_PATH=$R
port=50631
gpu_server main 127.0.0.1:$port --engine cuda
steps=${LANES_STEPS:-bench,python}
specs=${LANES_SPECS:-"--lanes 1;--lanes 1 --check;--lanes 8 --plain-io;--lanes 8;--lanes 8 --check --plain-io;--lanes 8 --check;--lanes 4;--lanes 16"}
IFS=';' read -ra list <<<"$specs"

# row NAME LABEL ARGS...: one 1 GiB int32 bench row (3 requests) against the main server.
row() {
  local f="$out/$1"
  shift
  # shellcheck disable=SC2086
  timeout 100 $B/gpuscan -s 127.0.0.1:$port bench --e2e --dtype int32 --bytes $((1 << 30)) "$@" \
    --concurrency 1 --requests 3 --json "$f.json" >"$f.txt" 2>&1
  gpu_row "$f.txt"
  grep -iE "error|wrong" "$f.txt" | head -2
}

if gpu_want "$steps" bench; then
  step "1 GiB int32 scan, GB/s of input: by position vs --plain-io, ceiling in the same run"
  for round in ${LANES_ROUNDS:-1 2 3}; do
    for spec in "${list[@]}"; do
      printf "round %s %-32s " "$round" "$spec"
      # shellcheck disable=SC2086
      row "scan_r${round}_$(echo "$spec" | tr -d ' -')" --op scan $spec
    done
    for spec in "--lanes 8 --plain-io" "--lanes 8"; do
      printf "round %s compact %-24s " "$round" "$spec"
      # shellcheck disable=SC2086
      row "compact_r${round}_$(echo "$spec" | tr -d ' -')" --op compact $spec
    done
  done
fi

if gpu_want "$steps" chunks; then
  step "1 GiB int32 scan at 8 lanes by chunk size, ceiling at the same chunks"
  for round in ${LANES_ROUNDS:-1 2 3}; do
    for c in 1048576 2097152 4194304; do
      for check in "" --check; do
        f="$out/chunks_r${round}_c${c}${check:+_check}"
        timeout 100 $B/gpuscan -s 127.0.0.1:$port --chunk-bytes $c bench --e2e --op scan --dtype int32 \
          --bytes $((1 << 30)) --lanes 8 $check --concurrency 1 --requests 3 --json "$f.json" >"$f.txt" 2>&1
        printf "round %s chunk %-8s %-8s " "$round" "$c" "$check"
        gpu_row "$f.txt"
      done
    done
  done
fi

if gpu_want "$steps" cli; then
  step "CLI file to file, 1 GiB int32 raw on tmpfs: this CLI (pread/pwrite by lane) vs gpuscan_old"
  head -c $((1 << 30)) /dev/urandom >/dev/shm/in.bin
  for round in 1 2 3; do
    for cli in old new; do
      bin=$B/gpuscan
      [ "$cli" = old ] && bin=$B/gpuscan_old
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

if gpu_want "$steps" tests; then
  step "lanes, shards and retries integration tests on the cuda engine"
  GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 --gtest_filter='LanesTest.*:*Shard*:*Retr*' 2>&1 |
    grep -v '\[info\]' | tee "$out/integration_lanes.log" | tail -4
  if [ -d "$P/gpuscan" ]; then
    step "Python native, lanes and retries suites against the cuda server"
    GPUSCAN_TARGET=127.0.0.1:$port gpu_pytest 200 python/tests/test_native.py python/tests/test_lanes.py python/tests/test_retries.py 2>&1 \
      | tee "$out/python_tests.log" | tail -4
  fi
fi

if gpu_want "$steps" peer && [ -d "$P/gpuscan" ]; then
  step "issue 12's rows in one run: Python one stream beside the grpcio + CuPy peer, 8 lanes, shared memory; the C++ CLI"
  mkdir -p /dev/shm/gpuscan-shm
  gpu_server shm 127.0.0.1:50632 --engine cuda --shm-dir /dev/shm/gpuscan-shm
  for k in 1 8; do
    peer=off shared=off
    [ $k = 1 ] && peer=on shared=on
    PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1 timeout 200 python3 -m gpuscan.bench \
      --target 127.0.0.1:50632 --lanes $k --repeat 3 --peer $peer --shared $shared --native on \
      --json "$out/py12_k$k.json" 2>&1 | tee "$out/py12_k$k.txt" | sed -n '/^operation/,$p'
  done
  for spec in "--lanes 1 --check" "--lanes 8 --check" "--shm --check"; do
    f="$out/cli12_$(echo "$spec" | tr -d ' -')"
    # shellcheck disable=SC2086
    timeout 100 $B/gpuscan -s 127.0.0.1:50632 bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) $spec \
      --concurrency 1 --requests 3 --json "$f.json" >"$f.txt" 2>&1
    printf "C++ CLI %-20s " "$spec"
    gpu_row "$f.txt"
  done
  gpu_stop shm
fi

if gpu_want "$steps" join; then
  step "where a striped array's time goes: the lane join's debug lines (a server at --log-level debug)"
  gpu_server debug 127.0.0.1:50633 --engine cuda --log-level debug
  for spec in ${LANES_JOIN:-scan:1 scan:4 scan:8 scan:16 reduce:8}; do
    op=${spec%:*} k=${spec#*:}
    echo "--- $op --lanes $k"
    : >"$out/server_debug.log"
    timeout 60 $B/gpuscan -s 127.0.0.1:50633 bench --e2e --op "$op" --dtype int32 --bytes $((1 << 30)) --lanes "$k" \
      --concurrency 1 --requests 3 2>&1 | grep -E "^ +1 |rror"
    grep -a "lanes array" "$out/server_debug.log" | tail -3 | sed 's/.*lanes array [0-9a-f]*: //'
  done
  gpu_stop debug
fi

if gpu_want "$steps" python && [ -d "$P/gpuscan" ]; then
  step "Python native path (ScanInto through the C API), 1 GiB int32"
  for k in 1 8; do
    PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1 timeout 120 python3 -m gpuscan.bench \
      --target 127.0.0.1:$port --lanes $k --repeat 3 --peer off --shared off --native on \
      --json "$out/python_k$k.json" 2>&1 | tee "$out/python_k$k.txt" | tail -6
  done
fi
gpu_stop main
