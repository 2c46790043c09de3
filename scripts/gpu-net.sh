#!/usr/bin/env bash
# The network figures of issue 43 on the GPU machine: striped lanes through HAProxy
# (deploy/haproxy/haproxy.cfg) and nginx (deploy/nginx/nginx.conf) against lanes direct, and TLS against plaintext, 1 GiB int32
# scans with `gpuscan bench --e2e` (each row beside its own Transport ceiling), in one run.
#   here:    scripts/gpu-net.sh pack   builds server + CLI, packs them with HAProxy and every
#                                      library they load into .gpu-net/net.tar.xz
#   device:  run(command="bash scripts/gpu-net.sh", carry=[".gpu-net"], timeout_s=590)
# NET_STEPS picks steps (default lb,nginx,tls); NET_ROUNDS rounds (default 3). Logs in $OUT/net-logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = pack ]; then
  set -e
  build=${BUILD_DIR:-build}
  cmake -S . -B "$build" -DGPUSCAN_ENABLE_CUDA=ON >/dev/null  # a tree `make` configured without a GPU has none
  cmake --build "$build" -j"$(nproc)" --target gpuscan-server gpuscan
  rm -rf .gpu-net && mkdir -p .gpu-net/stage/.gpu-bin
  strip -o .gpu-net/stage/.gpu-bin/gpuscan-server "$build/bin/gpuscan-server"
  strip -o .gpu-net/stage/.gpu-bin/gpuscan "$build/bin/gpuscan"
  cp /usr/sbin/haproxy /usr/sbin/nginx .gpu-net/stage/.gpu-bin/
  ../shared/device/bundle-libs.sh .gpu-net/stage/.gpu-rt .gpu-net/stage/.gpu-bin/gpuscan-server \
    .gpu-net/stage/.gpu-bin/gpuscan .gpu-net/stage/.gpu-bin/haproxy .gpu-net/stage/.gpu-bin/nginx
  tar -C .gpu-net/stage -cf - .gpu-bin .gpu-rt | xz -T2 -6 >.gpu-net/net.tar.xz
  rm -rf .gpu-net/stage
  du -h .gpu-net/net.tar.xz
  exit 0
fi

GPU_PACK=.gpu-net/net.tar.xz GPU_LOGS_TGZ=net-logs.tgz source "$(dirname "$0")/gpu-common.sh"
export LD_LIBRARY_PATH=$R
want() { [[ ",${NET_STEPS:-lb,nginx,tls}," == *",$1,"* ]]; }
rounds=${NET_ROUNDS:-3}
pids=()
# Stop the servers before gpu-common's EXIT trap packs the logs.
trap 'kill ${pids[@]} 2>/dev/null; wait 2>/dev/null; tar -czf "$final/net-logs.tgz" -C "$out" .' EXIT

# start NAME PORT [flags...]: a cuda server on 127.0.0.1:PORT, waited for.
start() {
  local name=$1 port=$2
  shift 2
  $B/gpuscan-server --address 127.0.0.1:$port --engine "${NET_ENGINE:-cuda}" "$@" >"$out/server_$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 150); do
    grep -q "listening on" "$out/server_$name.log" && return
    sleep 0.2
  done
  echo "server $name did not start"; cat "$out/server_$name.log"
}

# bench NAME LANES [global flags...]: one 1 GiB int32 scan row (3 requests) and its ceiling.
bench() {
  local name=$1 lanes=$2 f
  shift 2
  f="$out/${name}_k${lanes}_r$round"
  timeout "${NET_BENCH_TIMEOUT:-60}" $B/gpuscan "$@" bench --e2e --op scan --dtype int32 --bytes "${NET_BYTES:-$((1 << 30))}" --lanes "$lanes" \
    --concurrency 1 --requests 3 --json "$f.json" >"$f.txt" 2>&1
  printf "round %s %-12s lanes %-2s " "$round" "$name" "$lanes"
  grep -E "^ +1 " "$f.txt" | awk '{print "GB/s", $3, "ceiling", $(NF-1), "share", $NF}'
  grep -qE "^ +1 " "$f.txt" || tail -3 "$f.txt"
}

