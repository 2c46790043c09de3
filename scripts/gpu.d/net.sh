# scripts/gpu run net: the network figures of issue 43: striped lanes through HAProxy
# (deploy/haproxy/haproxy.cfg) and nginx (deploy/nginx/nginx.conf) against lanes direct, and TLS
# against plaintext, 1 GiB int32 scans with `gpuscan bench --e2e` (each row beside its own
# Transport ceiling), in one run. Pack with --proxies (HAProxy and nginx travel in the pack).
# NET_STEPS picks steps (default lb,nginx,tls); NET_ROUNDS rounds (default 3); NET_LB_TUNES
# "bufsize:window ..." HAProxy tunings to compare (default "shipped"); NET_NGINX nginx variants,
# "shipped" or "workers:http2_chunk_size:listen" (listen "plain" drops reuseport); NET_ENGINE,
# NET_BYTES, NET_BENCH_TIMEOUT. NET_PIN "BALANCER:SERVER:CLIENT" pins each to its own CPUs
# (taskset lists, e.g. 0-3:4-11:12-15: the balancer as on a host of its own; direct rows keep the
# same server and client cores).
source scripts/lib/gpu-common.sh
gpu_setup
export LD_LIBRARY_PATH=$R
steps=${NET_STEPS:-lb,nginx,tls}
rounds=${NET_ROUNDS:-3}
IFS=: read -r pin_b pin_s pin_c <<<"${NET_PIN:-}"
pb=() pc=()
[ -n "$pin_b" ] && pb=(taskset -c "$pin_b")
[ -n "$pin_c" ] && pc=(taskset -c "$pin_c")
# pin_server NAME: the server's threads (and those it starts later) on the server's CPUs.
pin_server() {
  [ -z "$pin_s" ] || taskset -a -p -c "$pin_s" "${gpu_pids[$1]}" >/dev/null
}
[ -z "${NET_PIN:-}" ] || echo "pinned: balancers on CPUs $pin_b, servers on $pin_s, clients on $pin_c (of $(nproc))"

# proxy NAME COMMAND...: a balancer in the background, stopped on exit.
proxy() {
  local name=$1
  shift
  "$@" >"$out/$name.log" 2>&1 &
  gpu_pids[$name]=$!
}

# bench NAME LANES [global flags...]: one 1 GiB int32 scan row (3 requests) and its ceiling.
bench() {
  local name=$1 lanes=$2 f
  shift 2
  f="$out/${name}_k${lanes}_r$round"
  timeout "${NET_BENCH_TIMEOUT:-60}" "${pc[@]}" $B/gpuscan "$@" bench --e2e --op scan --dtype int32 --bytes "${NET_BYTES:-$((1 << 30))}" --lanes "$lanes" \
    --concurrency 1 --requests 3 --json "$f.json" >"$f.txt" 2>&1
  printf "round %s %-12s lanes %-2s " "$round" "$name" "$lanes"
  gpu_row "$f.txt"
  grep -qE "^ +1 " "$f.txt" || tail -3 "$f.txt"
}

if gpu_want "$steps" lb; then
  step "lanes through HAProxy against lanes direct (one CUDA replica behind the balancer)"
  gpu_server direct 127.0.0.1:50701 --engine "${NET_ENGINE:-cuda}"
  pin_server direct
  # balancer.py needs gpuscan.testing alone (stdlib only): a package of that one module.
  mkdir -p "$out/py/gpuscan" && touch "$out/py/gpuscan/__init__.py" && cp python/gpuscan/testing.py "$out/py/gpuscan/"
  $B/haproxy -v | head -1
  read -ra tunes <<<"${NET_LB_TUNES:-shipped}"
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
    proxy "haproxy_$i" "${pb[@]}" $B/haproxy -db -f "$out/haproxy_$i.cfg"
  done
  sleep 3
  timeout 10 $B/gpuscan -s 127.0.0.1:50710 health || { echo "no health through the balancer"; cat "$out/haproxy_0.log"; }
  # nginx's grpc_pass beside it (NET_STEPS=lb,nginx), the shipped deploy/nginx/nginx.conf.
  ngx=()
  if gpu_want "$steps" nginx; then
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
      proxy "nginx_${v//:/_}" "${pb[@]}" $B/nginx -p "$d" -c "$d/nginx.conf"
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

if gpu_want "$steps" tls; then
  step "TLS against plaintext, the same server flags"
  certs=$(mktemp -d)
  bash tests/common/make_test_certs.sh "$certs" >/dev/null 2>&1 || echo "no certificates (openssl?)"
  gpu_server plain 127.0.0.1:50711 --engine "${NET_ENGINE:-cuda}"
  gpu_server tls 127.0.0.1:50712 --engine "${NET_ENGINE:-cuda}" --tls-cert "$certs/server.crt" --tls-key "$certs/server.key"
  pin_server plain
  pin_server tls
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
