"""Helpers for tests of the programs in benchmarks/ (importable by worker processes: no side
effects at import)."""

import importlib.util
import sys
from pathlib import Path


def load_benchmark(name, tag="under_test"):
    """benchmarks/<name>.py as a module named ``<name>_<tag>`` (in sys.modules while it runs:
    its dataclasses look their module up there)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_{tag}", path)
    program = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = program
    spec.loader.exec_module(program)
    return program
