#!/bin/bash
# Run 6 (issue 17): dyt's lean eager path on the GPU: its tests (the direct-launch GPU tests,
# misaligned views, graph capture, streams) and the other dyt API tests, then the host cost per
# call against F.layer_norm, eager DyT, torch.tanh and Liger-Kernel 0.8.5. Carry .whl.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$OUT/cache
timeout 200 python3 -m pytest -q -p no:cacheprovider -rf tests/test_dyt_lean.py tests/test_dyt_api.py \
    tests/test_dyt_functorch.py 2>&1 | tail -12 | tee $OUT/pytest.txt
timeout 150 python3 benchmarks/host_overhead.py 2>&1 | grep -v Warn | tee $OUT/host_overhead.txt | tail -45
