#!/bin/bash
# Run 10 (issue 15, prepared for the next device session: 335b4b3's 3xfp16 level-3 split).
#   OUT=... bash benchmarks/results/2026-12-01-h200-l/run10.sh a   (~6 min: the level-3 and weight-
#       gradient tests on the GPU, one Neo backward GEMM pair per precision and tile
#       (run10_gemm_precision.py), the weight gradients one GEMM against chunked (run10_wgrad.py,
#       launch.weight_grad), and the training backward at Neo against eager and torch.compile)
#   OUT=... bash benchmarks/results/2026-12-01-h200-l/run10.sh b   (~9 min: the level-3 sweeps of the
#       spec's three keys with both splits, then so2_peers at the three shapes with the level-3 peer
#       and DeePMD-kit's fp32 and fp16x3 ops; carry .whl for deepmd-kit)
# Part b keeps the sweeps' table in .tfcache-run10 (git-ignored, kept between calls) and exports it.
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-run10
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/gpu.txt
git rev-parse --short HEAD 2>/dev/null | tee -a $OUT/gpu.txt
if [ "${1:-a}" = a ]; then
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_so2_level3.py tests/test_so2_backward_weights.py \
      2>&1 | tail -15 | tee $OUT/pytest.txt
  timeout 200 python3 benchmarks/results/2026-12-01-h200-l/run10_gemm_precision.py 2>&1 | grep -v Warn \
      | tee $OUT/gemm_precision.txt
  timeout 60 python3 benchmarks/results/2026-12-01-h200-l/run10_wgrad.py 2>&1 | tee $OUT/wgrad.txt
  timeout 120 python3 benchmarks/so2_peers.py --shapes 647000:3:32 --rounds 4 --training \
      --peers tilefuse,eager,compile --json $OUT/training.json 2>&1 | tail -8 | tee $OUT/training.txt
else
  for s in 3x32 6x32 2x64; do
    timeout 170 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape $s --pass level3 --force --rounds 6 \
        --no-progress 2>&1 | grep -v Warning | tail -12 | tee -a $OUT/sweep_l3.txt
  done
  python3 -m tilefuse.cli tune --export-builtin $OUT >> $OUT/sweep_l3.txt 2>&1
  timeout 280 python3 benchmarks/so2_peers.py --shapes 647000:3:32,300000:6:32,400000:2:64 --rounds 5 \
      --deepmd-tiles h20 --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 --json $OUT/peers.json 2>&1 \
      | grep -v Warn | tail -24 | tee $OUT/peers.txt
fi
