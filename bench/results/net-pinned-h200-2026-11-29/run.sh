#!/usr/bin/env bash
# Issue 57's balancer as it runs in production, on one H200 host: lanes through nginx and HAProxy
# with the balancer pinned to CPUs of its own (0-3), the server to 4-11 and the client to 12-15,
# beside the same split with no balancer (`scripts/gpu run net`, NET_PIN); first, this tree's
# integration suites on the cuda engine (the calls' release of resident arrays, the lanes'
# refused connects, the histogram's explicit edges).
#   here:    scripts/gpu pack --build build-gpu --targets "integration_tests gpuscan-server gpuscan" --proxies
#   device:  run(command="bash bench/results/net-pinned-h200-2026-11-29/run.sh", carry=[".gpu-pack/gpu.tar.xz"], kind="nvidia-h200")
source scripts/lib/gpu-common.sh
gpu_setup
step integration suites on the cuda engine
LD_LIBRARY_PATH=$R GPUSCAN_TEST_ENGINE=cuda timeout 240 $B/integration_tests --gtest_brief=1 2>&1 | grep -v '\[info\]' \
  | tee "$out/integration_cuda.txt" | tail -6
step "lanes through the balancers, pinned (NET_PIN=${NET_PIN:=0-3:4-11:12-15})"
mkdir -p "$out/net"
OUT=$out/net NET_PIN=$NET_PIN NET_STEPS=${NET_STEPS:-lb,nginx} NET_ROUNDS=${NET_ROUNDS:-2} \
  NET_NGINX="${NET_NGINX:-shipped 4:8k:reuseport}" timeout 330 bash scripts/gpu run net 2>&1 | tee "$out/net.txt" | grep -E "^round|pinned|==="
exit 0
