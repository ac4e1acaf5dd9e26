"""Compiling kernels for sm_90 on any machine: Triton's bundled NVIDIA toolchain, run in a
subprocess without the interpreter (the test process may have TRITON_INTERPRET=1 set)."""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import triton

import tilefuse


def nvidia_compiler_available() -> bool:
    if importlib.util.find_spec("triton.backends.nvidia.compiler") is None:
        return False
    return (pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").exists()


def run_compile_script(script: str, timeout: int = 900) -> dict:
    """Run ``script`` (which prints a JSON object on its last line) and return that object."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    src = os.path.dirname(os.path.dirname(tilefuse.__file__))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
