#!/bin/bash
# Run 3 (GPU; prepared): the so2_mixing_stack sweeps -aj run 10 could not finish in its share of
# one call, each with the time it needs, in order; a sweep that could run past the call's 600 s
# limit is skipped and says so. Each key's result is exported after it (merge the exported
# table's entries into src/tilefuse/tuning/builtin/ by hand). Arguments: SHAPE:PASS:TIMEOUT
# items (shape LMAXxCF; pass fwd, bwd or level3; the tune's timeout in seconds), e.g.
#   OUT=... bash benchmarks/results/2026-12-05-h200-ak/run3.sh 2x64:level3:200 6x96:bwd:330
#   OUT=... bash benchmarks/results/2026-12-05-h200-ak/run3.sh 6x96:fwd:200 6x128:bwd:330
#   OUT=... bash benchmarks/results/2026-12-05-h200-ak/run3.sh 6x128:fwd:250
# (-aj run 10: 3x32 and 6x32 level 3 took 70 and 45 s with the weight-gradient validation; 2x64
# level 3 ran past 100 s, the (6, 96) and (6, 128) exact passes past 60 s and 40 s.)
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ak3
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run3/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run3/gpu.txt
for item in "$@"; do
  IFS=: read -r shape pass limit <<< "$item"
  if (( SECONDS + limit > 575 )); then echo "tune $shape $pass skipped at ${SECONDS}s" | tee -a $OUT/run3/tune-so2.txt; continue; fi
  timeout $limit python3 -m tilefuse.cli tune --op so2_mixing_stack --shape $shape --pass $pass --force --no-progress \
    >> $OUT/run3/tune-so2.txt 2>&1
  echo "tune $shape $pass exit $? at ${SECONDS}s" >> $OUT/run3/tune-so2.txt
  python3 -m tilefuse.cli tune --export-builtin $OUT/run3 > /dev/null 2>&1
  grep -E "^so2_mixing_stack  |exit" $OUT/run3/tune-so2.txt | tail -2
done
