#!/bin/bash
# Run 33 (GPU, any Hopper card): run33_gluon_quant.py, fp8_block's column-wise copies (with and
# without the row-wise copy from the same read) through quant.gluon_kernels.fp8_cols_kernel at
# four layouts, bitwise against the Triton launches the op runs, then timed beside them and a copy.
#   OUT=... [LIMIT=seconds, default 240] [ROUNDS=3] [SHAPES=1,2,3] bash benchmarks/results/2026-12-07-h200-bf/run33.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run33
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run33/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run33/gpu.txt
cat $OUT/run33/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout ${LIMIT:-240} \
  python3 benchmarks/results/2026-12-07-h200-bf/run33_gluon_quant.py --rounds ${ROUNDS:-3} --shapes ${SHAPES:-1,2,3} \
  > $OUT/run33/quant.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run33/quant.txt
grep -v "^ *$" $OUT/run33/quant.txt | grep -v Warn | cut -c1-170
