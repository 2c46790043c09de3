# Thin wrapper over CMake/CTest. `make demo` and `make test` work on a fresh Debian 12 /
# Ubuntu 24.04: both install missing packages first (scripts/install-deps.sh).
BUILD_DIR  ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
# The CUDA engine is built where nvcc is and a GPU is visible (nvidia-smi -L): a machine without
# one cannot run it, and its kernels are half of a 2-core build. CUDA=ON builds it anyway (a build
# host for GPU machines; `make build-cuda` is CI's check), CUDA=OFF never.
CUDA ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo ON || echo OFF)
CUDA_BUILD_DIR ?= build-cuda

.PHONY: all deps configure build build-cuda test sanitize demo clean image test-container deb test-debs

all: build

deps:
	bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DGPUSCAN_ENABLE_CUDA=$(CUDA) $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

# The CUDA side compiled on a machine without a GPU (CI): the kernels, the CUDA engine, the GPU
# kernel tests and the kernel suite, in their own build tree. Nothing runs.
build-cuda: deps
	cmake -S . -B $(CUDA_BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DGPUSCAN_ENABLE_CUDA=ON $(CMAKE_ARGS)
	cmake --build $(CUDA_BUILD_DIR) -j$(JOBS) --target gpuscan_engine gpu_kernel_tests kernel_suite

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j$(JOBS) --timeout 600

# ASan + UBSan build (build-asan, clang) of the CPU engine, service and their tests, then the
# request fuzzer for FUZZ_SECONDS (default 60). See docs/RELIABILITY.md.
sanitize: deps
	bash scripts/ci-sanitize.sh

demo: build
	bash scripts/demo.sh $(BUILD_DIR)

# The container image (scripts/image.sh: docker, podman or buildah; Debian stand-in bases, CPU
# engine only, where nvidia/cuda cannot be pulled). IMAGE names it (default gpuscan:latest).
IMAGE ?= gpuscan:latest
image:
	IMAGE=$(IMAGE) bash scripts/image.sh

# Builds the image, then runs it and checks it from the host (tests/container, label container).
# `build` too: the checks drive the container with the host's gpuscan CLI and Python package, and
# a build tree configured before tests/container existed would find no test (--no-tests=error).
test-container: build image
	GPUSCAN_CONTAINER_IMAGE=$(IMAGE) ctest --test-dir $(BUILD_DIR) -L container --output-on-failure --no-tests=error

# Debian packages of this build (cmake/packages.cmake): gpuscan-server, gpuscan-cli,
# libgpuscan-dev, python3-gpuscan in $(BUILD_DIR)/packages. A CPU-only build packs a CPU-only
# server: build with CUDA=ON for GPU hosts.
deb: build
	cd $(BUILD_DIR) && cpack -G DEB

# The packages installed with apt-get into a clean Debian 12 root and used there (root; ~70 s
# with a reachable mirror): tests/packages/check_debs.sh, label packages.
test-debs: deb
	GPUSCAN_TEST_DEBS=1 ctest --test-dir $(BUILD_DIR) -L packages --output-on-failure --no-tests=error

clean:
	rm -rf $(BUILD_DIR) $(CUDA_BUILD_DIR)
