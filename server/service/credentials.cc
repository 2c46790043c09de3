// Server transport security: TLS and mutual TLS credentials from PEM files, and the check that
// decides whether listening without TLS deserves a warning.
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <grpcpp/security/server_credentials.h>

#include "service/server.h"

namespace gpuscan::server {
namespace {

std::string ReadPem(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(std::string(flag) + "=" + path + ": cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  const std::string pem = text.str();
  // gRPC reports a malformed PEM only at the first handshake; refuse it at start instead.
  if (pem.find("-----BEGIN ") == std::string::npos) {
    throw std::invalid_argument(std::string(flag) + "=" + path + ": not a PEM file (no -----BEGIN line)");
  }
  return pem;
}

}  // namespace

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerOptions& o) {
  const bool cert = !o.tls_cert_file.empty();
  const bool key = !o.tls_key_file.empty();
  const bool client_ca = !o.tls_client_ca_file.empty();
  if (!cert && !key && !client_ca) return grpc::InsecureServerCredentials();
  if (cert != key) {
    throw std::invalid_argument(cert ? "--tls-cert is set but --tls-key is not: TLS needs both"
                                     : "--tls-key is set but --tls-cert is not: TLS needs both");
  }
  if (client_ca && !cert) {
    throw std::invalid_argument("--tls-client-ca needs --tls-cert and --tls-key: mutual TLS is TLS first");
  }
  grpc::SslServerCredentialsOptions ssl(client_ca ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                  : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  ssl.pem_key_cert_pairs.push_back({ReadPem(o.tls_key_file, "--tls-key"), ReadPem(o.tls_cert_file, "--tls-cert")});
  if (client_ca) ssl.pem_root_certs = ReadPem(o.tls_client_ca_file, "--tls-client-ca");
  return grpc::SslServerCredentials(ssl);
}

bool IsLoopbackAddress(const std::string& address) {
  if (address.rfind("unix:", 0) == 0 || address.rfind("unix-abstract:", 0) == 0) return true;
  const size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace gpuscan::server
