// CliE2E: the gpuscan binary end to end against an in-process server (CPU engine) on a free
// loopback port, and what its tests share (cli_e2e_test.cc, cli_e2e_io_test.cc).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>
#include <regex>
#include <thread>

#include "array_files.h"
#include "gpuscan/client.h"
#include "in_process_server.h"
#include "temp_dir.h"

namespace gpuscan::cli_test {
namespace {

struct CliRun {
  int code = -1;
  std::string out, err;
};

class CliE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartCpuServer().release(); }
  static void TearDownTestSuite() {
    server_->Shutdown();
    delete server_;
    server_ = nullptr;
  }

  std::string addr() const { return server_->address(); }
  Client client() const {
    ClientOptions o;
    o.target = addr();
    o.timeout = std::chrono::seconds(120);
    return Client(o);
  }

  // Runs `[stdin_cmd |] gpuscan args` through the shell, capturing stdout and stderr.
  CliRun Run(const std::string& args, const std::string& stdin_cmd = "") const {
    std::string cmd = stdin_cmd.empty() ? "" : stdin_cmd + " | ";
    cmd += std::string(GPUSCAN_CLI_PATH) + " --no-progress " + args + " > " + dir_ / "stdout" +
           " 2> " + dir_ / "stderr";
    int status = std::system(cmd.c_str());
    CliRun r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = ReadFile(dir_ / "stdout");
    r.err = ReadFile(dir_ / "stderr");
    return r;
  }

  std::string Path(const std::string& name) const { return dir_ / name; }

  inline static server::Server* server_ = nullptr;
  TempDir dir_;
};


// Enough elements for many 1 MiB chunks, and not a multiple of a chunk.
constexpr size_t kN = 3'000'017;

std::vector<int32_t> RandomInt32(size_t n) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<int32_t> d(INT32_MIN, INT32_MAX);  // sums wrap
  std::vector<int32_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A JSON field of the CLI's flat report, as text ("" when absent).
std::string JsonField(const std::string& json, const std::string& key) {
  std::smatch m;
  std::regex re("\"" + key + "\":(\"[^\"]*\"|[^,}]*)");
  return std::regex_search(json, m, re) ? m[1].str() : "";
}

}  // namespace
}  // namespace gpuscan::cli_test
