#!/bin/bash
# Run 1 (GPU; prepared): fp8_block's column-wise copies grouped by expert (the tree of this
# change, src/) against the global-token-index layout before it (.snap/src: a copy of the
# commit before, bf52910, made with `git archive bf52910 src | tar -x -C .snap`). The changed
# quantizer and recipe GPU tests first, then layout.py in alternating processes, grouped,
# global, grouped, global (PAIRS pairs, default 2: a process's first timing is sometimes slow,
# benchmarks/README.md "Comparing two trees"), each at the spec's three shapes with
# balanced and routed counts; one JSON line a case in $OUT/run1/layout.jsonl.
# Carry .whl (hypothesis, sortedcontainers) and .snap.
#   OUT=... bash benchmarks/results/2026-12-05-h200-al/run1.sh [PAIRS] [--no-tests]
# The tests take about 200 s and two pairs about 300 s (estimates): with -ak run 2 in the
# same session (it runs the same tests first), run this one with `2 --no-tests`.
set -u
cd "$(dirname "$0")/../../.."
pairs=${1:-2}
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/hypothesis-*.whl .whl/sortedcontainers-*.whl
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
if [[ "${2:-}" != "--no-tests" ]]; then
  PYTHONPATH=/tmp/site:$PWD/src timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/test_quant_kernels.py \
    tests/test_grouped_mlp_recipes.py > $OUT/run1/tests.txt 2>&1
  echo "exit $?" >> $OUT/run1/tests.txt
  tail -4 $OUT/run1/tests.txt
fi
for ((i = 0; i < pairs; i++)); do
  for tree in grouped global; do
    src=$PWD/src; [[ $tree == global ]] && src=$PWD/.snap/src
    PYTHONPATH=$src timeout 280 python3 benchmarks/results/2026-12-05-h200-al/layout.py --tag $tree \
      --json $OUT/run1/layout.jsonl >> $OUT/run1/layout.txt 2>&1
    echo "$tree exit $? at ${SECONDS}s" >> $OUT/run1/layout.txt
  done
done
grep -E "^(grouped|global) |exit" $OUT/run1/layout.txt | tail -26
