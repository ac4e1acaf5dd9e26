"""Table files: fingerprint, JSON schema, validation, locked atomic writes, built-in tables.

One JSON file per fingerprint (GPU name and compute capability, CUDA and driver
(``device.driver_version``), torch, triton,
tilefuse, and a hash of the built-in families' kernel sources) in ``cache_dir()``
(``$TILEFUSE_CACHE_DIR``, default ``~/.cache/tilefuse``)::

    {"schema": 1,
     "fingerprint": {"gpu": "NVIDIA H200", "capability": "sm90", ...},
     "families": {"dyt": {"fwd-M1048576-N64-x2": {"winner": {"block_m": 64, ...},
                                                   "measured": {"speedup": 1.04, ...}},
                          "bwd-M1048576-N64-x2": {"winner": "baseline", "measured": {...}}},
                  "my_op": {...}},
     "sources": {"my_op": "3f2a..."}}

``sources`` holds a hash of each registered (not built-in) family's ``source_files``, written
with its entries: a family registered at runtime must not change the fingerprint (every other
family's entries would stay behind in the old file), so its entries are used only while its
sources hash as they did when they were measured; otherwise they are reported, not used, kept
as they are, and replaced by the next write of that family.

Nothing read from a file is trusted: a file that is not a regular file (a FIFO, a directory:
never opened in a way that could block), is larger than ``MAX_FILE_BYTES``, is not UTF-8, does
not parse, nests deeper than ``MAX_DEPTH``, has another schema or another fingerprint is
reported once and ignored, and so is any entry whose key or config does not validate against
the running code (a config's fields must have their declared types and it must lie in the
family's pruned space for its key). A file that exists but cannot be opened or read (another
user's file in a shared folder, too many open files) is reported and ignored too, but says
nothing about its content: a write never moves it aside or replaces it, it fails
(``TableUnreadable``). A ``measured`` field that is not what the sweep writes is reported and
dropped, the entry kept (it is for display only). Entries of a family this process does not
know (another program registered it) are reported, not used, and kept in the file as they are
by every write. Writers hold a file lock, merge with what is on disk and replace the file
atomically, so concurrent sweeps never tear the file and never drop each other's entries.

Built-in tables (``tuning/builtin/<gpu>-<capability>.json``, same format) are matched by GPU
and capability only: their entries were measured with some other build, but a stale entry still
names a valid config (validated like any other), so at worst it is slower than a fresh sweep,
and a local sweep overrides it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import glob
import hashlib
import itertools
import json
import math
import os
import re
import stat
import tempfile
import time
import warnings
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from ..device import driver_version
from .family import (BASELINE, BUILTIN_FAMILIES, argument_error, family_names,
                     get_family)

SCHEMA = 1
LOCK_TIMEOUT_S = 120.0
_ENTRY_FIELDS = {"winner", "measured"}
# A table is a few levels deep (document, families, family, entry, measured, spread) and a few
# hundred entries; far larger or deeper files are not tables. The depth bound also keeps every
# document this process accepts writable again (json's encoder recurses).
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 32


class TableWarning(UserWarning):
    """A table file or entry was unreadable or invalid and has been ignored."""


class TableUnreadable(OSError):
    """A table file exists but could not be opened or read (no permission, too many open files,
    an I/O error). That is a fact about this process, not about the file's content, which may
    well be a good table: it is reported and ignored when loading, and a write fails rather than
    move it aside or replace it with only its own entries."""


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
    """The folder of the cache files, an absolute path: ``$TILEFUSE_CACHE_DIR`` (``~`` expanded;
    a relative path is taken from the working directory when the table is read, so a later
    ``chdir`` does not move the table), else ``~/.cache/tilefuse``.

    A process without a home folder (``HOME`` unset and its uid in no passwd database, as in a
    container run under an arbitrary uid) uses ``<tempdir>/tilefuse-<uid>`` instead, made
    private to the user (0700), and says so once; if that folder is another user's, a private
    folder of this process's own (its tables do not outlive it). Set ``TILEFUSE_CACHE_DIR`` to
    keep the tables elsewhere; a leading ``~`` in it then stands for that fallback folder
    (``~/x`` is ``<tempdir>/tilefuse-<uid>/x``, said once), not for a folder named ``~`` in
    the working directory."""
    configured = os.environ.get("TILEFUSE_CACHE_DIR")
    if configured:
        expanded = os.path.expanduser(configured)
        # expanduser leaves a leading ~ as it is where it finds no home folder (the string is
        # tested: Path("./~/x").parts drops the "." and would read as ~/x)
        if expanded == "~" or expanded.startswith("~" + os.sep):
            return _homeless_cache_dir(Path(expanded).parts[1:])
        return Path(os.path.abspath(expanded))
    try:
        home = Path.home()
    except RuntimeError:   # no HOME and no passwd entry: os.path.expanduser gives up too
        return _homeless_cache_dir()
    return Path(os.path.abspath(home / ".cache" / "tilefuse"))


@functools.lru_cache(maxsize=None)
def _homeless_cache_dir(tail: tuple[str, ...] | None = None) -> Path:
    """``cache_dir()`` without a home folder: the fallback folder (_homeless_folder), or for a
    TILEFUSE_CACHE_DIR of ``~`` followed by the components ``tail``, that path below it; said
    once per path."""
    folder, uid = _homeless_folder()
    if tail is None:
        path, where = folder, f"tuning tables are kept in {folder}; set TILEFUSE_CACHE_DIR to keep them elsewhere"
    else:
        path = Path(os.path.abspath(folder.joinpath(*tail)))
        where = f"TILEFUSE_CACHE_DIR's ~ is taken as {folder}: tuning tables are kept in {path}"
    report(f"tilefuse: no home folder (HOME is unset and uid {uid} has no passwd entry): {where}")
    return path


@functools.lru_cache(maxsize=None)
def _homeless_folder() -> tuple[Path, int | None]:
    """The fallback folder without a home folder and this process's uid: decided once per
    process (a private fallback folder made again on every table read would scatter the
    tables)."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    folder = Path(tempfile.gettempdir()) / f"tilefuse-{'user' if uid is None else uid}"
    try:
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
        st = os.lstat(folder)
        # the temp folder is shared: a folder of that name someone else made (or a link they
        # planted) would let them hold the lock or read and replace this user's tables
        ours = stat.S_ISDIR(st.st_mode) and (uid is None or st.st_uid == uid)
    except OSError:   # no usable temp folder: reads find nothing there and writes fail, naming it
        ours = True
    if not ours:
        try:
            folder = Path(tempfile.mkdtemp(prefix=f"{folder.name}-"))
        except OSError:
            pass
    return folder, uid


