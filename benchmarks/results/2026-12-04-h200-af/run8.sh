#!/bin/bash
# Run 8 (GPU; prepared, not run): run 3 with alpha not requiring grad (--alpha-fixed): how much of
# the gap to F.layer_norm is the fourth differentiated input.
#   OUT=... bash benchmarks/results/2026-12-04-h200-af/run8.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) TORCH_EXTENSIONS_DIR=$(mktemp -d)
mkdir -p $OUT/run8
timeout 300 python3 benchmarks/results/2026-12-04-h200-af/dyt_node_probe3.py --alpha-fixed > $OUT/run8/probe8.txt 2>&1
echo "exit $?" >> $OUT/run8/probe8.txt
cat $OUT/run8/probe8.txt | cut -c1-200 | head -120
