#!/bin/bash
# Run 2 (GPU, any card): run 1's 26 failures were the tests' own (CPU tensors and a "cpu" sweep
# device on a CUDA machine, where the CPU runs no kernel); the mended files again.
#   OUT=... bash benchmarks/results/2026-12-06-h200-bd/run2.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run2/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 6 -rfs tests/test_tuning_isolate.py tests/test_dyt_functorch.py \
  > $OUT/run2/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run2/tests.txt
tail -8 $OUT/run2/tests.txt
