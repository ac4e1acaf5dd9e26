# H200 run 2 (see this folder's README.md): re-test the fixes of run 1, diagnose the so2 E=1 bitwise
# case, sweep so2 (issue shapes) and grouped (spec shapes), export the measured table.
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
git log -1 --format=%H 2>/dev/null; python3 -c "import torch,triton;print(torch.__version__,triton.__version__)"
P="python3 -m pytest -q -p no:cacheprovider -rf"
timeout 200 $P tests/test_so2_kernels.py tests/test_tuning_sweep.py tests/test_check.py::test_report_renders_every_benchmark_section "tests/test_dyt.py::test_tanh_accuracy_over_range" > $OUT/pytest.txt 2>&1 &
PYTHONPATH=$PYTHONPATH:tests timeout 200 python3 "$(dirname "$0")"/so2_bitwise_diag.py > $OUT/so2_diag.txt 2>&1
wait
timeout 200 python3 -m tilefuse.cli tune --op so2_mixing_stack --no-progress --shape 3x32x647168x2 --shape 6x32x647168x2 --shape 2x64x647168x2 > $OUT/tune-so2.txt 2>&1
timeout 280 python3 -m tilefuse.cli tune --op grouped_glu_mlp --all-defaults --no-progress > $OUT/tune-grouped.txt 2>&1
python3 -m tilefuse.cli tune --export-builtin $OUT > /dev/null 2>&1
for f in $OUT/*.txt; do echo "== $f"; tail -6 $f; done
