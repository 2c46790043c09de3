#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: tune_bench of tiles.diff): small look-back scans with
# smaller tiles against the default, 2^12-2^18, three rounds (tune_bench's "small" table).
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
step small tiles
timeout 400 $B/tune_bench small >"$out/small.txt" 2>&1
echo "rc $?"; grep -E "default|bulk|copy|cub" "$out/small.txt" | awk '{print}' | head -400 | grep -E " 65536 " | head -80
