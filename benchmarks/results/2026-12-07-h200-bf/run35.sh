#!/bin/bash
# Run 35 (GPU, any Hopper card): run35_gluon_quant_step.py, fp8_block's step as called with the copies
# through the Triton launches, the Gluon tile kernel and its TMA ring (recipes.GLUON_COLS_STAGES):
# bits, graph-replay rounds, kernel times.
#   OUT=... [LIMIT=seconds, default 300] [ROUNDS=5] [SHAPES=1,2,3] bash benchmarks/results/2026-12-07-h200-bf/run35.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run35
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run35/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run35/gpu.txt
cat $OUT/run35/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout ${LIMIT:-300} \
  python3 benchmarks/results/2026-12-07-h200-bf/run35_gluon_quant_step.py --rounds ${ROUNDS:-5} --shapes ${SHAPES:-1,2,3} \
  > $OUT/run35/quant.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run35/quant.txt
grep -v "^ *$" $OUT/run35/quant.txt | grep -v Warn | cut -c1-170
