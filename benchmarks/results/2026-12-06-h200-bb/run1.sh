#!/bin/bash
# Run 1 (GPU, either card; carry .whl): the whole suite on the GPU after this session's fixes
# (benchmarks/gpu_tests.sh, 10 xdist workers, cut at $1 seconds, default 480).
#   OUT=... bash benchmarks/results/2026-12-06-h200-bb/run1.sh [SECONDS]
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > /dev/null 2>&1 || echo "pip failed"
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" | tee -a $OUT/run1/gpu.txt
OUT=$OUT/run1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) bash benchmarks/gpu_tests.sh ${1:-480} 10
