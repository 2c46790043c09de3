#include "shm_option.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <stdexcept>

namespace gpuscan::cli {

void AddShmOption(CLI::App* cmd, bool& shm, std::string& dir) {
  auto* on = cmd->add_flag("--shm", shm,
                           "same host as the server: pass the array through a shared-memory region instead of "
                           "gRPC messages (the server needs --shm-dir)");
  cmd->add_option("--shm-dir", dir,
                  "where to create the regions (default: the server's --shm-dir, as it reports it)")
      ->needs(on);
}

std::string ShmDir(const std::string& asked, Client& client) {
  if (!asked.empty()) return asked;
  const v1::Limits limits = client.Info().limits();
  if (!limits.shared_memory() || limits.shm_dir().empty()) {
    throw std::runtime_error("--shm: the server serves no shared memory (start it with --shm-dir DIR)");
  }
  return limits.shm_dir();
}

bool DirectlyUnder(const std::string& dir, const std::string& path) {
  if (path.empty() || path == "-") return false;
  std::error_code e1, e2;
  const auto d = std::filesystem::canonical(dir, e1);
  const auto p = std::filesystem::weakly_canonical(path, e2);
  return !e1 && !e2 && p.has_parent_path() && p.parent_path() == d;
}

bool InputFileAsRegion(const std::string& dir, const ArrayInput& in, v1::SharedMemory* m) {
  const std::optional<ArrayInput::FileSpan> span = in.InFile();
  if (!span || !DirectlyUnder(dir, span->path)) return false;
  m->set_region(std::filesystem::path(span->path).filename().string());
  m->set_offset(span->offset);
  m->set_bytes(span->bytes);
  return true;
}

bool OutputFileAsRegion(const std::string& dir, ArrayOutput& out, uint64_t bytes, v1::SharedMemory* m) {
  if (!DirectlyUnder(dir, out.path())) return false;
  const std::optional<uint64_t> at = out.ReserveInPlace(bytes);
  if (!at) return false;
  m->set_output_region(std::filesystem::path(out.path()).filename().string());
  m->set_output_offset(*at);
  return true;
}

SharedRegion LoadRegion(ArrayInput& in, const std::string& dir) {
  if (!in.payload_bytes()) {
    throw std::runtime_error("--shm needs an input whose length is known up front (a .npy or raw file), not " +
                             in.name());
  }
  const uint64_t bytes = *in.payload_bytes();
  SharedRegion region = SharedRegion::Create(dir, bytes);
  Source source = in.AsSource();
  auto* p = static_cast<char*>(region.data());
  for (uint64_t got = 0; got < bytes;) {
    const size_t n = source(p + got, static_cast<size_t>(std::min<uint64_t>(bytes - got, size_t{64} << 20)));
    if (n == 0) throw std::runtime_error(in.name() + " ended after " + std::to_string(got) + " of " +
                                         std::to_string(bytes) + " bytes");
    got += n;
  }
  return region;
}

void SaveRegion(const SharedRegion& region, uint64_t bytes, ArrayOutput& out) {
  const auto* p = static_cast<const char*>(region.data());
  constexpr uint64_t kPiece = uint64_t{64} << 20;
  for (uint64_t done = 0; done < bytes; done += kPiece) {
    out.Write(p + done, static_cast<size_t>(std::min(kPiece, bytes - done)));
  }
}

}  // namespace gpuscan::cli
