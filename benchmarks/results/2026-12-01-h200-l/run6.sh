#!/bin/bash
# Run 6 (the final tree, named in the README): the whole suite on the GPU (carry .whl for the
# property tests' hypothesis and sortedcontainers).
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
bash benchmarks/gpu_tests.sh 470
