#!/bin/bash
# Run 2: the weight-stationary persistent prototype of the so2 backward GEMM (pointer and TMA loads)
# against so2_gemm_kernel, and so2_gemm_kernel at larger tiles (run2_proto.py).
#   OUT=... bash benchmarks/results/2026-12-02-h200-p/run2.sh
set -u
cd "$(dirname "$0")/../../.."
here=benchmarks/results/2026-12-02-h200-p
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-p2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
timeout 400 python3 $here/run2_proto.py 2>&1 | grep -v Warn | tee $OUT/proto.txt
