# Thin wrapper over CMake/CTest. `make demo` and `make test` work on a fresh Debian 12 /
# Ubuntu 24.04: both install missing packages first (scripts/install-deps.sh).
BUILD_DIR  ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all deps configure build test sanitize demo clean image test-container

all: build

deps:
	bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

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

clean:
	rm -rf $(BUILD_DIR)
