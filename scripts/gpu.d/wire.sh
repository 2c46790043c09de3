# scripts/gpu run wire: the raw data path of issue 10 part 3 (the server copies a chunk once:
# gathered from gRPC's slices into a registered payload block, scanned in place, sent back by
# reference; the client sends the Source's slice and feeds the Sink from the received slices),
# measured A/B against an older build in the same run (bench/notes/wire.md). Pack with
#   scripts/gpu pack --python --extra gpuscan-server_old=OLD/bin/gpuscan-server --extra gpuscan_old=OLD/bin/gpuscan
# (OLD: a build of the commit to compare against; for compact, the one before raw Compact).
# WIRE_STEPS picks steps (default all): tests,python,ab,reduce,compact,cli.
source scripts/lib/gpu-common.sh
gpu_setup
export LD_LIBRARY_PATH=$R
steps=${WIRE_STEPS:-tests,python,ab,reduce,compact,cli}

if gpu_want "$steps" tests; then
  step integration tests on the cuda engine
  GPUSCAN_TEST_ENGINE=cuda timeout 300 $B/integration_tests --gtest_brief=1 2>&1 | grep -v '\[info\]' \
    | grep -v ' -> ' >"$out/integration_cuda.log"
  echo "rc=${PIPESTATUS[0]}"
  grep -E "PASSED|FAILED|tests ran|SKIPPED" "$out/integration_cuda.log" | head -20
fi

if gpu_want "$steps" python && [ -d "$P/gpuscan" ]; then
  step "Python client (grpcio, the device's newer protobuf) against a cuda server"
  gpu_server py 127.0.0.1:50609 --engine cuda
  GPUSCAN_TARGET=127.0.0.1:50609 gpu_pytest 240 python/tests 2>&1 | tee "$out/python.log" | tail -4
  gpu_stop py
fi

# ab OP PREFIX "ROUNDS" "SPECS" "COMBOS": the 1 GiB int32 e2e bench of OP, one line per round, lane
# spec ("K" or "K --check", ;-separated) and combination (name:cli:port; cli old = the old build's CLI).
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
        [ "$cli" = old ] && bin=$B/gpuscan_old
        f="$out/${prefix}_${name}_k$1${2:+_check}_r$round"
        timeout 100 $bin -s 127.0.0.1:$port bench --e2e --op "$op" --dtype int32 --bytes $((1 << 30)) \
          --lanes $1 ${2:-} --concurrency 1 --requests 3 --json "$f.json" >"$f.txt" 2>&1
        printf "round %s %s lanes %-2s %-8s %-7s " "$round" "$op" "$1" "${2:-}" "$name"
        gpu_row "$f.txt"
      done
    done
  done
}

if gpu_want "$steps" ab || gpu_want "$steps" reduce || gpu_want "$steps" compact || gpu_want "$steps" cli; then
  GPU_SERVER_BIN=$B/gpuscan-server_old gpu_server old 127.0.0.1:50601 --engine cuda
  gpu_server new 127.0.0.1:50602 --engine cuda
  gpu_server heap 127.0.0.1:50603 --engine cuda --payload-pool-bytes 0
fi

if gpu_want "$steps" ab; then
  # before: both binaries of the old build; server: that client against this server; both:
  # this client and server; heap: both, the server without its pool (raw, but staged on the GPU).
  step "1 GiB int32 scan: before / new server only / both new / both new, no pool; same run"
  ab scan ab "1 2" "1;1 --check;4;8;8 --check" "before:old:50601 server:old:50602 both:new:50602 heap:new:50603"
fi

if gpu_want "$steps" reduce; then
  step "reduce, 1 GiB int32: before vs both new (raw Reduce), one stream and 8 lanes"
  ab reduce reduce "1 2" "1;8" "before:old:50601 both:new:50602"
fi

if gpu_want "$steps" compact; then
  # before: both binaries of the old build; server: that client against this server; both:
  # this client and server. The predicate keeps about half, values and indices come back.
  step "compact, 1 GiB int32: before / new server only / both new; one stream and 8 lanes"
  ab compact compact "1 2 3" "1;8;8 --check" "before:old:50601 server:old:50602 both:new:50602"
fi

if gpu_want "$steps" cli; then
  step "CLI file to file, 1 GiB int32 (one call and --lanes 8), old vs new, three rounds"
  head -c $((1 << 30)) /dev/urandom >/dev/shm/in.bin  # tmpfs: the service, not the disk
  for round in 1 2 3; do
    for srv in old:50601 new:50602; do
      name=${srv%%:*} port=${srv##*:}
      for k in 1 8; do
        bin=$B/gpuscan
        [ "$name" = old ] && bin=$B/gpuscan_old
        /usr/bin/time -f "$name lanes $k: wall %e s" $bin -s 127.0.0.1:$port scan --format raw --dtype int32 \
          -i /dev/shm/in.bin -o /dev/shm/out_${name}_$k.bin --lanes $k --no-progress 2>&1 | tail -1
      done
    done
  done
  cmp /dev/shm/out_old_1.bin /dev/shm/out_new_1.bin && cmp /dev/shm/out_new_1.bin /dev/shm/out_new_8.bin && echo "outputs identical"
  rm -f /dev/shm/in.bin /dev/shm/out_*.bin
fi

if [ -n "${gpu_pids[new]:-}" ]; then
  grep -h "payload\|error" "$out"/server_new.log | head -5
  gpu_stop old; gpu_stop new; gpu_stop heap
fi