@functools.lru_cache(maxsize=None)
def kernel_source_hash() -> str:
    """sha256 over the source files of every family shipped with tilefuse (the fingerprint's
    ``kernels``; a registered family's are ``family_source_hash``)."""
    digest = hashlib.sha256()
    for name in sorted(BUILTIN_FAMILIES):
        for path in get_family(name).source_files:
            digest.update(f"{name}/{Path(path).parent.name}/{Path(path).name}\0".encode())
            digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:16]


def family_source_hash(name: str) -> str | None:
    """sha256 over the ``source_files`` of registered family ``name``, recorded in a cache
    file's ``sources`` beside its entries; None for a built-in family (its sources are in the
    fingerprint). Read on every load and write, not once per process: a family registered
    again after an edit of its files gets the new hash."""
    if name in BUILTIN_FAMILIES:
        return None
    digest = hashlib.sha256()
    for path in getattr(get_family(name), "source_files", None) or ():
        path = Path(path)
        digest.update(f"{path.parent.name}/{path.name}\0".encode())
        try:
            digest.update(path.read_bytes())
        except OSError as exc:   # a named file this process cannot read: hashed as such
            digest.update(f"\0unreadable ({type(exc).__name__})\0".encode())
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
        cuda, driver = torch.version.cuda, driver_version()
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

