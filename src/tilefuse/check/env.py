"""The environment a report describes: device, driver, CUDA, versions, git commit."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import torch

from .. import __version__, policy


def _git_commit() -> str | None:
    """The checkout's commit (with '-dirty' for local changes), when run from a checkout."""
    here = Path(__file__).resolve().parent
    try:
        top = subprocess.run(["git", "-C", str(here), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, timeout=10)
        if top.returncode != 0 or not (Path(top.stdout.strip()) / "src" / "tilefuse").is_dir():
            return None
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "--verify", "-q", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        sha = head.stdout.strip() if head.returncode == 0 else ""
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("-dirty" if dirty else "") if sha else None
    except (OSError, subprocess.SubprocessError):
        return None


def _driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def environment() -> dict:
    try:
        import triton
        triton_version = triton.__version__
    except Exception:  # Triton absent or broken: report it, the reference still runs
        triton_version = None
    env = {
        "tilefuse": __version__,
        "git_commit": _git_commit(),
        "torch": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cuda_available": torch.cuda.is_available(),
        "triton_interpreter": policy.interpreter_enabled(),
        "level": policy.get_level(),
        "cuda_runtime": torch.version.cuda,
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update({
            "device": props.name,
            "compute_capability": f"{props.major}.{props.minor}",
            "sms": props.multi_processor_count,
            "memory_gib": round(props.total_memory / 2**30, 1),
            "driver": _driver(),
        })
    else:
        env.update({"device": f"CPU ({platform.processor() or platform.machine()}, "
                              f"{os.cpu_count()} cores), Triton interpreter"})
    return env
