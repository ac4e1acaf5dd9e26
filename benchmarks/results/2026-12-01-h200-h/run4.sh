#!/bin/bash
# Run 4 (issue 16): grouped_glu_mlp's compose route on the GPU: its tests (GPU-only ones:
# CUDA-graph capture, torch.compile), then benchmarks/grouped_compose_gpu_check.py at the spec's
# three shapes, interleave 32 and None.
set -u
export PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$OUT/cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/gpu.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider -x tests/test_grouped_compose.py 2>&1 | tail -15 | tee $OUT/pytest.txt
timeout 360 python3 benchmarks/grouped_compose_gpu_check.py --rounds 5 2>&1 | grep -v Warn | tee $OUT/compose_check.txt | tail -60
