"""Sweeping many keys (in order, or one process per local GPU) and printing results."""

from __future__ import annotations

import base64
import importlib
import json
import multiprocessing
import io
import pickle
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import torch
from tqdm.auto import tqdm

from .. import isolate
from . import table
from .family import BASELINE, get_family
from .sweep import (REJECTED, ROUNDS, SKIPPED, TIMED, SweepError, SweepResult, default_device, record_result,
                    sweep_key)

Item = tuple[str, object]   # (family name, problem)


def sweep_each(items: list[Item], *, device=None, timer=None, rounds: int = ROUNDS,
               record: bool = True, progress: bool = True, position: int = 0
               ) -> tuple[list[SweepResult], list[SweepError]]:
    """Sweep ``items`` one after another. A key that aborts is collected in the errors and
    the others still run (their results are recorded); the caller decides how to fail."""
    results, errors = [], []
    label = f"tilefuse tune {device}" if device is not None else "tilefuse tune"
    # disable=None: tqdm shows the bar only on a terminal (not in logs or pipes).
    with tqdm(items, desc=label, unit="key", position=position, disable=None if progress else True) as bar:
        for family, problem in bar:
            try:
                results.append(sweep_key(family, problem, device=device, timer=timer, rounds=rounds,
                                         record=record, progress=progress))
            except SweepError as exc:
                errors.append(_without_frames(exc))
                _print_swept(exc)
            else:
                _print_swept(results[-1])
    return results, errors


def _print_swept(done: SweepResult | SweepError) -> None:
    """Lines per key as it finishes: a long sweep that is stopped keeps its evidence."""
    if isinstance(done, SweepError):
        tqdm.write(f"aborted: {done}")
    else:
        tqdm.write("swept: " + "  ".join(_result_row(done)))
        tqdm.write("timed:" + _timed_line(done))


def _without_frames(exc: BaseException) -> BaseException:
    """``exc`` with its tracebacks (and its causes') dropped: a kept error must not keep the
    aborted sweep's frames, and with them its inputs (GBs of device memory), alive while
    the next keys run."""
    seen = set()
    e = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        e = e.__cause__ or e.__context__
    return exc


def _worker(device: str, items: list[Item], position: int, options: dict):
    """One process per device: results travel back pickled, errors as their messages."""
    if torch.device(device).type == "cuda":
        torch.cuda.set_device(torch.device(device))
    results, errors = sweep_each(items, device=device, position=position, **options)
    return results, [str(e) for e in errors]


def sweep_parallel(items: list[Item], devices: list[str], *, isolate: bool = False, **options
                   ) -> tuple[list[SweepResult], list[SweepError]]:
    """Sweep ``items`` split round-robin over ``devices`` (e.g. ``["cuda:0", "cuda:1"]``),
    one spawned process each.

    Every worker records into the same cache file (same GPU model, same fingerprint); the
    file lock and merge-on-write keep all their entries. Afterwards this process re-reads
    the table. Families must be importable by name in the workers (built-in families are),
    and ``options`` (e.g. a timer) picklable. ``isolate`` (`tilefuse tune`'s default): the
    keys of each device run in a child process (tilefuse.isolate) that a key killing it, or
    losing its CUDA context, aborts alone: a fresh child sweeps the keys after it, one device
    included (sweep_isolated).
    """
    if isolate:
        return sweep_isolated(items, devices, **options)
    if len(devices) <= 1:
        return sweep_each(items, device=devices[0] if devices else None, **options)
    shards = [items[i::len(devices)] for i in range(len(devices))]
    results, errors = [], []
    with ProcessPoolExecutor(len(devices), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_worker, dev, shard, i, options)
                   for i, (dev, shard) in enumerate(zip(devices, shards)) if shard]
        for future in futures:
            shard_results, shard_errors = future.result()
            results += shard_results
            errors += [SweepError(message) for message in shard_errors]
    table.reload()
    return results, errors


class _ModulesPickler(pickle._Pickler):
    """pickle's Python pickler, noting the module of every class and function it pickles by
    reference (what the unpickling process must import)."""

    def __init__(self, file):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.modules = set()

    def save_global(self, obj, name=None):
        self.modules.add(getattr(obj, "__module__", None) or pickle.whichmodule(obj, name))
        return super().save_global(obj, name)


