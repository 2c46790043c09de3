# scripts/gpu run image: the image (`make image`) served on the GPU machine, run as the NVIDIA
# container toolkit would run it where there is no docker or podman: the image's root filesystem
# in a mount namespace of its own (unshare, chroot), /dev/nvidia* bound in, the host driver's
# libcuda.so.1 and libnvidia-ml.so.1 mounted where the image's loader finds them, /proc, /sys,
# /dev/shm; the image's ENTRYPOINT with its Env as its User (10001). The host's network, as
# `docker run --network host`. Checked from outside: health and info (the cuda engine, the GPU),
# scan, reduce, compact, sort and histogram of random arrays against numpy (the CLI and the
# Python client), /metrics, the server's uid, time to SERVING, a 1 GiB scan inside beside the
# same binary outside, SIGTERM under load (calls end cleanly, exit 0).
# Pack: scripts/gpu pack --build BUILD --targets gpuscan --python --no-build --image IMAGE
# (.gpu-pack/image.tar.xz and image.json besides gpu.tar.xz). IMAGE_BYTES: the scan's size.
source scripts/lib/gpu-common.sh
gpu_setup
export PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1
root=/tmp/gpuscan-image
lib=usr/lib/x86_64-linux-gnu
fail=0
check() {  # check WHAT COMMAND...: prints PASS or FAIL for WHAT
  local what=$1
  shift
  if "$@"; then echo "PASS $what"; else echo "FAIL $what"; fail=1; fi
}

step "the image's root filesystem"
rm -rf "$root" && mkdir -p "$root"
xz -dc .gpu-pack/image.tar.xz | tar -C "$root" --numeric-owner -xf -
du -sh "$root" | awk '{print "unpacked:", $1}'
ls -la .gpu-pack/image.tar.xz | awk '{print "carried (xz):", $5, "bytes"}'
# The config as a runtime reads it: Entrypoint, Cmd, Env, User.
python3 - "$root" <<'EOF' >"$out/image-config.sh"
import json, shlex, sys
cfg = json.load(open(".gpu-pack/image.json"))
c = cfg.get("Docker", {}).get("config") or cfg.get("OCIv1", {}).get("config", {})
print("entry=(" + " ".join(shlex.quote(a) for a in (c.get("Entrypoint") or []) + (c.get("Cmd") or [])) + ")")
print("env=(" + " ".join(shlex.quote(e) for e in c.get("Env") or []) + ")")
print("user=" + shlex.quote(c.get("User") or "0:0"))
EOF
source "$out/image-config.sh"
echo "entrypoint: ${entry[*]}; user: $user; env: ${env[*]}"

# The same binaries outside the container: the image's own loader and libraries.
outside() { "$root/$lib/ld-linux-x86-64.so.2" --library-path "$root/$lib" "$@"; }
G() { outside "$root/usr/local/bin/gpuscan" "$@"; }

