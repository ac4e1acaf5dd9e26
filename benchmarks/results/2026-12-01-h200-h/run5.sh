#!/bin/bash
# Run 5 (issue 16): shapes 2-3 again, torch.compile of the composition with a Dynamo reset and
# static shapes per shape (run 4's compile failed there after the third recompile).
set -u
export PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$OUT/cache
timeout 400 python3 benchmarks/grouped_compose_gpu_check.py --shapes 2,3 --rounds 5 2>&1 | grep -v Warn \
    | tee $OUT/compose_check.txt | tail -45
