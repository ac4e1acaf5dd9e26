#!/bin/bash
# Run 12: the so2 level-3 tests on the GPU (the one-launch 3xfp16 weight split, split_fp16_kernel);
# the stack's non-GEMM kernels at other row blocks and warps (run12_aux.py); so2_peers at the three
# shapes with the level-3 peer and DeePMD-kit's ops, profiled at Neo; then the dyt memory-growth test
# after the seven files before it (run 9's failure), as redesigned. Carry .whl. ~9 minutes.
#   OUT=... bash benchmarks/results/2026-12-01-h200-m/run12.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-run12
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/gpu.txt
timeout 80 python3 -m pytest -q -p no:cacheprovider tests/test_so2_level3.py 2>&1 | tail -4 | tee $OUT/pytest.txt
timeout 100 python3 benchmarks/results/2026-12-01-h200-m/run12_aux.py 2>&1 | grep -v Warn | tee $OUT/aux.txt
timeout 150 python3 benchmarks/so2_peers.py --shapes 647000:3:32,300000:6:32,400000:2:64 --rounds 3 \
    --deepmd-tiles h20 --peers tilefuse,tilefuse-l3,deepmd,deepmd-fp16x3 --profile --profile-peers tilefuse-l3 \
    --json $OUT/peers.json 2>&1 | grep -v Warn > $OUT/peers.txt
grep -A14 "profile: " $OUT/peers.txt | cut -c1-150; tail -16 $OUT/peers.txt
files=$(ls tests/test_*.py | grep -v -e /test_grouped_mlp_ -e /test_quant_ -e /test_so2_ -e /test_benchmarks_layout \
        | awk '{print} /test_dyt_lean/{exit}')
timeout -s INT 250 python3 -m pytest -q -p no:cacheprovider -rf $files > $OUT/rest-to-dyt-lean.txt 2>&1
echo "exit $?" >> $OUT/rest-to-dyt-lean.txt
grep -E "FAILED|passed|failed|grew|exit" $OUT/rest-to-dyt-lean.txt | cut -c1-1500
