#!/bin/bash
# Run 3 (GPU; prepared): one so2_mixing_stack sweep -aj run 10 could not finish in its share of
# one call, alone in a call with the time it needs, its result exported (merge the exported
# table's entry into src/tilefuse/tuning/builtin/ by hand). Run once per key:
#   OUT=... bash benchmarks/results/2026-12-05-h200-ak/run3.sh 2x64 level3 500   # weight_grads re-validation
#   OUT=... bash benchmarks/results/2026-12-05-h200-ak/run3.sh 6x96 bwd 540      # then 6x96 fwd, 6x128 bwd / fwd
# Arguments: the shape (LMAXxCF), the pass (fwd, bwd, level3), the tune's timeout in seconds.
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ak3
name=$1-$2
mkdir -p $OUT/run3-$name
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run3-$name/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run3-$name/gpu.txt
timeout $3 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape $1 --pass $2 --force --no-progress \
  > $OUT/run3-$name/tune.txt 2>&1
echo "tune $1 $2 exit $?" >> $OUT/run3-$name/tune.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run3-$name > /dev/null 2>&1
grep -E "^so2_mixing_stack  |exit" $OUT/run3-$name/tune.txt | tail -3
