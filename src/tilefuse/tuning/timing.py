"""The one timing harness: the tuner's sweeps, `tilefuse check` / `tilefuse bench` and the
programs in benchmarks/ all time GPU work with it.

The protocol is the tuning rules of docs/design.md:

- warm-up before any sample (compilation, autotuning, allocator pools);
- CUDA graphs for short calls, so the host's launch costs stay out of the samples;
- in the tuner's sweeps, whose candidates take an input set's index: rotating input sets
  whose total is larger than twice the L2 cache (``Timer.buffers``), so no sample reads
  inputs the previous call left in L2. ``interleaved``'s zero-argument providers (check,
  bench, benchmarks/) run on the one input set their caller made: the caller sizes it (at
  the shapes they time, the inputs are tens of MB to GB, most beyond the L2 cache);
- every choice sampled once per round, the order rotated by one each round (``interleave``),
  so drift in clocks or temperature spreads over every choice instead of favouring a
  position;
- medians over rounds; a ratio between two choices taken within each round (``ratio``), then
  its median.

Layers:

- ``Timer``: turns "call this on input set i" into a sampler that returns seconds per call.
  ``CudaTimer`` is the real one (CUDA events); tests inject a fake with the same two methods,
  so everything but the GPU clock runs on the CPU; ``WallTimer`` times the host's clock
  (CPU smoke runs of benchmarks/ in Triton's interpreter).
- ``interleave``: the rounds over samplers (the sweep computes its ratios from its result).
- ``interleaved``: zero-argument providers -> ``Timing`` per provider (or the exception a
  provider raised while warming up or timed); what `tilefuse check` and benchmarks/ call.

Why not ``triton.testing.do_bench_cudagraph`` or ``torch.utils.benchmark``: the first times
one function at a time (a graph of n unrolled calls, replayed 10 times back to back, captured
anew on every call), so it cannot interleave choices in rotating rounds, take ratios within a
round or rotate input sets; the second times the host's wall clock around synchronised loops
(no CUDA events, no graphs). Both would still need this module's protocol around them.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import Callable, Protocol

import torch

from ..utils import capture_cuda_graph

Call = Callable[[int], object]   # run the choice on input set i


def sync_if_cuda() -> None:
    """Wait for the GPU where this process uses one (nothing to wait for otherwise)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class Timer(Protocol):
    def buffers(self, input_bytes: int) -> int:
        """How many input sets to rotate through for inputs of ``input_bytes`` each."""

    def prepare(self, label: str, call: Call, n_buffers: int) -> Callable[[], float]:
        """Set up timing of ``call`` (warm-up, graph capture) and return a sampler: each
        call of the sampler measures once and returns seconds per call of ``call``."""


