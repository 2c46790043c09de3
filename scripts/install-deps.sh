#!/usr/bin/env bash
# Installs the Debian 12 / Ubuntu 24.04 packages gpuscan needs to build, test and run, skipping
# what is already there (one dpkg query, so a repeated call costs a fraction of a second).
# Uses sudo when not root. clang/libclang-rt-dev: sanitizer and fuzzing builds; python3-yaml: the
# deploy checks; python3-grpcio..setuptools: python/ and its tests (same names on Ubuntu 24.04);
# python3-dask, python3-distributed: gpuscan.dask and its tests (label dask); python3-mypy: the
# strict type check of the public modules (python_mypy);
# haproxy, nginx-light: the load-balancer tests (deploy/haproxy, deploy/nginx; the tests start
# their own, so the nginx service the package starts is stopped again); iproute2: the
# network-namespace tests; prometheus: promtool, which checks and unit-tests deploy/monitoring's
# alert rules (its service, started by the package, is stopped again).
# CUDA (nvcc) is not installed here: without it the build is CPU-only.
#
#   install-deps.sh              build, test and run (the default; `make`, the Dockerfile's builder)
#   install-deps.sh --runtime    only the shared libraries the binaries load (the Dockerfile's runtime)
#   install-deps.sh --container  the image tools `make image` may use (podman, buildah, debootstrap)
#   --print                      print the resolved package list, one a line; install nothing
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; }

mode=build
print_only=0
for arg in "$@"; do
  case "$arg" in
    --runtime) mode=runtime ;;
    --container) mode=container ;;
    --print) print_only=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install-deps: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
  esac
done

build_packages=(
  build-essential cmake make pkg-config git ca-certificates
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev
  libspdlog-dev libfmt-dev libcli11-dev libtbb-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev nlohmann-json3-dev
  openssl procps python3 python3-yaml
  clang libclang-rt-dev
  python3-grpcio python3-protobuf python3-numpy python3-pytest python3-hypothesis
  python3-venv python3-setuptools python3-dask python3-distributed python3-mypy
  haproxy "nginx-light|nginx" iproute2 prometheus
)

# `make image` uses docker, else podman, else buildah; debootstrap makes stand-in base images
# where no registry answers (scripts/image.sh). Docker itself is not a Debian package of ours.
container_packages=(
  podman buildah debootstrap
)

# What gpuscan-server and gpuscan load (tests/deploy checks this against ldd). "a|b": the first
# name apt knows; Ubuntu 24.04 renamed libraries for 64-bit time_t (t64) and ships newer spdlog.
# cudart is linked statically and libcuda comes from the host's driver: nothing CUDA here.
runtime_packages=(
  ca-certificates
  "libgrpc++1.51t64|libgrpc++1.51"
  "libgrpc29t64|libgrpc29"
  "libprotobuf32t64|libprotobuf32"
  "libabsl20220623t64|libabsl20220623"
  "libspdlog1.12|libspdlog1.10"
  libfmt9
  libtbb12
  libprometheus-cpp-core1.0
  libprometheus-cpp-pull1.0
  libcivetweb1
)

if [ "$mode" = runtime ]; then
  entries=("${runtime_packages[@]}")
elif [ "$mode" = container ]; then
  entries=("${container_packages[@]}")
else
  entries=("${build_packages[@]}")
fi

all_names() { local e; for e in "${entries[@]}"; do tr '|' '\n' <<<"$e"; done; }

# Package names among the arguments that are installed / that apt can install.
installed_names() { dpkg-query -W -f='${db:Status-Abbrev}|${Package}\n' "$@" 2>/dev/null | awk -F'|' '$1 ~ /^ii/ {print $2}' || true; }
candidate_names() {
  apt-cache policy "$@" 2>/dev/null |
    awk '/^[^ ]/ {name = $1; sub(/:.*$/, "", name)} /^  Candidate:/ && $2 != "(none)" {print name}' || true
}

# Fills `resolved` (one name per entry: an installed alternative first, else the first apt
# knows) and `unresolved` (entries none of whose names apt knows). With `lenient`, a single
# name passes as it is and apt-get install judges it, as this script always did.
lenient=0
resolve() {
  local -A installed=() available=()
  local -a names alts
  local n e alt pick
  mapfile -t names < <(all_names)
  for n in $(installed_names "${names[@]}"); do installed[$n]=1; done
  for n in $(candidate_names "${names[@]}"); do available[$n]=1; done
  resolved=(); unresolved=()
  for e in "${entries[@]}"; do
    pick=""
    if [ "$lenient" -eq 1 ] && [[ "$e" != *"|"* ]]; then resolved+=("$e"); continue; fi
    IFS='|' read -ra alts <<<"$e"
    for alt in "${alts[@]}"; do [ -n "${installed[$alt]:-}" ] && { pick=$alt; break; }; done
    if [ -z "$pick" ]; then
      for alt in "${alts[@]}"; do [ -n "${available[$alt]:-}" ] && { pick=$alt; break; }; done
    fi
    if [ -n "$pick" ]; then resolved+=("$pick"); else unresolved+=("$e"); fi
  done
}

# --print never touches the system: it reports what this machine's apt lists resolve to.
if [ "$print_only" -eq 1 ]; then
  resolve
  printf '%s\n' "${resolved[@]}"
  if [ ${#unresolved[@]} -gt 0 ]; then
    echo "install-deps: apt knows none of: ${unresolved[*]} (run apt-get update?)" >&2
    exit 1
  fi
  exit 0
fi

# Fast path: every entry has an installed alternative (no apt-cache call needed).
missing=()
mapfile -t present < <(installed_names $(all_names))
for e in "${entries[@]}"; do
  found=0
  IFS='|' read -ra alts <<<"$e"
  for alt in "${alts[@]}"; do
    for p in "${present[@]}"; do [ "$p" = "$alt" ] && { found=1; break 2; }; done
  done
  [ $found -eq 1 ] || missing+=("$e")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#entries[@]} $mode packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# Alternatives resolve only against fresh lists (a container image ships none).
entries=("${missing[@]}")
lenient=1
resolve
if [ ${#unresolved[@]} -gt 0 ]; then
  echo "install-deps: apt knows none of: ${unresolved[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${resolved[*]}"
$sudo apt-get install -y -qq --no-install-recommends "${resolved[@]}"
# Debian's nginx starts its default site on :80 where systemd runs; nothing here needs it.
if [[ " ${resolved[*]} " == *" nginx"* ]] && [ -d /run/systemd/system ]; then
  $sudo systemctl disable --now nginx >/dev/null 2>&1 || true
fi
# Likewise Debian's prometheus (a server on :9090): only its promtool is wanted.
if [[ " ${resolved[*]} " == *" prometheus "* || " ${resolved[*]} " == *" prometheus" ]] && [ -d /run/systemd/system ]; then
  $sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
