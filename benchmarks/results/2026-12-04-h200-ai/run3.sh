#!/bin/bash
# Run 3 (GPU): fp8_block as called with fc1 + GLU through the ws kernel and through the Triton
# launch, each with the op's second stream and on one stream (does the persistent fc1 lose
# against the side stream's W2 quantizer?), bf16 tilefuse beside; no torch.compile in the
# process (Triton's own ptxas throughout); 9 rounds, graph replay.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ai/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ai3
mkdir -p $OUT/run3
timeout 280 python3 benchmarks/results/2026-12-04-h200-ai/as_called_glu.py --providers "tilefuse,fp8_block" \
  --one-stream --shapes 1,2,3 --interleaves 32 --rounds 9 --profile none > $OUT/run3/as_called.txt 2>&1
echo "exit $?" >> $OUT/run3/as_called.txt
grep -v "^  *$" $OUT/run3/as_called.txt | tail -40
