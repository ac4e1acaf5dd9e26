#!/bin/bash
# Run 1 (GPU): fp8_block's nine quantizer launches against their copy floor per shape
# (quant_floor.py), then the so2 training backward at Neo with eager fp32 and torch.compile now
# that check 2's bound takes eager's error (388a81e): -ak run 4 shut compile out there.
#   OUT=... bash benchmarks/results/2026-12-05-h200-an/run1.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
timeout 100 python3 benchmarks/results/2026-12-05-h200-an/quant_floor.py --json $OUT/run1/quant_floor.jsonl \
  > $OUT/run1/quant_floor.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run1/quant_floor.txt
grep -E "^shape|exit" $OUT/run1/quant_floor.txt
timeout 150 python3 benchmarks/so2_peers.py --training --rounds 5 --shapes neo --peers tilefuse,eager,compile \
  --json $OUT/run1/training.json 2>&1 | grep -v Warn > $OUT/run1/training.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run1/training.txt
grep -E "^\| [0-9]|exit" $OUT/run1/training.txt | tail -5
