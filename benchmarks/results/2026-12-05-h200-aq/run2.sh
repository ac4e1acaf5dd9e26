#!/bin/bash
# Run 2 (GPU; the command as it ran, inline, on the warm H100 after run 1): torch.profiler kernel
# times per forward + backward of bf16 tilefuse and fp8_block at shapes 1 and 3 with the shipped table.
#   OUT=... bash benchmarks/results/2026-12-05-h200-aq/run2.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run2; export PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 400 python3 benchmarks/grouped_compose_gpu_check.py --shapes none --profile-shapes 1,3 --profile "tilefuse,fp8_block" \
  > $OUT/run2/profile.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run2/profile.txt
grep -vE "^\s*$" $OUT/run2/profile.txt | grep -v PASS | cut -c1-180 | head -120
