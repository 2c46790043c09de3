# Thin wrapper over CMake/CTest. `make demo` and `make test` work on a fresh Debian 12 /
# Ubuntu 24.04: both install missing packages first (scripts/install-deps.sh).
BUILD_DIR  ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all deps configure build test sanitize demo clean

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

clean:
	rm -rf $(BUILD_DIR)
