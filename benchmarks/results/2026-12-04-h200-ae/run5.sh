#!/bin/bash
# Run 5 (GPU): run 4's two measurements again where run 4 left a question: the host time per
# call (the -ad folder's run1_host.py; run 4's shape-3 interleave-32 forward read 1.32x a bare
# composition's on a host whose bare composition read 1.3-2.3x slower in the interleave-32
# blocks than in the halves blocks), and the op as called in the halves layout at shapes 2-3.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ae/run5.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
AD=benchmarks/results/2026-12-04-h200-ad
mkdir -p $OUT/run5
timeout 110 python3 $AD/run1_host.py > $OUT/run5/host.txt 2>&1
echo "exit $?" >> $OUT/run5/host.txt; grep -v Warn $OUT/run5/host.txt | tail -15
timeout 150 python3 benchmarks/grouped_compose_gpu_check.py --shapes 2,3 --interleaves none --rounds 7 --profile none \
  > $OUT/run5/check.txt 2>&1
echo "exit $?" >> $OUT/run5/check.txt; grep -E "^shape|tilefuse  |compiled comp|compose  |exit" $OUT/run5/check.txt | cut -c1-150