def check_sendable_timer(timer, caller: str) -> None:
    """An isolated sweep sends the timer to its child pickled: refuse, by name and before the
    model runs, one that does not pickle, or that refers to the caller's ``__main__`` (a class
    defined in the script being run: the child, a ``python -c`` process, cannot import it).
    ``caller`` names the API in the message."""
    pickler = _ModulesPickler(io.BytesIO())
    try:
        pickler.dump(timer)
    except Exception as exc:   # pickle raises PicklingError, AttributeError, TypeError, ...
        raise TypeError(f"{caller}: with isolate=True the timer must be picklable (it is sent to the sweep's "
                        f"child process), got {type(timer).__name__}: {exc}") from None
    if "__main__" in pickler.modules:
        raise TypeError(f"{caller}: with isolate=True the timer is sent to the sweep's child process, which cannot "
                        f"import what the running script (__main__) defines; {type(timer).__name__} refers to "
                        f"__main__: define it in a module the child can import")


def _indexed(device: str) -> str:
    """``device`` with its index: "cuda" alone is this process's current device (a child, a
    fresh process, would take its own, cuda:0)."""
    d = torch.device(device)
    return str(torch.device("cuda", torch.cuda.current_device())) if d.type == "cuda" and d.index is None else str(d)


def sweep_isolated(items: list[Item], devices: list[str], **options
                   ) -> tuple[list[SweepResult], list[SweepError]]:
    """sweep_parallel with each device's keys in a child process (tilefuse.isolate.run_parts),
    one per device at a time, driven by a thread each. A candidate that segfaults, or makes
    an illegal memory access that leaves the CUDA context unusable, aborts its own key (an
    error saying how) and a fresh child sweeps the keys after it; in one process every later
    key would fail on the dead context, or the whole sweep would end. The children sweep
    without recording; this process records each key's result once its child has come
    through it whole (a key whose process died or lost the context records nothing)."""
    check_sendable_timer(options.get("timer"), "sweep_isolated")
    devices = [_indexed(device) for device in devices]
    shards = [(device, items[i::len(devices)]) for i, device in enumerate(devices)] if devices else [(None, items)]
    shards = [(device, shard) for device, shard in shards if shard]
    results, errors = [], []
    with ThreadPoolExecutor(max(len(shards), 1)) as pool:
        futures = [pool.submit(_sweep_shard, device, shard, position, options)
                   for position, (device, shard) in enumerate(shards)]
        for future in futures:
            shard_results, shard_errors = future.result()
            results += shard_results
            errors += shard_errors
    table.reload()
    return results, errors


def _encode(value) -> str:
    return base64.b64encode(pickle.dumps(value)).decode("ascii")


def _decode(text: str):
    return pickle.loads(base64.b64decode(text))


def _sweep_shard(device, shard: list[Item], position: int, options: dict):
    """One device's keys through tilefuse.isolate.run_parts: (results, errors)."""
    options = dict(options)
    record = options.pop("record", True)
    # a family registered by a module of its own (not built in) is imported there first
    modules = {name: type(get_family(name)).__module__ for name, _ in shard}
    parts = [(f"{__name__}:_sweep_part", {"module": modules[name], "item": _encode((name, problem)),
                                          "device": device, "position": position,
                                          "options": _encode({**options, "record": False})})
             for name, problem in shard]
    results, errors = [], []
    for (name, problem), outcome in zip(shard, isolate.run_parts(parts)):
        key = f"{name} {get_family(name).key(problem)}"
        kind, done = _decode(outcome.value) if outcome.ok else ("aborted", None)
        if outcome.failed:
            said = f"{done}; then {outcome.why()}" if kind == "error" else f"{key}: aborted, {outcome.why()}"
            errors.append(SweepError(said))
            _print_swept(errors[-1])
        elif kind == "error":
            errors.append(SweepError(done))
        else:
            try:
                if record:
                    record_result(get_family(name), done, default_device() if device is None else torch.device(device))
            except SweepError as exc:
                errors.append(exc)
                _print_swept(exc)
            else:
                results.append(done)
    return results, errors


