#!/usr/bin/env bash
# Builds the Dockerfile into $IMAGE (default gpuscan:latest): `make image` runs this.
#
# Engine: docker if a docker engine answers (`docker info`), else podman if `podman build` works
# here, else buildah (`bud --isolation chroot`, which needs no OCI runtime).
# Bases: the Dockerfile's BUILD_BASE / RUNTIME_BASE defaults (nvidia/cuda devel and base). Where
# they cannot be pulled (no registry reachable), a Debian 12 rootfs made with
# `debootstrap --variant=minbase bookworm` from this machine's apt mirror stands in for both,
# cached in $IMAGE_CACHE_DIR (default build-image/, ignored by git and by the build context).
# The build stage's stand-in also gets the CUDA toolkit this machine has ($CUDA_TOOLKIT, default
# /usr/local/cuda: its compiler, headers, static runtime and CMake files, not the libraries the
# server does not link), so the image's server is built with the CUDA engine as on the real bases;
# the runtime stand-in stays without a toolkit (cudart is static; libcuda comes from the host's
# driver). Without a toolkit here (or IMAGE_CUDA=0) the image's server runs the CPU engine only.
#
# Environment: IMAGE, BUILD_BASE, RUNTIME_BASE (override the Dockerfile's defaults),
# CUDA_ARCHITECTURES (passed on as the build arg), IMAGE_ENGINE=docker|podman|buildah (skip the
# probing), IMAGE_STANDIN=1 (use the stand-in bases without trying to pull), IMAGE_CACHE_DIR,
# CUDA_TOOLKIT, IMAGE_CUDA=0 (a CPU-only stand-in build base).
set -euo pipefail

cd "$(dirname "$0")/.."
IMAGE=${IMAGE:-gpuscan:latest}
CACHE=${IMAGE_CACHE_DIR:-build-image}
STANDIN_SUITE=bookworm
STANDIN_TAG=localhost/gpuscan-standin:$STANDIN_SUITE

say() { echo "image: $*"; }
die() { echo "image: error: $*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }
loud() {  # a banner nobody scrolls past
  local line; line=$(printf '%.0s!' {1..78})
  printf '%s\n' "$line" "$@" "$line" >&2
}

# The Dockerfile is the one place the default bases are written down.
dockerfile_arg() { sed -n "s/^ARG $1=\(.*\)$/\1/p" Dockerfile | head -n1 | tr -d '"'; }
BUILD_BASE=${BUILD_BASE:-$(dockerfile_arg BUILD_BASE)}
RUNTIME_BASE=${RUNTIME_BASE:-$(dockerfile_arg RUNTIME_BASE)}
[ -n "$BUILD_BASE" ] && [ -n "$RUNTIME_BASE" ] || die "no ARG BUILD_BASE= / RUNTIME_BASE= in the Dockerfile"

# ------------------------------------------------------------------ engine
engine=${IMAGE_ENGINE:-}
if [ -z "$engine" ]; then
  if have docker && docker info >/dev/null 2>&1; then
    engine=docker
  elif have podman || have buildah; then
    engine=containers   # podman or buildah, decided below once a base is there to probe with
  else
    die "no docker engine answers and neither podman nor buildah is installed (scripts/install-deps.sh --container)"
  fi
fi

# podman and buildah share containers-storage, so images made by one are seen by the other.
store=buildah; have buildah || store=podman
[ "$engine" = docker ] && store=docker

# containers-storage tools resolve a short name only through registries.conf's search list, which
# is often empty: name Docker Hub explicitly, as Docker would.
qualify() {
  local n=$1 first=${1%%/*}
  if [ "$store" = docker ]; then echo "$n"; return; fi
  case "$n" in
    */*) if [[ "$first" == *.* || "$first" == *:* || "$first" == localhost ]]; then echo "$n"; else echo "docker.io/$n"; fi ;;
    *) echo "docker.io/library/$n" ;;
  esac
}

