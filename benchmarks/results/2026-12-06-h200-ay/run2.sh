#!/bin/bash
# Run 2 (GPU, right after run 1 on the same machine; carry .whl): issue 16's step table on this
# tree (grouped_compose_gpu_check.py: the compose route, `_grouped_mm` + torch.compile, tilefuse
# bf16 and fp8_block as called, 5 rounds of CUDA-graph replay, shapes 1-3, interleave 32 and
# halves), then, on an H200 only, 2026-12-05-h200-ar's prepared run 1 (fp8_block's weight pair
# on 4 warps against 8 there).
#   OUT=... bash benchmarks/results/2026-12-06-h200-ay/run2.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $OUT/run2/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 330 python3 benchmarks/grouped_compose_gpu_check.py --shapes 1,2,3 --interleaves 32,none --rounds 5 \
  --providers "compose,compiled composition,tilefuse,fp8_block" --profile none > $OUT/run2/steps.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run2/steps.txt
grep -vE "^\s*$" $OUT/run2/steps.txt | tail -24 | cut -c1-200
if grep -q H200 $OUT/run2/gpu.txt; then
  OUT=$OUT/run2 timeout $((580 - SECONDS)) bash benchmarks/results/2026-12-05-h200-ar/run1.sh
fi
echo "run2 done at ${SECONDS}s"