def _sweep_part(module: str, item: str, device, position: int, options: str) -> str:
    """In the child: sweep one key, print its lines, return ("result", SweepResult) or
    ("error", message), pickled (the part's value travels as JSON)."""
    importlib.import_module(module)
    name, problem = _decode(item)
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.set_device(torch.device(device))
    results, errors = sweep_each([(name, problem)], device=device, position=position, **_decode(options))
    return _encode(("result", results[0]) if results else ("error", str(errors[0])))


# --- printing ----------------------------------------------------------------------------

def _ratio(speedup, spread=None) -> str:
    """``1.234x [1.200-1.250]``; the speedup alone for an entry recorded without its spread."""
    return f"{speedup:.3f}x" + ("" if spread is None else f" [{spread[0]:.3f}-{spread[1]:.3f}]")


def _grid(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()
    return "\n".join([line(header), line(tuple("-" * w for w in widths)), *map(line, rows)])


def _result_row(r: SweepResult) -> tuple[str, ...]:
    """(family, key, winner, speedup [IQR], timed/rejected/skipped, wall s) of one sweep."""
    if r.winner == BASELINE:
        best = r.best
        speed = "1 (best " + (f"{best.name} {_ratio(best.speedup, best.spread)})" if best else "n/a)")
        winner = r.baseline.name
    else:
        win = r.winner_result
        speed, winner = _ratio(win.speedup, win.spread), win.name
    counts = "/".join(str(len(r.with_status(s))) for s in (TIMED, REJECTED, SKIPPED))
    return (r.family, r.key, winner, speed, counts, f"{r.wall_s:.1f}")


def _timed_line(r: SweepResult) -> str:
    """The baseline's median and every timed candidate's (median per call, speedup over the
    baseline [IQR]), fastest first."""
    line = [f"  {r.family} {r.key}: baseline {r.baseline.name} {r.baseline.median_s * 1e6:.1f} us"]
    line += [f"{c.name} {c.median_s * 1e6:.1f} us {_ratio(c.speedup, c.spread)}"
             for c in sorted(r.with_status(TIMED), key=lambda c: -c.speedup)]
    return "; ".join(line)


def format_results(results: list[SweepResult], errors: list[SweepError] = ()) -> str:
    """The end-of-sweep table: per key the winner, its speedup over the baseline with the
    interquartile range over rounds, the candidates timed/rejected/skipped, the wall time;
    then why candidates were rejected or skipped, and the keys that aborted. (Every timed
    candidate's time was printed with its key as the sweep went: sweep_each.)"""
    rows, notes = [], []
    for r in results:
        rows.append(_result_row(r))
        notes += [f"  {r.family} {r.key}: {c.status} {c.name}: {c.reason}"
                  for c in r.candidates if c.status in (REJECTED, SKIPPED)]
    out = _grid(("family", "key", "winner", "speedup [IQR]", "timed/rejected/skipped", "wall s"), rows)
    if notes:
        out += "\n\nrejected or skipped candidates:\n" + "\n".join(notes)
    if errors:
        out += "\n\naborted keys (nothing recorded):\n" + "\n".join(f"  {e}" for e in errors)
    return out


def format_table(device_index: int | None = None) -> str:
    """``tilefuse tune --show``: the fingerprint, the cache file, and every visible entry."""
    fingerprint, path = table.table_location(device_index)
    head = [f"fingerprint: {json.dumps(fingerprint, sort_keys=True)}", f"cache file:  {path}"]
    rows = []
    for family, key, source, entry in table.entries(device_index):
        measured = entry.measured
        winner = entry.winner if entry.winner == BASELINE else get_family(family).describe(entry.winner)
        speed = _ratio(measured["speedup"], measured.get("spread")) if "speedup" in measured else ""
        rows.append((family, key, source, winner, speed, str(measured.get("wall_s", ""))))
    if not rows:
        return "\n".join(head + ["", "no entries: every key runs its baseline (tilefuse tune sweeps them)"])
    return "\n".join(head + ["", _grid(("family", "key", "source", "winner", "speedup [IQR]", "wall s"), rows)])
