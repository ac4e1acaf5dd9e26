#!/bin/bash
# Run 1 (GPU only): the wgmma tests on the GPU (the fused Gluon kernel's bitwise tests among them), then
# run1_fused_wgmma.py.   OUT=... bash benchmarks/results/2026-12-02-h200-u/run1.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
PYTHONPATH=src timeout 300 python3 -m pytest -q -x -p no:cacheprovider tests/test_so2_wgmma.py > $OUT/run1/pytest.txt 2>&1
echo "exit $?" >> $OUT/run1/pytest.txt
tail -5 $OUT/run1/pytest.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 280 python3 benchmarks/results/2026-12-02-h200-u/run1_fused_wgmma.py \
  > $OUT/run1/fused.txt 2>&1; echo "exit $?" >> $OUT/run1/fused.txt
cat $OUT/run1/fused.txt | head -80
