#!/bin/bash
# Which wheels do the GPU runs carry, and are they all in .whl/?
# Fills the git-ignored .whl/ with them (the device image has no network): the peers
# (Liger-Kernel 0.8.5 for dyt, DeePMD-kit 3.2.0 and its pure-Python dependencies for
# so2_peers.py), hypothesis and sortedcontainers for the property tests, ninja for
# torch.compile's C++ wrapper; for the device image's Python 3.12 on x86_64, versions pinned so
# runs months apart carry the same peers. Runs here, no GPU (needs PyPI; about 10 s, 13 MB, and
# nothing downloaded again); prints the folder's wheels. Then carry .whl (benchmarks/README.md).
#   bash benchmarks/device_wheels.sh
set -eu
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download -q --no-deps --dest .whl --python-version 3.12 --only-binary=:all: \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any \
  deepmd-kit==3.2.0 array-api-compat==1.16.0 wcmatch==12.0.4 bracex==3.2.4 lmdb==3.0.0 \
  liger-kernel==0.8.5 hypothesis==6.170.27 sortedcontainers==2.4.0 ninja==1.13.2 2> >(grep -v "is ignored" >&2)
ls .whl
