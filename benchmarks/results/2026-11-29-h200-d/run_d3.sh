#!/bin/bash
# H200 run 3 of 2026-11-29-h200-d: the whole GPU test suite on the final tree, whole steps of
# bf16 and every recipe at the spec's three shapes, quantizer bandwidth.
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/ 2>&1 | tail -8 | tee $OUT/pytest.txt
for s in 1 2 3; do
  timeout 75 python3 benchmarks/grouped_profile_fp8.py --steps-only --shapes $s 2>&1 | tee -a $OUT/steps.txt
done
timeout 45 python3 benchmarks/quant_bench.py 2>&1 | tee $OUT/quant.txt
