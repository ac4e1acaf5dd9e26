#!/bin/bash
# Run 10 (GPU; prepared, not run): issue 16's epilogue bound: ws_rows' four row GEMMs with and
# without their epilogue (epilogue_bound.py) at the spec's three shapes, before any
# epilogue-overlapping schedule is built. About 2 minutes.
#   OUT=... bash benchmarks/results/2026-12-04-h200-af/run10.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run10
timeout 400 python3 benchmarks/results/2026-12-04-h200-af/epilogue_bound.py --rounds 7 > $OUT/run10/epilogue.txt 2>&1
echo "exit $?" >> $OUT/run10/epilogue.txt
cat $OUT/run10/epilogue.txt | cut -c1-200
