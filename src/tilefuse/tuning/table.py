"""The in-memory tuning table: three-valued entries, layered, cheap to look up.

Each (family, key) is in one of three states:

- a config: a sweep found a candidate that beat the baseline by its margin, and the fastest
  candidate of every simpler route by the route margin (sweep.choose_winner); level >= 2 uses it;
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
import threading
from pathlib import Path
from typing import Any, Iterator, Mapping

import torch

from ..utils import ThreadBlocks
from . import store
from .family import BASELINE, argument_error, family_argument, get_family, resolve_key
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
        resolved = self.resolved
        if resolved is None:
            with _lock:   # the runtime layer changes under register / unregister
                resolved = {}
                for layer in (self.builtin, self.cached, _runtime):
                    for family_name, entries in layer.items():
                        for key, entry in entries.items():
                            resolved[(family_name, key)] = entry.winner
                self.resolved = resolved
        return resolved


_tables: dict[int, _DeviceTable] = {}
_runtime: Entries = {}
# registered() blocks open on a key: (family, key) -> [the entry before the first of them or
# _MISS, [(block token, its entry), ...] in the order they opened]. The key shows the newest
# open block's entry; when the last one closes, the entry before the first comes back. Blocks
# may close in any order (two threads' blocks overlap): each takes only its own entry away.
_open_blocks: dict[tuple[str, str], list] = {}
# collecting() blocks open: (the opening thread's ident, the dict it fills), in opening order.
_collectors = ThreadBlocks()
# (device, family, problem) -> lookup result: the launchers' per-call cost is one dict probe.
# Problems are frozen dataclasses; cleared by every change to any layer, and when it holds
# MEMO_MAX results (a problem may carry an exact size, dyt's row count: one result each).
_memo: dict = {}
MEMO_MAX = 4096
_MISS = object()
# Bumped by every change that can alter what a lookup returns or records (register, unregister,
# record, reload, entering collecting()); launchers that cache their lookups key on it.
_generation = 0
# Held by every change (the layers, the memo's clearing, the generation's bump) and by a
# lookup's slow path (resolving and memoising an answer), so that no thread memoises an answer
# read before a change after that change cleared the memo, and no thread sees the new
# generation beside the old memo (the bump comes last). A memo hit takes no lock.
_lock = threading.RLock()
# Serialises record()'s file writes and their installation (a write waits on the file lock,
# up to store.LOCK_TIMEOUT_S: under _lock that would stall every other thread's lookups).
_record_lock = threading.Lock()


def generation() -> int:
    """A counter that changes whenever a lookup might answer differently than before (or must
    be made again to be recorded, inside ``collecting()``): key a cache of lookup results on it."""
    return _generation


def _table(device_index: int | None = None, where: str = "device_index") -> _DeviceTable:
    index = _device_index() if device_index is None else device_index
    table = _tables.get(index) if type(index) is int else None
    if table is None:
        _check_device_index(index, where)
        with _lock:
            table = _tables.get(index)
            if table is None:
                table = _tables[index] = _DeviceTable(index)
    return table


def _check_device_index(index, where: str) -> None:
    if not isinstance(index, int) or isinstance(index, bool):
        raise TypeError(f"{where} must be an int (a CUDA device index, -1 for no CUDA device) or "
                        f"None, got {index!r} ({type(index).__name__})")
    count = torch.cuda.device_count() if _has_cuda() else 0
    if not -1 <= index < count:
        raise ValueError(f"{where} must be -1 (no CUDA device) or a CUDA device index below "
                         f"{count}, got {index}")


def _key(family_name: str, key_or_problem, caller: str, arg: str = "key_or_problem") -> str:
    """The validated table key of ``key_or_problem`` (a key or a problem of the family);
    TypeError / ValueError naming ``caller`` and the argument."""
    fam = family_argument(family_name, caller)
    return resolve_key(fam, key_or_problem, f"{caller}: {arg}")[0]


# --- lookup (hot path) -----------------------------------------------------------------

def lookup_config(family: str, problem):
    """The tuned config for ``problem`` in ``family``, or None: the key is absent (never
    swept) or its entry is ``BASELINE``. Either way the caller runs its baseline.

    Called by launchers at level >= 2. Inside ``collecting()`` the (family, key, problem)
    is also recorded, which is how ``tilefuse.tune(model, ...)`` learns a model's keys.
    """
    device = _device_index()
    if not _collectors.open:
        try:
            hit = _memo.get((device, family, problem), _MISS)
        except TypeError:   # unhashable: named below
            hit = _MISS
        if hit is not _MISS:
            return hit
    fam = family_argument(family, "lookup_config")
    if isinstance(problem, str):
        raise TypeError(f"lookup_config: problem must be a {family} problem, got the str {problem!r} "
                        f"(get_entry and is_covered take keys)")
    key = resolve_key(fam, problem, "lookup_config: problem")[0]
    try:
        hash(problem)
    except TypeError:
        raise TypeError(f"lookup_config: problem must be hashable (a frozen dataclass), got "
                        f"{problem!r} ({type(problem).__name__})") from None
    with _lock:
        for seen in _collectors.here():   # this thread's blocks (utils.blocks_here)
            seen.setdefault((family, key), problem)
        winner = _table(device).resolve().get((family, key))
        config = None if winner is None or winner == BASELINE else winner
        if len(_memo) >= MEMO_MAX:
            _memo.clear()
        _memo[(device, family, problem)] = config
    return config


@contextlib.contextmanager
def collecting() -> Iterator[dict]:
    """Yields a dict that fills with ``(family, key) -> first problem seen`` for every
    lookup made inside the block by this thread, and by autograd's device thread while it
    runs a backward (``utils.blocks_here``). Lookups of other Python threads are not
    recorded, their own backwards' included; a CUDA backward another thread starts meanwhile
    runs on autograd's device thread too, which cannot tell whose it runs: its lookups are."""
    global _generation
    seen: dict = {}
    with _lock:
        token = _collectors.add(seen)
        _generation += 1     # caches of lookups look up again, so the block sees (and records) them
    try:
        yield seen
    finally:
        with _lock:
            _collectors.remove(token)


