#!/bin/bash
# Run 4 (GPU): the op as called with the re-swept built-in table (run 3's, merged):
# benchmarks/grouped_compose_gpu_check.py at the spec's shapes, interleave 32 and the halves
# layout (the check, then every provider interleaved, graph replay), and the host time per call
# (the -ad folder's run1_host.py). A fresh tilefuse cache directory: the built-in table decides.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ae/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
AD=benchmarks/results/2026-12-04-h200-ad
mkdir -p $OUT/run4
timeout 260 python3 benchmarks/grouped_compose_gpu_check.py --interleaves 32,none --rounds 5 --profile none \
  > $OUT/run4/check.txt 2>&1
echo "exit $?" >> $OUT/run4/check.txt; grep -E "^shape|tilefuse  |compiled comp|compose  |fp8|PASS|FAIL|exit" $OUT/run4/check.txt | cut -c1-150
timeout 130 python3 $AD/run1_host.py > $OUT/run4/host.txt 2>&1
echo "exit $?" >> $OUT/run4/host.txt; grep -v Warn $OUT/run4/host.txt | tail -15
