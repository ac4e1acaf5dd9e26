#!/bin/bash
# Run 1: the so2 level-3 and forward-key tests on the GPU (launch.gate_warps: the gate kernel's
# outputs bitwise the same on 2 and 4 warps), then run1_fp8_step.py (fp8_block's whole step
# under torch.profiler beside bf16, the three spec shapes), then run1_fp8_wgrad.py (the fp8
# wgrads at 2-4 stages and five TMA tiles, beside CUTLASS's bf16 wgrads).
#   OUT=... bash benchmarks/results/2026-12-02-h200-r/run1.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-r1
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_so2_level3.py tests/test_so2_forward_key.py -k "gate or forward" \
  > $OUT/run1/pytest.txt 2>&1; echo "pytest exit $?" >> $OUT/run1/pytest.txt; tail -3 $OUT/run1/pytest.txt
timeout 200 python3 benchmarks/results/2026-12-02-h200-r/run1_fp8_step.py > $OUT/run1/fp8_step.txt 2>&1
echo "exit $?" >> $OUT/run1/fp8_step.txt; grep -v Warn $OUT/run1/fp8_step.txt
timeout 220 python3 benchmarks/results/2026-12-02-h200-r/run1_fp8_wgrad.py > $OUT/run1/fp8_wgrad.txt 2>&1
echo "exit $?" >> $OUT/run1/fp8_wgrad.txt; grep -v Warn $OUT/run1/fp8_wgrad.txt
