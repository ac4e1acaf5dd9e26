#!/bin/bash
# Run 3: the dyt lean-path tests run 1 did not reach and the fp8_block TMA tests, then the fp8_block
# sweep of the spec's three keys with this tree's candidates (the heuristic, now with the wgrads
# through TMA, against 7 tilings, two of them through TMA), exported.
# Carry .whl.   OUT=... bash benchmarks/results/2026-12-02-h200-o/run3.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-run3
timeout -s INT -k 20 150 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_dyt_lean.py \
  tests/test_grouped_mlp_kernels.py -k "lean or plan or fp8_tma or dyt" > $OUT/pytest.txt 2>&1
echo "pytest exit $?" >> $OUT/pytest.txt; grep -E "FAILED|ERROR|passed|failed|exit" $OUT/pytest.txt | tail -12
timeout 330 python3 -m tilefuse.cli tune --op grouped_glu_mlp --dtype fp8_block --shape 8x16384x4096x3584 \
  --shape 64x32768x2048x1408 --shape 128x65536x2048x768 --force --rounds 6 --no-progress > $OUT/tune-fp8.txt 2>&1
echo "tune exit $?" >> $OUT/tune-fp8.txt
python3 -m tilefuse.cli tune --export-builtin $OUT >> $OUT/tune-fp8.txt 2>&1
grep -v Warn $OUT/tune-fp8.txt | tail -30
