// Configuration of both binaries: every flag also comes from a GPUSCAN_* environment variable
// (and --help lists it), the command line wins over the environment, TLS options of the CLI
// work against a TLS server, and gpuscan-server warns when it listens in the clear on a
// non-loopback address.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "in_process_server.h"
#include "service/server.h"
#include "temp_dir.h"

namespace gpuscan::cli_test {
namespace {

struct ProcRun {
  int code = -1;
  std::string out, err;
};

class ConfigTest : public ::testing::Test {
 protected:
  // Runs `env binary args` through the shell, capturing stdout and stderr.
  ProcRun Shell(const std::string& env, const std::string& binary, const std::string& args) const {
    const std::string cmd = "env " + env + " " + binary + " " + args + " > " + dir_ / "stdout" + " 2> " + dir_ / "stderr";
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(dir_ / "stdout"), ReadFile(dir_ / "stderr")};
  }
  ProcRun Cli(const std::string& env, const std::string& args) const { return Shell(env, GPUSCAN_CLI_PATH, args); }

  TempDir dir_;
};

const char* const kServerEnv[] = {
    "GPUSCAN_ADDRESS",     "GPUSCAN_ENGINE",      "GPUSCAN_DEVICE",          "GPUSCAN_STREAMS",
    "GPUSCAN_MAX_CONCURRENT", "GPUSCAN_MAX_QUEUED", "GPUSCAN_MAX_REQUEST_BYTES", "GPUSCAN_CHUNK_BYTES",
    "GPUSCAN_WORKERS",     "GPUSCAN_CPU_THREADS", "GPUSCAN_SHUTDOWN_GRACE",  "GPUSCAN_LOG_LEVEL",
    "GPUSCAN_TLS_CERT",    "GPUSCAN_TLS_KEY",     "GPUSCAN_TLS_CLIENT_CA",   "GPUSCAN_METRICS_ADDRESS",
    "GPUSCAN_DEVICE_MEMORY_LIMIT", "GPUSCAN_MAX_INFLIGHT_BYTES", "GPUSCAN_MAX_CONNECTION_AGE", "GPUSCAN_DEVICES"};
const char* const kCliEnv[] = {"GPUSCAN_SERVER",          "GPUSCAN_CLIENT_TIMEOUT",  "GPUSCAN_CLIENT_CHUNK_BYTES",
                               "GPUSCAN_CLIENT_TLS",      "GPUSCAN_CLIENT_TLS_CA",   "GPUSCAN_CLIENT_TLS_CERT",
                               "GPUSCAN_CLIENT_TLS_KEY",  "GPUSCAN_CLIENT_TLS_SERVER_NAME",
                               "GPUSCAN_CLIENT_LB_POLICY", "GPUSCAN_CLIENT_RETRIES"};

TEST_F(ConfigTest, HelpListsEveryEnvironmentVariable) {
  const ProcRun server = Shell("", GPUSCAN_SERVER_PATH, "--help");
  ASSERT_EQ(server.code, 0) << server.err;
  for (const char* name : kServerEnv) EXPECT_NE(server.out.find(name), std::string::npos) << name;
  EXPECT_NE(server.out.find("127.0.0.1:50051"), std::string::npos) << "defaults are shown:\n" << server.out;
  const ProcRun cli = Cli("", "--help");
  ASSERT_EQ(cli.code, 0) << cli.err;
  for (const char* name : kCliEnv) EXPECT_NE(cli.out.find(name), std::string::npos) << name;
}

TEST_F(ConfigTest, CliTakesServerFromEnvironmentAndCommandLineWins) {
  auto server = StartCpuServer();
  EXPECT_EQ(Cli("GPUSCAN_SERVER=" + server->address(), "health").code, 0);
  const ProcRun wrong = Cli("GPUSCAN_SERVER=127.0.0.1:1 GPUSCAN_CLIENT_TIMEOUT=2", "health");
  EXPECT_NE(wrong.code, 0);
  EXPECT_EQ(Cli("GPUSCAN_SERVER=127.0.0.1:1", "--server " + server->address() + " health").code, 0);
  const ProcRun bad_policy = Cli("GPUSCAN_CLIENT_LB_POLICY=random", "-s " + server->address() + " health");
  EXPECT_NE(bad_policy.code, 0);
  EXPECT_NE(bad_policy.err.find("random"), std::string::npos) << bad_policy.err;
  EXPECT_EQ(Cli("GPUSCAN_CLIENT_LB_POLICY=round_robin", "-s dns:///" + server->address() + " health").code, 0);
  server->Shutdown();
}

TEST_F(ConfigTest, CliSpeaksTlsAndMutualTls) {
  const std::string certs = dir_ / "certs";
  ASSERT_EQ(std::system(("bash '" GPUSCAN_TEST_CERTS_SCRIPT "' '" + certs + "' >/dev/null").c_str()), 0);
  server::ServerOptions options;
  options.address = "127.0.0.1:0";
  options.tls_cert_file = certs + "/server.crt";
  options.tls_key_file = certs + "/server.key";
  options.tls_client_ca_file = certs + "/ca.crt";
  engine::EngineOptions eo;
  eo.kind = engine::EngineKind::kCpu;
  std::string why;
  auto server = server::Server::Start(options, engine::MakeEngine(eo, &why));
  const std::string target = "-s " + server->address() + " --timeout 10 ";

  const ProcRun by_flags = Cli("", target + "--tls-ca " + certs + "/ca.crt --tls-cert " + certs + "/client.crt --tls-key " +
                                   certs + "/client.key info");
  EXPECT_EQ(by_flags.code, 0) << by_flags.err;
  const ProcRun by_env = Cli("GPUSCAN_CLIENT_TLS_CA=" + certs + "/ca.crt GPUSCAN_CLIENT_TLS_CERT=" + certs +
                             "/client.crt GPUSCAN_CLIENT_TLS_KEY=" + certs + "/client.key",
                         target + "health");
  EXPECT_EQ(by_env.code, 0) << by_env.err;
  const ProcRun no_cert = Cli("", target + "--tls-ca " + certs + "/ca.crt info");
  EXPECT_NE(no_cert.code, 0);
  EXPECT_NE(no_cert.err.find("UNAVAILABLE"), std::string::npos) << no_cert.err;
  const ProcRun plaintext = Cli("", target + "info");
  EXPECT_NE(plaintext.code, 0);
  const ProcRun half = Cli("", target + "--tls-ca " + certs + "/ca.crt --tls-cert " + certs + "/client.crt info");
  EXPECT_NE(half.code, 0);
  EXPECT_NE(half.err.find("--tls-key"), std::string::npos) << half.err;
  server->Shutdown();
}

// Starts gpuscan-server with `env`, waits for its "listening on" line and returns its pid and
// port; its log goes to `log`.
struct Child {
  pid_t pid = -1;
  int port = 0;
};
Child StartServerBinary(const std::string& env, const std::string& log, const std::string& args = "") {
  const std::string cmd = "exec env " + env + " " + GPUSCAN_SERVER_PATH + " " + args + " > " + log + " 2>&1";
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::regex listening("listening on [^ ]*:([0-9]+)");
  for (int i = 0; i < 200; ++i) {
    std::smatch m;
    const std::string text = ReadFile(log);
    if (std::regex_search(text, m, listening)) return {pid, std::stoi(m[1].str())};
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ADD_FAILURE() << "gpuscan-server did not start:\n" << ReadFile(log);
  return {};
}

int StopServerBinary(pid_t pid) {
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(ConfigTest, ServerReadsEnvironmentAndWarnsWithoutTlsOnReachableAddress) {
  const std::string log = dir_ / "server.log";
  const Child open = StartServerBinary("GPUSCAN_ADDRESS=0.0.0.0:0 GPUSCAN_ENGINE=cpu GPUSCAN_MAX_CONCURRENT=3", log);
  ASSERT_GT(open.port, 0);
  EXPECT_EQ(Cli("", "-s 127.0.0.1:" + std::to_string(open.port) + " health").code, 0);
  EXPECT_EQ(StopServerBinary(open.pid), 0);
  const std::string text = ReadFile(log);
  EXPECT_NE(text.find("NOT using TLS"), std::string::npos) << text;
  EXPECT_NE(text.find("max-concurrent 3"), std::string::npos) << "GPUSCAN_MAX_CONCURRENT was read:\n" << text;

  const std::string log2 = dir_ / "server2.log";  // a fresh file: the old one already says "listening"
  const Child loopback = StartServerBinary("GPUSCAN_ADDRESS=127.0.0.1:0 GPUSCAN_ENGINE=cpu", log2);
  ASSERT_GT(loopback.port, 0);
  EXPECT_EQ(StopServerBinary(loopback.pid), 0);
  EXPECT_EQ(ReadFile(log2).find("NOT using TLS"), std::string::npos) << "no warning on loopback";
}

// SIGTERM ends the process as soon as every call has its answer (server_main.cc's EndProcess, not a
// piece-by-piece teardown, which took 7-9 s after CUDA calls on an H200): after 64 MiB scans the
// process is gone within 2 s, having said "exiting 0", with status 0; a unix socket's file goes too.
TEST_F(ConfigTest, SigtermEndsTheProcessOnceEveryCallIsAnswered) {
  const std::string log = dir_ / "server.log";
  const Child server = StartServerBinary("GPUSCAN_ADDRESS=127.0.0.1:0 GPUSCAN_ENGINE=cpu", log);
  ASSERT_GT(server.port, 0);
  const ProcRun bench = Cli("", "-s 127.0.0.1:" + std::to_string(server.port) +
                                    " bench --e2e --op scan --dtype int32 --bytes 67108864 --concurrency 2 --requests 4");
  EXPECT_EQ(bench.code, 0) << bench.err;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(StopServerBinary(server.pid), 0);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  EXPECT_NE(ReadFile(log).find("exiting 0"), std::string::npos) << ReadFile(log);

  const std::string sock = dir_ / "gpuscan.sock", log2 = dir_ / "server2.log";
  const std::string cmd = std::string("exec ") + GPUSCAN_SERVER_PATH + " --engine cpu --address unix:" + sock + " > " +
                          log2 + " 2>&1";
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    up = Cli("", "-s unix:" + sock + " health --timeout 1").code == 0;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(up) << ReadFile(log2);
  EXPECT_EQ(StopServerBinary(pid), 0);
  EXPECT_FALSE(std::filesystem::exists(sock)) << "the socket file outlived its server";
}

// gRPC core channel arguments as tuning knobs: NAME=INT on both ends (bench/notes/wire.md, "HTTP/2
// frame size"); a value that is not an int is refused naming it.
TEST_F(ConfigTest, GrpcChannelArgumentsAreTakenAsNameEqualsInt) {
  const std::string log = dir_ / "server.log";
  const Child server = StartServerBinary("GPUSCAN_ADDRESS=127.0.0.1:0 GPUSCAN_ENGINE=cpu", log,
                                         "--grpc-arg grpc.http2.max_frame_size=1048576");
  ASSERT_GT(server.port, 0);
  const std::string target = "-s 127.0.0.1:" + std::to_string(server.port);
  EXPECT_EQ(Cli("", target + " --channel-arg grpc.http2.max_frame_size=4194304 --channel-arg "
                             "grpc.http2.lookahead_bytes=8388608 health").code, 0);
  const std::string in = dir_ / "in.txt";
  ASSERT_EQ(std::system(("printf '3\\n1\\n4\\n1\\n5\\n' > " + in).c_str()), 0);
  const ProcRun scan = Cli("", target + " --channel-arg grpc.http2.max_frame_size=4194304 scan --dtype int32 -i " + in +
                                   " --no-progress");
  EXPECT_EQ(scan.code, 0) << scan.err;
  EXPECT_EQ(scan.out, "3\n4\n8\n9\n14\n");
  const ProcRun bad = Cli("", target + " --channel-arg grpc.http2.max_frame_size=big health");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--channel-arg"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("big"), std::string::npos) << bad.err;
  EXPECT_NE(Cli("", target + " --channel-arg grpc.http2.max_frame_size health").code, 0);  // no value
  EXPECT_EQ(StopServerBinary(server.pid), 0);
  const ProcRun bad_server = Shell("", GPUSCAN_SERVER_PATH, "--engine cpu --grpc-arg grpc.http2.max_frame_size=huge");
  EXPECT_NE(bad_server.code, 0);
  EXPECT_NE((bad_server.out + bad_server.err).find("huge"), std::string::npos) << bad_server.out << bad_server.err;
}

TEST_F(ConfigTest, ServerRefusesBadEnvironmentValuesByName) {
  const ProcRun bad = Shell("GPUSCAN_ENGINE=tpu", GPUSCAN_SERVER_PATH, "");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE((bad.out + bad.err).find("tpu"), std::string::npos) << bad.out << bad.err;
  const ProcRun missing = Shell("GPUSCAN_TLS_CERT=/no/such.crt", GPUSCAN_SERVER_PATH, "");
  EXPECT_NE(missing.code, 0);
  EXPECT_NE((missing.out + missing.err).find("/no/such.crt"), std::string::npos) << missing.out << missing.err;
  // --devices: "all" or distinct ordinals, named in the message as given.
  for (const auto& [value, says] : std::vector<std::pair<std::string, std::string>>{
           {"0,x", "'0,x' is not all or a list of device ordinals such as 0,2 (at 'x')"},
           {"-1", "'-1' is not all or a list of device ordinals"},
           {"1,,2", "'1,,2' is not all or a list of device ordinals such as 0,2 (at '')"},
           {"2,2", "'2,2' names device 2 twice"}}) {
    const ProcRun devices = Shell("GPUSCAN_DEVICES=" + value, GPUSCAN_SERVER_PATH, "--engine cpu");
    EXPECT_NE(devices.code, 0) << value;
    EXPECT_NE(devices.err.find("--devices: " + says), std::string::npos) << value << ": " << devices.err;
  }
}

}  // namespace
}  // namespace gpuscan::cli_test
