#!/bin/bash
# Run 4 (prepared for the next device session): the 3xfp16-gate precision (94fe1f7) on the GPU:
# the level-3 tests, run4_gate.py (the gate kernel and the forward, exact s against split s),
# then the three spec level-3 keys re-swept with it and exported. Run 5 times the peers on
# that table (the same TILEFUSE_CACHE_DIR, the same machine session).
#   OUT=... bash benchmarks/results/2026-12-02-h200-q/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-q4
mkdir -p $OUT/run4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run4/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run4/gpu.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_so2_level3.py > $OUT/run4/pytest.txt 2>&1
echo "pytest exit $?" >> $OUT/run4/pytest.txt; tail -3 $OUT/run4/pytest.txt
timeout 90 python3 benchmarks/results/2026-12-02-h200-q/run4_gate.py > $OUT/run4/gate.txt 2>&1
echo "gate exit $?" >> $OUT/run4/gate.txt; grep -E "error|exact / split|exit" $OUT/run4/gate.txt
for s in 3x32 6x32 2x64; do
  timeout 100 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape $s --pass level3 --force --no-progress \
    >> $OUT/run4/tune-so2.txt 2>&1; echo "tune $s level3 exit $?" >> $OUT/run4/tune-so2.txt
done
python3 -m tilefuse.cli tune --export-builtin $OUT/run4 >> $OUT/run4/tune-so2.txt 2>&1
grep -E "^so2_mixing_stack  |exit" $OUT/run4/tune-so2.txt
