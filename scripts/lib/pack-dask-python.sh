#!/usr/bin/env bash
# Bundles a Python that runs dask.distributed where none is installed (the GPU machine's Python is
# 3.12 with no dask and no package access; Debian's dask and distributed are built for 3.11):
# Debian's /usr/bin/python3.11 with its standard library (no test suites, tkinter, idlelib,
# ensurepip, lib2to3), the dist-packages that numpy, grpcio, protobuf, dask.array and distributed
# import (found by running a LocalCluster here, in the client and in its workers, plus a fixed
# list), and every shared library their binaries load but the C/C++ runtime, into one tarball.
# `scripts/gpu pack --dask` runs it once into .gpu-cache/ and packs it as .gpu-pack/python.tar.xz:
#   scripts/lib/pack-dask-python.sh [OUT.tar.xz]      (default .gpu-cache/python.tar.xz; needs xz)
# It unpacks to pyb/: run pyb/bin/python3 (a wrapper: PYTHONHOME and LD_LIBRARY_PATH set to the
# bundle's, PYTHONNOUSERSITE, the caller's PYTHONPATH kept); the real interpreter is
# pyb/bin/.python3.11, which spawned processes (dask's nannies) start with the same environment.
# The bundle is checked before it is packed: `env -i pyb/bin/python3` imports everything and
# runs a LocalCluster of two worker processes.
#   PY=/usr/bin/python3.11 (the interpreter to carry), PACK_XZ="-9 -T2" (xz options)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/gpu-common.sh
py=${PY:-/usr/bin/python3.11}
out=${1:-.gpu-cache/python.tar.xz}
dist=/usr/lib/python3/dist-packages
ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
stdlib=/usr/lib/python$ver
[ -d "$stdlib" ] && [ -d "$dist" ] || { echo "no $stdlib or $dist: this packs a Debian/Ubuntu python$ver"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/pyb
mkdir -p "$root/bin" "$root/lib/so" "$root/lib/python3/dist-packages"

# 1. The dist-packages entries in use: every module loaded by a small dask.distributed run (the
#    client's and the workers'), plus the packages named here; dist-info/egg-info of each.
cat >"$work/discover.py" <<'PY'
import importlib, os, sys

NEEDED = ["numpy", "grpc", "google.protobuf", "dask", "dask.array", "distributed", "psutil", "msgpack", "tornado",
          "toolz", "tlz", "cloudpickle", "partd", "fsspec", "locket", "sortedcontainers", "tblib", "zict", "yaml",
          "click", "jinja2", "markupsafe", "packaging", "urllib3", "lz4"]


def loaded():
    return sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())} - {""})


def main():
    for name in NEEDED:
        try:
            importlib.import_module(name)
        except ImportError as e:
            print(f"warning: {name} not importable here: {e}", file=sys.stderr)
    import numpy as np
    import dask, dask.array as da, distributed
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c, \
            distributed.Client(c) as dc:
        x = da.from_array(np.arange(10_000, dtype=np.int64), chunks=1000).persist()
        assert int(x.cumsum(axis=0)[-1].compute()) == int(np.arange(10_000).sum())
        da.histogram(x, 10, range=(0, 10_000))[0].compute()
        x.sum().compute()
        files = set(loaded())
        for w in dc.run(loaded).values():
            files.update(w)
    for f in sorted(files):
        print(f)


if __name__ == "__main__":
    main()
PY
"$py" "$work/discover.py" >"$work/files.txt"
# Optional packages dask and distributed import when they are there (pandas, scipy.sparse through
# the sparse/cupy probes, ...): left out, as on a machine without them (PACK_EXCLUDE, space-separated).
skip=${PACK_EXCLUDE:-pandas scipy matplotlib mpl_toolkits numexpr bottleneck zmq pyzmq sparse cupy cupyx numba \
  llvmlite pyarrow tables h5py xarray IPython bokeh blosc brotli _brotli snappy dateutil python_dateutil pytz six colorama}
"$py" - "$dist" "$work/files.txt" "$skip" >"$work/entries.txt" <<'PY'
import os, re, sys
dist, files, skip = sys.argv[1], sys.argv[2], sys.argv[3].split()
norm = lambda s: re.sub(r"[-_.]+", "_", s).lower()
skip = {norm(s) for s in skip}
tops = set()
for f in open(files).read().split():
    f = os.path.realpath(f)
    if f.startswith(dist + "/"):
        top = os.path.relpath(f, dist).split("/")[0]
        if norm(top.split(".")[0]) not in skip:
            tops.add(top)
