# H200 run 3 (see this folder's README.md): GPU re-tests of the tanh and quantizer changes, the so2
# bitwise diagnosis, the grouped per-GEMM profile, quantizer bandwidth, the so2 L2-C64 sweep.
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)"
P="python3 -m pytest -q -p no:cacheprovider -rf"
timeout 240 $P tests/test_quant_kernels.py tests/test_quant_api.py "tests/test_dyt.py::test_tanh_accuracy_over_range" > $OUT/pytest.txt 2>&1 &
PYTHONPATH=$PYTHONPATH:tests timeout 200 python3 "$(dirname "$0")"/so2_bitwise_diag.py > $OUT/so2_diag.txt 2>&1
wait
timeout 150 python3 benchmarks/grouped_profile.py > $OUT/grouped_profile.txt 2>&1
timeout 60 python3 benchmarks/quant_bench.py > $OUT/quant.txt 2>&1
timeout 170 python3 -m tilefuse.cli tune --op so2_mixing_stack --no-progress --shape 2x64x647168x2 > $OUT/tune-so2.txt 2>&1
python3 -m tilefuse.cli tune --export-builtin $OUT > /dev/null 2>&1
for f in $OUT/*.txt; do echo "== $f"; tail -5 $f; done
