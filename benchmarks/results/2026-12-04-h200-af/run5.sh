#!/bin/bash
# Run 5 (GPU): the three failures of run 4 after their fixes: the property tests with their
# tensors on the GPU (test_property_views.py), tilefuse check --quick's fused-vs-relay rows
# (test_check.py), and the so2 wgmma kernel's sm_90 compile report in full, with the ptxas
# that compiled it.
#   OUT=... bash benchmarks/results/2026-12-04-h200-af/run5.sh   (carry: .whl with hypothesis, sortedcontainers)
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/hypothesis-*.whl .whl/sortedcontainers-*.whl
mkdir -p $OUT/run5
{
  echo "TRITON_PTXAS_PATH=${TRITON_PTXAS_PATH:-unset}"
  python3 -c "from triton.backends.nvidia import compiler as c; p = c.get_ptxas(90); print('ptxas', p.path, p.version)" 2>&1
  PYTHONPATH=$PYTHONPATH:$PWD/tests timeout 200 python3 -c "$(PYTHONPATH=$PWD/src:$PWD/tests python3 -c 'import test_so2_wgmma as t; print(t._SM90_WGMMA)')"
} > $OUT/run5/wgmma_compile.txt 2>&1
cat $OUT/run5/wgmma_compile.txt | head -5 | cut -c1-400
timeout 300 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_property_views.py > $OUT/run5/pytest-property.txt 2>&1 &
timeout 300 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_check.py -k "quick_writes_report or fused_check_forces" > $OUT/run5/pytest-check.txt 2>&1 &
wait
for f in $OUT/run5/pytest-*.txt; do echo "== $f"; grep -E "^(FAILED|ERROR)|^E " $f | head -20; tail -1 $f; done
