#!/bin/bash
# Run 3 (GPU): GemmConfig.rows_glu (fc1's GLU in ws_rows' epilogue or the GLU kernel after fc1)
# as a tuned choice. (a) the GPU tests run 2 did not reach (plans, compose configs: bits
# interleaved and halves, eager, compiled, graphs); (b) the whole standard grid re-swept with
# the new candidates (run3_warm.py, then tilefuse tune --all-defaults --force), exported as a
# built-in table.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ae/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ae
R=benchmarks/results/2026-12-04-h200-ae
mkdir -p $OUT/run3
START=$(date +%s)
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_plan.py tests/test_grouped_ws_wgrad.py \
  > $OUT/run3/pytest.txt 2>&1
echo "exit $? after $(( $(date +%s) - START )) s" >> $OUT/run3/pytest.txt
grep -E "passed|failed|FAILED|Error|exit" $OUT/run3/pytest.txt | head -12
timeout 170 python3 $R/run3_warm.py --jobs 8 > $OUT/run3/warm.txt 2>&1
echo "exit $? after $(( $(date +%s) - START )) s" >> $OUT/run3/warm.txt; grep -v Warn $OUT/run3/warm.txt | tail -10
LEFT=$(( 540 - ($(date +%s) - START) ))
timeout $LEFT python3 -m tilefuse.cli tune --all-defaults --op grouped_glu_mlp --force --rounds 6 --no-progress \
  > $OUT/run3/tune.txt 2>&1
echo "tune exit $? after $(( $(date +%s) - START )) s" >> $OUT/run3/tune.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run3 >> $OUT/run3/tune.txt 2>&1
grep "^swept\|exit\|Error" $OUT/run3/tune.txt | cut -c1-200
