#!/bin/bash
# Run 3: fp8_block's wgrad at its new heuristic tile (128x64 through TMA): the recipe tests on
# the GPU, then run3_fp8_step_ab.py (the whole step with the old and new wgrad tile, beside the
# bf16 compose route).
#   OUT=... bash benchmarks/results/2026-12-02-h200-r/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-r3
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run3/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_mlp_recipes.py > $OUT/run3/pytest.txt 2>&1
echo "pytest exit $?" >> $OUT/run3/pytest.txt; grep -E "FAILED|ERROR|passed|failed|exit" $OUT/run3/pytest.txt | tail -8
timeout 200 python3 benchmarks/results/2026-12-02-h200-r/run3_fp8_step_ab.py > $OUT/run3/step_ab.txt 2>&1
echo "exit $?" >> $OUT/run3/step_ab.txt; grep -v Warn $OUT/run3/step_ab.txt