image_exists() {
  case "$store" in
    docker) docker image inspect "$1" >/dev/null 2>&1 ;;
    buildah) buildah inspect --type image "$1" >/dev/null 2>&1 ;;
    podman) podman image exists "$1" ;;
  esac
}

pull() {
  image_exists "$1" && return 0
  say "pulling $1"
  case "$store" in
    docker) timeout 1800 docker pull "$1" ;;
    buildah) timeout 1800 buildah pull "$1" ;;
    podman) timeout 1800 podman pull "$1" ;;
  esac
}

# ------------------------------------------------------------------ stand-in bases
# apt_mirror, standin_tarball: scripts/lib/standin.sh (the packages' test makes its clean root the same way).
source scripts/lib/standin.sh

make_standin() {
  if image_exists "$STANDIN_TAG"; then say "stand-in base image present: $STANDIN_TAG"; return; fi
  local tarball; tarball=$(standin_tarball)
  say "importing $tarball as $STANDIN_TAG"
  local path=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  case "$store" in
    docker) docker import --change "ENV $path" --change 'CMD ["bash"]' "$tarball" "$STANDIN_TAG" >/dev/null ;;
    podman) podman import --change "ENV $path" --change 'CMD ["bash"]' "$tarball" "$STANDIN_TAG" >/dev/null ;;
    buildah)
      local ctr; ctr=$(buildah from scratch)
      buildah add --quiet "$ctr" "$tarball" / >/dev/null   # a local archive is extracted, owners kept
      buildah config --env "$path" --cmd bash --label gpuscan.standin="debian $STANDIN_SUITE minbase" "$ctr"
      buildah commit --quiet --rm "$ctr" "$STANDIN_TAG" >/dev/null ;;
  esac
}

standin=0
if [ "${IMAGE_STANDIN:-0}" = 1 ]; then
  standin=1
else
  BUILD_BASE=$(qualify "$BUILD_BASE"); RUNTIME_BASE=$(qualify "$RUNTIME_BASE")
  if ! pull "$BUILD_BASE" || ! pull "$RUNTIME_BASE"; then standin=1; fi
fi
TOOLKIT=${CUDA_TOOLKIT:-/usr/local/cuda}
cuda_standin=0
if [ "$standin" = 1 ]; then
  make_standin
  BUILD_BASE=$STANDIN_TAG; RUNTIME_BASE=$STANDIN_TAG
  if [ "${IMAGE_CUDA:-1}" = 1 ] && [ -x "$TOOLKIT/bin/nvcc" ]; then
    cuda_standin=1
    loud "image: cannot pull the nvidia/cuda bases (no registry reachable?)." \
         "image: USING STAND-IN BASES: Debian 12 minbase from debootstrap; the build stage's with" \
         "image: the CUDA toolkit of this machine ($TOOLKIT): the server is built with the CUDA engine."
  else
    loud "image: cannot pull $BUILD_BASE / $RUNTIME_BASE (no registry reachable?)." \
         "image: USING STAND-IN BASES: Debian 12 minbase from debootstrap, no CUDA toolkit or driver" \
         "image: libraries. $IMAGE will run the CPU ENGINE ONLY: not the image to deploy on GPUs."
  fi
fi

# ------------------------------------------------------------------ build
if [ "$engine" = containers ]; then
  engine=buildah
  if have podman; then
    # `podman build` runs RUN steps through an OCI runtime (crun/runc), which some sandboxes
    # refuse (e.g. setrlimit RLIMIT_NOFILE): try a one-step build first.
    probe=$(mktemp -d)
    printf 'FROM %s\nRUN true\n' "$RUNTIME_BASE" >"$probe/Dockerfile"
    if id=$(podman build -q --pull=never "$probe" 2>"$probe/err"); then
      engine=podman
      podman rmi -f "$id" >/dev/null 2>&1 || true
    else
      say "podman build does not work here ($(grep -m1 -E 'crun|runc|rlimit|cgroup' "$probe/err" || tail -n1 "$probe/err")): using buildah"
    fi
    rm -rf "$probe"
  fi
  [ "$engine" = podman ] || have buildah || die "podman build fails and buildah is not installed"
