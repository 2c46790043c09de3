#!/usr/bin/env bash
# Installs the package the documented way into a throwaway venv (system site packages: Debian's
# grpcio/protobuf/numpy; no network) from a copy of python/ and proto/, so the source tree stays
# clean, then runs the stub and smoke tests with the installed package. It ships py.typed and the
# gpuscan.dask subpackage; with no library built beside the copy, clients take grpcio and say why.
# With LIB (the built libgpuscan_capi.so), a second install from a copy that has it where `make`
# puts it (build/python/pkg/gpuscan) ships it, and clients take the native path from site-packages.
#   check_install.sh PYTHON REPO_ROOT [LIB]
set -euo pipefail
py=$1 root=$2 lib=${3:-}
unset GPUSCAN_NATIVE_LIB GPUSCAN_NATIVE
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src"
cp -r "$root/proto" "$tmp/src/proto"
(cd "$root" && tar --exclude=build --exclude='*.egg-info' --exclude=__pycache__ --exclude=gpuscan/v1 \
  --exclude=libgpuscan_capi.so -cf - python) | tar -xf - -C "$tmp/src"
"$py" -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --no-build-isolation --no-deps --no-index "$tmp/src/python"
cd "$tmp"
"$tmp/venv/bin/python" -c 'import gpuscan, gpuscan.v1.gpuscan_pb2 as pb, sys; print("installed", gpuscan.__file__); assert "site-packages" in gpuscan.__file__'
"$tmp/venv/bin/python" -c '
import os, gpuscan
assert os.path.isfile(os.path.join(os.path.dirname(gpuscan.__file__), "py.typed")), "no py.typed"
assert os.path.isfile(os.path.join(os.path.dirname(gpuscan.__file__), "dask", "__init__.py")), "no gpuscan.dask"
p = gpuscan.Client("127.0.0.1:1").data_path
print("data path", p)
assert p.name == "native" or p.reason, p  # grpcio: it says why'
"$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests/test_stubs.py" \
  "$root/python/tests/test_client.py::test_info_and_health" "$root/python/tests/test_client.py::test_async_client"
if [ -n "$lib" ] && [ -f "$lib" ]; then
  mkdir -p "$tmp/src/build/python/pkg/gpuscan"
  cp "$lib" "$tmp/src/build/python/pkg/gpuscan/libgpuscan_capi.so"
  "$tmp/venv/bin/python" -m pip install -q --no-build-isolation --no-deps --no-index --force-reinstall "$tmp/src/python"
  "$tmp/venv/bin/python" -c '
import gpuscan
p = gpuscan.Client("127.0.0.1:1").data_path
print("data path", p)
assert p.name == "native" and "site-packages" in p.library, p'
  "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests/test_client.py::test_info_and_health" \
    "$root/python/tests/test_api_surface.py::test_data_path_reported"
fi
