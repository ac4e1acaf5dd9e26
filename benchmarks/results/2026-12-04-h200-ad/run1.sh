#!/bin/bash
# Run 1 (GPU only): the backward call plans (compose.BackwardPlan) and every ws_rows / ws_wgrad
# launch through ws_wgrad.DescriptorLaunch: their GPU tests; the host time per call, forward
# and forward + backward, against the compositions and the unplanned backward (run1_host.py);
# Nsight Compute of ws_rows' fc1 and CUTLASS's at shape 1 (2026-12-03-h200-ab's prepared
# run6_ncu_rows.py).
#   OUT=... bash benchmarks/results/2026-12-04-h200-ad/run1.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ad
R=benchmarks/results/2026-12-04-h200-ad
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run1/env.txt
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/run1/env.txt
timeout 170 python3 -m pytest -q -p no:cacheprovider -x tests/test_grouped_plan.py tests/test_grouped_ws_rows.py \
  tests/test_grouped_ws_wgrad.py > $OUT/run1/pytest.txt 2>&1
echo "exit $?" >> $OUT/run1/pytest.txt; grep -E "passed|failed|FAILED|Error" $OUT/run1/pytest.txt | head -12
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_compose.py \
  -k "plan or compose_config or without_grad or ends or graph or compile" > $OUT/run1/pytest2.txt 2>&1
echo "exit $?" >> $OUT/run1/pytest2.txt; grep -E "passed|failed|FAILED|Error" $OUT/run1/pytest2.txt | head -8
timeout 130 python3 $R/run1_host.py > $OUT/run1/host.txt 2>&1
echo "exit $?" >> $OUT/run1/host.txt; grep -v Warn $OUT/run1/host.txt | tail -16
timeout 120 ncu --kernel-name regex:"ws_rows|device_kernel" --launch-skip 3 --launch-count 3 \
  --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
  --section LaunchStats python3 benchmarks/results/2026-12-03-h200-ab/run6_ncu_rows.py --shape 1 > $OUT/run1/ncu.txt 2>&1
echo "exit $?" >> $OUT/run1/ncu.txt
grep -E "ws_rows_kernel|cutlass|Duration|Throughput|L2 Hit|Warp Cycles Per Issued|Registers Per|exit" $OUT/run1/ncu.txt | head -60
