#!/bin/bash
# H200 run 1 of 2026-11-29-h200-d: GPU tests of the changed modules, the fp8 profile at shape 1.
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" | tee -a $OUT/gpu.txt
timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/test_quant_kernels.py tests/test_grouped_mlp_recipes.py tests/test_grouped_mlp_kernels.py 2>&1 | tail -15 | tee $OUT/pytest-changed.txt
timeout 200 python3 benchmarks/grouped_profile_fp8.py --shapes 1 2>&1 | tee $OUT/fp8-profile-1.txt
timeout 90 python3 benchmarks/quant_bench.py 2>&1 | tee $OUT/quant.txt
