#!/bin/bash
# Run 1 (GPU; any Hopper card): the so2_mixing_stack backward keys at focus_dim 96 and 128 swept
# again on the chunked gate kernels (5957ed9), whichever card comes: on an H100 its table's
# entries were swept on the spilling kernels; the H200's table has none. Calls -ak's run3.sh
# (one tune per key, each exported after it; merge the winners into src/tilefuse/tuning/builtin/).
#   OUT=... bash benchmarks/results/2026-12-05-h200-av/run1.sh
set -u
cd "$(dirname "$0")/../../.."
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
mkdir -p $OUT/run1
case "$GPU" in
  *H200*) keys="6x96:bwd:180 6x128:bwd:330" ;;    # 2^19 edges on 141 GB (docs/tuning.md)
  *) keys="6x96:bwd:200 6x128:bwd:250" ;;         # 2^18 edges on 80 GB
esac
echo "$GPU: $keys" | tee $OUT/run1/keys.txt
OUT=$OUT/run1 bash benchmarks/results/2026-12-05-h200-ak/run3.sh $keys
