#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite of the committed build): why int32 trails
# float32 by ~0.5-0.8 point of copy on both GPUs with the same tiles: ncu's warp states, memory
# and speed-of-light sections of one look-back launch at 2^28 for each type, and the two
# kernels' SASS instruction mix (cuobjdump).
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
which ncu cuobjdump nvdisasm 2>&1 | tee "$out/tools.txt"
for d in int32 float32; do
  step ncu $d
  timeout 240 ncu -k regex:SinglePassScanBulk --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    $B/kernel_suite --ops scan --algorithms decoupled_lookback --dtypes $d --sizes 2^28 --reps 3 --warmup 1 \
    >"$out/ncu_$d.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Stall|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Block Limit|Issued Ipc|L2 Hit" "$out/ncu_$d.txt" | head -40
done
step sass
cuobjdump -sass $B/kernel_suite > "$out/sass_all.txt" 2>/dev/null
python3 - "$out/sass_all.txt" <<'PY' | tee "$out/sass_mix.txt"
import re, sys, collections
text = open(sys.argv[1]).read().split("Function : ")
for block in text[1:]:
    name = block.split("\n", 1)[0]
    if "SinglePassScanBulk" not in name or "ELi44E" not in name or "Sum" not in name: continue
    ops = collections.Counter(m.group(1).split(".")[0] for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", block))
    print(name[:160]); print("  total", sum(ops.values()), dict(ops.most_common(25)))
PY
