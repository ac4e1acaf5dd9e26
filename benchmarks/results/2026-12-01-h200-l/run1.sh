#!/bin/bash
# Run 1 (tree ca2604a): the grouped GPU kernel tests (TMA against pointers, bitwise), then the
# per-role profile with TMA tiles at the spec's three shapes (bf16).
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
timeout 120 python3 -m pytest -q -x tests/test_grouped_mlp_kernels.py 2>&1 | tail -4
timeout 440 python3 benchmarks/grouped_profile.py --recipes bf16 --shapes 3,2,1 --rounds 5
