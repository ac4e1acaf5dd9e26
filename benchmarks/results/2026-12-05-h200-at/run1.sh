#!/bin/bash
# Run 1 (GPU, ran inline; H100): so2_mixing_stack keys the H100's built-in table lacked, swept
# by -ak's run3.sh (one key after another, each exported after it). The three calls of this
# folder ran on one warm machine, so run3's cache folder (.tfcache-ak3) carried over between
# them: run 3's export holds every key of the three calls.
#   OUT=... bash benchmarks/results/2026-12-05-h200-at/run1.sh
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
OUT=$OUT bash benchmarks/results/2026-12-05-h200-ak/run3.sh 3x64:bwd:200 3x64:level3:150 1x32:level3:120
cat $OUT/run3/gpu.txt
