#!/bin/bash
# Run 7: tests/test_so2_wgmma.py on the GPU again (run 6's bitwise test compared NaN-filled
# columns with torch.equal), then so2_peers.py at the three shapes on the table with run 6's
# level-3 entries (carries .whl: DeePMD-kit 3.2.0 and its dependencies).
#   OUT=... bash benchmarks/results/2026-12-02-h200-t/run7.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache-t7
mkdir -p $OUT/run7
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run7/gpu.txt
PYTHONPATH=$PWD/src:$PWD/tests timeout 170 python3 -m pytest -q tests/test_so2_wgmma.py -p no:cacheprovider \
  > $OUT/run7/pytest.txt 2>&1; echo "pytest exit $?" >> $OUT/run7/pytest.txt
tail -4 $OUT/run7/pytest.txt
PYTHONPATH=/tmp/site:$PWD/src timeout 330 python3 benchmarks/so2_peers.py --rounds 3 --deepmd-tiles h20 \
  --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 2>&1 | grep -v Warn > $OUT/run7/peers.txt
echo "peers exit $?" >> $OUT/run7/peers.txt
tail -30 $OUT/run7/peers.txt
