#!/bin/bash
# Run 1 (GPU): streams_probe.py: the compose backward's weight gradients on a second stream.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ag/run1.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $OUT/run1/gpu.txt 2>&1
timeout 400 python3 benchmarks/results/2026-12-04-h200-ag/streams_probe.py --rounds 9 > $OUT/run1/streams.txt 2>&1
echo "exit $?" >> $OUT/run1/streams.txt
cut -c1-200 $OUT/run1/streams.txt
