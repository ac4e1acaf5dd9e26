#!/bin/bash
# Run 4 (GPU, on run 3's machine: its /tmp/site holds the wheels run 3 installed): the role-check
# test of tests/test_check.py after its fix (run 3 ran it on CPU tensors), and its neighbours.
# As it ran (the device tool's command line, from the repository root with .snap carried):
#   mkdir -p /tmp/h4 && tar -xf .snap/head.tar -C /tmp/h4 && cd /tmp/h4 && mkdir -p $OUT/run4 &&
#   nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run4/gpu.txt &&
#   PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 200 python3 -m pytest -q \
#     -p no:cacheprovider -rf tests/test_check.py -k "role" 2>&1 | tail -5 | tee $OUT/run4/pytest.txt
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run4/gpu.txt
PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 200 python3 -m pytest -q -p no:cacheprovider -rf \
  tests/test_check.py -k "role" 2>&1 | tail -5 | tee $OUT/run4/pytest.txt
