#!/bin/bash
# Run 1: the relay's sigma recomputed inside its pointwise kernel (issue 15).
#   1. the so2 kernel tests that cover it, on the GPU;
#   2. run1_sigma_merge.py: bitwise and timed against the sigma kernel + pointwise pair;
#   3. so2_peers.py at the three shapes: tilefuse level 3 (built-in table of e232b0d) against DeePMD-kit's fp16x3,
#      torch.profiler of both at Neo; then the exact path against DeePMD-kit fp32 and torch.compile. Carries .whl.
#   OUT=... bash benchmarks/results/2026-12-03-h200-w/run1.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache-w1
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
PYTHONPATH=src timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_so2_kernels.py \
  -k "pointwise_recomputes or fused_is_bitwise or forward_and_relay or sigma_pass_reads" > $OUT/run1/pytest.txt 2>&1
echo "exit $?" >> $OUT/run1/pytest.txt
tail -2 $OUT/run1/pytest.txt
PYTHONPATH=src timeout 120 python3 benchmarks/results/2026-12-03-h200-w/run1_sigma_merge.py > $OUT/run1/sigma_merge.txt 2>&1
echo "exit $?" >> $OUT/run1/sigma_merge.txt
cat $OUT/run1/sigma_merge.txt
PYTHONPATH=/tmp/site:$PWD/src timeout 200 python3 benchmarks/so2_peers.py --rounds 3 --deepmd-tiles h20 \
  --peers tilefuse-l3,deepmd-fp16x3 --profile --profile-peers tilefuse-l3,deepmd-fp16x3 --json $OUT/run1/peers_l3.json \
  2>&1 | grep -v Warn > $OUT/run1/peers_l3.txt
echo "peers exit $?" >> $OUT/run1/peers_l3.txt
grep -E "^\| [0-9]|exit" $OUT/run1/peers_l3.txt | tail -8
PYTHONPATH=/tmp/site:$PWD/src timeout 230 python3 benchmarks/so2_peers.py --rounds 3 --deepmd-tiles h20 \
  --peers tilefuse,deepmd,compile --json $OUT/run1/peers_exact.json 2>&1 | grep -v Warn > $OUT/run1/peers_exact.txt
echo "peers exit $?" >> $OUT/run1/peers_exact.txt
grep -E "^\| [0-9]|exit" $OUT/run1/peers_exact.txt | tail -12
