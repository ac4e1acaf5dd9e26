#!/bin/bash
# Run 2: (a) dyt's host cost again, first in a fresh machine's process, with the layer breakdown and
# cProfile tables (run 1 measured 47.9-56.9 us / 229.6-281.5 us, against 22.4 / 183.2 in
# 2026-12-01-h200-h run 6); (b) grouped_glu_mlp: how far a CUTLASS-GEMM route can get past
# `_grouped_mm` + torch.compile (run2_grouped_bound.py); (c) 2026-12-01-h200-l/run8.sh's first
# half at shapes 1-2, 3 rounds: fp8_block's roles with the float8 data through TMA.
# Carry .whl.   OUT=... bash benchmarks/results/2026-12-02-h200-o/run2.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-run2
timeout 130 python3 benchmarks/host_overhead.py --profile 2>&1 | grep -v Warn > $OUT/host_overhead.txt
head -40 $OUT/host_overhead.txt
timeout 200 python3 benchmarks/results/2026-12-02-h200-o/run2_grouped_bound.py > $OUT/grouped_bound.txt 2>&1
echo "bound exit $?" >> $OUT/grouped_bound.txt; grep -v Warn $OUT/grouped_bound.txt | tail -25
timeout 220 python3 benchmarks/grouped_profile.py --recipes fp8_block --shapes 1,2 --rounds 3 > $OUT/fp8_profile.txt 2>&1
echo "profile exit $?" >> $OUT/fp8_profile.txt
grep -v "^  rows\|^  cols\|^  W" $OUT/fp8_profile.txt | tail -60
