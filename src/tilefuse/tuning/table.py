"""The in-memory tuning table: three-valued entries, layered, cheap to look up.

Each (family, key) is in one of three states:

- a config: a sweep found a candidate that beat the baseline by the margin; level >= 2 uses it;
- ``BASELINE``: swept, and the baseline won; the baseline runs, and the key is not swept again;
- absent: never swept; the baseline runs (the safe default), and ``tilefuse tune`` sweeps it.

Layers, first match wins: runtime registrations (``register``), then the cache file of this
machine's fingerprint, then the built-in table for this GPU. An entry in a higher layer hides
the same key below it, whatever its value (a cached ``BASELINE`` hides a built-in config).

The files are read once per process and device (on the first lookup); after that a lookup is
a key derivation and a dict probe, with no file I/O. Sweeps write through ``record``, which
updates the file and the in-memory table together.
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Any, Iterator

import torch

from . import store
from .family import BASELINE, get_family
from .store import Entries, Entry


@functools.lru_cache(maxsize=None)
def _has_cuda() -> bool:
    return torch.cuda.is_available()


def _device_index() -> int:
    """The CUDA device whose table applies (the current one), -1 without CUDA. A process
    whose GPUs differ in model sees the table of the device current at lookup time."""
    return torch.cuda.current_device() if _has_cuda() else -1


class _DeviceTable:
    """The file-backed layers for one device's fingerprint, plus the resolved view."""

    def __init__(self, device_index: int):
        self.fingerprint = store.fingerprint(device_index)
        self.path = store.cache_path(self.fingerprint)
        self.builtin: Entries = store.load_builtin(self.fingerprint)
        self.cached: Entries = store.load(self.path, self.fingerprint)
        self.resolved: dict[tuple[str, str], Any] | None = None

    def resolve(self) -> dict[tuple[str, str], Any]:
        """(family, key) -> winner, layers applied; rebuilt after any change."""
        if self.resolved is None:
            resolved = {}
            for layer in (self.builtin, self.cached, _runtime):
                for family_name, entries in layer.items():
                    for key, entry in entries.items():
                        resolved[(family_name, key)] = entry.winner
            self.resolved = resolved
        return self.resolved


_tables: dict[int, _DeviceTable] = {}
_runtime: Entries = {}
_collectors: list[dict] = []
# (device, family, problem) -> lookup result: the launchers' per-call cost is one dict probe.
# Problems are frozen dataclasses; cleared by every change to any layer.
_memo: dict = {}
_MISS = object()


def _table(device_index: int | None = None) -> _DeviceTable:
    index = _device_index() if device_index is None else device_index
    table = _tables.get(index)
    if table is None:
        table = _tables[index] = _DeviceTable(index)
    return table


def _key(family_name: str, key_or_problem) -> str:
    family = get_family(family_name)
    return key_or_problem if isinstance(key_or_problem, str) else family.key(key_or_problem)


# --- lookup (hot path) -----------------------------------------------------------------

def lookup_config(family: str, problem):
    """The tuned config for ``problem`` in ``family``, or None: the key is absent (never
    swept) or its entry is ``BASELINE``. Either way the caller runs its baseline.

    Called by launchers at level >= 2. Inside ``collecting()`` the (family, key, problem)
    is also recorded, which is how ``tilefuse.tune(model, ...)`` learns a model's keys.
    """
    device = _device_index()
    if not _collectors:
        hit = _memo.get((device, family, problem), _MISS)
        if hit is not _MISS:
            return hit
    fam = get_family(family)
    key = fam.key(problem)
    if _collectors:
        _collectors[-1].setdefault((family, key), problem)
    winner = _table(device).resolve().get((family, key))
    config = None if winner is None or winner == BASELINE else winner
    _memo[(device, family, problem)] = config
    return config


