#!/usr/bin/env bash
# Installs the package the documented way into a throwaway venv (system site packages: Debian's
# grpcio/protobuf/numpy; no network) from a copy of python/ and proto/, so the source tree stays
# clean, then runs the stub and smoke tests with the installed package.
#   check_install.sh PYTHON REPO_ROOT
set -euo pipefail
py=$1 root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src"
cp -r "$root/proto" "$tmp/src/proto"
(cd "$root" && tar --exclude=build --exclude='*.egg-info' --exclude=__pycache__ --exclude=gpuscan/v1 -cf - python) |
  tar -xf - -C "$tmp/src"
"$py" -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --no-build-isolation --no-deps --no-index "$tmp/src/python"
cd "$tmp"
"$tmp/venv/bin/python" -c 'import gpuscan, gpuscan.v1.gpuscan_pb2 as pb, sys; print("installed", gpuscan.__file__); assert "site-packages" in gpuscan.__file__'
"$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests/test_stubs.py" \
  "$root/python/tests/test_client.py::test_info_and_health" "$root/python/tests/test_client.py::test_async_client"
