#!/bin/bash
# Run 1 (GPU): (a) which ptxas torch's CUDA build carries; (b) four pytest processes sharing the
# GPU: the tests -ag run 7 left unrun (it stopped at its 500 s limit in
# test_property_views.py) with the new tests/test_sm90_helpers.py; the nine sm_90 compile tests
# under Triton's ptxas and under torch's; test_so2_wgmma.py's GPU tests (bitwise against
# so2_gemm_kernel) on this tree's kernel; (c) alone on the GPU: epilogue_alpha.py under each
# ptxas; (d) host_stream_parts.py. Carry .whl (hypothesis, sortedcontainers).
#   OUT=... bash benchmarks/results/2026-12-04-h200-ah/run1.sh
set -u
cd "$(dirname "$0")/../../.."
HERE=benchmarks/results/2026-12-04-h200-ah
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/hypothesis-*.whl .whl/sortedcontainers-*.whl
mkdir -p $OUT/run1
TP=$(python3 -c "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'bin', 'ptxas'))")
{
  echo "torch's ptxas: $TP"; "$TP" --version | tail -2
  python3 -c "from triton.backends.nvidia import compiler as c; p = c.get_ptxas(90); print('triton ptxas', p.path, p.version)"
  python3 -c "
import torch
from tilefuse.check import env
print('before torch.compile:', env.ptxas())
torch.compile(lambda x: x.sin() + 1)(torch.randn(8, device='cuda'))
print('after torch.compile: ', env.ptxas())"
} > $OUT/run1/ptxas.txt 2>&1
cat $OUT/run1/ptxas.txt
compile="tests/test_dyt.py tests/test_grouped_compose.py tests/test_grouped_mlp_kernels.py tests/test_grouped_mlp_ws.py
 tests/test_grouped_ws_rows.py tests/test_grouped_ws_wgrad.py tests/test_quant_kernels.py tests/test_so2_level3.py
 tests/test_so2_wgmma.py"
T() {  # name, pytest arguments...
  local name=$1; shift
  TILEFUSE_CACHE_DIR=$PWD/.tfcache-$name timeout -s INT -k 30 300 python3 -m pytest -q -p no:cacheprovider -rfs \
    --tb=short --durations=5 "$@" > $OUT/run1/pytest-$name.txt 2>&1
  echo "exit $?" >> $OUT/run1/pytest-$name.txt
}
T tuning tests/test_property_views.py tests/test_specializing_launcher.py tests/test_tuning_*.py tests/test_sm90_helpers.py &
T compile-triton $compile -k "sm90 and triton" &
T compile-torch $compile -k "sm90 and torch" &
T so2-wgmma tests/test_so2_wgmma.py -k "not compiles_for_sm90" &
wait
for f in $OUT/run1/pytest-*.txt; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -2 $f; done
export TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 110 python3 $HERE/epilogue_alpha.py > $OUT/run1/alpha-triton-ptxas.txt 2>&1; echo "exit $?" >> $OUT/run1/alpha-triton-ptxas.txt
TRITON_PTXAS_PATH=$TP timeout 110 python3 $HERE/epilogue_alpha.py > $OUT/run1/alpha-torch-ptxas.txt 2>&1; echo "exit $?" >> $OUT/run1/alpha-torch-ptxas.txt
timeout 70 python3 $HERE/host_stream_parts.py > $OUT/run1/host_parts.txt 2>&1; echo "exit $?" >> $OUT/run1/host_parts.txt
tail -8 $OUT/run1/alpha-*.txt; head -14 $OUT/run1/host_parts.txt
