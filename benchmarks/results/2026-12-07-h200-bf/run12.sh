#!/bin/bash
# Run 12 (GPU, any Hopper card): run 10's set-up (compute-sanitizer memcheck, PyTorch's caching
# allocator off) on the warp-specialised kernels' own GPU tests (tests/test_grouped_mlp_ws.py:
# fp8_block's ws GEMM, GLU and dGLU; tests/test_grouped_ws_rows.py: the bf16 row GEMMs and
# their GLU epilogues), 6 pytest-xdist workers, every worker process under the sanitizer.
#   OUT=... bash benchmarks/results/2026-12-07-h200-bf/run12.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run12
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run12/pip.txt 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) PYTORCH_NO_CUDA_MEMORY_CACHING=1
timeout 420 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 --target-processes all \
  python3 -m pytest -q -p no:cacheprovider -n 6 -rfs tests/test_grouped_mlp_ws.py tests/test_grouped_ws_rows.py \
  > $OUT/run12/memcheck.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run12/memcheck.txt
grep -E "ERROR SUMMARY|Invalid|passed|failed|exit" $OUT/run12/memcheck.txt | sort | uniq -c | head -20 | cut -c1-200
