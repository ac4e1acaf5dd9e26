#!/bin/bash
# Run 3 (GPU, either card; carry .whl): the whole suite on the GPU after the later fixes (the reviews of run 2's tree)
# (benchmarks/gpu_tests.sh, 10 xdist workers, cut at $1 seconds, default 480).
#   OUT=... bash benchmarks/results/2026-12-06-h200-ba/run3.sh [SECONDS]
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > /dev/null 2>&1 || echo "pip failed"
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run3/gpu.txt
OUT=$OUT/run3 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) bash benchmarks/gpu_tests.sh ${1:-480} 10
