#!/usr/bin/env bash
# Runs ON the GPU machine (device `run`, repo root): does a gRPC core channel argument move the
# 1 GiB int32 scan over loopback (one stream and 8 lanes, the ceiling in the same run)? Each
# configuration gets its own cuda server started with `--grpc-arg` and a CLI with the same
# `--channel-arg`, so both ends advertise the same HTTP/2 settings.
#   carry: .gpu-args (args.tar.xz: .gpu-bin/{gpuscan-server,gpuscan}, .gpu-rt)
#   run(command="bash scripts/gpu-grpc-args.sh", carry=[".gpu-args"], timeout_s=590)
# ARGS_CONFIGS overrides the configurations ("name:arg,arg;..."), ARGS_ROUNDS the rounds (2),
# ARGS_BYTES the size, ARGS_ENGINE the engine (a local try: ARGS_ENGINE=cpu ARGS_BYTES=16777216).
GPU_PACK=.gpu-args/args.tar.xz GPU_LOGS_TGZ=args-logs.tgz source "$(dirname "$0")/gpu-common.sh"
export LD_LIBRARY_PATH=$R
configs=${ARGS_CONFIGS:-"default:;frame1m:grpc.http2.max_frame_size=1048576;frame4m:grpc.http2.max_frame_size=4194304;frame16m:grpc.http2.max_frame_size=16777215;frame4m_look8m:grpc.http2.max_frame_size=4194304,grpc.http2.lookahead_bytes=8388608"}
port=50700
IFS=';' read -ra list <<<"$configs"
for c in "${list[@]}"; do
  name=${c%%:*} args=${c#*:}
  sflags=() cflags=()
  IFS=',' read -ra kv <<<"$args"
  for a in "${kv[@]}"; do [ -n "$a" ] && sflags+=(--grpc-arg "$a") && cflags+=(--channel-arg "$a"); done
  port=$((port + 1))
  $B/gpuscan-server --address 127.0.0.1:$port --engine "${ARGS_ENGINE:-cuda}" "${sflags[@]}" >"$out/server_$name.log" 2>&1 &
  echo "$! $port ${cflags[*]}" >"$out/cfg_$name"
  for _ in $(seq 100); do $B/gpuscan -s 127.0.0.1:$port health >/dev/null 2>&1 && break; sleep 0.2; done
done
for round in $(seq "${ARGS_ROUNDS:-2}"); do
  for k in 1 8; do
    for c in "${list[@]}"; do
      name=${c%%:*}
      read -r pid p cf <<<"$(cat "$out/cfg_$name")"
      f="$out/scan_${name}_k${k}_r$round"
      # shellcheck disable=SC2086
      timeout 100 $B/gpuscan -s 127.0.0.1:$p $cf bench --e2e --op scan --dtype int32 --bytes "${ARGS_BYTES:-1073741824}" \
        --lanes $k --concurrency 1 --requests 3 --json "$f.json" >"$f.txt" 2>&1
      printf "round %s lanes %-2s %-15s " "$round" "$k" "$name"
      grep -E "^ +1 " "$f.txt" | awk '{print "GB/s", $3, "ceiling", $(NF-1), "share", $NF}'
    done
  done
done
for c in "${list[@]}"; do
  read -r pid _ <<<"$(cat "$out/cfg_${c%%:*}")"
  kill -TERM "$pid"
done
wait