class CudaTimer:
    """CUDA-event timing of launches on one device.

    - Warm-up: ``warmup`` eager passes over the input sets before anything is measured.
    - Rotation: ``buffers`` asks for enough input sets that one pass touches more than twice
      the L2 cache.
    - CUDA graphs: a call shorter than ``graph_below_s`` (measured eagerly after warm-up) is
      captured (one graph replays one call per input set) and replayed, so host launch
      overhead and the launchers' output allocations, which the graph turns into fixed
      addresses, stay out of the samples. Longer calls hide that overhead behind the GPU
      work and run eagerly. ``graph_below_s=math.inf``: always capture; ``0``: never.
      Every graph this timer captures shares one memory pool: its graphs replay one at a
      time and their outputs are discarded, so their temporaries need not stay reserved
      apart (a pool per graph held about 100 GiB at the so2 benchmark's lmax-6 shape).
    - Each sample repeats the step until it lasts ``min_sample_s`` (above the event
      resolution, ~1 us, and launch jitter), at least ``min_reps`` and at most ``max_reps``
      times.
    - ``settle_s``: each sample first runs the step, untimed, for about that long. Run back to
      back for a second or more, heavy GPU work reaches the board's power limit and the SM
      clock settles at a level that depends on the work (benchmarks/README.md, "The power
      cap"); with a settle time and samples of seconds, each provider is timed at its own
      sustained clock instead of the clock of whatever ran before it.

    ``device``: the CUDA device (default: the current one when ``prepare`` runs).
    """

    MAX_BUFFERS = 64

    def __init__(self, device: torch.device | str | None = None, *, min_sample_s: float = 1e-3,
                 graph_below_s: float = 2e-4, warmup: int = 3, min_reps: int = 1,
                 max_reps: int = 1_000_000, settle_s: float = 0.0):
        if not settle_s >= 0:
            raise ValueError(f"CudaTimer: settle_s must be >= 0, got {settle_s!r}")
        self.device = None if device is None else torch.device(device)
        self.min_sample_s = min_sample_s
        self.settle_s = settle_s
        self.graph_below_s = graph_below_s
        self.warmup = warmup
        self.min_reps, self.max_reps = min_reps, max_reps
        self._pool = None

    def _device(self) -> torch.device:
        return self.device if self.device is not None else torch.device("cuda", torch.cuda.current_device())

    def buffers(self, input_bytes: int) -> int:
        l2 = getattr(torch.cuda.get_device_properties(self._device()), "L2_cache_size", 0) or 64 << 20
        return max(1, min(self.MAX_BUFFERS, math.ceil(2 * l2 / max(input_bytes, 1))))

    @staticmethod
    def _seconds(step: Callable[[], object], reps: int) -> float:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            step()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def prepare(self, label: str, call: Call, n_buffers: int) -> Callable[[], float]:
        device = self._device()
        with torch.cuda.device(device):
            def eager():
                for i in range(n_buffers):
                    call(i)

            for _ in range(self.warmup):
                eager()
            torch.cuda.synchronize()
            step, per_pass = eager, None
            if 0 < self.graph_below_s < math.inf:
                per_pass = self._seconds(eager, 1)
            if self.graph_below_s == math.inf or (per_pass is not None and per_pass / n_buffers < self.graph_below_s):
                if self._pool is None:
                    self._pool = torch.cuda.graph_pool_handle()
                graph, _ = capture_cuda_graph(eager, self._pool)
                graph.replay()
                step, per_pass = graph.replay, None
            if per_pass is None:      # the step that is sampled, measured as it will run
                per_pass = self._seconds(step, 3) / 3
            reps = min(self.max_reps, max(self.min_reps, math.ceil(self.min_sample_s / max(per_pass, 1e-9))))
            settle = min(self.max_reps, math.ceil(self.settle_s / max(per_pass, 1e-9))) if self.settle_s else 0

        def sample() -> float:
            with torch.cuda.device(device):
                for _ in range(settle):   # enqueued before the start event: untimed
                    step()
                return self._seconds(step, reps) / (reps * n_buffers)

        return sample


class WallTimer:
    """Host wall clock around each pass (``time.perf_counter``; CUDA synchronised before and
    after where it is in use): the same protocol without CUDA events, for CPU smoke runs of
    benchmarks/ under Triton's interpreter. Its numbers time the interpreter, not a GPU."""

    def __init__(self, warmup: int = 1):
        self.warmup = warmup

    def buffers(self, input_bytes: int) -> int:
        return 1

    def prepare(self, label: str, call: Call, n_buffers: int) -> Callable[[], float]:
        def run():
            for i in range(n_buffers):
                call(i)

        for _ in range(self.warmup):
            run()

        def sample() -> float:
            sync_if_cuda()
            t0 = time.perf_counter()
            run()
            sync_if_cuda()
            return (time.perf_counter() - t0) / n_buffers

        return sample


def _check_rounds(rounds) -> None:
    if isinstance(rounds, bool) or not isinstance(rounds, int):
        raise TypeError(f"rounds must be an int >= 1, got {type(rounds).__name__}")
    if rounds < 1:
        raise ValueError(f"rounds must be an int >= 1, got {rounds}")


def interleave(samplers: dict[str, Callable[[], float]], rounds: int,
               after_round: Callable[[], object] = lambda: None,
               on_error: Callable[[str, Exception], object] = lambda name, exc: None
               ) -> dict[str, list[float] | Exception]:
    """One sample per sampler per round, the order rotated by one each round, so drift in
    clocks or temperature spreads over every choice instead of favouring a position.

    A sampler that raises (out of memory in its sample, say) takes no part in the later
    rounds, and its entry is the exception instead of its samples; the others go on.
    ``on_error(name, exc)`` is called as it happens: the caller decides what the failure
    means, and may stop the rounds by raising (the sweep aborts a key so). ``rounds``: an int
    of at least 1 (ValueError / TypeError naming it: with none there is no sample to report)."""
    _check_rounds(rounds)
    names = list(samplers)
    samples: dict[str, list[float] | Exception] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % max(len(names), 1)
        for name in names[shift:] + names[:shift]:
            if isinstance(samples[name], Exception):
                continue
            try:
                samples[name].append(samplers[name]())
            except Exception as exc:  # noqa: BLE001 - handed to the caller (on_error, the result)
                samples[name] = exc
                on_error(name, exc)
        after_round()
    return samples


