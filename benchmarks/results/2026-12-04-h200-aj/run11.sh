#!/bin/bash
# Run 11 (GPU, two of them: the device tool's kind nvidia-h200-x2; prepared): each public op on
# cuda:1 with cuda:0 current (device.on_tensor_device), bitwise the same call made with cuda:1
# current: tests/test_devices.py, which skips without two GPUs.
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run11.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) NCCL_NVLS_ENABLE=0
mkdir -p $OUT/run11
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $OUT/run11/gpu.txt
timeout 300 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_devices.py > $OUT/run11/pytest.txt 2>&1
echo "exit $?" >> $OUT/run11/pytest.txt
tail -3 $OUT/run11/pytest.txt
