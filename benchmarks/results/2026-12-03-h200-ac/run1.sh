#!/bin/bash
# Run 1 (GPU only): the bf16 sweep of grouped_glu_mlp's standard grid (the spec's three shapes x
# SwiGLU / GeGLU x interleave 32 / halves x bias off / on; the three default keys are already
# in the built-in table and skipped), after warm.py compiled every choice in parallel; exported.
#   OUT=... bash benchmarks/results/2026-12-03-h200-ac/run1.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ac
R=benchmarks/results/2026-12-03-h200-ac
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee $OUT/run1/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/run1/gpu.txt
START=$(date +%s)
timeout 240 python3 $R/warm.py --jobs 8 > $OUT/run1/warm.txt 2>&1
echo "exit $? after $(( $(date +%s) - START )) s" >> $OUT/run1/warm.txt; grep -v Warn $OUT/run1/warm.txt | tail -12
LEFT=$(( 560 - ($(date +%s) - START) ))
timeout $LEFT python3 -m tilefuse.cli tune --all-defaults --op grouped_glu_mlp --rounds 6 --no-progress \
  > $OUT/run1/tune.txt 2>&1
echo "tune exit $? after $(( $(date +%s) - START )) s" >> $OUT/run1/tune.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run1 >> $OUT/run1/tune.txt 2>&1
grep "^swept\|exit\|Error" $OUT/run1/tune.txt | cut -c1-200
