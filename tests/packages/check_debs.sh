#!/usr/bin/env bash
# The Debian packages (`make deb`, cmake/packages.cmake) as a user meets them: `apt-get install
# ./*.deb` into a clean Debian 12 root (debootstrap minbase, scripts/lib/standin.sh), which pulls
# their dependencies from the mirror; then, inside that root:
#   the service user and settings file exist, the systemd unit is installed and enabled;
#   gpuscan-server (as the gpuscan user) answers `gpuscan health` and a scan through the CLI;
#   the Python package scans through its native path;
#   README.md's C++ example builds against libgpuscan-dev with find_package and with pkg-config,
#   and both binaries run against the server;
#   `apt-get purge gpuscan-server` removes the settings file and leaves no process.
# Slow (the dependencies' download and a compiler in the root): label packages, `make test-debs`.
# Needs root (chroot, mounts). usage: GPUSCAN_TEST_DEBS=1 check_debs.sh PACKAGES_DIR EXAMPLE_CC
set -euo pipefail
if [ "${GPUSCAN_TEST_DEBS:-}" != 1 ]; then
  echo "SKIP: the packages' test runs under make test-debs (GPUSCAN_TEST_DEBS=1): it downloads and compiles"
  exit 77
fi
debs=$(cd "$1" && pwd) example=$2
cd "$(dirname "$0")/../.."
CACHE=${IMAGE_CACHE_DIR:-build-image}
STANDIN_SUITE=bookworm
say() { echo "== $*" >&2; }
die() { echo "check_debs: error: $*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }
source scripts/lib/standin.sh
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (chroot)"; exit 77; }
ls "$debs"/*.deb >/dev/null 2>&1 || die "no .deb in $debs (make deb)"
tarball=$(standin_tarball)

root=$(mktemp -d /tmp/gpuscan-debs.XXXXXX)
cleanup() {
  pkill -f "$root/usr/bin/gpuscan-server" 2>/dev/null || true
  for m in dev/pts dev proc sys; do umount -l "$root/$m" 2>/dev/null || true; done
  rm -rf "$root"
}
trap cleanup EXIT
start=$(date +%s)
say "a clean Debian 12 root from $tarball"
tar -C "$root" -xzf "$tarball"
for m in proc sys dev dev/pts; do mount --bind "/$m" "$root/$m"; done
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/tmp/debs"
cp "$debs"/*.deb "$root/tmp/debs/"
cp -r tests/install/consumer "$root/tmp/example"  # the program tests/install builds too
cp "$example" "$root/tmp/example/example.cc"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DEBIAN_FRONTEND=noninteractive "$@"; }

say "apt-get install ./*.deb (and a compiler, cmake for the example)"
in_root apt-get update -qq
in_root bash -c 'apt-get install -y -qq --no-install-recommends /tmp/debs/*.deb g++ cmake make >/tmp/apt.log 2>&1 || { tail -40 /tmp/apt.log; exit 1; }'
in_root dpkg -l gpuscan-server gpuscan-cli libgpuscan-dev python3-gpuscan | tail -4
installed=$(date +%s)

port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
in_root bash -euo pipefail -s "$port" <<'INSIDE'
port=$1
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }
uid=$(id -u gpuscan) || fail "no gpuscan user"
[ "$uid" -lt 1000 ] || fail "gpuscan is uid $uid, not a system user"
[ "$(getent passwd gpuscan | cut -d: -f7)" = /usr/sbin/nologin ] || fail "gpuscan has a login shell"
ok "system user gpuscan (uid $uid, no login)"
[ -f /etc/default/gpuscan-server ] || fail "no /etc/default/gpuscan-server"
[ -f /usr/lib/systemd/system/gpuscan-server.service ] || fail "no systemd unit"
ok "settings file and systemd unit installed"

# As systemd would start it: the unit's user, its settings file, only the port moved.
set -a; . /etc/default/gpuscan-server; set +a
export GPUSCAN_ADDRESS=127.0.0.1:$port GPUSCAN_METRICS_ADDRESS= GPUSCAN_ENGINE=cpu
setpriv --reuid gpuscan --regid gpuscan --init-groups /usr/bin/gpuscan-server >/tmp/server.log 2>&1 &
server=$!
for _ in $(seq 100); do gpuscan -s "127.0.0.1:$port" health --timeout 1 >/dev/null 2>&1 && break; sleep 0.1; done
gpuscan -s "127.0.0.1:$port" health | grep -q SERVING || { cat /tmp/server.log; fail "health is not SERVING"; }
[ "$(ps -o user= -p "$server")" = gpuscan ] || fail "the server does not run as gpuscan"
ok "gpuscan-server as user gpuscan: SERVING"
out=$(echo "3, 1, 4, 1, -5, 9, 2, -6" | gpuscan -s "127.0.0.1:$port" scan --dtype int64 2>/dev/null | paste -sd' ')
[ "$out" = "3 4 8 9 4 13 15 9" ] || fail "CLI scan gave: $out"
ok "gpuscan scan of 3, 1, 4, 1, -5, 9, 2, -6: $out"

python3 - "$port" <<'PY'
import sys
import numpy as np
import gpuscan
from gpuscan import _native
rng = np.random.default_rng()
x = rng.integers(-1000, 1000, 1_000_003, dtype=np.int32)
with gpuscan.Client(f"127.0.0.1:{sys.argv[1]}") as c:
    assert np.array_equal(c.scan(x), np.cumsum(x, dtype=np.int32)), "scan differs from numpy"
    assert c.reduce(x, "max") == x.max()
lib, why = _native.library()
assert lib is not None, "the native data path did not load: " + why
print("ok: python3-gpuscan: scan and reduce of 1,000,003 int32 equal numpy; native path loaded")
PY

cd /tmp/example
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/tmp/cmake.log 2>&1 || { cat /tmp/cmake.log; fail "find_package(gpuscan) configure"; }
cmake --build build >/tmp/build.log 2>&1 || { tail -30 /tmp/build.log; fail "find_package(gpuscan) build"; }
read -r -a flags <<<"$(pkg-config --cflags --libs gpuscan)"
g++ -std=c++17 -O1 example.cc "${flags[@]}" -o example_pc || fail "pkg-config build"
build/capi_version || fail "the C API's version"
for bin in build/example ./example_pc; do
  GPUSCAN_DOCS_TARGET=127.0.0.1:$port "$bin" >/tmp/example.log 2>&1 || { cat /tmp/example.log; fail "$bin"; }
done
ok "README's C++ example built with find_package(gpuscan) and with pkg-config gpuscan, and a C API program; all ran: $(head -1 /tmp/example.log)"
kill -TERM "$server"; wait "$server" || true
INSIDE

say "apt-get purge gpuscan-server"
in_root apt-get purge -y -qq gpuscan-server >/dev/null
[ ! -e "$root/etc/default/gpuscan-server" ] || die "purge left /etc/default/gpuscan-server"
[ ! -e "$root/usr/bin/gpuscan-server" ] || die "purge left the binary"
echo "ok: purged: binary and settings file gone"
end=$(date +%s)
echo "PASS: the .debs install into a clean Debian 12 root and work ($((installed - start)) s to install, $((end - start)) s in all)"
