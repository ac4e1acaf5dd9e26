#!/bin/bash
# Run 5: so2_peers.py on the product
# tree (the built-in table of e232b0d; the relay as it ships) at the three shapes: level 3 against DeePMD-kit fp16x3;
# run5_gate_stages.py (the forward gate's launch shape and pipelining depth); then the exact path against DeePMD-kit
# fp32 and torch.compile. First, the GPU tests run 6's 200 s timeout cut off (the False-BWD / BWD_HEAD cases of the
# bitwise test and the last two tests of tests/test_so2_wgmma.py). Carries .whl. About 9 minutes.
#   OUT=... bash benchmarks/results/2026-12-03-h200-w/run5.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache-w5
mkdir -p $OUT/run5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run5/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run5/gpu.txt
PYTHONPATH=src timeout 100 python3 -m pytest -q -x -p no:cacheprovider tests/test_so2_wgmma.py \
  -k "(False and BWD) or outside_the_descriptor or production_tiles" > $OUT/run5/pytest.txt 2>&1
echo "exit $?" >> $OUT/run5/pytest.txt
tail -2 $OUT/run5/pytest.txt
PYTHONPATH=/tmp/site:$PWD/src timeout 150 python3 benchmarks/so2_peers.py --rounds 3 --deepmd-tiles h20 \
  --peers tilefuse-l3,deepmd-fp16x3 --json $OUT/run5/peers_l3.json 2>&1 | grep -v Warn > $OUT/run5/peers_l3.txt
echo "peers exit $?" >> $OUT/run5/peers_l3.txt
grep -E "^\| [0-9]|exit" $OUT/run5/peers_l3.txt | tail -8
PYTHONPATH=src timeout 100 python3 benchmarks/results/2026-12-03-h200-w/run5_gate_stages.py > $OUT/run5/gate.txt 2>&1
echo "exit $?" >> $OUT/run5/gate.txt
grep -E "^##|\]|exit|Error" $OUT/run5/gate.txt | tail -45
PYTHONPATH=/tmp/site:$PWD/src timeout 230 python3 benchmarks/so2_peers.py --rounds 3 --deepmd-tiles h20 \
  --peers tilefuse,deepmd,compile --json $OUT/run5/peers_exact.json 2>&1 | grep -v Warn > $OUT/run5/peers_exact.txt
echo "peers exit $?" >> $OUT/run5/peers_exact.txt
grep -E "^\| [0-9]|exit" $OUT/run5/peers_exact.txt | tail -12
