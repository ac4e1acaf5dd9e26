#!/bin/bash
# Run 3 (GPU, any card): run 2's isolation test that hit the file's 120 s limit, as a script
# under a part timeout of its own (where would a child wait?); what a child's start costs;
# then the verification alone three times on one machine: isolated (cold caches), in-process
# (warm), isolated (warm), each timed by the report's wall_seconds. Stops itself at $1 s.
#   OUT=... bash benchmarks/results/2026-12-06-h200-bc/run3.sh [SECONDS]
set -u
cd "$(dirname "$0")/../../.."
LIMIT=${1:-360}
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run3/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 150 python3 - > $OUT/run3/lost_context.txt 2>&1 <<'PY'
import sys, time
sys.path.insert(0, "tests")
import test_check_isolate as t
from tilefuse import check
check.verify_op = t.verify_lost_context_then_fresh
t0 = time.perf_counter()
r = check.run_check("/tmp/lost", quick=True, bench=False, show_progress=False, isolate=True,
                    ops=("dyt", "so2_mixing_stack"), part_timeout=40)
print(f"{time.perf_counter() - t0:.1f} s")
for row in r["verification"]:
    print(row["op"], row["ok"], row["detail"])
PY
echo "exit $? at ${SECONDS}s" >> $OUT/run3/lost_context.txt
cat $OUT/run3/lost_context.txt | cut -c1-400
for i in 1 2 3; do
  python3 -c "import time; t = time.perf_counter(); import torch, tilefuse.check.isolate; torch.ones(1, device='cuda'); \
print(f'imports and CUDA init {time.perf_counter() - t:.2f} s')" 2>&1 | tail -1 | tee -a $OUT/run3/start.txt
done
for mode in isolated in-process isolated-warm; do
  flag=$([ $mode = in-process ] && echo --in-process)
  left=$((LIMIT - SECONDS)); [ $left -lt 20 ] && { echo "$mode: out of time"; break; }
  timeout $left python3 -m tilefuse.cli check --quick --no-bench --no-progress $flag --out $OUT/run3/$mode \
    > $OUT/run3/$mode.txt 2>&1
  echo "exit $? at ${SECONDS}s" >> $OUT/run3/$mode.txt
  echo "$mode: $(grep -E 'verification:' $OUT/run3/$mode.txt) $(grep -oE '\([0-9.]+ s\)' $OUT/run3/$mode.txt) $(tail -1 $OUT/run3/$mode.txt)"
  rm -f $OUT/run3/$mode/*.png
done
