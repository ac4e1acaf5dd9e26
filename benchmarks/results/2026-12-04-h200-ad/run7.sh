#!/bin/bash
# Run 7 (GPU only; prepared, not run in the stop that wrote it): Nsight Compute's speed of light
# for the six GEMMs of a bf16 step at shape 1 as the table runs them, each beside CUTLASS's
# (run7_ncu_six.py): where shape 1's step loses to the SM's throughput, the GEMM by GEMM view
# run 1 gave for fc1 alone.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ad/run7.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ad
mkdir -p $OUT/run7
timeout 300 ncu --section SpeedOfLight --launch-skip 12 --launch-count 12 \
  --kernel-name regex:"ws_rows|ws_wgrad|device_kernel" \
  python3 benchmarks/results/2026-12-04-h200-ad/run7_ncu_six.py > $OUT/run7/ncu.txt 2>&1
echo "exit $?" >> $OUT/run7/ncu.txt
grep -E "^  [a-z_]+kernel|^  void cutlass|Duration|Compute \(SM\) Throughput|L2 Cache Throughput|exit" $OUT/run7/ncu.txt | cut -c1-100
