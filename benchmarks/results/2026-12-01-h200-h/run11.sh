#!/bin/bash
# Run 11: the grouped bench with its new rows (tilefuse as called, the compose route) at the
# quick shape, and the fixed dyt level test on the GPU.
set -u
export PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$OUT/cache
timeout 40 python3 -m pytest -q -p no:cacheprovider tests/test_dyt_lean.py -k "level_change" 2>&1 | tail -2 | tee $OUT/pytest.txt
timeout 190 python3 -m tilefuse.cli bench --no-progress --quick --ops grouped_glu_mlp --out $OUT/grouped > $OUT/bench.txt 2>&1
echo "bench rc $?"; grep -A16 "| experts" $OUT/grouped/report.md | head -20
