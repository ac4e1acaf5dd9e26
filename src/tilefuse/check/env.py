"""The environment a report describes (`tilefuse info`, `tilefuse check`, benchmarks/): the
one environment report of the project.

PyTorch's own report (``torch.utils.collect_env``, what PyTorch bug reports carry) gives the
OS, Python, torch and its CUDA / cuDNN build, the GPU models and the Python packages; tilefuse
adds what that report lacks: its version and git commit, Triton, the execution level and the
interpreter, the device's properties, and the driver version from ``tilefuse.device``
(the same value the tuning table's fingerprint holds; collect_env's own comes from
nvidia-smi and is not used).
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from pathlib import Path

import torch

from .. import __version__, policy
from ..device import driver_version, ptxas  # noqa: F401  (ptxas: env.ptxas for its callers)

# torch.utils.collect_env.SystemEnv fields -> report keys (fields a torch version lacks are
# left out).
_COLLECT_ENV = {"os": "os", "libc_version": "libc", "python_platform": "platform",
                "cudnn_version": "cudnn",
                "nvidia_gpu_models": "gpus", "pip_packages": "python_packages"}


def git_commit() -> str | None:
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


def _one_line(value) -> str | None:
    """A multi-line collect_env value (package lists, GPU lists) as one line for report.md."""
    if value is None:
        return None
    lines = [line.strip() for line in str(value).splitlines() if line.strip()]
    return "; ".join(lines) or None


@functools.lru_cache(maxsize=1)
def _collect_env() -> dict:
    """The fields of ``torch.utils.collect_env.get_env_info()`` this report keeps; an
    ``collect_env_error`` where it failed (the rest of the report does not need it). Once per
    process: collect_env runs several subprocesses (pip, nvidia-smi, lscpu)."""
    try:
        from torch.utils import collect_env
        info = collect_env.get_env_info()._asdict()
    except Exception as exc:  # noqa: BLE001 - a broken subprocess or parser must not stop a check
        return {"collect_env_error": f"{type(exc).__name__}: {exc}"[:200]}
    out = {key: _one_line(info[field]) for field, key in _COLLECT_ENV.items() if field in info}
    cpu = next((line.split(":", 1)[1].strip() for line in str(info.get("cpu_info") or "").splitlines()
                if line.strip().startswith("Model name:")), None)
    if cpu:
        out["cpu"] = cpu
    return out


def environment() -> dict:
    try:
        import triton
        triton_version = triton.__version__
    except Exception:  # Triton absent or broken: report it, the reference still runs
        triton_version = None
    env = {
        "tilefuse": __version__,
        "git_commit": git_commit(),
        "torch": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
        "cuda_available": torch.cuda.is_available(),
        "triton_interpreter": policy.interpreter_enabled(),
        "level": policy.get_level(),
        "cuda_runtime": torch.version.cuda,
        "ptxas": ptxas(),
        "driver": driver_version(),     # the one source (tilefuse.device), with or without CUDA
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update({
            "device": props.name,
            "compute_capability": f"{props.major}.{props.minor}",
            "sms": props.multi_processor_count,
            "memory_gib": round(props.total_memory / 2**30, 1),
        })
    else:
        # The same interpreter fact as "triton_interpreter" above (`tilefuse info` does not
        # switch it on; check, tune and bench do).
        where = ", Triton interpreter" if env["triton_interpreter"] else ", no Triton interpreter"
        env.update({"device": f"CPU ({platform.processor() or platform.machine()}, "
                              f"{os.cpu_count()} cores){where}"})
    env.update(_collect_env())
    return env
