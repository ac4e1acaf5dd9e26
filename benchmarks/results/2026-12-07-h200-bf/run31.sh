#!/bin/bash
# Run 31 (GPU, any Hopper card; carry .whl): tests/test_grouped_mlp_ws.py whole on this tree,
# the package's ws dGLU with SwiGLU's whole-tile z (run 29's change, taken into ws_kernels.py).
#   OUT=... [LIMIT=seconds, default 560] bash benchmarks/results/2026-12-07-h200-bf/run31.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run31
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run31/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run31/gpu.txt
cat $OUT/run31/gpu.txt
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run31/pip.txt 2>&1
PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout $(( ${LIMIT:-560} - SECONDS )) \
  python3 -m pytest -q -p no:cacheprovider -n 8 -rfs tests/test_grouped_mlp_ws.py > $OUT/run31/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run31/tests.txt
tail -n 6 $OUT/run31/tests.txt | cut -c1-300
