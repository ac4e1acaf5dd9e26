#!/bin/bash
# Run 2 (tree as committed with this script): the sm_90 compile test's report under the
# image's triton 3.6 (it failed in run 1), then run2_roles.py.
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD/src
timeout 120 python3 -m pytest -q -x tests/test_grouped_mlp_kernels.py -k sm90 2>&1 | grep -E "^E |passed|failed" | head -20
timeout 420 python3 benchmarks/results/2026-12-01-h200-l/run2_roles.py
