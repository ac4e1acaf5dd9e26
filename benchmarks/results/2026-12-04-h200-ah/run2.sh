#!/bin/bash
# Run 2 (GPU): (a) epilogue_alpha.py under each ptxas (run 1's call of the op lacked lmax /
# focus_dim); (b) host_stream_split.py; (c) issue 16's bf16 shape 2, where -ag run 5 read
# 1.193x against the 1.20x target: the op as called against the compiled composition, both
# layouts (interleave 32 and None), 11 rounds (-ag as_called_product.py).
#   OUT=... bash benchmarks/results/2026-12-04-h200-ah/run2.sh
set -u
cd "$(dirname "$0")/../../.."
HERE=benchmarks/results/2026-12-04-h200-ah
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run2
TP=$(python3 -c "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'bin', 'ptxas'))")
timeout 100 python3 $HERE/epilogue_alpha.py > $OUT/run2/alpha-triton-ptxas.txt 2>&1; echo "exit $?" >> $OUT/run2/alpha-triton-ptxas.txt
TRITON_PTXAS_PATH=$TP timeout 100 python3 $HERE/epilogue_alpha.py > $OUT/run2/alpha-torch-ptxas.txt 2>&1; echo "exit $?" >> $OUT/run2/alpha-torch-ptxas.txt
cat $OUT/run2/alpha-*.txt
timeout 60 python3 $HERE/host_stream_split.py > $OUT/run2/host_split.txt 2>&1; echo "exit $?" >> $OUT/run2/host_split.txt
cat $OUT/run2/host_split.txt
timeout 200 python3 benchmarks/results/2026-12-04-h200-ag/as_called_product.py \
  --providers "compiled composition,tilefuse" --shapes 2 --interleaves 32,none --rounds 11 --profile none \
  > $OUT/run2/as_called.txt 2>&1
echo "exit $?" >> $OUT/run2/as_called.txt
grep -v "^  PASS" $OUT/run2/as_called.txt | grep -v "TFLOP" | cut -c1-260 | tail -30
