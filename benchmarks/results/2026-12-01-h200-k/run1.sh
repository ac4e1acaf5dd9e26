#!/bin/bash
# Run 1: the so2 forward keys of the other three grid shapes (L1-C32, L2-C32, L3-C64) swept and
# exported (prepared as run 6 of 2026-12-01-h200-j), then that folder's dyt bound probe (its run 5
# probe: the 16-bit channels-last cases with many fresh seeds).
#   OUT=... bash benchmarks/results/2026-12-01-h200-k/run1.sh     (carry .whl)
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/env.txt"
python3 -c "import torch, triton; print(torch.__version__, torch.version.cuda, triton.__version__)" >> "$OUT/env.txt"
timeout 170 python3 -m tilefuse.cli tune --op so2_mixing_stack --pass fwd --shape 1x32 --shape 2x32 --shape 3x64 \
  --force --rounds 6 --no-progress > "$OUT/tune-so2-fwd.txt" 2>&1; echo "tune exit $?" >> "$OUT/tune-so2-fwd.txt"
python3 -m tilefuse.cli tune --export-builtin "$OUT" >> "$OUT/tune-so2-fwd.txt" 2>&1
PYTHONPATH=/tmp/site:$PWD/src:$PWD/tests timeout 90 python3 benchmarks/results/2026-12-01-h200-j/run5_dyt_bound_probe.py 60 \
  > "$OUT/probe.txt" 2>&1; echo "probe exit $?" >> "$OUT/probe.txt"
