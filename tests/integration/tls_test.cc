// TLS and mutual TLS end to end, with certificates generated for this run by
// tests/common/make_test_certs.sh (openssl): the right client gets correct results, the wrong
// ones are refused, and bad TLS options stop the server at start with a message naming them.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "reference.h"
#include "test_server.h"

namespace gpuscan {
namespace {

namespace fs = std::filesystem;
using testing::TestServer;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("gpuscan-tls-test-" + std::to_string(::getpid()));
    const std::string cmd = std::string("bash '") + GPUSCAN_TEST_CERTS_SCRIPT + "' '" + dir_.string() + "' >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "cannot generate test certificates with openssl: " << cmd;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string File(const char* name) { return (dir_ / name).string(); }

  static server::ServerOptions TlsServer(bool mutual) {
    server::ServerOptions o;
    o.tls_cert_file = File("server.crt");
    o.tls_key_file = File("server.key");
    if (mutual) o.tls_client_ca_file = File("ca.crt");
    return o;
  }

  // A client of `server` with the given TLS options; the target names 127.0.0.1, which the
  // server certificate lists as an IP SAN.
  static ClientOptions WithTls(const TestServer& server, TlsOptions tls) {
    ClientOptions o = server.client_options();
    o.timeout = std::chrono::seconds(20);
    o.tls = std::move(tls);
    return o;
  }

  // Scans random data through `client` and checks every element.
  static void ExpectCorrectScan(Client& client) {
    GPUSCAN_SEEDED_RNG(rng);
    const auto x = testing::RandomInput<int64_t, ops::Sum<int64_t>>(300001, rng);
    auto result = client.Scan(x);
    EXPECT_EQ(result.values, (testing::ScanRef<int64_t, ops::Sum<int64_t>>(x, false)));
  }

  static grpc::StatusCode CodeOfInfo(Client& client) {
    try {
      client.Info();
      return grpc::StatusCode::OK;
    } catch (const RpcError& e) {
      return e.code();
    }
  }

  // TLS options naming files of this run's directory ("" = unset).
  static TlsOptions Tls(const char* ca, const char* cert = "", const char* key = "", const char* name = "") {
    TlsOptions t;
    if (*ca) t.ca_file = File(ca);
    if (*cert) t.cert_file = File(cert);
    if (*key) t.key_file = File(key);
    t.server_name = name;
    return t;
  }

