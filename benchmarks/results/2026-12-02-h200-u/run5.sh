#!/bin/bash
# Run 5: the three so2 level-3 keys re-swept with the register-A wgmma kernel (the fused Gluon route
# dropped: runs 1-4), exported; then so2_peers.py at the three shapes on those entries (the sweep's
# cache file, above the built-in table), carrying .whl (DeePMD-kit 3.2.0 and its dependencies).
#   OUT=... bash benchmarks/results/2026-12-02-h200-u/run5.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache-u5
mkdir -p $OUT/run5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run5/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run5/gpu.txt
for s in 3x32 6x32 2x64; do
  PYTHONPATH=$PWD/src timeout 110 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape $s --pass level3 --force \
    --no-progress >> $OUT/run5/tune-so2.txt 2>&1; echo "tune $s level3 exit $?" >> $OUT/run5/tune-so2.txt
  PYTHONPATH=$PWD/src python3 -m tilefuse.cli tune --export-builtin $OUT/run5 > /dev/null 2>&1
done
grep -E "^so2_mixing_stack  |exit" $OUT/run5/tune-so2.txt
PYTHONPATH=/tmp/site:$PWD/src timeout 300 python3 benchmarks/so2_peers.py --rounds 3 --deepmd-tiles h20 \
  --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 2>&1 | grep -v Warn > $OUT/run5/peers.txt
echo "peers exit $?" >> $OUT/run5/peers.txt
grep -E "^\| [0-9]|exit" $OUT/run5/peers.txt | tail -24
