// libFuzzer entry point of the request fuzzer (format and invariants: request_fuzz_target.h).
//   request_fuzzer -max_total_time=60 CORPUS_COPY_DIR      (see scripts/ci-sanitize.sh)
#include <cstddef>
#include <cstdint>

#include "request_fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return gpuscan::fuzz::RunRequestInput(data, size);
}
