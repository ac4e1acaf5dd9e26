#!/bin/bash
# Run 1 (GPU, either card; carry .whl): dyt's host cost first in a fresh process on a quiet host
# (benchmarks/host_overhead.py), then so2_mixing_stack against DeePMD-kit 3.2.0 (fp32 and
# fp16x3, its H20 tiles) and torch.compile at the issue's three shapes, tilefuse exact and level
# 3 with the card's built-in table, 5 interleaved rounds (-as run 1's command; the wheel
# install's output and an import check of DeePMD-kit's op are kept this time: -ax run 5 lost
# them), then tests/test_dyt_lean.py on the GPU (its level-0 test mended in 2f9fc32 after -ax
# run 6).
#   OUT=... bash benchmarks/results/2026-12-06-h200-ay/run1.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
cat $OUT/run1/gpu.txt
PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 90 python3 benchmarks/host_overhead.py > $OUT/run1/host.txt 2>&1
echo "host exit $? at ${SECONDS}s" >> $OUT/run1/host.txt
tail -8 $OUT/run1/host.txt
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run1/pip.txt 2>&1
echo "pip exit $?" >> $OUT/run1/pip.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
python3 -c "import deepmd.kernels.triton.sezm.so2_value_path as m; print('deepmd op', m.__file__)" \
  > $OUT/run1/deepmd_import.txt 2>&1
echo "import exit $?" >> $OUT/run1/deepmd_import.txt
tail -3 $OUT/run1/deepmd_import.txt
timeout 330 python3 benchmarks/so2_peers.py --rounds 5 --deepmd-tiles h20 \
  --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 --json $OUT/run1/interleaved.json 2>&1 \
  | grep -v Warn > $OUT/run1/interleaved.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run1/interleaved.txt
grep -E "^\| |exit" $OUT/run1/interleaved.txt | tail -18
timeout $((585 - SECONDS)) python3 -m pytest -q -p no:cacheprovider -rf tests/test_dyt_lean.py > $OUT/run1/pytest.txt 2>&1
echo "pytest exit $? at ${SECONDS}s" >> $OUT/run1/pytest.txt
tail -3 $OUT/run1/pytest.txt
