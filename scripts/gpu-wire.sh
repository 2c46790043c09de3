#!/usr/bin/env bash
# Runs ON the GPU machine (device `run`, repo root): the raw Scan path of issue 10 part 3 (the
# server copies a chunk once: gathered from gRPC's slices into a registered payload block, scanned
# in place, sent back by reference; the client sends the Source's slice and feeds the Sink from
# the received slices), measured A/B against the binaries before it in the same run.
#   carry: .gpu-wire (wire.tar.xz: .gpu-bin/{integration_tests,gpuscan-server,gpuscan}, .gpu-rt,
#   .gpu-old/{gpuscan-server,gpuscan} built from the commit before; see bench/notes/wire.md) and,
#   optionally, .gpu-small/pkg (the Python package without its C API .so: the Python tests).
#   run(command="bash scripts/gpu-wire.sh", carry=[".gpu-wire", ".gpu-small"], timeout_s=590)
# WIRE_STEPS picks steps (default all): tests,python,ab,reduce,compact,cli. Logs in $OUT/wire-logs.tgz.
# .gpu-old is whichever commit the step compares against (for compact: the one before raw Compact).
GPU_PACK=.gpu-wire/wire.tar.xz GPU_LOGS_TGZ=wire-logs.tgz source "$(dirname "$0")/gpu-common.sh"
export LD_LIBRARY_PATH=$R
want() { [[ ",${WIRE_STEPS:-tests,python,ab,reduce,compact,cli}," == *",$1,"* ]]; }

if want tests; then
  step integration tests on the cuda engine
  GPUSCAN_TEST_ENGINE=cuda timeout 300 $B/integration_tests --gtest_brief=1 2>&1 | grep -v '\[info\]' \
    | grep -v ' -> ' >"$out/integration_cuda.log"
  echo "rc=${PIPESTATUS[0]}"
  grep -E "PASSED|FAILED|tests ran|SKIPPED" "$out/integration_cuda.log" | head -20
fi

if want python && [ -d .gpu-small/pkg ]; then
  step "Python client (grpcio, the device's newer protobuf) against a cuda server"
  printf '#!/bin/sh\nexec %s "$@"\n' "$B/gpuscan-server" >"$B/server-wrapped"
  chmod +x "$B/server-wrapped"
  "$B/server-wrapped" --address 127.0.0.1:50609 --engine cuda >"$out/server_py.log" 2>&1 &
  pypid=$!
  sleep 2
  PYTHONPATH=$PWD/.gpu-small/pkg PYTHONDONTWRITEBYTECODE=1 GPUSCAN_TARGET=127.0.0.1:50609 \
    GPUSCAN_SERVER="$B/server-wrapped" GPUSCAN_TEST_ENGINE=cuda timeout 240 \
    python3 -m pytest -q -p no:cacheprovider python/tests 2>&1 | tee "$out/python.log" | tail -4
  kill -TERM $pypid; wait $pypid
fi

# start NAME BINARY PORT [flags...]: a cuda server, waited for.
start() {
  local name=$1 bin=$2 port=$3
  shift 3
  $bin --address 127.0.0.1:$port --engine cuda "$@" >"$out/server_$name.log" 2>&1 &
  echo $! >"$out/pid_$name"
  for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:$port >/dev/null 2>&1 && return; sleep 0.2; done
  echo "server $name did not start"
}
stop() { kill -TERM "$(cat "$out/pid_$1")"; wait "$(cat "$out/pid_$1")" 2>/dev/null; }

# ab OP PREFIX "ROUNDS" "SPECS" "COMBOS": the 1 GiB int32 e2e bench of OP, one line per round, lane
# spec ("K" or "K --check", ;-separated) and combination (name:cli:port; cli old = .gpu-old's CLI).
ab() {
  local op=$1 prefix=$2 rounds=$3 combos=$5 round spec combo name cli port bin f
  local -a specs
  IFS=';' read -ra specs <<<"$4"
  for round in $rounds; do
    for spec in "${specs[@]}"; do
      set -- $spec
      for combo in $combos; do
        IFS=: read -r name cli port <<<"$combo"
        bin=$B/gpuscan
        [ "$cli" = old ] && bin=.gpu-old/gpuscan
        f="$out/${prefix}_${name}_k$1${2:+_check}_r$round"
        timeout 100 $bin -s 127.0.0.1:$port bench --e2e --op "$op" --dtype int32 --bytes $((1 << 30)) \
          --lanes $1 ${2:-} --concurrency 1 --requests 3 --json "$f.json" >"$f.txt" 2>&1
        printf "round %s %s lanes %-2s %-8s %-7s " "$round" "$op" "$1" "${2:-}" "$name"
        grep -E "^ +1 " "$f.txt" | awk '{print "GB/s", $3, "ceiling", $(NF-1), "share", $NF}'
      done
    done
  done
}

if want ab || want reduce || want compact || want cli; then
  start old .gpu-old/gpuscan-server 50601
  start new $B/gpuscan-server 50602
  start heap $B/gpuscan-server 50603 --payload-pool-bytes 0
fi

if want ab; then
  # before: both binaries of the commit before; server: that client against this server; both:
  # this client and server; heap: both, the server without its pool (raw, but staged on the GPU).
  step "1 GiB int32 scan: before / new server only / both new / both new, no pool; same run"
  ab scan ab "1 2" "1;1 --check;4;8;8 --check" "before:old:50601 server:old:50602 both:new:50602 heap:new:50603"
fi

if want reduce; then
  step "reduce, 1 GiB int32: before vs both new (raw Reduce), one stream and 8 lanes"
  ab reduce reduce "1 2" "1;8" "before:old:50601 both:new:50602"
fi

if want compact; then
  # before: both binaries of the commit before; server: that client against this server; both:
  # this client and server. The predicate keeps about half, values and indices come back.
  step "compact, 1 GiB int32: before / new server only / both new; one stream and 8 lanes"
  ab compact compact "1 2 3" "1;8;8 --check" "before:old:50601 server:old:50602 both:new:50602"
fi

if want cli; then
  step "CLI file to file, 1 GiB int32 (one call and --lanes 8), old vs new, three rounds"
  head -c $((1 << 30)) /dev/urandom >/dev/shm/in.bin  # tmpfs: the service, not the disk
  for round in 1 2 3; do
  for srv in old:50601 new:50602; do
    name=${srv%%:*} port=${srv##*:}
    for k in 1 8; do
      bin=$B/gpuscan
      [ "$name" = old ] && bin=.gpu-old/gpuscan
      /usr/bin/time -f "$name lanes $k: wall %e s" $bin -s 127.0.0.1:$port scan --format raw --dtype int32 \
        -i /dev/shm/in.bin -o /dev/shm/out_${name}_$k.bin --lanes $k --no-progress 2>&1 | tail -1
    done
  done
  done
  cmp /dev/shm/out_old_1.bin /dev/shm/out_new_1.bin && cmp /dev/shm/out_new_1.bin /dev/shm/out_new_8.bin && echo "outputs identical"
  rm -f /dev/shm/in.bin /dev/shm/out_*.bin
fi

if want ab || want reduce || want compact || want cli; then
  grep -h "payload\|error" "$out"/server_new.log | head -5
  stop old; stop new; stop heap
fi
