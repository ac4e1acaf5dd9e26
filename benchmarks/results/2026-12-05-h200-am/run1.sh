#!/bin/bash
# Run 1 (GPU; prepared): fp8_block's grouped column-wise quantizer with the block table
# (a869d17 and later, src/) against the per-program scan of the counts (9525667, .snap/src:
# `rm -rf .snap && mkdir .snap && git archive 9525667 src | tar -x -C .snap`). The grouped
# quantizer and recipe GPU tests first (unless --no-tests), then table.py in alternating
# processes, table, scan, table, scan (PAIRS pairs, default 1), each at the spec's three
# shapes with balanced and routed counts; one JSON line a case in $OUT/run1/table.jsonl; the
# summary table at the end. Carry .whl (hypothesis, sortedcontainers) and .snap.
#   OUT=... bash benchmarks/results/2026-12-05-h200-am/run1.sh [PAIRS] [--no-tests]
# Estimates (-al run 1 on an H100): the tests about 80 s, a process about 110 s; so the tests
# and one pair in one call, a second pair (`1 --no-tests`, the same $OUT/run1 appended) in the next.
set -u
cd "$(dirname "$0")/../../.."
pairs=${1:-1}
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/hypothesis-*.whl .whl/sortedcontainers-*.whl \
  2>/dev/null
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
if [[ "${2:-}" != "--no-tests" ]]; then
  PYTHONPATH=/tmp/site:$PWD/src timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_quant_kernels.py \
    tests/test_grouped_mlp_recipes.py -k "group or expert or counts or pair or rows_cols" > $OUT/run1/tests.txt 2>&1
  echo "exit $?" >> $OUT/run1/tests.txt
  tail -3 $OUT/run1/tests.txt
fi
for ((i = 0; i < pairs; i++)); do
  for tree in table scan; do
    src=$PWD/src; [[ $tree == scan ]] && src=$PWD/.snap/src
    PYTHONPATH=$src timeout 250 python3 benchmarks/results/2026-12-05-h200-am/table.py --tag $tree \
      --json $OUT/run1/table.jsonl >> $OUT/run1/table.txt 2>&1
    echo "$tree exit $? at ${SECONDS}s" >> $OUT/run1/table.txt
  done
done
grep -E "exit" $OUT/run1/table.txt | tail -4
python3 benchmarks/results/2026-12-05-h200-am/table.py --summarize $OUT/run1/table.jsonl
