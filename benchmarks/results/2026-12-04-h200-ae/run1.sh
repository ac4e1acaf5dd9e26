#!/bin/bash
# Run 1 (GPU): where a bf16 step's time goes, as called.
#  (a) Nsight Compute's speed of light of the six GEMMs of a shape-1 step as the table runs
#      them, each beside CUTLASS's (the -ad folder's run7_ncu_six.py, prepared there, run here);
#  (b) torch.profiler's kernel times per forward + backward of tilefuse as called, the compiled
#      composition and fp8_block as called, at the spec's three shapes (interleave 32).
#   OUT=... bash benchmarks/results/2026-12-04-h200-ae/run1.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ae
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $OUT/run1/gpu.txt
git rev-parse HEAD >> $OUT/run1/gpu.txt 2>/dev/null
timeout 230 ncu --section SpeedOfLight --launch-skip 12 --launch-count 12 \
  --kernel-name regex:"ws_rows|ws_wgrad|device_kernel" \
  python3 benchmarks/results/2026-12-04-h200-ad/run7_ncu_six.py > $OUT/run1/ncu.txt 2>&1
echo "exit $?" >> $OUT/run1/ncu.txt
grep -E "^  [a-z_]+kernel|^  void cutlass|^  ws_|Duration|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput|exit" $OUT/run1/ncu.txt | cut -c1-100
timeout 320 python3 benchmarks/grouped_compose_gpu_check.py --shapes none --interleaves 32 \
  --profile "tilefuse,compiled composition,fp8_block" --profile-shapes 1,2,3 > $OUT/run1/profile.txt 2>&1
echo "exit $?" >> $OUT/run1/profile.txt
grep -v "^  *0.00[0-9] ms\|Warning\|_warn_once\|USDT" $OUT/run1/profile.txt | cut -c1-150
