#!/bin/bash
# Run 3 (GPU): issue 17's probe, step 3: a hand-built node beside the Function node, with and without launches, and
# the host time inside each cuLaunchKernel (dyt_node_probe3.py).
#   OUT=... bash benchmarks/results/2026-12-04-h200-af/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) TORCH_EXTENSIONS_DIR=$(mktemp -d)
mkdir -p $OUT/run3
timeout 300 python3 benchmarks/results/2026-12-04-h200-af/dyt_node_probe3.py > $OUT/run3/probe3.txt 2>&1
echo "exit $?" >> $OUT/run3/probe3.txt
cat $OUT/run3/probe3.txt | cut -c1-200 | head -120
