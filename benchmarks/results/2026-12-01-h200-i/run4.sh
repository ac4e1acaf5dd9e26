#!/bin/bash
# Run 4: the dyt GPU tests after the prefetch fix (n_groups specialised to 1); the memory-growth
# probe; host cost per call (benchmarks/host_overhead.py --sections peers) of this tree against
# 1bb2aed (the tree before the review commit f19c3a3), alternating twice. .snap/old holds
# `git archive 1bb2aed src benchmarks`, carried.
#   OUT=... bash benchmarks/results/2026-12-01-h200-i/run4.sh
here="$(dirname "$0")"
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
PYTHONPATH=/tmp/site:$PWD/src timeout 170 python3 -m pytest -q -p no:cacheprovider -rfs tests/test_dyt.py tests/test_dyt_lean.py \
  > "$OUT/pytest-dyt.txt" 2>&1; echo "exit $?" >> "$OUT/pytest-dyt.txt"
PYTHONPATH=$PWD/src timeout 60 python3 "$here/run4_memgrowth.py" > "$OUT/memgrowth.txt" 2>&1
for r in 1 2; do for t in old new; do
  if [ $t = old ]; then root=.snap/old; else root=.; fi
  echo "== round $r $t"
  PYTHONPATH=/tmp/site:$root/src timeout 60 python3 $root/benchmarks/host_overhead.py --sections peers 2>&1 | grep -E "^\||check|verdict|over"
done; done > "$OUT/host.txt" 2>&1
