# The shared part of the GPU driver (scripts/gpu), sourced from the repository root by
# scripts/gpu.d/*.sh and by the run scripts in bench/results/*/. Defines functions only; a script
# that runs ON the GPU machine calls gpu_setup first.
#
# The pack (made here by `scripts/gpu pack`, carried to the device as `.gpu-pack`):
#   .gpu-pack/gpu.tar.xz     .gpu-bin/ (stripped binaries; extra builds as <binary>_<name>),
#                            .gpu-rt/ (their shared libraries but the C/C++ runtime),
#                            .gpu-py/gpuscan/ (the Python package, with `pack --python`)
#   .gpu-pack/python.tar.xz  pyb/: a Python 3.11 with dask (`pack --dask`; scripts/lib/pack-dask-python.sh)

# shellcheck disable=SC2034  # both used by the scripts that source this
# The binaries every device suite needs (`scripts/gpu pack` builds these unless --targets says).
GPU_TARGETS=(gpu_kernel_tests gpu_engine_tests integration_tests isolation_tests shm_region_test gpuscan-server
  gpuscan kernel_suite gpuscan_soak)
# Libraries every Linux has, never carried (../shared/device/bundle-libs.sh skips the same, but libutil).
GPU_SYSTEM_LIBS='/(libc|libm|libgcc_s|libstdc\+\+|ld-linux-x86-64|libpthread|libdl|librt|libcuda|libutil)\.so'

step() { echo; echo "=== $* ==="; }

# gpu_want STEPS NAME: whether NAME is one of the comma-separated STEPS.
gpu_want() { [[ ",$1," == *",$2,"* ]]; }

# gpu_unpack TARBALL DIR ENTRY...: unpacks TARBALL (whose top-level entries are ENTRY...) into DIR,
# unless DIR holds it already: a warm machine keeps the last call's files, so unpack again only
# when the tarball changed (its checksum is kept in DIR/ENTRY/.pack-sum).
gpu_unpack() {
  local tarball=$1 dir=$2 sum
  shift 2
  [ -f "$tarball" ] || return 0
  sum=$(cksum <"$tarball")
  [ "$(cat "$dir/$1/.pack-sum" 2>/dev/null)" = "$sum" ] && return 0
  mkdir -p "$dir" && (cd "$dir" && rm -rf "$@")
  xz -dc "$tarball" | tar -C "$dir" -xf - && echo "$sum" >"$dir/$1/.pack-sum"
}

# gpu_setup: ON the GPU machine, in the repository root. Unpacks .gpu-pack/gpu.tar.xz and sets
#   out  the logs' folder: $OUT, or with GPU_LOGS_TGZ=name.tgz a scratch folder that comes back as
#        $OUT/name.tgz (a device call returns at most 8 files; many logs travel as one)
#   final  $OUT itself (files that must come back apart)
#   B, R, P  the binaries, their libraries, the Python package's folder (PYTHONPATH)
# and writes the device to $out/device.txt (and prints it). Servers started with gpu_server are
# stopped on exit, before the logs are packed.
gpu_setup() {
  set -uo pipefail
  final=${OUT:-/tmp/gpuscan-out}
  mkdir -p "$final"
  if [ -n "${GPU_LOGS_TGZ:-}" ]; then
    out=$(mktemp -d)
    _gpu_logs_tgz=$GPU_LOGS_TGZ
  else
    out=$final _gpu_logs_tgz=
  fi
  trap _gpu_exit EXIT
  gpu_unpack .gpu-pack/gpu.tar.xz . .gpu-bin .gpu-rt .gpu-py
  B=$PWD/.gpu-bin R=$PWD/.gpu-rt P=$PWD/.gpu-py
  { nvidia-smi -L
    nvidia-smi --query-gpu=driver_version,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader
    echo "cores $(nproc)"; } 2>&1 | tee "$out/device.txt"
  [ "$out" = "$final" ] || cp "$out/device.txt" "$final/"
}

