"""The ops `tilefuse check` covers, in report order, and the module of each.

A section module has ``verify(quick, device, progress) -> rows``, ``benchmark(quick, progress)
-> dict``, ``benchmark_markdown(b) -> lines`` and ``benchmark_summary(b) -> lines`` for a
benchmark dict that was not skipped, and optionally ``plots(out_dir, b) -> file names``."""

from __future__ import annotations

import importlib
from types import ModuleType

MODULES = {"dyt": "dyt", "so2_mixing_stack": "so2", "grouped_glu_mlp": "grouped"}
OPS = tuple(MODULES)


def section(op: str) -> ModuleType:
    return importlib.import_module(f".{MODULES[op]}", __package__)
