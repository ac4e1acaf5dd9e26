#!/bin/bash
# Run 5 (prepared; not run in this folder's session: no device time was left): the whole GPU
# suite on the final tree (benchmarks/gpu_tests.sh, default limit), then
# run5_dyt_bound_probe.py (the dyt channels-last 16-bit cases with many fresh seeds; README).
#   OUT=... bash benchmarks/results/2026-12-01-h200-j/run5.sh     (carry .whl)
here="$(dirname "$0")"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
bash benchmarks/gpu_tests.sh 400 > "$OUT/gpu-tests.txt" 2>&1; echo "gpu_tests exit $?" >> "$OUT/gpu-tests.txt"
PYTHONPATH=$PWD/src:$PWD/tests timeout 75 python3 "$here/run5_dyt_bound_probe.py" 50 > "$OUT/probe.txt" 2>&1
echo "probe exit $?" >> "$OUT/probe.txt"
