#!/usr/bin/env bash
# The client as others use it (cmake/install.cmake): `cmake --install` of the build's dev component
# into an empty prefix, then, outside this tree, README.md's C++ example built against that prefix
# twice (find_package(gpuscan CONFIG) with gpuscan::client, and `pkg-config --cflags --libs
# gpuscan` on one compiler line) and a C program against the C API (gpuscan::capi, and
# gpuscan-capi.pc). Each binary then runs against a CPU server (check_docs.py's runner).
# usage: check_install.sh BUILD_DIR SOURCE_DIR EXAMPLE_CC SERVER PYTHON CXX
set -euo pipefail
build=$1 src=$2 example=$3 server=$4 python=$5 cxx=$6
cc=${CC:-cc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
step() { echo "== $*"; }

step "cmake --install --component dev"
cmake --install "$build" --prefix "$prefix" --component dev >/dev/null
for f in lib/cmake/gpuscan/gpuscanConfig.cmake lib/pkgconfig/gpuscan.pc include/gpuscan/client.h \
         include/gpuscan/v1/gpuscan.pb.h include/gpuscan_capi.h lib/libgpuscan_capi.so; do
  [[ -e $prefix/$f ]] || { echo "FAIL: the prefix has no $f"; exit 1; }
done

cp -r "$src/tests/install/consumer" "$work/project"
cp "$example" "$work/project/example.cc"

step "find_package(gpuscan CONFIG REQUIRED): configure and build"
cmake -S "$work/project" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1 \
  || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/cmake-build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }

step "pkg-config --cflags --libs gpuscan / gpuscan-capi"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
read -r -a flags <<<"$(pkg-config --cflags --libs gpuscan)"
"$cxx" -std=c++17 -O1 "$work/project/example.cc" "${flags[@]}" -o "$work/example_pc"
read -r -a cflags <<<"$(pkg-config --cflags --libs gpuscan-capi)"
"$cc" "$work/project/capi_version.c" "${cflags[@]}" -Wl,-rpath,"$prefix/lib" -o "$work/capi_version_pc"

step "run them"
"$work/cmake-build/capi_version"
"$work/capi_version_pc"
for bin in "$work/cmake-build/example" "$work/example_pc"; do
  "$python" "$src/tests/docs/check_docs.py" example cpp --source-dir "$src" --server "$server" --binary "$bin"
done
echo "PASS: the installed client builds with find_package and pkg-config, and its programs run"
