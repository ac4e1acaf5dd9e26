#!/bin/bash
# Run 3 (GPU only): the fused Gluon layer's kernels one by one (run3_components.py), after the
# fused kernel's tests.   OUT=... bash benchmarks/results/2026-12-02-h200-u/run3.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run3/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run3/gpu.txt
PYTHONPATH=src timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_so2_wgmma.py -k "fused or sigma_pass" \
  > $OUT/run3/pytest.txt 2>&1
echo "exit $?" >> $OUT/run3/pytest.txt
tail -3 $OUT/run3/pytest.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 300 python3 benchmarks/results/2026-12-02-h200-u/run3_components.py \
  > $OUT/run3/components.txt 2>&1; echo "exit $?" >> $OUT/run3/components.txt
cat $OUT/run3/components.txt
# Nsight Compute of the two |m| = 1 passes at Neo (run3_ncu.py)
PYTHONPATH=src timeout 200 ncu --clock-control none --kernel-name regex:"so2_gemm3x_wgmma_kernel|so2_bwd_fused3x_wgmma_kernel" \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
  python3 benchmarks/results/2026-12-02-h200-u/run3_ncu.py > $OUT/run3/ncu.txt 2>&1
echo "exit $?" >> $OUT/run3/ncu.txt
grep -E "so2_|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Theoretical Occ|Stall|Issue Slots|Eligible|Block Limit|L2 Hit|L1/TEX Hit|exit" $OUT/run3/ncu.txt | head -60
