#!/bin/bash
# Run 3 (the machine still warm after run 1; this is the command it ran, as one line there): the exact
# path against DeePMD-kit fp32 and torch.compile on the product tree, then the forward gate kernel's
# launch shape and pipelining depth (2026-12-03-h200-w's run5_gate_stages.py). Carries .whl.
#   OUT=... bash benchmarks/results/2026-12-03-h200-x/run3.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache-x3
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run3/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run3/gpu.txt
PYTHONPATH=/tmp/site:$PWD/src timeout 260 python3 benchmarks/so2_peers.py --rounds 3 --deepmd-tiles h20 \
  --peers tilefuse,deepmd,compile --json $OUT/run3/peers_exact.json 2>&1 | grep -v Warn > $OUT/run3/peers_exact.txt
echo "peers exit $?" >> $OUT/run3/peers_exact.txt
grep -E "^\| [0-9]|exit" $OUT/run3/peers_exact.txt | tail -12
PYTHONPATH=src timeout 100 python3 benchmarks/results/2026-12-03-h200-w/run5_gate_stages.py > $OUT/run3/gate.txt 2>&1
echo "exit $?" >> $OUT/run3/gate.txt
grep -E "^##|\]|exit|Error" $OUT/run3/gate.txt | tail -45
