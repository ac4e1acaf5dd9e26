#!/bin/bash
# Run 4: (a) the dyt memory-growth question (run4_dyt_memory.py: four windows of calls, stacks and
# object counts); (b) benchmarks/grouped_compose_gpu_check.py at the spec's shapes, interleave 32,
# with run 3's fp8_block entries in the built-in table: the compose route, the op as called, the
# fused kernels and fp8_block against the plain composition and its torch.compile, one run.
#   OUT=... bash benchmarks/results/2026-12-02-h200-o/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-run4
timeout 90 python3 benchmarks/results/2026-12-02-h200-o/run4_dyt_memory.py > $OUT/dyt_memory.txt 2>&1
echo "memory exit $?" >> $OUT/dyt_memory.txt; grep -E "^window|object counts|exit" $OUT/dyt_memory.txt
timeout 300 python3 benchmarks/grouped_compose_gpu_check.py --shapes 1,2,3 --interleaves 32 > $OUT/grouped_check.txt 2>&1
echo "check exit $?" >> $OUT/grouped_check.txt; grep -v Warn $OUT/grouped_check.txt | grep -E "shape|compose |composition|tilefuse |fused|fp8|exit|FAIL"
