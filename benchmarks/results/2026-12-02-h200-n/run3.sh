#!/bin/bash
# Run 3: the dyt backward A/B (dalpha's smaller accumulator against the kernels before it), the
# GPU tests of the changed dyt and so2 code, and so2_mixing_stack against DeePMD-kit and
# torch.compile at the three shapes with the folded backward head. Carry .whl.
#   OUT=... bash benchmarks/results/2026-12-02-h200-n/run3.sh
set -u
cd "$(dirname "$0")/../../.."
here=benchmarks/results/2026-12-02-h200-n
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/gpu.txt
timeout 100 python3 $here/run3_dyt_bwd_ab.py $here/run3_dyt_kernels_before.py 2>&1 | grep -v Warn | tee $OUT/dyt_bwd_ab.txt
timeout 170 python3 -m pytest -q -p no:cacheprovider tests/test_dyt.py tests/test_so2_backward_weights.py \
  tests/test_so2_kernels.py tests/test_so2_forward_key.py tests/test_so2_level3.py > $OUT/pytest.txt 2>&1
echo "pytest exit $?" >> $OUT/pytest.txt; tail -4 $OUT/pytest.txt
timeout 260 python3 benchmarks/so2_peers.py --shapes 647000:3:32,300000:6:32,400000:2:64 --rounds 4 \
  --deepmd-tiles h20 --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 --json $OUT/peers.json 2>&1 \
  | grep -v Warn | tail -19 | tee $OUT/peers.txt
