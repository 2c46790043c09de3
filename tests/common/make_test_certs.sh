#!/usr/bin/env bash
# Writes throwaway TLS material for the TLS tests into DIR (created): a CA and a server
# certificate for localhost/127.0.0.1 signed by it, two client certificates signed by it, and a
# second, unrelated CA with a client certificate of its own (which a mutual-TLS server must refuse).
# EC P-256 keys: generated in milliseconds.
set -euo pipefail
dir=${1:?usage: make_test_certs.sh DIR}
mkdir -p "$dir"
cd "$dir"

ca() {  # ca NAME
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=gpuscan test $1" -keyout "$1.key" -out "$1.crt" 2>/dev/null
}
leaf() {  # leaf NAME CA EXTENSIONS
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=gpuscan test $1" -keyout "$1.key" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days 2 \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
}

ca ca
ca rogue-ca
leaf server ca "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
leaf client ca "extendedKeyUsage=clientAuth"
leaf client2 ca "extendedKeyUsage=clientAuth"  # another tenant under mutual TLS (resident arrays)
leaf rogue-client rogue-ca "extendedKeyUsage=clientAuth"
echo "test certificates in $dir"
