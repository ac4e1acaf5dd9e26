#!/bin/bash
# Run 9 (prepared, not run this session): the dyt memory-growth test after the files that run
# before it in gpu_tests.sh's 'rest' process (it failed there in run 6, 4644 bytes over 40
# calls, and passes alone); its message now names the sites that grew. About 5 minutes.
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache PYTHONUNBUFFERED=1
files=$(ls tests/test_*.py | grep -v -e /test_grouped_mlp_ -e /test_quant_ -e /test_so2_ | awk '{print} /test_dyt_lean/{exit}')
timeout -s INT 420 python3 -m pytest -q -p no:cacheprovider -rf $files > $OUT/rest-to-dyt-lean.txt 2>&1
echo "exit $?" >> $OUT/rest-to-dyt-lean.txt
grep -E "FAILED|passed|failed|grew|exit" $OUT/rest-to-dyt-lean.txt | cut -c1-3000