@contextlib.contextmanager
def collecting() -> Iterator[dict]:
    """Yields a dict that fills with ``(family, key) -> first problem seen`` for every
    lookup made inside the block."""
    seen: dict = {}
    _collectors.append(seen)
    try:
        yield seen
    finally:
        _collectors.remove(seen)


# --- inspection ------------------------------------------------------------------------

def get_entry(family: str, key_or_problem):
    """The three-valued entry: a config, ``BASELINE``, or None when absent."""
    return _table().resolve().get((family, _key(family, key_or_problem)))


def is_covered(family: str, key_or_problem) -> bool:
    """Whether the key was swept (or registered): its entry is a config or ``BASELINE``.
    Only keys that are not covered get swept."""
    return get_entry(family, key_or_problem) is not None


def entries(device_index: int | None = None) -> list[tuple[str, str, str, Entry]]:
    """Every visible entry as (family, key, source, entry), source being "runtime",
    "cache" or "builtin"; lower layers' entries hidden by a higher layer are left out."""
    table = _table(device_index)
    out, seen = [], set()
    for source, layer in (("runtime", _runtime), ("cache", table.cached), ("builtin", table.builtin)):
        for family_name, layer_entries in layer.items():
            for key, entry in layer_entries.items():
                if (family_name, key) not in seen:
                    seen.add((family_name, key))
                    out.append((family_name, key, source, entry))
    return sorted(out, key=lambda row: row[:2])


def table_location(device_index: int | None = None) -> tuple[dict, Path]:
    """(fingerprint, cache file path) of the table that lookups use."""
    table = _table(device_index)
    return table.fingerprint, table.path


# --- changes ---------------------------------------------------------------------------

def _invalidate() -> None:
    _memo.clear()
    for table in _tables.values():
        table.resolved = None


def register(family: str, mapping: dict) -> None:
    """Install entries for this process only, above the cache file and built-ins.

    ``mapping``: key (or problem) -> config object, config dict, or ``BASELINE``. Nothing is
    written to disk. ValueError for an unknown family, a bad key, or a config outside the
    family's pruned space for that key.
    """
    fam = get_family(family)
    parsed = {}
    for key_or_problem, value in mapping.items():
        key = _key(family, key_or_problem)
        if value == BASELINE or isinstance(value, dict):
            winner = value
        else:
            winner = fam.config_to_dict(value)
        parsed[key] = store.parse_entry(family, key, {"winner": winner, "measured": {"source": "register"}})
    _runtime.setdefault(family, {}).update(parsed)
    _invalidate()


def unregister(family: str, keys=None) -> None:
    """Drop runtime registrations of ``family`` (the given keys or problems, or all)."""
    get_family(family)
    layer = _runtime.get(family, {})
    for key in list(layer) if keys is None else [_key(family, k) for k in keys]:
        layer.pop(key, None)
    _invalidate()


def record(family: str, updates: dict[str, dict], device_index: int | None = None) -> None:
    """Persist sweep results (key -> raw entry) in the cache file of the device's
    fingerprint and make them visible to lookups in this process at once."""
    table = _table(device_index)
    table.cached = store.save(table.path, table.fingerprint, {family: updates})
    _invalidate()


def export_builtin(dest_dir, device_index: int | None = None) -> Path:
    """Write the entries this machine measured (its cache file) as the built-in table for
    its GPU, ``<dest_dir>/<gpu>-<capability>.json``; returns the path. Copy the file into
    ``tilefuse/tuning/builtin/`` to ship it."""
    table = _table(device_index)
    raw = {family: {key: store.raw_entry(family, entry) for key, entry in layer.items()}
           for family, layer in table.cached.items()}
    path = Path(dest_dir) / store.builtin_name(table.fingerprint)
    store.write_document(path, table.fingerprint, raw)
    return path


def reload() -> None:
    """Forget what was read from files (they are read again on the next lookup), e.g. after
    other processes swept keys. Runtime registrations stay."""
    _memo.clear()
    _tables.clear()
