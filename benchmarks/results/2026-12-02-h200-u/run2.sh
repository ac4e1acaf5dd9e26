#!/bin/bash
# Run 2 (GPU only): as run 1 on the tree with the sigma pass writing gz_s (so2_bwd_sigma_gzs_kernel): the wgmma tests, then
# run1_fused_wgmma.py.   OUT=... bash benchmarks/results/2026-12-02-h200-u/run2.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run2/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run2/gpu.txt
PYTHONPATH=src timeout 300 python3 -m pytest -q -x -p no:cacheprovider tests/test_so2_wgmma.py > $OUT/run2/pytest.txt 2>&1
echo "exit $?" >> $OUT/run2/pytest.txt
tail -5 $OUT/run2/pytest.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 280 python3 benchmarks/results/2026-12-02-h200-u/run1_fused_wgmma.py \
  > $OUT/run2/fused.txt 2>&1; echo "exit $?" >> $OUT/run2/fused.txt
cat $OUT/run2/fused.txt | head -80
