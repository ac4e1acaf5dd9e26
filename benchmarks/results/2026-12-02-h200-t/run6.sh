#!/bin/bash
# Run 6: the Gluon 3xfp16 layer GEMM productised (So2Config.wgmma): tests/test_so2_wgmma.py on
# the GPU, then the three so2 level-3 keys re-swept with the wgmma candidates, exported.
#   OUT=... bash benchmarks/results/2026-12-02-h200-t/run6.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-t6
mkdir -p $OUT/run6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run6/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run6/gpu.txt
PYTHONPATH=$PWD/src:$PWD/tests timeout 150 python3 -m pytest -q -x tests/test_so2_wgmma.py -p no:cacheprovider \
  > $OUT/run6/pytest.txt 2>&1; echo "pytest exit $?" >> $OUT/run6/pytest.txt
tail -5 $OUT/run6/pytest.txt
for s in 3x32 6x32 2x64; do
  timeout 120 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape $s --pass level3 --force --no-progress \
    >> $OUT/run6/tune-so2.txt 2>&1; echo "tune $s level3 exit $?" >> $OUT/run6/tune-so2.txt
  python3 -m tilefuse.cli tune --export-builtin $OUT/run6 > /dev/null 2>&1
done
grep -E "^so2_mixing_stack  |exit|wgmma" $OUT/run6/tune-so2.txt | head -80