# The image's entrypoint in its own mount namespace: `"${container[@]}" &` (exec all the way, so
# that $! is the server's pid).
container=(unshare --mount --propagation private -- bash -c '
    set -e
    root=$1; lib=$2; user=$3; shift 3
    for d in /dev/nvidia* /dev/null /dev/zero /dev/full /dev/random /dev/urandom; do
      [ -e "$d" ] || continue
      if [ -d "$d" ]; then mkdir -p "$root$d"; else touch "$root$d"; fi
      mount --bind "$d" "$root$d"
    done
    mkdir -p "$root/dev/shm" "$root/proc" "$root/sys"
    mount -t tmpfs -o mode=1777 shm "$root/dev/shm"
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    # The driver libraries the toolkit mounts (libcuda for cudart, NVML for the metrics).
    for f in libcuda.so.1 libnvidia-ml.so.1; do
      src=""
      for d in /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64; do [ -e "$d/$f" ] && { src=$d/$f; break; }; done
      [ -n "$src" ] || { echo "no $f on this host"; continue; }
      touch "$root/$lib/$f"
      mount --bind "$(readlink -f "$src")" "$root/$lib/$f"
    done
    exec chroot --userspec="$user" "$root" /usr/bin/env -i "$@"
  ' container "$root" "$lib" "$user" "${env[@]}" "${entry[@]}")

step "start: time to SERVING"
t0=$(date +%s.%N)
"${container[@]}" >"$out/container.log" 2>&1 &
pid=$!
serving=""
for _ in $(seq 600); do
  if G health --timeout 1 2>/dev/null | grep -q SERVING; then serving=$(date +%s.%N); break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.05
done
[ -n "$serving" ] && awk -v a="$t0" -v b="$serving" 'BEGIN {printf "SERVING after %.2f s\n", b - a}'
check "health SERVING" test -n "$serving"
G info >"$out/info.txt" 2>&1
head -12 "$out/info.txt"
check "info names the cuda engine" grep -qi "engine.*cuda" "$out/info.txt"
check "info names the GPU" grep -q "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" "$out/info.txt"
uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
echo "server pid $pid, uid $uid"
check "runs as uid 10001" test "$uid" = 10001
check "/metrics answers" python3 -c "
import urllib.request
t = urllib.request.urlopen('http://127.0.0.1:9090/metrics', timeout=5).read().decode()
assert 'gpuscan_' in t, t[:200]"

step "scan, reduce, compact, sort and histogram against numpy (the Python client and the CLI)"
check "Python client against numpy" timeout 240 python3 - <<'EOF'
import numpy as np, gpuscan
rng = np.random.default_rng(57)
with gpuscan.Client("127.0.0.1:50051", timeout=120) as c:
    assert "cuda" in c.info()["engine"], c.info()["engine"]
    for dtype in ("int32", "int64", "uint32", "float32", "float64"):
        for n in (1, 4095, 4097, 1 << 20, 3 * (1 << 20) + 5):
            x = (rng.integers(-1000, 1000, n) if dtype[0] != "u" else rng.integers(0, 1000, n)).astype(dtype)
            if dtype[0] == "f":
                x = rng.uniform(-100, 100, n).astype(dtype)
            s = c.scan(x)
            if dtype[0] == "f":  # within rounding of the float64 sums; the same bits twice
                err = np.abs(s.astype(np.float64) - np.cumsum(x.astype(np.float64)))
                assert np.all(err <= 1e-4 * np.cumsum(np.abs(x.astype(np.float64))) + 1e-3), (dtype, n, err.max())
                assert np.array_equal(c.scan(x).view(np.uint8), s.view(np.uint8)), "same bits twice"
            else:
                assert np.array_equal(s, np.cumsum(x, dtype=dtype)), (dtype, n)
                assert c.reduce(x) == x.sum(dtype=dtype), (dtype, n)
            assert c.reduce(x, op="max") == x.max()
            assert np.array_equal(c.compact(x, predicate=("gt", 0)), x[x > 0]), (dtype, n)
            assert np.array_equal(c.sort(x), np.sort(x, kind="stable")), (dtype, n)
            h = c.histogram(x, 17, range=(-50, 50))
            assert np.array_equal(h.counts, np.histogram(x, 17, range=(-50, 50))[0]), (dtype, n)
print("python client: scan, reduce, compact, sort, histogram of 5 dtypes x 5 sizes equal numpy")
EOF
python3 -c "import numpy as np; np.save('$out/x.npy', np.random.default_rng(5).integers(-99, 99, 1 << 22).astype(np.int32))"
G scan -i "$out/x.npy" -o "$out/scan.npy" >/dev/null 2>&1
G sort -i "$out/x.npy" -o "$out/sort.npy" >/dev/null 2>&1
check "CLI scan and sort against numpy" python3 -c "
import numpy as np
x = np.load('$out/x.npy')
assert np.array_equal(np.load('$out/scan.npy'), np.cumsum(x, dtype=np.int32))
assert np.array_equal(np.load('$out/sort.npy'), np.sort(x))"
rm -f "$out"/*.npy

step "a 1 GiB int32 scan inside the container and the same binary outside, one after the other"
bytes=${IMAGE_BYTES:-$((1 << 30))}
G bench --e2e --op scan --dtype int32 --bytes "$bytes" --concurrency 1 --requests 3 >"$out/scan_inside.txt" 2>&1
# The host driver's libraries first (inside, they are mounted over the image's placeholders).
drv=$(dirname "$(ldconfig -p | awk '/libcuda.so.1/ {print $NF; exit}')")
[ -e /usr/local/nvidia/lib64/libcuda.so.1 ] && drv=/usr/local/nvidia/lib64
(GPUSCAN_ADDRESS=127.0.0.1:50061 GPUSCAN_METRICS_ADDRESS= exec "$root/$lib/ld-linux-x86-64.so.2" \
  --library-path "$drv:$root/$lib" "$root/usr/local/bin/gpuscan-server" >"$out/server_outside.log" 2>&1) &
opid=$!
for _ in $(seq 300); do G -s 127.0.0.1:50061 health --timeout 1 2>/dev/null | grep -q SERVING && break; sleep 0.05; done
G -s 127.0.0.1:50061 info | grep -E "^(engine|device)" | sed 's/^/outside: /'
G -s 127.0.0.1:50061 bench --e2e --op scan --dtype int32 --bytes "$bytes" --concurrency 1 --requests 3 >"$out/scan_outside.txt" 2>&1
printf "inside:  "; gpu_row "$out/scan_inside.txt"
printf "outside: "; gpu_row "$out/scan_outside.txt"

step "SIGTERM under load (the same binary outside first, then the container)"
# sigterm_under_load PID ADDRESS NAME: 256 MiB scans, 4 at a time, then SIGTERM; prints the exit.
sigterm_under_load() {
  G -s "$2" bench --e2e --op scan --dtype int32 --bytes $((256 << 20)) --concurrency 4 --duration 12 \
    >"$out/sigterm_load_$3.txt" 2>&1 &
  local bpid=$! t1
  sleep 4
  t1=$(date +%s.%N)
  kill -TERM "$1"
  wait "$1"
  rc=$?
  local t2
  t2=$(date +%s.%N)
  awk -v a="$t1" -v b="$t2" -v rc="$rc" -v n="$3" 'BEGIN {printf "%s: server exit %d, %.2f s after SIGTERM\n", n, rc, b - a}'
  # The process ends once its shutdown is complete (it took 7-9 s more on a GPU before
  # server_main.cc's EndProcess: bench/results/exit-h200-2026-11-29).
  if awk -v a="$t1" -v b="$t2" 'BEGIN {exit !(b - a <= 2)}'; then echo "PASS $3 exits within 2 s of SIGTERM"; else
    echo "FAIL $3 exits within 2 s of SIGTERM"; fi
  wait "$bpid"
  echo "$3: the load's bench: exit $?"; grep -E "^ +4 |calls failed" "$out/sigterm_load_$3.txt" | cut -c1-160
}
sigterm_under_load "$opid" 127.0.0.1:50061 outside
sigterm_under_load "$pid" 127.0.0.1:50051 container
check "exit 0 after SIGTERM" test "$rc" = 0
# Every failed call UNAVAILABLE or CANCELLED (gRPC's UNAVAILABLE message may say "last error:
# UNKNOWN" of the refused connect); nothing INTERNAL, no crash in the server's log.
check "calls ended with a clean status" bash -c "! grep -E 'calls failed; first: ' '$out/sigterm_load_container.txt' | grep -Evq 'first: (UNAVAILABLE|CANCELLED)' && ! grep -Eq 'INTERNAL|Segmentation|Aborted|terminate called' '$out/container.log'"
grep -E "received SIGTERM|shutting down|shutdown complete" "$out/container.log" | cut -c1-120
[ "$fail" = 0 ] && echo "ALL PASS" || echo "SOME FAILED"
exit 0
