#!/bin/bash
# Run 1 (GPU, any Hopper card; carry .whl: hypothesis, sortedcontainers, pytest-xdist, execnet
# from python3 benchmarks/device_wheels.py): the whole suite on the GPU in 10 pytest-xdist
# workers (compiles are CPU-bound; the card has 16 cores), verbose so that a timeout still
# leaves each finished test's verdict in the log.
#   OUT=... bash benchmarks/results/2026-12-06-h200-aw/run1.sh [LIMIT_S]
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/hypothesis-*.whl .whl/sortedcontainers-*.whl .whl/pytest_xdist-*.whl .whl/execnet-*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run1/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/run1/gpu.txt
timeout ${1:-540} python3 -m pytest -v -rfE -p no:cacheprovider -n 10 --durations=25 tests > $OUT/run1/pytest.txt 2>&1
echo "pytest exit $? at ${SECONDS}s" >> $OUT/run1/pytest.txt
grep -c " PASSED " $OUT/run1/pytest.txt; grep -c " SKIPPED " $OUT/run1/pytest.txt
grep -E " (FAILED|ERROR|XPASS)|^FAILED|^ERROR|passed|failed|pytest exit" $OUT/run1/pytest.txt | tail -40
