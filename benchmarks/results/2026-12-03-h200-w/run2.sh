#!/bin/bash
# Run 2: run2_row_resident.py (issue 15's backward layer with gz resident in shared memory, a probe): small shapes
# (partial row blocks) for correctness, then the three benchmark shapes, against the wgmma relay layer.
#   OUT=... bash benchmarks/results/2026-12-03-h200-w/run2.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache-w2
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run2/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run2/gpu.txt
PYTHONPATH=src timeout 200 python3 benchmarks/results/2026-12-03-h200-w/run2_row_resident.py --small > $OUT/run2/small.txt 2>&1
echo "exit $?" >> $OUT/run2/small.txt
grep -E "^\||exit|Error" $OUT/run2/small.txt | tail -8
PYTHONPATH=src timeout 300 python3 benchmarks/results/2026-12-03-h200-w/run2_row_resident.py > $OUT/run2/row_resident.txt 2>&1
echo "exit $?" >> $OUT/run2/row_resident.txt
grep -E "^\||exit|Error" $OUT/run2/row_resident.txt | tail -8