def collecting_any() -> bool:
    """Whether a ``collecting()`` block is open in any thread: caches of lookups (the ops'
    call plans) are then not reused, so every call makes its lookups and the calling thread's
    blocks record them (a plan another thread built inside the block would hide them)."""
    return bool(_collectors.open)


# --- inspection ------------------------------------------------------------------------

def get_entry(family: str, key_or_problem):
    """The three-valued entry: a config, ``BASELINE``, or None when absent. TypeError or
    ValueError naming the argument for a family that is not one, or a key or problem that is
    not one of the family's."""
    return _entry(family, key_or_problem, "get_entry")


def get_measured(family: str, key_or_problem) -> dict | None:
    """The visible entry's ``measured`` record (what its sweep reported, e.g. a level-3 entry's
    accuracy validation), or None when the key has no entry. The same argument checks as
    get_entry."""
    key = _key(family, key_or_problem, "get_measured")
    table = _table()
    for layer in (_runtime, table.cached, table.builtin):
        entry = layer.get(family, {}).get(key)
        if entry is not None:
            return entry.measured
    return None


def is_covered(family: str, key_or_problem) -> bool:
    """Whether the key was swept (or registered): its entry is a config or ``BASELINE``.
    Only keys that are not covered get swept."""
    return _entry(family, key_or_problem, "is_covered") is not None


def _entry(family: str, key_or_problem, caller: str):
    return _table().resolve().get((family, _key(family, key_or_problem, caller)))


def entries(device_index: int | None = None) -> list[tuple[str, str, str, Entry]]:
    """Every visible entry as (family, key, source, entry), source being "runtime",
    "cache" or "builtin"; lower layers' entries hidden by a higher layer are left out."""
    table = _table(device_index, "entries: device_index")
    out, seen = [], set()
    with _lock:
        for source, layer in (("runtime", _runtime), ("cache", table.cached), ("builtin", table.builtin)):
            for family_name, layer_entries in layer.items():
                for key, entry in layer_entries.items():
                    if (family_name, key) not in seen:
                        seen.add((family_name, key))
                        out.append((family_name, key, source, entry))
    return sorted(out, key=lambda row: row[:2])


def coverage(family_names, device_index: int | None = None) -> dict:
    """How much of each family's standard grid (``default_problems``, what ``tilefuse tune
    --all-defaults`` sweeps) this device's table covers: {"gpu", "builtin" (the built-in
    file's name, or None where none ships for this GPU), "families": {name: {"grid", "covered"
    (keys with an entry in any layer), "builtin", "cache", "runtime" (entries per layer,
    visible ones only), "missing" (the grid's keys without an entry, in grid order)}}}. A key
    without an entry runs its family's baseline (the heuristic tiles, or a route: grouped_glu_mlp's
    compose route, so2's relay)."""
    if isinstance(family_names, str):
        raise TypeError(f"coverage: family_names must be a list of family names, got the str {family_names!r} "
                        f"(pass [{family_names!r}])")
    table = _table(device_index, "coverage: device_index")
    visible = {(f, k): source for f, k, source, _ in entries(device_index)}
    builtin = store.builtin_name(table.fingerprint)
    out = {"gpu": table.fingerprint.get("gpu"), "builtin": builtin if table.builtin else None, "families": {}}
    for name in family_names:
        family = get_family(name)
        grid = list(dict.fromkeys(family.key(p) for p in family.default_problems()))
        sources = [source for (f, _), source in visible.items() if f == name]
        out["families"][name] = {
            "grid": len(grid), "covered": sum((name, k) in visible for k in grid),
            **{layer: sources.count(layer) for layer in ("builtin", "cache", "runtime")},
            "missing": [k for k in grid if (name, k) not in visible]}
    return out