  static fs::path dir_;
};
fs::path TlsTest::dir_;

TEST_F(TlsTest, TlsClientWithTheServersCaGetsCorrectResults) {
  TestServer server(TlsServer(false));
  Client client(WithTls(server, Tls("ca.crt")));
  ExpectCorrectScan(client);
  EXPECT_EQ(client.Health(""), "SERVING");
}

TEST_F(TlsTest, PlaintextClientIsRefusedByTlsServer) {
  TestServer server(TlsServer(false));
  Client client(WithTls(server, {}));
  EXPECT_EQ(CodeOfInfo(client), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, ClientRefusesServerItCannotVerify) {
  TestServer server(TlsServer(false));
  Client client(WithTls(server, Tls("rogue-ca.crt")));
  EXPECT_EQ(CodeOfInfo(client), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, ServerNameOverrideIsChecked) {
  TestServer server(TlsServer(false));
  Client good(WithTls(server, Tls("ca.crt", "", "", "localhost")));
  EXPECT_EQ(CodeOfInfo(good), grpc::StatusCode::OK);
  Client bad(WithTls(server, Tls("ca.crt", "", "", "gpuscan.example.com")));
  EXPECT_EQ(CodeOfInfo(bad), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, MutualTlsAcceptsClientSignedByTheClientCa) {
  TestServer server(TlsServer(true));
  Client client(WithTls(server, Tls("ca.crt", "client.crt", "client.key")));
  ExpectCorrectScan(client);
}

TEST_F(TlsTest, MutualTlsRefusesClientWithoutCertificate) {
  TestServer server(TlsServer(true));
  Client client(WithTls(server, Tls("ca.crt")));
  EXPECT_EQ(CodeOfInfo(client), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, MutualTlsRefusesClientSignedByAnotherCa) {
  TestServer server(TlsServer(true));
  Client client(WithTls(server, Tls("ca.crt", "rogue-client.crt", "rogue-client.key")));
  EXPECT_EQ(CodeOfInfo(client), grpc::StatusCode::UNAVAILABLE);
  // The refusal is per connection: a good client still gets through afterwards.
  Client good(WithTls(server, Tls("ca.crt", "client.crt", "client.key")));
  EXPECT_EQ(CodeOfInfo(good), grpc::StatusCode::OK);
}

// Starting a server with `o` throws std::invalid_argument whose message contains `needle`.
void ExpectStartRefused(server::ServerOptions o, const std::string& needle) {
  try {
    TestServer server(std::move(o));
    ADD_FAILURE() << "the server started; expected a refusal mentioning " << needle;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Resident arrays under mutual TLS belong to the certificate's identity: another certificate's
// client gets NOT_FOUND, and gpuscan-tenant metadata cannot claim another tenant.
TEST_F(TlsTest, MutualTlsTenantsAreTheCertificatesAndMetadataCannotChangeThem) {
  server::ServerOptions o = TlsServer(true);
  o.resident_bytes = 1 << 20;
  TestServer server(o);
  ClientOptions first = WithTls(server, Tls("ca.crt", "client.crt", "client.key"));
  ClientOptions second = WithTls(server, Tls("ca.crt", "client2.crt", "client2.key"));
  second.tenant = "x509:gpuscan test client";  // claims the first's identity through metadata
  Client a(first), b(second);
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(1000, rng);
  RemoteArray r = a.Put(x);
  EXPECT_EQ(a.GetArray(r.info().id()).size(), x.size() * sizeof(int32_t));
  try {
    b.GetArray(r.info().id());
    ADD_FAILURE() << "another certificate's client read the array";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::NOT_FOUND) << e.what();
  }
  EXPECT_EQ(b.ListArrays().arrays_size(), 0);
  first.tenant = "someone-else";  // the certificate still decides
  Client a2(first);
  EXPECT_EQ(a2.ListArrays().arrays_size(), 1);
}

TEST_F(TlsTest, BadTlsOptionsStopTheServerAtStart) {
  server::ServerOptions cert_only;
  cert_only.tls_cert_file = File("server.crt");
  ExpectStartRefused(cert_only, "--tls-key");

  server::ServerOptions ca_only;
  ca_only.tls_client_ca_file = File("ca.crt");
  ExpectStartRefused(ca_only, "--tls-client-ca");

  server::ServerOptions missing = TlsServer(false);
  missing.tls_key_file = File("no-such.key");
  ExpectStartRefused(missing, "no-such.key");

  server::ServerOptions not_pem = TlsServer(false);
  not_pem.tls_cert_file = File("server.ext");  // a text file, but no PEM
  ExpectStartRefused(not_pem, "not a PEM file");
}

TEST_F(TlsTest, ClientTlsOptionsAreChecked) {
  EXPECT_THROW(MakeChannelCredentials(Tls("", "client.crt")), std::invalid_argument);
  EXPECT_THROW(MakeChannelCredentials(Tls("missing.crt")), std::invalid_argument);
  TlsOptions system_roots;
  system_roots.enabled = true;
  EXPECT_NE(MakeChannelCredentials(system_roots), nullptr);
}

TEST(LoopbackAddressTest, TellsLoopbackFromReachableAddresses) {
  for (const char* a : {"127.0.0.1:50051", "127.1.2.3:1", "localhost:50051", "[::1]:50051", "unix:/tmp/s"}) {
    EXPECT_TRUE(server::IsLoopbackAddress(a)) << a;
  }
  for (const char* a : {"0.0.0.0:50051", "[::]:50051", "10.0.0.7:50051", "gpu-box:50051", ":50051"}) {
    EXPECT_FALSE(server::IsLoopbackAddress(a)) << a;
  }
}

}  // namespace
}  // namespace gpuscan
