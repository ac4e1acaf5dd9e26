#!/bin/bash
# Run 2 (GPU): fc1's GLU in ws_rows' epilogue in the halves layout, z's halves by two TMA stores.
#  (a) the GPU tests: bitwise the GLU kernel and torch._grouped_mm (experts ending inside tiles,
#      empty experts, both activations, bias, fp32 and bf16 probs), the plans, the compose
#      configs (bits against the plain route, eager and compiled), interleaved and halves;
#  (b) the op as called, forward + backward under graph replay: halves with the epilogue on /
#      off and interleave 32 (the -ad folder's run6_halves.py, written for the first form);
#  (c) host time per call (the -ad folder's run1_host.py): the halves forward's launches.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ae/run2.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ae
AD=benchmarks/results/2026-12-04-h200-ad
mkdir -p $OUT/run2
git rev-parse HEAD > $OUT/run2/env.txt 2>/dev/null
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/run2/env.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/test_grouped_ws_rows.py tests/test_grouped_plan.py \
  tests/test_grouped_ws_wgrad.py > $OUT/run2/pytest.txt 2>&1
echo "exit $?" >> $OUT/run2/pytest.txt; grep -E "passed|failed|FAILED|Error|exit" $OUT/run2/pytest.txt | head -12
timeout 190 python3 $AD/run6_halves.py > $OUT/run2/halves.txt 2>&1
echo "exit $?" >> $OUT/run2/halves.txt; grep -v "Warn\|return Variable\|AccumulateGrad" $OUT/run2/halves.txt | tail -10
timeout 130 python3 $AD/run1_host.py > $OUT/run2/host.txt 2>&1
echo "exit $?" >> $OUT/run2/host.txt; grep -v Warn $OUT/run2/host.txt | tail -16
