#!/bin/bash
# Run 1: the GPU tests of tests/test_so2_wgmma.py that 2026-12-03-h200-w run 6's timeout cut off;
# run1_prep_ahead.py (the level-3 step with the wgmma GEMM's next activation tile split during
# this tile's products, and register caps per mode, bitwise and timed against the shipped kernel);
# then so2_peers.py, level 3 against DeePMD-kit fp16x3 on the product tree. Carries .whl.
#   OUT=... bash benchmarks/results/2026-12-03-h200-x/run1.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache-x1
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
PYTHONPATH=src timeout 100 python3 -m pytest -q -x -p no:cacheprovider tests/test_so2_wgmma.py \
  -k "(False and BWD) or outside_the_descriptor or production_tiles" > $OUT/run1/pytest.txt 2>&1
echo "exit $?" >> $OUT/run1/pytest.txt
tail -2 $OUT/run1/pytest.txt
PYTHONPATH=src timeout 290 python3 benchmarks/results/2026-12-03-h200-x/run1_prep_ahead.py > $OUT/run1/step.txt 2>&1
echo "exit $?" >> $OUT/run1/step.txt
grep -E "^##|ms \(|bitwise|exit|Error" $OUT/run1/step.txt | tail -30
PYTHONPATH=/tmp/site:$PWD/src timeout 150 python3 benchmarks/so2_peers.py --rounds 3 --deepmd-tiles h20 \
  --peers tilefuse-l3,deepmd-fp16x3 --json $OUT/run1/peers_l3.json 2>&1 | grep -v Warn > $OUT/run1/peers_l3.txt
echo "peers exit $?" >> $OUT/run1/peers_l3.txt
grep -E "^\| [0-9]|exit" $OUT/run1/peers_l3.txt | tail -8
