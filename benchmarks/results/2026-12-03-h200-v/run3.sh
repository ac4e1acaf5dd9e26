#!/bin/bash
# Run 3: the wgmma kernel with TMA activation tiles (A_STAGES 2) in the product: tests/test_so2_wgmma.py on the GPU,
# then the three so2 level-3 keys re-swept and exported.
#   OUT=... bash benchmarks/results/2026-12-03-h200-v/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache-v3
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run3/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run3/gpu.txt
PYTHONPATH=src timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_so2_wgmma.py > $OUT/run3/pytest.txt 2>&1
echo "exit $?" >> $OUT/run3/pytest.txt
tail -3 $OUT/run3/pytest.txt
for s in 3x32 6x32 2x64; do
  PYTHONPATH=$PWD/src timeout 120 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape $s --pass level3 --force \
    --no-progress >> $OUT/run3/tune-so2.txt 2>&1; echo "tune $s level3 exit $?" >> $OUT/run3/tune-so2.txt
  PYTHONPATH=$PWD/src python3 -m tilefuse.cli tune --export-builtin $OUT/run3 > /dev/null 2>&1
done
grep -E "^so2_mixing_stack  |exit" $OUT/run3/tune-so2.txt