def table_location(device_index: int | None = None) -> tuple[dict, Path]:
    """(fingerprint, cache file path) of the table that lookups use."""
    table = _table(device_index, "table_location: device_index")
    return table.fingerprint, table.path


# --- changes ---------------------------------------------------------------------------

def _invalidate() -> None:
    """After a change (made holding _lock): the memo and the resolved views go, then the
    generation moves on (last: a thread that reads the new generation finds no old answer)."""
    global _generation
    with _lock:
        _memo.clear()
        for table in list(_tables.values()):
            table.resolved = None
        _generation += 1


def register(family: str, mapping: Mapping | None = None) -> None:
    """Install entries for this process only, above the cache file and built-ins.

    ``mapping``: key (or problem) -> config object, config dict, or ``BASELINE``. Nothing is
    written to disk, and nothing is installed unless every entry is valid: ValueError for an
    unknown family, a bad key, a config outside the family's pruned space for that key, or
    a value the config class rejects; TypeError for arguments of the wrong type (a family
    name that is not a str, a key that is neither a str nor a problem, a config field of the
    wrong type: ``block_m=64.0``). Each message names the argument or field.
    """
    _install(family, _parse(family, mapping))


def _parse(family: str, mapping) -> dict:
    """register's checked entries of ``mapping`` (key -> Entry), installing nothing: the
    family's own code (keys, configs) runs outside the table's lock."""
    if mapping is None:
        hint = " (the family name comes first)" if isinstance(family, Mapping) else ""
        raise TypeError(f"register(family, mapping): mapping is missing{hint}; e.g. "
                        f"register('dyt', {{key: config}}), got family={family!r}")
    fam = family_argument(family, "register")
    if not isinstance(mapping, Mapping):
        raise TypeError(f"register: mapping must be a dict of key (or problem) -> config, config "
                        f"dict or {BASELINE!r}, got {mapping!r} ({type(mapping).__name__})")
    cls = fam.config_class
    parsed = {}
    for key_or_problem, value in mapping.items():
        where = f"register({family!r}): key {key_or_problem!r}"
        key = resolve_key(fam, key_or_problem, where)[0]
        if isinstance(value, str):
            if value != BASELINE:
                raise ValueError(f"{where}: the value must be {BASELINE!r}, a config or a config "
                                 f"dict, got the str {value!r}")
            winner = BASELINE
        elif isinstance(value, Mapping):
            winner = dict(value)
        elif cls is not None and not isinstance(value, cls):
            raise TypeError(f"{where}: the value must be {BASELINE!r}, a {cls.__name__} or a dict of "
                            f"its fields, got {value!r} ({type(value).__name__})")
        else:
            try:
                winner = fam.config_to_dict(value)
            except Exception as exc:
                raise TypeError(f"{where}: the value {value!r} ({type(value).__name__}) is not a "
                                f"{fam.name} config: {exc}") from None
        try:
            parsed[key] = store.parse_entry(family, key, {"winner": winner, "measured": {"source": "register"}})
        except (TypeError, ValueError) as exc:
            raise argument_error(exc, where) from None
    return parsed


def register_entries(family: str, raw: Mapping) -> None:
    """Install whole entries (key -> {"winner": ..., "measured": ...}, as a table file holds
    them and sweeps make them) for this process only, like ``register``: what the distributed
    ``tune`` gives every rank, so an entry keeps the record its use depends on (a level-3
    variant's validation). Nothing is installed unless every entry is valid (ValueError)."""
    fam = family_argument(family, "register_entries")
    parsed = {}
    for key, entry in raw.items():
        try:
            parsed[key] = store.parse_entry(fam.name, key, entry)
        except (TypeError, ValueError) as exc:
            raise argument_error(exc, f"register_entries({family!r}): key {key!r}") from None
    _install(family, parsed)


def _install(family: str, parsed: dict) -> None:
    with _lock:
        _runtime.setdefault(family, {}).update(parsed)
        _invalidate()


