#!/bin/bash
# Run 2 (GPU, ran inline; H100): so2_mixing_stack keys the H100's built-in table lacked, swept
# by -ak's run3.sh (one key after another, each exported after it). The three calls of this
# folder ran on one warm machine, so run3's cache folder (.tfcache-ak3) carried over between
# them: run 3's export holds every key of the three calls.
#   OUT=... bash benchmarks/results/2026-12-05-h200-at/run2.sh
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
OUT=$OUT bash benchmarks/results/2026-12-05-h200-ak/run3.sh 2x32:level3:120 6x96:fwd:200 6x128:bwd:250
cat $OUT/run3/gpu.txt
