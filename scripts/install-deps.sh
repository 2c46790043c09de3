#!/usr/bin/env bash
# Installs the Debian 12 / Ubuntu 24.04 packages gpuscan needs to build, test and run, skipping
# what is already there (one dpkg query, so a repeated call costs a fraction of a second).
# Uses sudo when not root. clang and libclang-rt-dev serve the sanitizer and fuzzing builds
# that CI runs; python3-yaml the deployment manifest checks. CUDA (nvcc) is not installed here:
# without it the build is CPU-only.
set -euo pipefail

packages=(
  build-essential cmake make pkg-config git ca-certificates
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev
  libspdlog-dev libfmt-dev libcli11-dev libtbb-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev
  openssl procps python3 python3-yaml
  clang libclang-rt-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
