#!/bin/bash
# Run 3: run2_row_resident.py (now with the next chunk's first weight tiles issued a step ahead) --decompose: at Neo, the row-resident layer with only its phase 1 (gz formed and split
# into shared memory) or only its phase 2 (the GEMMs from shared memory), the sigma kernel alone and a surface copy,
# interleaved with the full kernel and the relay layer.
#   OUT=... bash benchmarks/results/2026-12-03-h200-w/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache-w3
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run3/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run3/gpu.txt
PYTHONPATH=src timeout 200 python3 benchmarks/results/2026-12-03-h200-w/run2_row_resident.py --decompose > $OUT/run3/decompose.txt 2>&1
echo "exit $?" >> $OUT/run3/decompose.txt
grep -E "^\||^  |exit|Error" $OUT/run3/decompose.txt | tail -12
# and the three shapes again with the cross-chunk weight prefetch
PYTHONPATH=src timeout 200 python3 benchmarks/results/2026-12-03-h200-w/run2_row_resident.py > $OUT/run3/row_resident.txt 2>&1
echo "exit $?" >> $OUT/run3/row_resident.txt
grep -E "^\||exit|Error" $OUT/run3/row_resident.txt | tail -6
