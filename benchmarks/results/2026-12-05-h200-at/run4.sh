#!/bin/bash
# Run 4 (GPU, ran inline; H100): the (6, 96) and (6, 128) keys' sweep baselines took 0.9-2.4 s a
# call at 2^18-2^19 edges, 6-15 TFLOP/s against 27-56 at focus_dim <= 64. Is the op that slow
# there against the eager reference (cuBLAS fp32) and DeePMD-kit, and which kernels take the
# time? so2_peers.py at 65,536 edges, (6, 96), (6, 128) and (3, 32) for scale, and a per-kernel
# profile at (6, 96). Needs .whl with DeePMD-kit's wheels (python3 benchmarks/device_wheels.py).
#   OUT=... bash benchmarks/results/2026-12-05-h200-at/run4.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run4/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run4/gpu.txt
timeout 380 python3 benchmarks/so2_peers.py --shapes 65536:6:96,65536:6:128,65536:3:32 --rounds 3 \
  --target-ms 50 --peers tilefuse,eager,deepmd --profile --profile-shape 65536:6:96 \
  --profile-peers tilefuse,eager,deepmd --profile-steps 2 --json $OUT/run4/peers.json 2>&1 \
  | grep -v Warn > $OUT/run4/peers.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run4/peers.txt
tail -c 9000 $OUT/run4/peers.txt