def _brief(value, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _number(v) -> bool:
    """A finite number a float holds (an int too large for a float is not: displays format it
    as one)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


# What a sweep writes in ``measured`` (SweepResult.entry; "source" from register), as
# (check, description). Other fields are kept as they are and not displayed.
MEASURED_FIELDS = {
    "speedup": (_number, "a number"),
    "spread": (lambda v: isinstance(v, list) and len(v) == 2 and all(map(_number, v)),
               "a list of two numbers"),
    "baseline": (lambda v: isinstance(v, str), "a string"),
    "baseline_us": (_number, "a number"),
    "best": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "best_speedup": (lambda v: v is None or _number(v), "a number or null"),
    "timed": (_count, "a count"),
    "rejected": (_count, "a count"),
    "skipped": (_count, "a count"),
    "rounds": (_count, "a count"),
    "wall_s": (_number, "a number"),
    "source": (lambda v: isinstance(v, str), "a string"),
    "validation": (lambda v: isinstance(v, dict), "an object"),
    "sweep_problem": (lambda v: isinstance(v, str), "a string"),
}


def _check_measured(measured) -> tuple[dict, list[str]]:
    """(``measured`` without its ill-typed fields, one message per field dropped)."""
    if not isinstance(measured, dict):
        return {}, [f"'measured' must be an object, got {_brief(measured)}"]
    clean, problems = {}, []
    for name, value in measured.items():
        check = MEASURED_FIELDS.get(name)
        if check is not None and not check[0](value):
            problems.append(f"measured field {name!r} must be {check[1]}, got {_brief(value)}")
        else:
            clean[name] = value
    return clean, problems


def parse_entry(family_name: str, key: str, raw, where: str | None = None) -> Entry:
    """Validate one entry against the running code: ValueError (or TypeError for a config
    field of the wrong type) says why it is unusable.

    A ``measured`` that is not what sweeps write is an error too, unless ``where`` (the file
    the entry was read from) is given: then each bad field is reported and dropped, and the
    entry, whose winner is what runs, is kept.
    """
    family = get_family(family_name)
    if not isinstance(key, str):
        raise TypeError(f"a key is a str, got {_brief(key)} ({type(key).__name__})")
    family.check_key(key)   # ValueError for a key this family cannot produce, or not as it writes it
    if not isinstance(raw, dict) or not set(raw) <= _ENTRY_FIELDS or "winner" not in raw:
        raise ValueError(f"an entry is an object with 'winner' and optional 'measured', got {_brief(raw)}")
    measured, problems = _check_measured(raw.get("measured", {}))
    if problems and where is None:
        raise ValueError("; ".join(problems))
    winner = raw["winner"]
    if isinstance(winner, str) and winner == BASELINE:
        config = BASELINE
    elif not isinstance(winner, dict):
        raise ValueError(f"'winner' must be {BASELINE!r} or a config object, got {_brief(winner)}")
    else:
        config = family.config_from_dict(winner)
        if not family.is_valid(key, config):
            raise ValueError(f"config {family.describe(config)} is not in the config space of {key}")
        family.check_entry(key, config, measured)
    for problem in problems:   # the entry is used: say what of it is not
        report(f"tilefuse tuning table {where}: entry {family_name}/{key}: ignoring {problem}")
    return Entry(config, measured)


def raw_entry(family_name: str, entry: Entry) -> dict:
    winner = entry.winner if entry.winner == BASELINE else \
        get_family(family_name).config_to_dict(entry.winner)
    return {"winner": winner, "measured": entry.measured}


def _known(family_name: str) -> bool:
    """Whether this process knows the family (built in, or registered)."""
    try:
        get_family(family_name)
    except (TypeError, ValueError):
        return False
    return True


def _families_of(doc, expect) -> dict:
    """The raw ``families`` mapping of a table document; ValueError if the document is not
    a table of this schema whose fingerprint satisfies ``expect``."""
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    schema = doc.get("schema")
    if type(schema) is not int or schema != SCHEMA:   # not true, not 1.0
        raise ValueError(f"schema {_brief(schema)}, this tilefuse reads schema {SCHEMA}")
    if not expect(doc.get("fingerprint")):
        raise ValueError(f"fingerprint {_brief(doc.get('fingerprint'), 400)} is not this machine's")
    families = doc.get("families")
    if not isinstance(families, dict) or not all(isinstance(v, dict) for v in families.values()):
        raise ValueError("'families' must map family names to objects of entries")
    return families


def _sources_of(doc: dict, where: str) -> dict[str, str]:
    """A cache file's ``sources`` (family -> source hash); what is not a string is reported
    and left out (the entries it would vouch for are then not used)."""
    raw = doc.get("sources", {})
    if not isinstance(raw, dict):
        report(f"tilefuse tuning table {where}: ignoring 'sources': must be an object, got {_brief(raw)}")
        return {}
    sources = {name: value for name, value in raw.items() if isinstance(value, str)}
    for name in raw.keys() - sources.keys():
        report(f"tilefuse tuning table {where}: ignoring the source hash of {name!r}: must be a "
               f"string, got {_brief(raw[name])}")
    return sources


def _source_problem(family_name: str, sources: dict[str, str]) -> str | None:
    """Why the entries of known family ``family_name`` in a file whose ``sources`` are
    ``sources`` do not hold for this process's code (None: they do)."""
    try:
        current = family_source_hash(family_name)
    except Exception as exc:   # a family's source_files is its own code: never a crash here
        return f"its source_files cannot be hashed ({type(exc).__name__}: {exc})"
    if current is None or sources.get(family_name) == current:
        return None
    if family_name not in sources:
        return "no hash of its source_files was recorded with them"
    return "they were measured with other source_files of it (changed since)"


def _entries_of(n: int) -> str:
    return f"the {n} entr{'y' if n == 1 else 'ies'}"


def _valid_entries(families: dict, where: str, sources: dict[str, str] | None = None) -> Entries:
    """The entries of ``families`` that validate; each invalid one is reported, and so is
    (once) each family this process does not know, whose entries are not used. With
    ``sources`` (a cache file's), the entries of a registered family are used only where its
    source hash matches (built-in tables hold entries measured by other builds, by design)."""
    out: Entries = {}
    for family_name, entries in families.items():
        if not _known(family_name):
            n = len(entries)
            report(f"tilefuse tuning table {where}: {_entries_of(n)} of tuning "
                   f"family {family_name!r} {'is' if n == 1 else 'are'} not used (no such family in this process: "
                   f"known: {', '.join(family_names())}); writes keep them in the file")
            continue
        why = None if sources is None else _source_problem(family_name, sources)
        if why is not None:
            n = len(entries)
            report(f"tilefuse tuning table {where}: {_entries_of(n)} of tuning family "
                   f"{family_name!r} {'is' if n == 1 else 'are'} not used: {why}; the next write "
                   f"of {family_name!r} entries replaces them")
            continue
        for key, raw in entries.items():
            try:
                out.setdefault(family_name, {})[key] = parse_entry(family_name, key, raw, where)
            except Exception as exc:   # a file is never trusted, whatever the family's code raises
                why = str(exc) if isinstance(exc, (TypeError, ValueError)) else f"{type(exc).__name__}: {exc}"
                report(f"tilefuse tuning table {where}: ignoring entry {family_name}/{key}: {why}")
    return out


def _check_depth(doc) -> None:
    """ValueError if ``doc`` nests lists and objects deeper than MAX_DEPTH (iterative)."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise ValueError(f"nested deeper than {MAX_DEPTH} levels: not a tuning table")
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))


def _parse_json(data: bytes):
    """The JSON document in ``data``; ValueError saying why it is not one we accept."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text: {exc}") from None
    try:
        doc = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested too deeply to parse (more than {MAX_DEPTH} levels): "
                         f"not a tuning table") from None
    except ValueError as exc:   # JSONDecodeError, and an integer literal beyond int's str limit
        raise ValueError(f"not valid JSON (corrupt or truncated): {exc}") from None
    _check_depth(doc)
    return doc


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _read_bytes(path: Path) -> bytes | None:
    """The content of the regular file ``path``, None when nothing is there; ValueError when
    what is there is not a table file (not a regular file, too large), TableUnreadable when it
    cannot be opened or read. Opened non-blocking and checked with fstat before any read, so a
    FIFO or a device at the path is reported instead of waiting for a writer."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) \
        | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TableUnreadable(f"cannot be opened: {exc.strerror or exc}") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _kind(mode)
            raise ValueError(f"{kind}, not a regular file")
        chunks, size = [], 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_FILE_BYTES:
            raise ValueError(f"larger than {MAX_FILE_BYTES} bytes: not a tuning table")
        return b"".join(chunks)
    except OSError as exc:
        raise TableUnreadable(f"unreadable: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def _move_aside(path: Path, why: str) -> None:
    """Rename ``path`` to a name of its own beside it (``<name>.invalid-<time>-<n>``, never one
    an earlier move took: two moves in one second each keep their file) and report it."""
    stamp = time.strftime('%Y%m%d-%H%M%S')
    for n in itertools.count():
        aside = path.with_name(f"{path.name}.invalid-{stamp}" + (f"-{n}" if n else ""))
        if not os.path.lexists(aside):
            break
    os.replace(path, aside)
    report(f"tilefuse tuning table {path} was unusable ({why}); moved to {aside}")


def _usable_lock_path(lock: Path) -> str:
    """The lock file's path, after moving aside whatever non-regular file lies there (a FIFO or
    a directory: filelock versions differ on them, from working to EINVAL or blocking)."""
    try:
        mode = os.lstat(lock).st_mode
    except FileNotFoundError:
        return str(lock)
    if not stat.S_ISREG(mode):
        kind = _kind(mode)
        _move_aside(lock, f"{kind} at the lock path")
    return str(lock)


def _read_document(path: Path):
    """The parsed JSON of ``path``, None when it does not exist; ValueError if unusable (a file
    whose JSON is ``null`` too: None means no file), TableUnreadable if it cannot be read."""
    data = _read_bytes(path)
    if data is None:
        return None
    doc = _parse_json(data)
    if doc is None:
        raise ValueError("not a JSON object: null")
    return doc


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
    except (ValueError, TableUnreadable) as exc:
        report(f"tilefuse tuning table {path} ignored: {exc}")
        return {}
    return _valid_entries(families, str(path), _sources_of(doc, str(path)))


def builtin_dir():
    """The folder of built-in tables shipped in the package (``tuning/builtin``)."""
    return resources.files(__package__).joinpath("builtin")


def load_builtin(fp: dict) -> Entries:
    """The valid entries of the built-in table for ``fp``'s GPU (empty if none ships)."""
    name = builtin_name(fp)
    resource = builtin_dir().joinpath(name)
    where = f"built-in {name}"
    try:
        if isinstance(resource, Path):
            doc = _read_document(resource)      # an installed package: a plain folder
            if doc is None:
                return {}
        else:                                   # a zipped package: a resource, not a path
            if not resource.is_file():
                return {}
            data = resource.read_bytes()
            if len(data) > MAX_FILE_BYTES:
                raise ValueError(f"larger than {MAX_FILE_BYTES} bytes: not a tuning table")
            doc = _parse_json(data)
        families = _families_of(doc, _same_gpu(fp))
    except (OSError, ValueError) as exc:
        report(f"tilefuse tuning table {where} ignored: {exc}")
        return {}
    return _valid_entries(families, where)


