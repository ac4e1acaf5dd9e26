#!/bin/bash
# Run 7 (GPU only): the final tree's GPU tests of ws_wgrad, the fp8 ws kernel and the check's
# grouped roles; Nsight Compute of one ws_wgrad dW1 launch and CUTLASS's at shape 2.
#   OUT=... bash benchmarks/results/2026-12-03-h200-aa/run7.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-aa7
mkdir -p $OUT/run7
timeout 140 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_ws_wgrad.py tests/test_grouped_mlp_ws.py \
  tests/test_check.py -k "ws or wgrad or compose or grouped" > $OUT/run7/pytest.txt 2>&1
echo "exit $?" >> $OUT/run7/pytest.txt; tail -3 $OUT/run7/pytest.txt
timeout 75 ncu --kernel-name regex:"ws_wgrad|device_kernel" --launch-skip 2 --launch-count 2 \
  --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
  python3 benchmarks/results/2026-12-03-h200-aa/run7_ncu_wgrad.py --shape 2 > $OUT/run7/ncu.txt 2>&1
echo "exit $?" >> $OUT/run7/ncu.txt
grep -E "ws_wgrad|cutlass|Duration|Throughput|Tensor|Stall|Warp Cycles|Issued|exit" $OUT/run7/ncu.txt | head -60