@dataclasses.dataclass
class Timing:
    """One provider's per-call milliseconds over the rounds of ``interleaved``."""

    median_ms: float
    min_ms: float
    max_ms: float
    rounds: int
    samples_ms: tuple[float, ...] = ()     # per round, in round order

    @property
    def spread(self) -> float:
        """(max - min) / median over the rounds."""
        return (self.max_ms - self.min_ms) / self.median_ms if self.median_ms else 0.0


# The sustained protocol (benchmarks/README.md, "The power cap"): interleaved(**SUSTAINED) times
# each provider in alternating 2 s blocks, 0.5 s untimed then 1.5 s timed, so that each runs at
# its own clock under the GPU's power limit rather than at the clock of the providers' mix.
SUSTAINED = dict(target_ms=1500.0, settle_ms=500.0)


def ratio(base: Timing, other: Timing) -> float:
    """base / other per call, as the median of the per-round ratios of two providers timed in
    the same ``interleaved`` call (> 1: ``other`` is faster); medians' ratio where either
    has no per-round samples."""
    if base.samples_ms and len(base.samples_ms) == len(other.samples_ms):
        return statistics.median(b / o for b, o in zip(base.samples_ms, other.samples_ms))
    return base.median_ms / other.median_ms


def interleaved(providers: dict[str, Callable[[], object]], *, rounds: int = 7, target_ms: float = 25.0,
                graphs: bool | None = False, timer: Timer | None = None,
                settle_ms: float = 0.0) -> dict[str, Timing | Exception]:
    """Time each provider (a zero-argument callable) on the current CUDA device.

    Each provider is warmed up (compilation, autotuning). Then, over ``rounds`` rounds in
    rotating order (``interleave``), every provider is timed for about ``target_ms`` (at
    least 3 calls, at most 2000) with CUDA events, after ``settle_ms`` of untimed calls
    (CudaTimer's ``settle_s``: e.g. ``target_ms=1500, settle_ms=500`` times each provider at
    its own sustained clock under the power limit, in alternating 2 s blocks). ``graphs``: True
    captures each provider in a CUDA graph after warm-up and times its replays (device time
    only); False times eager calls (host costs included); None captures the calls shorter than
    0.2 ms, as the tuner does. The graphs of one call share a memory pool. ``timer``: a
    ``Timer`` to use instead (tests); ``target_ms`` and ``settle_ms`` are then its own.

    Returns per provider a ``Timing`` (per-call median, min, max and the per-round samples:
    ``ratio`` compares two providers within rounds), or the exception it raised while warming
    up or in a timed round (it then leaves the later rounds; the others go on): a failing
    provider is one row of the caller's report, not the end of it.
    """
    _check_rounds(rounds)   # before any warm-up: raising after minutes of compiles helps no one
    if timer is None:
        below = {True: math.inf, False: 0.0, None: 2e-4}[graphs]
        timer = CudaTimer(None, min_sample_s=target_ms * 1e-3, graph_below_s=below, warmup=1, min_reps=3,
                          max_reps=2000, settle_s=settle_ms * 1e-3)
    out: dict[str, Timing | Exception] = {}
    samplers: dict[str, Callable[[], float]] = {}
    for name, fn in providers.items():
        try:
            samplers[name] = timer.prepare(name, lambda i, fn=fn: fn(), 1)
        except Exception as exc:  # noqa: BLE001 - a failing peer is reported, not dropped
            sync_if_cuda()
            out[name] = exc
    for name, seconds in interleave(samplers, rounds, on_error=lambda name, exc: sync_if_cuda()).items():
        if isinstance(seconds, Exception):   # raised in a timed round: reported as in warm-up
            out[name] = seconds
            continue
        ms = tuple(s * 1e3 for s in seconds)
        out[name] = Timing(statistics.median(ms), min(ms), max(ms), len(ms), ms)
    return out