# --- writing ---------------------------------------------------------------------------

def _umask() -> int:
    mask = os.umask(0o022)   # reading the umask means setting it: put it back at once
    os.umask(mask)
    return mask


def write_document(path: Path, fp: dict, families: dict, sources: dict[str, str] | None = None) -> None:
    """Write a table (family -> key -> raw entry; ``sources``: registered family -> source
    hash, if any) to a temp file in ``path``'s folder, fsync, then rename it over ``path``: a
    reader sees the old file or the new one, never a part."""
    doc = {"schema": SCHEMA, "fingerprint": fp, "families": families}
    if sources:
        doc["sources"] = sources
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        # mkstemp makes the file 0600 whatever the umask: give it an ordinary file's mode, so
        # a shared cache folder or an exported table stays readable as other files there are
        os.fchmod(fd, 0o666 & ~_umask())
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
    one loaded it), keep its valid entries, and exactly as they are the entries of families
    this process does not know (another program wrote them; it may read them again) and of
    registered families whose source hash is not this process's, unless ``updates`` holds
    that family (its fresh entries replace them), apply ``updates`` (they win on equal keys),
    write atomically. A file whose content cannot be used is moved aside to
    ``<name>.invalid-<time>`` so it can be inspected, and reported; a file that cannot be
    opened or read is left as it is, and the write fails with TableUnreadable (an OSError).
    """
    from filelock import FileLock

    if not isinstance(updates, dict):
        raise TypeError(f"updates must be a dict of family -> {{key: entry}}, got {_brief(updates)}")
    for family_name, entries in updates.items():
        get_family(family_name)
        if not isinstance(entries, dict):
            raise TypeError(f"the updates of family {family_name!r} must be a dict of key -> entry, "
                            f"got {_brief(entries)}")
        for key, raw in entries.items():
            try:   # never write what could not be read back
                parse_entry(family_name, key, raw)
            except (TypeError, ValueError) as exc:
                raise argument_error(exc, f"cannot record {family_name}/{_brief(key)}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(_usable_lock_path(Path(str(path) + ".lock")), timeout=LOCK_TIMEOUT_S):
        try:
            doc = _read_document(path)
            on_disk = {} if doc is None else _families_of(doc, _same_print(fp))
            sources = {} if doc is None else _sources_of(doc, str(path))
        except TableUnreadable as exc:
            raise TableUnreadable(f"tilefuse tuning table {path} {exc}: left as it is, nothing "
                                  f"recorded") from exc
        except ValueError as exc:
            _move_aside(path, str(exc))
            on_disk, sources = {}, {}
        current = _valid_entries(on_disk, str(path), sources)
        kept = [name for name in on_disk if name not in updates
                and (not _known(name) or _source_problem(name, sources) is not None)]
        merged = {name: dict(on_disk[name]) for name in kept}
        merged_sources = {name: sources[name] for name in kept if name in sources}
        merged.update({name: {key: raw_entry(name, e) for key, e in entries.items()}
                       for name, entries in current.items()})
        for family_name, entries in updates.items():
            merged.setdefault(family_name, {}).update(entries)
        for name in merged.keys() - set(kept):
            source_hash = family_source_hash(name)
            if source_hash is not None:
                merged_sources[name] = source_hash
        _remove_orphaned_temp_files(path)
        write_document(path, fp, merged, merged_sources)
    return _valid_entries(merged, str(path), merged_sources)


def _remove_orphaned_temp_files(path: Path) -> None:
    """Delete write_document's temp files of ``path`` that a killed writer left (each a whole
    copy of the table). Called under the file's lock, which every saving writer holds while its
    temp file exists, so any such file is an orphan."""
    for orphan in path.parent.glob(glob.escape(path.name) + ".*.tmp"):
        with contextlib.suppress(OSError):
            orphan.unlink()
