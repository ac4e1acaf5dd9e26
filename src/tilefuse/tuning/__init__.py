"""The tuning mechanism shared by every op (docs/design.md, "The tuning mechanism"; docs/tuning.md).

Lookup side (hot path, used by launchers at level >= 2)::

    lookup_config(family, problem)     # tuned config, or None: run the baseline

Table::

    get_entry(family, key_or_problem)  # config | BASELINE | None (absent: never swept)
    is_covered(family, key_or_problem) # swept (or registered)?
    register(family, {key: entry})     # runtime entries, above the cache file and built-ins
    with registered(family, {key: entry}): ...   # the same for a block, what was there put back
    entries(), table_location(), reload()

Tuning (ahead of time, never inside a training step)::

    sweep_key(family, key_or_problem, ...)   # one key: check, engage, time, choose, record
    tune(model, example_inputs)              # the keys a model uses that are not covered
    python -m tilefuse.tuning.command ...    # `tilefuse tune` (see command.py)

Op families plug in through ``TuningFamily`` (family.py); ``dyt`` is in ops/dyt/tune.py.
"""

from __future__ import annotations

from .family import BASELINE, ROUTE, TILE, TuningFamily, family_names, get_family, register_family, unregister_family
from .model import tune
from .store import TableWarning
from .sweep import EngagementError, SweepError, SweepResult, sweep_key
from .table import (collecting, coverage, entries, get_entry, is_covered, lookup_config, register, registered,
                    reload, table_location, unregister)

__all__ = [
    "BASELINE", "ROUTE", "TILE", "EngagementError", "SweepError", "SweepResult", "TableWarning",
    "TuningFamily", "collecting", "coverage", "entries", "family_names", "get_family", "get_entry",
    "is_covered", "lookup_config", "register", "register_family", "registered", "reload", "sweep_key",
    "table_location", "tune", "unregister", "unregister_family",
]
