#!/bin/bash
# Run 1 (GPU): on the card at hand with the built-in table shipped for it (the H100's since this
# commit): (a) wtile.py, the fp8_block step with the weight pair on 4 warps against 8, bf16
# beside them; (b) issue 16's whole-step table: grouped_compose_gpu_check.py, tilefuse bf16 and
# fp8_block as called, the compose route, the compiled composition (_grouped_mm + compile), at
# the spec's three shapes, interleave 32 and None, 5 rounds of graph replay.
#   OUT=... bash benchmarks/results/2026-12-05-h200-aq/run1.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
git log -1 --format=%H >> $OUT/run1/gpu.txt 2>/dev/null
timeout 170 python3 benchmarks/results/2026-12-05-h200-aq/wtile.py --json $OUT/run1/wtile.jsonl > $OUT/run1/wtile.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run1/wtile.txt
timeout $((570 - SECONDS)) python3 benchmarks/grouped_compose_gpu_check.py --shapes 1,2,3 --interleaves 32,none --rounds 5 \
  --providers "compose,compiled composition,tilefuse,fp8_block" --profile none > $OUT/run1/steps.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run1/steps.txt
cat $OUT/run1/wtile.txt | grep -v "^ " | cut -c1-300
grep -vE "^\s*$" $OUT/run1/steps.txt | tail -40 | cut -c1-200
