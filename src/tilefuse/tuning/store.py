"""Table files: fingerprint, JSON schema, validation, locked atomic writes, built-in tables.

One JSON file per fingerprint (GPU name and compute capability, CUDA and driver, torch, triton,
tilefuse, and a hash of the tuned families' kernel sources) in ``$TILEFUSE_CACHE_DIR``
(default ``~/.cache/tilefuse``)::

    {"schema": 1,
     "fingerprint": {"gpu": "NVIDIA H200", "capability": "sm90", ...},
     "families": {"dyt": {"fwd-M1048576-N64-x2": {"winner": {"block_m": 64, ...},
                                                   "measured": {"speedup": 1.04, ...}},
                          "bwd-M1048576-N64-x2": {"winner": "baseline", "measured": {...}}}}}

Nothing read from a file is trusted: a file that does not parse, has another schema or another
fingerprint is reported once and ignored, and so is any entry whose family, key or config does
not validate against the running code (a config must lie in the family's pruned space for its
key). Writers hold a file lock, merge with what is on disk and replace the file atomically, so
concurrent sweeps never tear the file and never drop each other's entries.

Built-in tables (``tuning/builtin/<gpu>-<capability>.json``, same format) are matched by GPU
and capability only: their entries were measured with some other build, but a stale entry still
names a valid config (validated like any other), so at worst it is slower than a fresh sweep,
and a local sweep overrides it.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import hashlib
import json
import os
import re
import tempfile
import time
import warnings
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from .family import BASELINE, BUILTIN_FAMILIES, get_family

SCHEMA = 1
LOCK_TIMEOUT_S = 120.0
_ENTRY_FIELDS = {"winner", "measured"}


class TableWarning(UserWarning):
    """A table file or entry was unreadable or invalid and has been ignored."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """A table entry: ``winner`` is a config or ``BASELINE``; ``measured`` is what the sweep
    that produced it reported (speedup, spread, counts, wall time), for display only."""

    winner: Any
    measured: dict


Entries = dict[str, dict[str, Entry]]   # family -> key -> entry

_reported: set[str] = set()


def report(message: str) -> None:
    """Warn about an ignored file or entry, once per message per process."""
    if message not in _reported:
        _reported.add(message)
        warnings.warn(message, TableWarning, stacklevel=3)


# --- fingerprint -----------------------------------------------------------------------

def cache_dir() -> Path:
    return Path(os.environ.get("TILEFUSE_CACHE_DIR") or Path.home() / ".cache" / "tilefuse")


def _driver_version() -> str | None:
    try:
        version = ctypes.c_int()
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return f"{version.value // 1000}.{version.value % 1000 // 10}"


@functools.lru_cache(maxsize=None)
def kernel_source_hash() -> str:
    """sha256 over the source files of every family shipped with tilefuse."""
    digest = hashlib.sha256()
    for name in sorted(BUILTIN_FAMILIES):
        for path in get_family(name).source_files:
            digest.update(f"{name}/{Path(path).name}\0".encode())
            digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def fingerprint(device_index: int) -> dict:
    """What a table's measurements depend on, for CUDA device ``device_index`` (-1: no
    CUDA device; the kernels run in Triton's interpreter)."""
    from .. import __version__
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    if device_index >= 0:
        props = torch.cuda.get_device_properties(device_index)
        gpu, capability = props.name, f"sm{props.major}{props.minor}"
        cuda, driver = torch.version.cuda, _driver_version()
    else:
        gpu, capability, cuda, driver = "cpu", "interpreter", None, None
    return {"gpu": gpu, "capability": capability, "cuda": cuda, "driver": driver,
            "torch": torch.__version__, "triton": triton_version, "tilefuse": __version__,
            "kernels": kernel_source_hash()}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def builtin_name(fp: dict) -> str:
    """File name of the built-in table for ``fp``'s GPU, e.g. ``nvidia-h200-sm90.json``."""
    return f"{_slug(fp['gpu'])}-{fp['capability']}.json"


def cache_path(fp: dict) -> Path:
    """The cache file of fingerprint ``fp``: readable GPU prefix, hash of the whole print."""
    digest = hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / f"{_slug(fp['gpu'])}-{fp['capability']}-{digest}.json"


# --- validation ------------------------------------------------------------------------

def parse_entry(family_name: str, key: str, raw) -> Entry:
    """Validate one stored entry against the running code; ValueError says why not."""
    family = get_family(family_name)
    family.problem_for_key(key)   # ValueError for a key this family cannot produce
    if not isinstance(raw, dict) or not set(raw) <= _ENTRY_FIELDS or "winner" not in raw:
        raise ValueError(f"an entry is an object with 'winner' and optional 'measured', got {raw!r}")
    measured = raw.get("measured", {})
    if not isinstance(measured, dict):
        raise ValueError(f"'measured' must be an object, got {measured!r}")
    winner = raw["winner"]
    if winner == BASELINE:
        return Entry(BASELINE, measured)
    if not isinstance(winner, dict):
        raise ValueError(f"'winner' must be {BASELINE!r} or a config object, got {winner!r}")
    config = family.config_from_dict(winner)
    if not family.is_valid(key, config):
        raise ValueError(f"config {family.describe(config)} is not in the config space of {key}")
    return Entry(config, measured)