fi

# build_context ENGINE DIR TAG [ARGS...]: builds DIR's Dockerfile as TAG with ENGINE.
build_context() {
  local engine=$1 dir=$2 tag=$3
  shift 3
  case "$engine" in
    docker) docker build "$@" -t "$tag" "$dir" ;;
    # --format docker: the OCI format has no HEALTHCHECK, and buildah drops it with a warning.
    podman) podman build --pull=never --format docker "$@" -t "$tag" "$dir" ;;
    # --layers: keep each step's layer, so a re-run reuses the package steps (podman's default);
    # --force-rm: a failed step leaves no working container behind.
    buildah) buildah bud --pull=never --layers --force-rm --isolation chroot --format docker "$@" -t "$tag" "$dir" ;;
    *) die "unknown IMAGE_ENGINE '$engine' (docker, podman or buildah)" ;;
  esac
}

# The CUDA stand-in build base: the stand-in with the toolkit's build parts under its own path
# and /usr/local/cuda pointing at it, as nvidia/cuda's devel images lay it out.
if [ "$cuda_standin" = 1 ]; then
  real=$(readlink -f "$TOOLKIT")
  version=$("$real/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  cuda_tag=localhost/gpuscan-standin-cuda:$STANDIN_SUITE-$version
  if image_exists "$cuda_tag"; then
    say "CUDA stand-in build base present: $cuda_tag"
  else
    ctx=$(mktemp -d)
    say "packing the toolkit's build parts from $real (CUDA $version)"
    name=$(basename "$real")
    (cd "$(dirname "$real")" && find "$name" \( -path "$name/lib/lib*.so*" ! -name 'libcudart.so*' \) -prune -o -print |
       tar --no-recursion -czf "$ctx/toolkit.tar.gz" -T -)
    printf 'FROM %s\nADD toolkit.tar.gz /usr/local/\nRUN ln -sfn %s /usr/local/cuda\nENV PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n' \
      "$STANDIN_TAG" "$name" >"$ctx/Dockerfile"
    build_context "$engine" "$ctx" "$cuda_tag"
    rm -rf "$ctx"
  fi
  BUILD_BASE=$cuda_tag
fi

args=(--build-arg "BUILD_BASE=$BUILD_BASE" --build-arg "RUNTIME_BASE=$RUNTIME_BASE")
[ -n "${CUDA_ARCHITECTURES:-}" ] && args+=(--build-arg "CUDA_ARCHITECTURES=$CUDA_ARCHITECTURES")
say "building $IMAGE with $engine (bases: $BUILD_BASE, $RUNTIME_BASE)"
start=$(date +%s)
build_context "$engine" . "$IMAGE" "${args[@]}"
elapsed=$(( $(date +%s) - start ))

case "$engine" in
  docker) bytes=$(docker image inspect -f '{{.Size}}' "$IMAGE") ;;
  *) bytes=$( (have podman && podman image inspect --format '{{.Size}}' "$IMAGE") ||
              buildah inspect --type image --format '{{.ImageSize}}' "$IMAGE" 2>/dev/null || echo 0) ;;
esac
say "built $IMAGE with $engine in $((elapsed / 60))m$((elapsed % 60))s; size $((bytes / 1000000)) MB ($bytes bytes)"
if [ "$standin" = 1 ] && [ "$cuda_standin" = 0 ]; then
  loud "image: $IMAGE IS BUILT ON STAND-IN DEBIAN BASES: CPU ENGINE ONLY, NO CUDA." \
       "image: For the GPU image, build where $(dockerfile_arg BUILD_BASE) can be pulled."
elif [ "$standin" = 1 ]; then
  say "$IMAGE: built on stand-in Debian bases, its server with CUDA $version (a Debian 12 runtime, not nvidia/cuda's)"
fi
