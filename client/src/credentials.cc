// Channel credentials from the client's TLS options (PEM files).
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <grpcpp/security/credentials.h>

#include "gpuscan/client.h"

namespace gpuscan {
namespace {

std::string ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(std::string(what) + " " + path + ": cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    throw std::invalid_argument(std::string(what) + " " + path + ": not a PEM file (no -----BEGIN line)");
  }
  return text.str();
}

}  // namespace

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const TlsOptions& tls) {
  if (!tls.wanted()) return grpc::InsecureChannelCredentials();
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    throw std::invalid_argument("TLS client certificate and key go together: set both the certificate (--tls-cert) "
                                "and the key (--tls-key), or neither");
  }
  grpc::SslCredentialsOptions ssl;
  if (!tls.ca_file.empty()) ssl.pem_root_certs = ReadPem(tls.ca_file, "TLS CA file");
  if (!tls.cert_file.empty()) {
    ssl.pem_cert_chain = ReadPem(tls.cert_file, "TLS certificate file");
    ssl.pem_private_key = ReadPem(tls.key_file, "TLS key file");
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace gpuscan
