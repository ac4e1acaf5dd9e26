#!/bin/bash
# Run 2 (GPU; prepared, after run 1 on the same warm machine): grouped_glu_mlp's step, bf16 and
# fp8_block, with run 1's table (.tfcache-ap) and without one, in one process (steps.py).
#   OUT=... bash benchmarks/results/2026-12-05-h200-ap/run2.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run2/gpu.txt
timeout 400 python3 benchmarks/results/2026-12-05-h200-ap/steps.py --tuned $PWD/.tfcache-ap --json $OUT/run2/steps.jsonl \
  > $OUT/run2/steps.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run2/steps.txt
grep -E "^shape|exit|Error" $OUT/run2/steps.txt | cut -c1-400
