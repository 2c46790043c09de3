# gpuscan-server container: built on the CUDA devel image, run on the matching slim image.
#   docker build -t gpuscan .
#   docker build --build-arg CUDA_ARCHITECTURES="90" -t gpuscan .    # one architecture: faster build
#   docker run --gpus all -p 50051:50051 -p 9090:9090 gpuscan
#   make image    # scripts/image.sh: docker, podman or buildah; stand-in bases where no registry answers
# Flags after the image name, or -e GPUSCAN_* variables, override the defaults (gpuscan-server --help).

# The two bases are build arguments so this one file also builds on stand-in bases
# (scripts/image.sh makes Debian 12 ones where nvidia/cuda cannot be pulled: CPU engine only).
# Keep the CUDA versions of the two equal: the runtime needs a driver for the toolkit's version.
ARG BUILD_BASE=nvidia/cuda:13.0.1-devel-ubuntu24.04
ARG RUNTIME_BASE=nvidia/cuda:13.0.1-base-ubuntu24.04

FROM ${BUILD_BASE} AS build
# A100 (80), A10/A40 (86), L4/L40 (89), H100/H200 (90). CMake's list syntax: semicolons.
ARG CUDA_ARCHITECTURES="80;86;89;90"
WORKDIR /src
# The installer the README uses, so CI's runs of it cover this image's build too. Copied alone so
# the package layer survives source changes.
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# Only the two programs' install rules: the whole tree's also want what is not built here (the
# Python package's C API library).
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
        -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES}" \
 && cmake --build build -j"$(nproc)" --target gpuscan-server gpuscan \
 && cmake --install build/server --prefix /opt/gpuscan --strip \
 && cmake --install build/client --prefix /opt/gpuscan --strip

# base, not runtime: cudart is linked statically (CMake's default) and libcuda comes from the
# host's driver through the NVIDIA container toolkit, which this image's NVIDIA_* variables ask for.
FROM ${RUNTIME_BASE}
COPY scripts/install-deps.sh /tmp/install-deps.sh
# apt's caches go too (88 MB on the Debian stand-in, whose apt keeps them; nvidia/cuda's Ubuntu
# bases clean them by themselves): the image carries what the server runs on, nothing else.
RUN bash /tmp/install-deps.sh --runtime && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /tmp/install-deps.sh \
 && groupadd --gid 10001 gpuscan \
 && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin gpuscan
COPY --from=build /opt/gpuscan/bin/ /usr/local/bin/
# Numeric, so Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
# Configured through the environment so the ENTRYPOINT stays bare and `docker run … IMAGE --flag`
# or `-e GPUSCAN_…` override it.
ENV GPUSCAN_ADDRESS=0.0.0.0:50051 \
    GPUSCAN_METRICS_ADDRESS=0.0.0.0:9090
EXPOSE 50051 9090
# The CLI's default target is 127.0.0.1:50051: if GPUSCAN_ADDRESS moves the port, set
# GPUSCAN_SERVER to match (and GPUSCAN_CLIENT_TLS_* when TLS is on).
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["gpuscan", "health", "--timeout", "3"]
ENTRYPOINT ["gpuscan-server"]
