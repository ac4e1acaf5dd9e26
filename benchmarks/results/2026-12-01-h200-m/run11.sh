#!/bin/bash
# Run 11 (issue 15): the training backward at Neo against eager and torch.compile with check 2 against
# float64 (run 10a's check against eager fp32 rejected tilefuse's weight gradients, whose float64
# error is 4x below eager's), then a torch.profiler per-kernel table at Neo of tilefuse exact,
# tilefuse level 3 and DeePMD-kit's fp32 and fp16x3 ops (carry .whl).  ~4 minutes.
#   OUT=... bash benchmarks/results/2026-12-01-h200-m/run11.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-run11
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/gpu.txt
git rev-parse --short HEAD 2>/dev/null | tee -a $OUT/gpu.txt
timeout 150 python3 benchmarks/so2_peers.py --shapes 647000:3:32 --rounds 4 --training \
    --peers tilefuse,eager,compile --json $OUT/training.json 2>&1 | grep -v Warn | tail -14 | tee $OUT/training.txt
timeout 200 python3 benchmarks/so2_peers.py --shapes 647000:3:32 --rounds 3 --deepmd-tiles h20 \
    --peers tilefuse,tilefuse-l3,deepmd,deepmd-fp16x3 --profile --profile-top 14 --json $OUT/profile.json 2>&1 \
    | grep -v Warn | tee $OUT/profile.txt | grep -A200 "profile at" | cut -c1-170
