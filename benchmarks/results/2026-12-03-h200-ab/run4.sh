#!/bin/bash
# Run 4 (GPU only): fc1 with the GLU in ws_rows' epilogue: the GPU tests (ws_rows and the tuned
# compose route); run4_glu.py (the fused launch against CUTLASS + GLU kernel and ws_rows + GLU
# kernel); the bf16 sweep of the spec's three keys, exported; the op as users call it on that
# table (copied into the built-in table after the run).
#   OUT=... bash benchmarks/results/2026-12-03-h200-ab/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ab4
mkdir -p $OUT/run4
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_ws_rows.py tests/test_grouped_ws_wgrad.py \
  -k "glu or compose_config or bitwise_grouped_mm" -x > $OUT/run4/pytest.txt 2>&1
echo "exit $?" >> $OUT/run4/pytest.txt; tail -3 $OUT/run4/pytest.txt
timeout 100 python3 benchmarks/results/2026-12-03-h200-ab/run4_glu.py > $OUT/run4/glu.txt 2>&1
echo "exit $?" >> $OUT/run4/glu.txt; grep -v Warn $OUT/run4/glu.txt
timeout 200 python3 -m tilefuse.cli tune --op grouped_glu_mlp --dtype bf16 --shape 64x32768x2048x1408 \
  --shape 128x65536x2048x768 --shape 8x16384x4096x3584 --force --rounds 6 --no-progress > $OUT/run4/tune-bf16.txt 2>&1
echo "tune exit $?" >> $OUT/run4/tune-bf16.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run4 >> $OUT/run4/tune-bf16.txt 2>&1
grep "^swept\|exit" $OUT/run4/tune-bf16.txt
cp $OUT/run4/nvidia-h200-sm90.json src/tilefuse/tuning/builtin/run4-table.json 2>/dev/null
python3 - <<'PY'
import json
p = "src/tilefuse/tuning/builtin/nvidia-h200-sm90.json"
d = json.load(open(p))
new = json.load(open("src/tilefuse/tuning/builtin/run4-table.json"))
d["families"]["grouped_glu_mlp"].update(new["families"]["grouped_glu_mlp"])
open(p, "w").write(json.dumps(d, indent=1, sort_keys=True) + "\n")
PY
rm -f src/tilefuse/tuning/builtin/run4-table.json
timeout 160 python3 benchmarks/grouped_compose_gpu_check.py --interleaves 32 --rounds 5 > $OUT/run4/check.txt 2>&1
echo "exit $?" >> $OUT/run4/check.txt
grep "^shape\|compiled\|tilefuse  \|compose  \|fp8\|exit" $OUT/run4/check.txt | grep -v "^ *[0-9.]* ms  *[0-9.]*x"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
