#!/bin/bash
# Run 2: on the tree with run 1's winner in the product kernel: tests/test_so2_wgmma.py on the GPU
# (every mode, tile and ring depth bitwise so2_gemm_kernel), then so2_peers.py, level 3 against
# DeePMD-kit fp16x3. Carries .whl.
#   OUT=... bash benchmarks/results/2026-12-03-h200-x/run2.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache-x2
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run2/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run2/gpu.txt
PYTHONPATH=src timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_so2_wgmma.py > $OUT/run2/pytest.txt 2>&1
echo "exit $?" >> $OUT/run2/pytest.txt
tail -3 $OUT/run2/pytest.txt
PYTHONPATH=/tmp/site:$PWD/src timeout 200 python3 benchmarks/so2_peers.py --rounds 3 --deepmd-tiles h20 \
  --peers tilefuse-l3,deepmd-fp16x3 --json $OUT/run2/peers_l3.json 2>&1 | grep -v Warn > $OUT/run2/peers_l3.txt
echo "peers exit $?" >> $OUT/run2/peers_l3.txt
grep -E "^\| [0-9]|exit" $OUT/run2/peers_l3.txt | tail -8
