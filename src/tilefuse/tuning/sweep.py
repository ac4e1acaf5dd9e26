"""Sweep one key: check each candidate, prove it engaged, time it against the baseline in
interleaved rounds, choose a winner with a margin, record the result.

The rules (docs/design.md, "The tuning mechanism"):

- Check before timing: each candidate runs on fresh random inputs, with every fresh allocation
  poisoned with NaN, next to the baseline on the same inputs; the family compares (bitwise or
  by its derived tolerance). Non-finite output or a mismatch rejects the candidate. The check
  runs the family's ``check_problem``, a size of the same key that leaves partial last tiles
  (dyt: an odd row count of the key's bucket; so2: one edge more), so a config wrong only
  there is rejected; timing runs the key's own size.
- Engagement: every run must launch the kernels the family names for that choice, both when
  checked and when warmed up for timing. Otherwise a policy level or a guard sent it down
  another path, and the sweep raises instead of timing the same code twice.
- Timing (``timing``, the harness `tilefuse check` and benchmarks/ use too): baseline and
  candidates are sampled in a rotating order, one sample each per round, on rotating input
  sets larger than the L2 cache, short calls replayed from CUDA graphs; a candidate's speedup
  is the median over rounds of baseline/candidate from the same round, with the
  interquartile range as its spread.
- Choice: a candidate must beat the baseline by its margin (1% tile, 3% route), and the best
  timed candidate of every simpler route (``TuningFamily.route_rank``) by the route margin: a
  fused kernel 1% faster than the fastest relay tiling does not win. Among those within 1% of
  the fastest, the simplest wins.
- Failures: a resource error (out of shared memory/registers/resources, CUDA OOM) skips that
  candidate and is counted, whether its check, its warm-up or a timed round raised it; any
  other exception aborts the key, records nothing, and is raised naming the candidate. An
  implementation bug is never recorded as "baseline won".
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import statistics
import tempfile
import time
import warnings
from typing import Any, Callable

import torch
from tqdm.auto import tqdm

from .. import launches, policy
from ..utils import SharedOverride, type_name
from . import table
from .family import BASELINE, MARGINS, ROUTE, TuningFamily, family_argument, get_family, resolve_key
from .timing import CudaTimer, Timer, interleave

ROUNDS = 10
# Configs whose speedups are within this fraction of the best count as tied.
TIE = 0.01

TIMED, REJECTED, SKIPPED = "timed", "rejected", "skipped"


class SweepError(RuntimeError):
    """A sweep was aborted; nothing was recorded for its key."""


class EngagementError(SweepError):
    """A choice ran without launching its kernels (routed elsewhere by a policy or guard)."""


# Phrases of the errors Triton, ptxas and the CUDA driver give when a config asks for more
# shared memory, registers or resources than the GPU has: properties of the config, not bugs.
_RESOURCE_MESSAGE = re.compile(
    r"out of resource|too many resources requested|shared memory|too much shared data|registers",
    re.IGNORECASE)


def is_resource_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the config asks for more than the GPU has (skip the candidate), not
    that the code is wrong (abort the key). A kernel that does not compile is a bug, whatever
    its message holds: Triton's CompilationError quotes the kernel's source lines, whose
    comments may say "registers" or "shared memory"."""
    try:
        from triton.compiler.errors import CompilationError
        from triton.errors import TritonError
        from triton.runtime.errors import OutOfResources
    except ImportError:  # without Triton nothing raises its errors
        TritonError = OutOfResources = CompilationError = type("NoTritonError", (Exception,), {})
    if isinstance(exc, (torch.OutOfMemoryError, OutOfResources)):
        return True
    if isinstance(exc, CompilationError):
        return False
    return isinstance(exc, (RuntimeError, TritonError)) and bool(_RESOURCE_MESSAGE.search(str(exc)))


def _poison_apply():
    saved = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
             torch.utils.deterministic.fill_uninitialized_memory)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    return saved


def _poison_restore(saved):
    enabled, warn_only, fill = saved
    torch.utils.deterministic.fill_uninitialized_memory = fill
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


_poison_override = SharedOverride(_poison_apply, _poison_restore)