# gpu_at_exit COMMAND: runs COMMAND on exit, after the servers stopped and before the logs are packed.
gpu_at_exit() { _gpu_exit_cmds+="$1;"; }
declare -gA gpu_pids=()
_gpu_exit_cmds=
_gpu_exit() {
  local pid
  for pid in "${gpu_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${gpu_pids[@]}"; do wait "$pid" 2>/dev/null; done
  eval "$_gpu_exit_cmds"
  [ -z "${_gpu_logs_tgz:-}" ] || tar -czf "$final/$_gpu_logs_tgz" -C "$out" .
}

# gpu_server NAME ADDRESS [server flags...]: starts a server (GPU_SERVER_BIN, default
# $B/gpuscan-server) on ADDRESS (host:port or unix:path), its log in $out/server_NAME.log, and
# waits until it says it is listening (its own word: TLS and unix sockets too). gpu_stop NAME
# stops it and waits for it.
gpu_server() {
  local name=$1 address=$2
  shift 2
  LD_LIBRARY_PATH=$R "${GPU_SERVER_BIN:-$B/gpuscan-server}" --address "$address" "$@" >"$out/server_$name.log" 2>&1 &
  gpu_pids[$name]=$!
  for _ in $(seq 300); do
    grep -q "listening on" "$out/server_$name.log" && return 0
    kill -0 "${gpu_pids[$name]}" 2>/dev/null || break
    sleep 0.1
  done
  echo "server $name did not start"
  tail -5 "$out/server_$name.log"
  return 1
}
gpu_stop() {  # returns the server's exit status
  local pid=${gpu_pids[$1]:-} rc
  [ -n "$pid" ] || return 0
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null
  rc=$?
  unset "gpu_pids[$1]"
  return $rc
}

# gpu_row FILE [CONCURRENCY]: the GB/s of one `gpuscan bench --e2e` log's row beside its Transport
# ceiling (the bench prints the ceiling and the share of it last).
gpu_row() {
  grep -E "^ +${2:-1} " "$1" | awk '{print "GB/s", $3, "ceiling", $(NF-1), "share", $NF}'
}

# gpu_wrapped_server: prints the path of a script that runs the carried server with its libraries,
# for tests that start servers themselves (GPUSCAN_SERVER_BIN) without the libraries in their own
# environment.
gpu_wrapped_server() {
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$R" "$B/gpuscan-server" >"$B/server-wrapped"
  chmod +x "$B/server-wrapped"
  echo "$B/server-wrapped"
}

# gpu_pytest SECONDS PATH...: the Python tests on the cuda engine, with the carried package and its
# libraries (the native path's C API needs them); tests that start servers start the carried one.
# GPUSCAN_TARGET=host:port before it points the tests at a running server.
gpu_pytest() {
  local seconds=$1
  shift
  PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1 LD_LIBRARY_PATH=$R GPUSCAN_TEST_ENGINE=cuda \
    GPUSCAN_SERVER_BIN="$(gpu_wrapped_server)" timeout "$seconds" python3 -m pytest -q -p no:cacheprovider "$@"
}

# gpu_sanitizer: compute-sanitizer's path (not on PATH on every image).
gpu_sanitizer() { command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer; }

# gpu_sanitize TOOL FILTER: compute-sanitizer's TOOL (memcheck, racecheck, ...) on the kernel tests
# that FILTER picks, failing on any error; the output in $out/TOOL.log, its exit status and tail
# printed. The run scripts of bench/results check a kernel change this way before timing it.
gpu_sanitize() {
  step "$1: $2"
  timeout 300 "$(gpu_sanitizer)" --tool "$1" --error-exitcode 9 "$B/gpu_kernel_tests" --gtest_brief=1 \
    --gtest_filter="$2" >"$out/$1.log" 2>&1
  echo "$1 exit $?"
  tail -3 "$out/$1.log"
}
