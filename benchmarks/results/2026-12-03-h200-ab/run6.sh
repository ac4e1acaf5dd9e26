#!/bin/bash
# Run 6 (GPU only; prepared, not run in the stop that wrote it): Nsight Compute of ws_rows' fc1
# (with and without the GLU epilogue) and CUTLASS's at shape 1; the bench's grouped section for
# the host p50 per forward call on the current table (issue 16's host target, not measured
# since the Gluon row GEMMs).
#   OUT=... bash benchmarks/results/2026-12-03-h200-ab/run6.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ab6
mkdir -p $OUT/run6
timeout 150 ncu --kernel-name regex:"ws_rows|device_kernel" --launch-skip 3 --launch-count 3 \
  --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
  python3 benchmarks/results/2026-12-03-h200-ab/run6_ncu_rows.py --shape 1 > $OUT/run6/ncu.txt 2>&1
echo "exit $?" >> $OUT/run6/ncu.txt
grep -E "ws_rows|cutlass|Duration|Throughput|Stall|Warp Cycles|Issued|exit" $OUT/run6/ncu.txt | head -60
timeout 300 python3 -m tilefuse.cli bench --ops grouped_glu_mlp --no-progress --out $OUT/run6/report > $OUT/run6/bench.txt 2>&1
echo "exit $?" >> $OUT/run6/bench.txt; grep -i "host\|exit" $OUT/run6/bench.txt | head -20
