#!/bin/bash
# Run 2 (GPU): issue 17's probe, step 2: the node's host time with and without its launches,
# and torch.profiler's device and host time per kernel (dyt_node_probe2.py).
#   OUT=... bash benchmarks/results/2026-12-04-h200-af/run2.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) TORCH_EXTENSIONS_DIR=$(mktemp -d)
mkdir -p $OUT/run2
timeout 300 python3 benchmarks/results/2026-12-04-h200-af/dyt_node_probe2.py > $OUT/run2/probe2.txt 2>&1
echo "exit $?" >> $OUT/run2/probe2.txt
cat $OUT/run2/probe2.txt | cut -c1-200 | head -120