def raw_entry(family_name: str, entry: Entry) -> dict:
    winner = entry.winner if entry.winner == BASELINE else \
        get_family(family_name).config_to_dict(entry.winner)
    return {"winner": winner, "measured": entry.measured}


def _families_of(doc, expect) -> dict:
    """The raw ``families`` mapping of a table document; ValueError if the document is not
    a table of this schema whose fingerprint satisfies ``expect``."""
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"schema {doc.get('schema')!r}, this tilefuse reads schema {SCHEMA}")
    if not expect(doc.get("fingerprint")):
        raise ValueError(f"fingerprint {doc.get('fingerprint')!r} is not this machine's")
    families = doc.get("families")
    if not isinstance(families, dict) or not all(isinstance(v, dict) for v in families.values()):
        raise ValueError("'families' must map family names to objects of entries")
    return families


def _valid_entries(families: dict, where: str) -> Entries:
    """The entries of ``families`` that validate; each invalid one is reported."""
    out: Entries = {}
    for family_name, entries in families.items():
        for key, raw in entries.items():
            try:
                out.setdefault(family_name, {})[key] = parse_entry(family_name, key, raw)
            except ValueError as exc:
                report(f"tilefuse tuning table {where}: ignoring entry {family_name}/{key}: {exc}")
    return out


def _read_document(path: Path):
    """The parsed JSON of ``path``, None when it does not exist; ValueError if unreadable."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"unreadable: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON (corrupt or truncated): {exc}") from None


def _same_print(fp: dict):
    return lambda found: found == fp


def _same_gpu(fp: dict):
    return lambda found: (isinstance(found, dict) and found.get("gpu") == fp["gpu"]
                          and found.get("capability") == fp["capability"])


def load(path: Path, fp: dict) -> Entries:
    """The valid entries of the cache file for ``fp`` (empty if absent or invalid)."""
    try:
        doc = _read_document(path)
        if doc is None:
            return {}
        families = _families_of(doc, _same_print(fp))
    except ValueError as exc:
        report(f"tilefuse tuning table {path} ignored: {exc}")
        return {}
    return _valid_entries(families, str(path))


def builtin_dir():
    """The folder of built-in tables shipped in the package (``tuning/builtin``)."""
    return resources.files(__package__).joinpath("builtin")


def load_builtin(fp: dict) -> Entries:
    """The valid entries of the built-in table for ``fp``'s GPU (empty if none ships)."""
    name = builtin_name(fp)
    resource = builtin_dir().joinpath(name)
    where = f"built-in {name}"
    try:
        if not resource.is_file():
            return {}
        doc = json.loads(resource.read_text(encoding="utf-8"))
        families = _families_of(doc, _same_gpu(fp))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        report(f"tilefuse tuning table {where} ignored: {exc}")
        return {}
    return _valid_entries(families, where)


# --- writing ---------------------------------------------------------------------------

def write_document(path: Path, fp: dict, families: dict) -> None:
    """Write a table (family -> key -> raw entry) to a temp file in ``path``'s folder, fsync,
    then rename it over ``path``: a reader sees the old file or the new one, never a part."""
    doc = {"schema": SCHEMA, "fingerprint": fp, "families": families}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save(path: Path, fp: dict, updates: dict[str, dict[str, dict]]) -> Entries:
    """Merge ``updates`` (family -> key -> raw entry) into the file at ``path`` and return
    the merged valid entries.

    Under the file lock: read what is on disk (other processes may have written since this
    one loaded it), keep its valid entries, apply ``updates`` (they win on equal keys), write
    atomically. A file that cannot be used is moved aside to ``<name>.invalid-<time>`` so it
    can be inspected, and reported.
    """
    from filelock import FileLock

    for family_name, entries in updates.items():
        for key, raw in entries.items():
            parse_entry(family_name, key, raw)   # never write what could not be read back
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT_S):
        try:
            doc = _read_document(path)
            current = {} if doc is None else _valid_entries(
                _families_of(doc, _same_print(fp)), str(path))
        except ValueError as exc:
            aside = path.with_name(f"{path.name}.invalid-{time.strftime('%Y%m%d-%H%M%S')}")
            os.replace(path, aside)
            report(f"tilefuse tuning table {path} was unusable ({exc}); moved to {aside}")
            current = {}
        merged = {name: {key: raw_entry(name, e) for key, e in entries.items()}
                  for name, entries in current.items()}
        for family_name, entries in updates.items():
            merged.setdefault(family_name, {}).update(entries)
        write_document(path, fp, merged)
    return _valid_entries(merged, str(path))