@contextlib.contextmanager
def poisoned_allocations():
    """Inside the block, ``torch.empty``-style allocations come back filled with NaN (integer
    tensors: their maximum), so an output element a kernel fails to write shows up as NaN.

    This is PyTorch's deterministic mode with ``fill_uninitialized_memory`` (warn-only, so
    ops without a deterministic implementation warn instead of failing; those warnings are
    silenced here). Process-wide state, held while any block is open in any thread and
    restored when the last closes (utils.SharedOverride: sweeps checking in two threads).
    """
    with _poison_override(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*deterministic implementation.*")
        yield


@dataclasses.dataclass
class CandidateResult:
    name: str
    choice: Any
    status: str                              # TIMED, REJECTED or SKIPPED
    reason: str = ""                         # why rejected or skipped
    median_s: float | None = None            # median seconds per call over the rounds
    speedup: float | None = None             # median of per-round baseline/candidate times
    spread: tuple[float, float] | None = None  # interquartile range of those ratios
    validation: dict | None = None           # the family's validation record (TuningFamily.validate)


@dataclasses.dataclass
class SweepResult:
    family: str
    key: str
    problem: Any
    winner: Any                              # a config, or BASELINE
    baseline: CandidateResult                # the baseline as timed (speedup 1 by definition)
    candidates: list[CandidateResult]
    rounds: int
    wall_s: float
    resized: str | None = None               # the problem swept, where it is not the key's own
                                             # (the family made it smaller; a model's problem)

    def with_status(self, status: str) -> list[CandidateResult]:
        return [c for c in self.candidates if c.status == status]

    @property
    def winner_result(self) -> CandidateResult:
        if self.winner == BASELINE:
            return self.baseline
        return next(c for c in self.candidates if c.choice == self.winner and c.status == TIMED)

    @property
    def best(self) -> CandidateResult | None:
        """The fastest timed candidate (it lost if it missed a margin: the baseline's, or a
        simpler route's)."""
        timed = self.with_status(TIMED)
        return max(timed, key=lambda c: c.speedup) if timed else None

    def entry(self) -> dict:
        """The raw table entry this sweep records."""
        family = get_family(self.family)
        win, best = self.winner_result, self.best
        return {
            "winner": BASELINE if self.winner == BASELINE else family.config_to_dict(self.winner),
            "measured": {
                "speedup": round(win.speedup, 4), "spread": [round(v, 4) for v in win.spread],
                "baseline": self.baseline.name, "baseline_us": round(self.baseline.median_s * 1e6, 3),
                "best": best.name if best else None,
                "best_speedup": round(best.speedup, 4) if best else None,
                "timed": len(self.with_status(TIMED)), "rejected": len(self.with_status(REJECTED)),
                "skipped": len(self.with_status(SKIPPED)), "rounds": self.rounds,
                "wall_s": round(self.wall_s, 2),
                **({"sweep_problem": self.resized} if self.resized is not None else {}),
                **({"validation": win.validation} if win.validation is not None else {}),
            },
        }


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def choose_winner(family: TuningFamily, timed: list[CandidateResult]):
    """BASELINE unless a candidate is eligible: it beats the baseline by its margin and, where
    its ``route_rank`` is above others', the fastest timed candidate of each lower rank by the
    route margin (whether or not that one is eligible itself: the unfused route is recorded
    when fusion does not win by the margin). Among eligible candidates within ``TIE`` of the
    best eligible speedup, the simplest."""
    ranks = {id(c): family.route_rank(c.choice) for c in timed}
    fastest: dict[int, float] = {}   # route rank -> the best speedup timed at it
    for c in timed:
        fastest[ranks[id(c)]] = max(fastest.get(ranks[id(c)], c.speedup), c.speedup)

    def beats_simpler_routes(c: CandidateResult) -> bool:
        return all(c.speedup >= best * (1.0 + MARGINS[ROUTE]) for rank, best in fastest.items()
                   if rank < ranks[id(c)])

    eligible = [c for c in timed
                if c.speedup >= 1.0 + MARGINS[family.change(c.choice)] and beats_simpler_routes(c)]
    if not eligible:
        return BASELINE
    best = max(c.speedup for c in eligible)
    close = [c for c in eligible if c.speedup * (1.0 + TIE) >= best]
    return min(close, key=lambda c: family.complexity(c.choice)).choice


def default_device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _device_index(device: torch.device) -> int:
    if device.type != "cuda":
        return -1
    return torch.cuda.current_device() if device.index is None else device.index


def _made_current(device: torch.device):
    """A block with ``device`` the current CUDA device (nothing to do for another device):
    tilefuse's launchers, like Triton's, launch on the current device, so a sweep on another
    one would check and warm up its candidates where it does not time them."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def covered_keys(device=None) -> set[tuple[str, str]]:
    """The (family, key) pairs covered in the table a sweep on ``device`` records into
    (default: the current CUDA device's): the keys a sweep there skips unless forced.
    ``is_covered`` reads the current device's table, another one where ``device`` is a GPU of
    another model (a fingerprint of its own)."""
    device = default_device() if device is None else torch.device(device)
    return {(family, key) for family, key, _, _ in table.entries(_device_index(device))}


def check_rounds(rounds, caller: str) -> int:
    """``rounds``, the timing rounds of a sweep, checked before any work: TypeError unless an
    int (a bool is not one), ValueError below 1 (a speedup is a median over rounds)."""
    if isinstance(rounds, bool) or not isinstance(rounds, int):
        raise TypeError(f"{caller}: rounds must be an int, got {rounds!r} ({type(rounds).__name__})")
    if rounds < 1:
        raise ValueError(f"{caller}: rounds must be at least 1, got {rounds}")
    return rounds


def check_flags(caller: str, **flags) -> None:
    """A sweep's on/off arguments (``record``, ``force``, ``progress``), checked before any
    work: TypeError naming the first that is not a bool (the string "False" is truthy: a
    ``record="False"`` would write the table)."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise TypeError(f"{caller}: {name} must be a bool, got {value!r} ({type_name(value)})")


class _Sweep:
    """State of one key's sweep; ``sweep_key`` is the entry point."""

    def __init__(self, family: TuningFamily, problem, device: torch.device, timer: Timer,
                 rounds: int, seed: int):
        self.family, self.problem, self.device = family, problem, device
        self.key = family.key(problem)
        self.check_problem = family.check_problem(problem)
        if family.key(self.check_problem) != self.key:
            raise SweepError(f"{family.name}: check_problem made {self.check_problem!r} of {problem!r}, whose key "
                             f"differs ({family.key(self.check_problem)!r}, not {self.key!r}); nothing swept")
        self.baseline = family.baseline(problem)
        self.timer, self.rounds, self.seed = timer, rounds, seed

    def abort(self, name: str, exc: BaseException) -> SweepError:
        return SweepError(f"{self.family.name} {self.key}: {name} raised {type(exc).__name__}: "
                          f"{exc}; sweep aborted, nothing recorded")

    def run_engaged(self, name: str, choice, inputs, problem=None) -> dict[str, torch.Tensor]:
        problem = self.problem if problem is None else problem
        with launches.counting() as launched:
            outputs = self.family.run(problem, choice, inputs)
        missing = [k for k in self.family.expected_launches(problem, choice) if not launched[k]]
        if missing:
            raise EngagementError(
                f"{self.family.name} {self.key}: {name} did not launch {', '.join(missing)} "
                f"(launched: {dict(launched) or 'nothing'}); a policy level or a guard routed it "
                f"to another path, so timing it would time that path. Sweep aborted, nothing recorded")
        return outputs

    def check(self, candidate, name: str, seed: int) -> tuple[list[str], dict | None]:
        """(mismatches of ``candidate`` against the baseline on fresh inputs of the family's
        check_problem (empty: passed), the family's validation record). Exceptions from the
        candidate propagate; the baseline's, and the family's while it makes the inputs, abort
        the sweep (they are no candidate's failure)."""
        problem = self.check_problem
        try:
            inputs = self.family.make_inputs(problem, self.device, seed)
        except Exception as exc:   # noqa: BLE001  reported as the sweep's failure, with its cause
            raise self.abort("making the check inputs", exc) from exc
        with poisoned_allocations():
            want = self._guarded("baseline", self.baseline,
                                 lambda: self.run_engaged("baseline", self.baseline, inputs, problem))
            got = self.run_engaged(name, candidate, inputs, problem)
        for out_name, t in want.items():
            if not torch.isfinite(t).all():
                raise SweepError(f"{self.family.name} {self.key}: the baseline's {out_name} is not "
                                 f"finite on finite inputs; sweep aborted, nothing recorded")
        bad = [f"{n}: non-finite values (unwritten elements or overflow)"
               for n, t in got.items() if not torch.isfinite(t).all()]
        if bad:
            return bad, None
        with poisoned_allocations():   # the runs a family's validate makes itself (so2's level 3) too
            return self.family.validate(problem, candidate, inputs, got, want)

    def timed_sampler(self, name: str, choice, buffers: list) -> Callable[[], float]:
        for inputs in buffers:   # warm-up, and engagement proven in the timed setting itself
            self.run_engaged(name, choice, inputs)
        return self.timer.prepare(name, lambda i: self.family.run(self.problem, choice, buffers[i]),
                                  len(buffers))

    def run(self, progress: bool) -> SweepResult:
        start = time.perf_counter()
        family, problem, baseline = self.family, self.problem, self.baseline
        candidates = family.sweep_candidates(problem)
        results: list[CandidateResult] = []
        bar = tqdm(total=len(candidates) + self.rounds, desc=f"{family.name} {self.key}",
                   unit="step", leave=False, disable=not progress)
        try:
            passed = []   # (choice, validation record)
            for i, choice in enumerate(candidates):
                name = family.describe(choice)
                outcome = self._guarded(name, choice, lambda: self.check(choice, name, self.seed + i))
                if isinstance(outcome, CandidateResult):
                    results.append(outcome)
                elif outcome[0]:
                    results.append(CandidateResult(name, choice, REJECTED, "; ".join(outcome[0])))
                else:
                    passed.append((choice, outcome[1]))
                bar.update()

            buffers = self.timing_inputs(self.seed + len(candidates))
            base_name = f"baseline {family.describe(baseline)}"
            samplers = {base_name: self._guarded(
                "baseline", baseline, lambda: self.timed_sampler("baseline", baseline, buffers))}
            choices, timed = {base_name: baseline}, []
            for choice, validation in passed:
                name = family.describe(choice)
                sampler = self._guarded(name, choice, lambda: self.timed_sampler(name, choice, buffers))
                if isinstance(sampler, CandidateResult):
                    results.append(sampler)
                else:
                    samplers[name], choices[name] = sampler, choice
                    timed.append(CandidateResult(name, choice, TIMED, validation=validation))

            def failed(name: str, exc: Exception):
                """A timed sample's exception meets the guard of the checks and warm-ups: a
                candidate's resource error skips it (interleave drops its sampler), any
                other exception aborts the key."""
                results.append(self._failure(name, choices[name], exc))

            samples = interleave(samplers, self.rounds, bar.update, on_error=failed)
            timed = [c for c in timed if not isinstance(samples[c.name], Exception)]
        finally:
            bar.close()

        base_samples = samples[base_name]
        base = CandidateResult(base_name, baseline, TIMED, median_s=statistics.median(base_samples),
                               speedup=1.0)
        base.spread = _quartiles([base.median_s / s for s in base_samples])
        for c in timed:
            ratios = [b / s for b, s in zip(base_samples, samples[c.name])]
            c.median_s = statistics.median(samples[c.name])
            c.speedup, c.spread = statistics.median(ratios), _quartiles(ratios)
        results.extend(timed)
        return SweepResult(family.name, self.key, problem, choose_winner(family, timed), base,
                           results, self.rounds, time.perf_counter() - start)

    def timing_inputs(self, seed: int) -> list:
        """The input sets the timer rotates through (``Timer.buffers`` of them). Where the
        device runs out of memory making them, fewer: the timer asks for several only so a
        pass overflows the L2 cache, which inputs too large to fit twice do alone. Where not
        even one fits, the key aborts with a ``SweepError`` (the next key still runs)."""
        want = self.timer.buffers(self.family.input_bytes(self.problem))
        buffers = []
        for j in range(want):
            try:
                buffers.append(self.family.make_inputs(self.problem, self.device, seed + j))
            except Exception as exc:
                if not buffers or not is_resource_error(exc):
                    raise self.abort("making the timing inputs", exc) from exc
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()
                break
        return buffers

    def _guarded(self, name: str, choice, step: Callable[[], Any]):
        """``step()``, or the SKIPPED result of the exception it raised (``_failure``)."""
        try:
            return step()
        except SweepError:
            raise
        except Exception as exc:
            return self._failure(name, choice, exc)

    def _failure(self, name: str, choice, exc: Exception) -> CandidateResult:
        """What ``exc``, raised by ``name``'s check, warm-up or timed sample, means: for a
        candidate a resource error is a SKIPPED result; any other exception, and any from the
        baseline (without which nothing can be compared or timed), aborts the sweep naming
        ``name`` (raises the SweepError)."""
        if choice is self.baseline or not is_resource_error(exc):
            raise self.abort(name, exc) from exc
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        return CandidateResult(name, choice, SKIPPED, f"{type(exc).__name__}: {exc}")


def sweep_key(family: str, key_or_problem, *, device=None, timer: Timer | None = None,
              rounds: int = ROUNDS, record: bool = True, progress: bool = False,
              seed: int = 0) -> SweepResult:
    """Sweep one key of ``family`` and (with ``record``) write the result to the table.

    Args:
        family: family name ("dyt").
        key_or_problem: a table key (swept at its representative problem) or a problem.
        device: where to run (default: the current CUDA device; CPU only under Triton's
            interpreter and with an injected ``timer``). A CUDA device is made current for
            the sweep (``torch.cuda.device``): the kernels launch on the current device.
        timer: a ``Timer``; default ``CudaTimer`` on the device.
        rounds: interleaved timing rounds, an int >= 1 (TypeError / ValueError naming it
            before any work otherwise).
        record: write the winner (a config or BASELINE) to the cache file and the table.

    The problem swept is the family's ``sweep_problem`` of it on ``device`` (the same key,
    smaller where the representative problem would not fit the device's memory; recorded in
    the entry). Runs at level >= 2 (the level that consults the table). Raises ``SweepError`` (and
    records nothing) when the key cannot be swept honestly: kernels cannot run on the device,
    a choice did not engage, the baseline failed, or a candidate raised a non-resource error;
    also when ``record`` could not write the table file (the error says what won).
    """
    fam = family_argument(family, "sweep_key")
    problem = resolve_key(fam, key_or_problem, "sweep_key: key_or_problem")[1]
    check_rounds(rounds, "sweep_key")
    check_flags("sweep_key", record=record, progress=progress)
    device = default_device() if device is None else torch.device(device)
    if record:
        _check_recordable(fam, device)
    try:
        result = _sweep_swept(fam, problem, device, timer, rounds, seed, progress)
    except SweepError:
        raise
    except Exception as exc:   # noqa: BLE001  the family's own code (its baseline, candidates, sizes...)
        try:
            key = fam.key(problem)
        except Exception:   # noqa: BLE001  the error names the problem instead
            key = repr(problem)
        raise SweepError(f"{fam.name} {key}: the sweep raised {type(exc).__name__}: {exc}; "
                         f"sweep aborted, nothing recorded") from exc
    if record:
        record_result(fam, result, device)
    return result


def _sweep_swept(fam: TuningFamily, problem, device: torch.device, timer: Timer | None, rounds: int, seed: int,
                 progress: bool) -> SweepResult:
    """sweep_key's sweep of ``problem`` (its family's sweep_problem of it) on ``device``, not
    recorded. An exception that is not a SweepError (the family's own code outside a
    candidate's guarded steps: its baseline, candidates, names, sizes) is sweep_key's to
    turn into one, so that sweep_each goes on with the next key."""
    with _made_current(device), policy.level(max(policy.get_level(), 2)):
        swept = fam.sweep_problem(problem, device)
        if swept != problem and fam.key(swept) != fam.key(problem):
            raise SweepError(f"{fam.name}: sweep_problem made {swept!r} of {problem!r}, whose key differs "
                             f"({fam.key(swept)!r}, not {fam.key(problem)!r}); nothing swept")
        if not policy.kernels_enabled(device):
            raise SweepError(f"{fam.name}: tilefuse kernels cannot run on {device} (no Triton, or "
                             f"a CPU without TRITON_INTERPRET=1); a sweep would time the fallback")
        if timer is None:
            if device.type != "cuda":
                raise SweepError(f"{fam.name}: timing needs a CUDA device, got {device}; pass "
                                 f"timer= to sweep elsewhere (tests)")
            timer = CudaTimer(device)
        result = _Sweep(fam, swept, device, timer, rounds, seed).run(progress)
        if swept != problem or swept != fam.problem_for_key(result.key):
            result.resized = repr(swept)
    return result


def _check_recordable(family: TuningFamily, device: torch.device) -> None:
    """SweepError, before any timing, where ``device``'s table file could not be written: its
    folder cannot be made or holds no new file (TILEFUSE_CACHE_DIR naming a file, a folder
    without write permission). Found only when the result is recorded, it would cost the whole
    sweep, and a run over many keys would sweep every one to record none."""
    folder = table.table_location(_device_index(device))[1].parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
            pass
    except OSError as exc:
        configured = os.environ.get("TILEFUSE_CACHE_DIR")
        setting = (f"TILEFUSE_CACHE_DIR={configured!r}" if configured
                   else "TILEFUSE_CACHE_DIR unset (the default folder)")
        raise SweepError(f"{family.name}: the tuning table's folder {folder} cannot hold a table file "
                         f"({type(exc).__name__}: {exc}); {setting}: set TILEFUSE_CACHE_DIR to a writable "
                         f"folder; nothing swept") from exc


def record_result(family: TuningFamily, result: SweepResult, device: torch.device) -> None:
    """Write a sweep's result to the table of ``device``'s GPU; SweepError if the file could
    not be written (nothing was recorded)."""
    try:
        table.record(family.name, {result.key: result.entry()}, _device_index(device))
    except OSError as exc:   # an unwritable cache folder, a lock held too long (filelock.Timeout)
        raise SweepError(f"{family.name} {result.key}: swept (winner {family.describe(result.winner)}) but the table "
                         f"file could not be written, so nothing was recorded: {exc}") from exc