names = {norm(t.split(".")[0]) for t in tops}
for d in os.listdir(dist):  # the metadata of what is carried (importlib.metadata versions, entry points)
    if d.endswith((".dist-info", ".egg-info")):
        top = os.path.join(dist, d, "top_level.txt")
        mine = set(open(top).read().split()) if os.path.isfile(top) else {d.split("-")[0]}
        if {norm(m) for m in mine} & names:
            tops.add(d)
print("\n".join(sorted(tops)))
PY
echo "dist-packages carried: $(tr '\n' ' ' <"$work/entries.txt")"
# shellcheck disable=SC2046  # one entry a line, none with spaces
tar -C "$dist" --exclude=__pycache__ --exclude='*/tests' -cf - $(cat "$work/entries.txt") \
  | tar -C "$root/lib/python3/dist-packages" -xf -

# 2. The standard library (lib-dynload too), without what a headless run never imports.
tar -C "$(dirname "$stdlib")" --exclude=__pycache__ --exclude="python$ver/test" --exclude="python$ver/idlelib" \
  --exclude="python$ver/tkinter" --exclude="python$ver/turtledemo" --exclude="python$ver/ensurepip" \
  --exclude="python$ver/lib2to3" --exclude="python$ver/config-$ver-*" --exclude="python$ver/dist-packages" \
  --exclude="python$ver/site-packages" --exclude='_tkinter*' -cf - "python$ver" | tar -C "$root/lib" -xf -

# 3. The interpreter, its wrapper, and the shared libraries of every binary carried.
cp "$(readlink -f "$py")" "$root/bin/.python$ver"
cat >"$root/bin/python$ver" <<SH
#!/bin/sh
# The carried Python $ver (scripts/lib/pack-dask-python.sh): its own standard library, dist-packages
# and shared libraries; the caller's PYTHONPATH is kept (e.g. the gpuscan package).
here=\$(dirname "\$(readlink -f "\$0")")
root=\$(dirname "\$here")
LD_LIBRARY_PATH="\$root/lib/so\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" PYTHONHOME="\$root" PYTHONNOUSERSITE=1
export LD_LIBRARY_PATH PYTHONHOME PYTHONNOUSERSITE
exec "\$here/.python$ver" "\$@"
SH
chmod +x "$root/bin/python$ver"
ln -s "python$ver" "$root/bin/python3"
find "$root" -name '*.so*' -type f >"$work/bins.txt"
echo "$root/bin/.python$ver" >>"$work/bins.txt"
while read -r bin; do
  ldd "$bin" 2>/dev/null | awk '/=> \//{print $3}' | grep -Ev "$GPU_SYSTEM_LIBS" || true
done <"$work/bins.txt" | sort -u | while read -r lib; do cp -Lu "$lib" "$root/lib/so/"; done
find "$root" -name '*.so*' -type f -exec strip --strip-unneeded {} + 2>/dev/null || true
strip "$root/bin/.python$ver" 2>/dev/null || true
echo "libraries carried: $(ls "$root/lib/so" | tr '\n' ' ')"

# 4. Check it as it will run: no environment, a LocalCluster of two worker processes.
cat >"$work/check.py" <<'PY'
import sys, numpy as np, grpc, google.protobuf, dask, dask.array as da, distributed, psutil, yaml
assert sys.prefix.endswith("pyb"), sys.prefix
def main():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c, \
            distributed.Client(c) as dc:
        x = da.arange(1, 100_001, chunks=10_000, dtype=np.int64)
        assert int(x.cumsum(axis=0)[-1].compute()) == 100_000 * 100_001 // 2
        exes = set(dc.run(lambda: sys.executable).values())
    print(f"bundle ok: python {sys.version.split()[0]} at {sys.executable}, numpy {np.__version__}, grpc {grpc.__version__}, "
          f"dask {dask.__version__}, distributed {distributed.__version__}; workers ran {exes}")
if __name__ == "__main__":
    main()
PY
(cd "$work" && env -i "$root/bin/python3" "$work/check.py")
find "$root" -name __pycache__ -type d -prune -exec rm -rf {} +
mkdir -p "$(dirname "$out")"
tar -C "$work" -cf - pyb | xz ${PACK_XZ:--9 -T2} >"$out"
du -sh "$root" | awk '{print "bundle " $1 " unpacked"}'
du -h "$out" | awk '{print "packed " $1 " into " $2}'
