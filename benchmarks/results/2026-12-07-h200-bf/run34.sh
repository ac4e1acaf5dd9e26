#!/bin/bash
# Run 34 (GPU, any Hopper card): run34_gluon_quant_tma.py, run 33's Gluon quantizer timed as CUDA-graph
# replays at layouts with sector-filling transposed stores, and persistent with TMA loads into a ring
# (fp8_cols_tma_kernel); bits first against the Triton launches the op runs.
#   OUT=... [LIMIT=seconds, default 240] [ROUNDS=3] [SHAPES=1,2,3] bash benchmarks/results/2026-12-07-h200-bf/run34.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run34
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run34/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run34/gpu.txt
cat $OUT/run34/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout ${LIMIT:-240} \
  python3 benchmarks/results/2026-12-07-h200-bf/run34_gluon_quant_tma.py --rounds ${ROUNDS:-3} --shapes ${SHAPES:-1,2,3} \
  > $OUT/run34/quant.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run34/quant.txt
grep -v "^ *$" $OUT/run34/quant.txt | grep -v Warn | cut -c1-170
