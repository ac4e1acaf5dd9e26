#!/bin/bash
# Run 6 (prepared, not run): tests/test_so2_wgmma.py on the GPU (the product kernel's deeper weight rings bitwise
# so2_gemm_kernel in every mode); run6_weight_ring.py, the wgmma GEMM (BWD mode) with its weight tiles prefetched
# num_stages - 1 K tiles ahead (So2Config.num_stages of a wgmma config: 2 = every candidate's schedule, 3, 4),
# 64x64 and 64x128, bitwise and timed at the three shapes.
#   OUT=... bash benchmarks/results/2026-12-03-h200-w/run6.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache-w6
mkdir -p $OUT/run6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run6/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run6/gpu.txt
PYTHONPATH=src timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_so2_wgmma.py > $OUT/run6/pytest.txt 2>&1
echo "exit $?" >> $OUT/run6/pytest.txt
tail -2 $OUT/run6/pytest.txt
PYTHONPATH=src timeout 240 python3 benchmarks/results/2026-12-03-h200-w/run6_weight_ring.py > $OUT/run6/ring.txt 2>&1
echo "exit $?" >> $OUT/run6/ring.txt
grep -E "ms \(|bitwise|exit|Error" $OUT/run6/ring.txt | tail -40
