#!/bin/bash
# Run 1: the GPU tests of the files the 2026-12-02-h200-n session changed (so2 backward head through
# mul_rn, dyt's dalpha accumulator), then issue 17's host cost per call against F.layer_norm and
# Liger-Kernel and `tilefuse bench --ops dyt` (2026-12-02-h200-n/run6.sh's first two steps).
# Carry .whl.   OUT=... bash benchmarks/results/2026-12-02-h200-o/run1.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/gpu.txt
timeout -s INT -k 20 250 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_so2_backward_weights.py \
  tests/test_so2_kernels.py tests/test_so2_level3.py tests/test_dyt.py tests/test_dyt_lean.py > $OUT/pytest.txt 2>&1
echo "pytest exit $?" >> $OUT/pytest.txt; grep -E "FAILED|ERROR|passed|failed|exit" $OUT/pytest.txt | tail -15
timeout 90 python3 benchmarks/host_overhead.py --sections peers 2>&1 | grep -v Warn | tee $OUT/host_overhead.txt
timeout 200 python3 -m tilefuse.cli bench --ops dyt --out $OUT/bench 2>&1 | grep -v Warn | tail -40 | tee $OUT/bench.txt