if want lb; then
  step "lanes through HAProxy against lanes direct (one CUDA replica behind the balancer)"
  start direct 50701
  # balancer.py needs gpuscan.testing alone (stdlib only): a package of that one module.
  mkdir -p "$out/py/gpuscan" && touch "$out/py/gpuscan/__init__.py" && cp python/gpuscan/testing.py "$out/py/gpuscan/"
  $B/haproxy -v | head -1
  # NET_LB_TUNES: "bufsize:window ..." to compare (default: the shipped config's own, "shipped").
  tunes=(${NET_LB_TUNES:-shipped})
  for i in "${!tunes[@]}"; do
    PYTHONPATH=tests/lb:$out/py python3 -c "
import balancer, pathlib, re, sys
t = balancer.render_config(balancer.CONFIG.read_text(), 50710 + $i, ['127.0.0.1:50701'])
if '${tunes[$i]}' != 'shipped':
    b, w = '${tunes[$i]}'.split(':')
    t = re.sub(r'tune.bufsize \\d+', 'tune.bufsize ' + b, t)
    t = re.sub(r'tune.h2.initial-window-size \\d+', 'tune.h2.initial-window-size ' + w, t)
pathlib.Path('$out/haproxy_$i.cfg').write_text(t)"
    grep -E "tune\.(bufsize|h2.initial)" "$out/haproxy_$i.cfg" | tr '\n' ' '; echo "(balancer $i)"
    $B/haproxy -db -f "$out/haproxy_$i.cfg" >"$out/haproxy_$i.log" 2>&1 &
    pids+=($!)
  done
  sleep 3
  timeout 10 $B/gpuscan -s 127.0.0.1:50710 health || { echo "no health through the balancer"; cat "$out/haproxy_0.log"; }
  # nginx's grpc_pass beside it (NET_STEPS=lb,nginx), the shipped deploy/nginx/nginx.conf.
  # NET_NGINX: variants to compare, "shipped" or "workers:http2_chunk_size:listen" edits of it
  # (listen "plain" drops reuseport).
  ngx=()
  if want nginx; then
    $B/nginx -v 2>&1
    for v in ${NET_NGINX:-shipped}; do
      d="$out/nginx_${v//:/_}" && mkdir -p "$d"
      port=$((50720 + ${#ngx[@]}))
      PYTHONPATH=tests/lb:$out/py python3 -c "
import balancer, pathlib, re
t = balancer.render_nginx_config(balancer.NGINX_CONFIG.read_text(), $port, ['127.0.0.1:50701'], '$d')
if '$v' != 'shipped':
    w, c, l = '$v'.split(':')
    t = re.sub(r'worker_processes \\w+;', f'worker_processes {w};', t)
    t = t.replace('http {', f'http {{\\n  http2_chunk_size {c};', 1)
    if l == 'plain':
        t = t.replace(' reuseport;', ';')
pathlib.Path('$d/nginx.conf').write_text(t)"
      $B/nginx -p "$d" -c "$d/nginx.conf" >"$d/nginx.log" 2>&1 &
      pids+=($!)
      ngx+=("${v//:/-}@$port")
    done
    sleep 2
  fi
  for round in $(seq "$rounds"); do
    for k in 8 1; do
      bench direct "$k" -s 127.0.0.1:50701
      for i in "${!tunes[@]}"; do bench "balancer$i" "$k" -s 127.0.0.1:$((50710 + i)); done
      for n in "${ngx[@]}"; do bench "nginx-${n%%@*}" "$k" -s "127.0.0.1:${n##*@}"; done
    done
  done
  cat "$out"/haproxy_*.log | grep -c "is DOWN" | awk '{print "haproxy DOWN events:", $1}'
fi

if want tls; then
  step "TLS against plaintext, the same server flags"
  certs=$(mktemp -d)
  bash tests/common/make_test_certs.sh "$certs" >/dev/null 2>&1 || echo "no certificates (openssl?)"
  start plain 50711
  start tls 50712 --tls-cert "$certs/server.crt" --tls-key "$certs/server.key"
  tls=(--tls-ca "$certs/ca.crt" --tls-server-name localhost)
  for round in $(seq "$rounds"); do
    for k in 1 8; do
      bench plain "$k" -s 127.0.0.1:50711
      bench tls "$k" -s 127.0.0.1:50712 "${tls[@]}"
      bench tls-4MiB "$k" -s 127.0.0.1:50712 "${tls[@]}" --chunk-bytes $((4 << 20))
    done
  done
  for k in 16 32; do
    round=1 bench tls "$k" -s 127.0.0.1:50712 "${tls[@]}"
  done
fi
