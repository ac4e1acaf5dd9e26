#!/bin/bash
# Run 3 (the device budget allowed one more call): on the tree with the TMA activation ring in the product,
#   1. tests/test_so2_wgmma.py on the GPU;
#   2. run5_res_prefetch.py (the epilogue's residual tile prefetched by TMA; a probe, bitwise and timed);
#   3. so2_peers.py at the three shapes, tilefuse level 3 (built-in table: run 5 of -u's tiles) against DeePMD-kit's
#      fp16x3 (the exact path did not change since -u run 5), torch.profiler of both at Neo; carries .whl;
#   4. the three level-3 keys re-swept and exported, as long as the command's time lasts.
#   OUT=... bash benchmarks/results/2026-12-03-h200-v/run3.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache-v3
mkdir -p $OUT/run3 $OUT/run5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run3/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run3/gpu.txt
cp $OUT/run3/gpu.txt $OUT/run5/gpu.txt
PYTHONPATH=src timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_so2_wgmma.py > $OUT/run3/pytest.txt 2>&1
echo "exit $?" >> $OUT/run3/pytest.txt
tail -2 $OUT/run3/pytest.txt
PYTHONPATH=src timeout 100 python3 benchmarks/results/2026-12-03-h200-v/run5_res_prefetch.py > $OUT/run5/res.txt 2>&1
echo "exit $?" >> $OUT/run5/res.txt
grep -v "bitwise.*True" $OUT/run5/res.txt; grep -c "bitwise.*True" $OUT/run5/res.txt
PYTHONPATH=/tmp/site:$PWD/src timeout 240 python3 benchmarks/so2_peers.py --rounds 3 --deepmd-tiles h20 \
  --peers tilefuse-l3,deepmd-fp16x3 --profile --profile-peers tilefuse-l3,deepmd-fp16x3 --json $OUT/run3/peers.json \
  2>&1 | grep -v Warn > $OUT/run3/peers.txt
echo "peers exit $?" >> $OUT/run3/peers.txt
grep -E "^\| [0-9]|exit" $OUT/run3/peers.txt | tail -12
for s in 2x64 3x32 6x32; do
  PYTHONPATH=$PWD/src timeout 100 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape $s --pass level3 --force \
    --no-progress >> $OUT/run3/tune-so2.txt 2>&1; echo "tune $s level3 exit $?" >> $OUT/run3/tune-so2.txt
  PYTHONPATH=$PWD/src python3 -m tilefuse.cli tune --export-builtin $OUT/run3 > /dev/null 2>&1
  grep -E "^so2_mixing_stack  |exit" $OUT/run3/tune-so2.txt | tail -2
done
