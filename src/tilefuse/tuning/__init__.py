"""The tuning mechanism shared by every op (DESIGN.md, "The tuning mechanism").

Lookup side (hot path, used by launchers at level >= 2)::

    lookup_config(family, problem)     # tuned config, or None: run the baseline

Table::

    get_entry(family, key_or_problem)  # config | BASELINE | None (absent: never swept)
    is_covered(family, key_or_problem) # swept (or registered)?
    register(family, {key: entry})     # runtime entries, above the cache file and built-ins
    entries(), table_location(), reload()

Op families plug in through ``TuningFamily`` (family.py).
"""

from __future__ import annotations

from .family import BASELINE, ROUTE, TILE, TuningFamily, family_names, get_family, register_family, unregister_family
from .store import TableWarning
from .table import (collecting, entries, get_entry, is_covered, lookup_config, register, reload,
                    table_location, unregister)

__all__ = [
    "BASELINE", "ROUTE", "TILE", "TableWarning", "TuningFamily", "collecting", "entries",
    "family_names", "get_family", "get_entry", "is_covered", "lookup_config", "register",
    "register_family", "reload", "table_location", "unregister", "unregister_family",
]
