#!/bin/bash
# Run 12 (GPU; prepared): `tilefuse check --no-bench` on the H200 after the 2026-12-05 check
# rows: grouped_glu_mlp's float16 case, the compose route at the Gluon tiles and fp8_block's
# warp-specialised GEMMs (each passing only if those kernels launched), and every config the
# built-in table hands out verified as called (21 distinct picks on the H200 table); dyt's
# alpha = inf y bitwise. Prints the summary and any failed row; the report under $OUT/run12.
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run12.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run12
SECONDS=0
timeout 480 python3 -m tilefuse.cli check --no-bench --no-progress --out $OUT/run12/report > $OUT/run12/check.txt 2>&1
echo "exit $? after $SECONDS s" >> $OUT/run12/check.txt
tail -8 $OUT/run12/check.txt
python3 - "$OUT/run12/report/report.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["verification"]
bad = [r for r in rows if not r["ok"]]
print(f"{len(rows)} rows, {len(bad)} failed")
for r in bad:
    print("FAILED", r["op"], r["path"], r["case"], r.get("detail"), r.get("errors"))
PY
