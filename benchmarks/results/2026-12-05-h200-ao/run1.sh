#!/bin/bash
# Run 1 (GPU; prepared): fp8_block's quantizer tiles on the card it runs on (quant_tiles.py),
# the spec's three shapes, one process. About 3 minutes (estimate: 21 tiles compiled, 7 launch
# kinds x 7 samplers x 5 rounds a shape).
#   OUT=... bash benchmarks/results/2026-12-05-h200-ao/run1.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
timeout 420 python3 benchmarks/results/2026-12-05-h200-ao/quant_tiles.py --json $OUT/run1/tiles.jsonl \
  > $OUT/run1/tiles.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run1/tiles.txt
grep -E "^shape|exit|Error" $OUT/run1/tiles.txt | cut -c1-400
