# H200 run 4 (see this folder's README.md): grouped sweep with the measured defaults, then the
# benchmark sections of `tilefuse check` one op at a time (each writes its own report).
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)"
timeout 130 python3 -m tilefuse.cli tune --op grouped_glu_mlp --all-defaults --no-progress > $OUT/tune-grouped.txt 2>&1
python3 -m tilefuse.cli tune --export-builtin $OUT > /dev/null 2>&1
timeout 235 python3 -m tilefuse.cli bench --no-progress --ops grouped_glu_mlp --out $OUT/grouped > $OUT/bench-grouped.txt 2>&1
timeout 165 python3 -m tilefuse.cli bench --no-progress --ops so2_mixing_stack --out $OUT/so2 > $OUT/bench-so2.txt 2>&1
timeout 45 python3 -m tilefuse.cli bench --quick --no-progress --ops dyt --out $OUT/dyt > $OUT/bench-dyt.txt 2>&1
for f in $OUT/*.txt; do echo "== $f"; tail -4 $f; done
