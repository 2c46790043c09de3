// --shm for the array commands (scan, reduce, compact): the CLI, on the server's host, loads the
// input file into a shared-memory region, the server reads it and writes results into another
// (header.shared_memory), and the CLI writes the output file from that region. Nothing but the
// header crosses gRPC. The regions are deleted when the command ends. Files that already lie
// directly under the server's --shm-dir (scan, reduce) are regions themselves: nothing is copied.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "array_input.h"
#include "array_output.h"
#include "gpuscan/client.h"

namespace gpuscan::cli {

// --shm into `on`, --shm-dir into `dir` (empty: the server's Limits.shm_dir).
void AddShmOption(CLI::App* cmd, bool& on, std::string& dir);

// The directory to create regions in: `asked` (--shm-dir), else the one the server reports.
// Throws std::runtime_error when the server serves no shared memory (no --shm-dir of its own).
std::string ShmDir(const std::string& asked, Client& client);

// The CLI's regions serve one call: the server maps them populated and registers them for DMA on
// that call (SharedMemory.arena) rather than staging its copies and registering on a second use
// that never comes.
template <class Header>
void RegisterAtOnce(Header& header) {
  header.mutable_shared_memory()->set_arena(true);
}

// Whether `path` lies directly under `dir` (both resolved): a file the server can open as a region.
bool DirectlyUnder(const std::string& dir, const std::string& path);

// The input's own file as the region, where it is a .npy or raw file lying directly under `dir`
// (the server's --shm-dir as this host sees it): region, offset and bytes of *m; false otherwise.
bool InputFileAsRegion(const std::string& dir, const ArrayInput& in, v1::SharedMemory* m);
// The output's own file as the scan's output region, where it lies directly under `dir` and
// takes results by position: sized now for `bytes`, output_region and output_offset of *m.
bool OutputFileAsRegion(const std::string& dir, ArrayOutput& out, uint64_t bytes, v1::SharedMemory* m);

// A region holding the whole input, read from the file straight into the mapping. Throws when
// the input's length is not known up front (a pipe or text): --shm needs a .npy or raw file.
SharedRegion LoadRegion(ArrayInput& in, const std::string& dir);

// Writes the first `bytes` bytes of the region to the output.
void SaveRegion(const SharedRegion& region, uint64_t bytes, ArrayOutput& out);

}  // namespace gpuscan::cli