def unregister(family: str, keys=None) -> None:
    """Drop runtime registrations of ``family`` (the given keys or problems, or all)."""
    family_argument(family, "unregister")
    if isinstance(keys, (str, bytes, Mapping)) or (keys is not None and not hasattr(keys, "__iter__")):
        raise TypeError(f"unregister: keys must be None or a list of keys or problems, got "
                        f"{keys!r} ({type(keys).__name__})")
    drop = None if keys is None else [_key(family, k, "unregister", "keys") for k in keys]
    with _lock:
        layer = _runtime.get(family, {})
        for key in list(layer) if drop is None else drop:
            layer.pop(key, None)
        _invalidate()


@contextlib.contextmanager
def registered(family: str, mapping: Mapping | None = None) -> Iterator[None]:
    """``register(family, mapping)`` for the duration of the block. On exit the family's runtime
    entries for those keys are what they were before: an entry registered earlier is put back,
    a key that had none has none. Blocks on one key may nest or overlap (two threads' blocks,
    closing in either order): while any is open the key holds the newest open block's entry,
    and when the last closes, the entry from before the first. A ``register`` of the key
    inside a block lasts until the block closes. Arguments are checked as ``register`` checks
    them, before anything changes."""
    if not isinstance(mapping, Mapping):
        _parse(family, mapping)      # raises register's TypeError
    for k in mapping:   # a bad key named as registered's
        _key(family, k, "registered", "mapping key")
    parsed = _parse(family, mapping)      # register's checks, before anything changes
    token = object()
    with _lock:
        layer = _runtime.setdefault(family, {})
        for key, entry in parsed.items():
            state = _open_blocks.setdefault((family, key), [layer.get(key, _MISS), []])
            state[1].append((token, entry))
        _install(family, parsed)
    try:
        yield
    finally:
        with _lock:
            layer = _runtime.setdefault(family, {})
            for key in parsed:
                before, blocks = _open_blocks[(family, key)]
                blocks[:] = [b for b in blocks if b[0] is not token]
                if blocks:
                    layer[key] = blocks[-1][1]
                else:
                    del _open_blocks[(family, key)]
                    if before is _MISS:
                        layer.pop(key, None)
                    else:
                        layer[key] = before
            _invalidate()


def record(family: str, updates: dict[str, dict], device_index: int | None = None) -> None:
    """Persist sweep results (key -> raw entry) in the cache file of the device's
    fingerprint and make them visible to lookups in this process at once, on every device of
    that fingerprint (identical GPUs share the file)."""
    family_argument(family, "record")
    if not isinstance(updates, dict):
        raise TypeError(f"record: updates must be a dict of key -> raw entry, got {updates!r} "
                        f"({type(updates).__name__})")
    table = _table(device_index, "record: device_index")
    with _record_lock:   # the file write outside _lock: lookups go on while it waits on the file lock
        try:
            cached = store.save(table.path, table.fingerprint, {family: updates})
        except (TypeError, ValueError) as exc:
            raise argument_error(exc, "record: updates") from None
        with _lock:
            for other in _tables.values():   # identical GPUs share the fingerprint, so the file
                if other.path == table.path:
                    other.cached = cached
            table.cached = cached
            _invalidate()


def export_builtin(dest_dir, device_index: int | None = None) -> Path:
    """Write this GPU's built-in table, ``<dest_dir>/<gpu>-<capability>.json``: the shipped
    built-in table's entries with the ones this machine measured (its cache file) over them;
    returns the path. Exported into ``tilefuse/tuning/builtin/`` it replaces the shipped file,
    keeping every key the cache does not hold (a sweep skips the keys the shipped table
    covers, so the cache alone would drop them)."""
    table = _table(device_index, "export_builtin: device_index")
    raw = {family: {key: store.raw_entry(family, entry) for key, entry in layer.items()}
           for family, layer in table.builtin.items()}
    for family, layer in table.cached.items():
        raw.setdefault(family, {}).update({key: store.raw_entry(family, entry) for key, entry in layer.items()})
    path = Path(dest_dir) / store.builtin_name(table.fingerprint)
    store.write_document(path, table.fingerprint, raw)
    return path


def forget_family(name: str) -> None:
    """family.unregister_family's part here: drop the family's runtime registrations and every
    memoised lookup (the generation moves on)."""
    with _lock:
        _runtime.pop(name, None)
        _invalidate()


def reload() -> None:
    """Forget what was read from files (they are read again on the next lookup), e.g. after
    other processes swept keys. Runtime registrations stay."""
    with _lock:
        _tables.clear()
        _invalidate()
