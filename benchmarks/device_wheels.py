"""Which wheels do the GPU runs carry, and are they all in .whl/?

Fills the git-ignored .whl/ with them (the device image has no network): the peers
(Liger-Kernel 0.8.5 for dyt, DeePMD-kit 3.2.0 and its pure-Python dependencies for
so2_peers.py), hypothesis and sortedcontainers for the property tests, pytest-xdist and
execnet for the suite in parallel workers, ninja for
torch.compile's C++ wrapper; for the device image's Python 3.12 on x86_64, versions pinned so
runs months apart carry the same peers. Runs here, no GPU (needs PyPI; about 10 s and 13 MB,
nothing downloaded again). Prints the folder's wheels; exits non-zero if pip fails. Then carry
.whl (benchmarks/README.md, "The GPU evidence set").

    python3 benchmarks/device_wheels.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

WHEELS = ("deepmd-kit==3.2.0", "array-api-compat==1.16.0", "wcmatch==12.0.4", "bracex==3.2.4", "lmdb==3.0.0",
          "liger-kernel==0.8.5", "hypothesis==6.170.27", "sortedcontainers==2.4.0", "ninja==1.13.2",
          "pytest-xdist==3.8.0", "execnet==2.1.2")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any")


def main() -> int:
    dest = Path(__file__).resolve().parents[1] / ".whl"
    dest.mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--dest", str(dest), "--python-version", "3.12",
           "--only-binary=:all:", *(arg for p in PLATFORMS for arg in ("--platform", p)), *WHEELS]
    done = subprocess.run(cmd, capture_output=True, text=True)
    for line in done.stderr.splitlines():
        if "is ignored" not in line:      # the machine's local package folders, absent on most
            print(line, file=sys.stderr)
    for wheel in sorted(dest.glob("*.whl")):
        print(wheel.name)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
