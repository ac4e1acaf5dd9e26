#!/bin/bash
# Run 1 (GPU; for the H100 80GB HBM3 the session holds): so2_mixing_stack against its peers at
# the spec's three shapes with the H100's table of a84ff7f (the issue's shapes' exact, forward
# and level-3 keys swept: -ar runs 3-4), interleaved rounds, plain calls: tilefuse exact and
# level 3, torch.compile of the reference, DeePMD-kit 3.2.0 fp32 and fp16x3 (its H20 tiles
# registered for this GPU). -aj run 9's interleaved half, with the timeout this call allows.
# Needs .whl with DeePMD-kit's wheels (python3 benchmarks/device_wheels.py).
#   OUT=... bash benchmarks/results/2026-12-05-h200-as/run1.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
timeout 300 python3 benchmarks/so2_peers.py --rounds 5 --deepmd-tiles h20 \
  --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 --json $OUT/run1/interleaved.json 2>&1 \
  | grep -v Warn > $OUT/run1/interleaved.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run1/interleaved.txt
grep -E "^\| |exit" $OUT/run1/interleaved.txt | tail -24
