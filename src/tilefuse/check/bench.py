"""Timing for benchmarks: providers interleaved in rotating order, CUDA events, medians."""

from __future__ import annotations

import dataclasses
import statistics
from typing import Callable

import torch

from ..utils import capture_cuda_graph


@dataclasses.dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    rounds: int

    @property
    def spread(self) -> float:
        """(max - min) / median over the rounds."""
        return (self.max_ms - self.min_ms) / self.median_ms if self.median_ms else 0.0


def _time_calls(fn: Callable[[], object], iters: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters


def as_graph(fn: Callable[[], object], pool=None) -> Callable[[], object]:
    """Capture ``fn`` (already warmed up) in a CUDA graph; returns its replay. Graph replay
    times the device work alone, without the host's per-call Python and launch costs.
    ``pool``: a memory pool shared with other graphs that are never replayed concurrently."""
    return capture_cuda_graph(fn, pool)[0].replay


def interleaved(providers: dict[str, Callable[[], object]], *, rounds: int = 7,
                target_ms: float = 25.0, graphs: bool = False) -> dict[str, Timing | Exception]:
    """Time each provider (a zero-argument callable) on the current CUDA device.

    Each provider is warmed up (compilation, autotuning) and must not raise there; one that
    raises is returned as its exception. Then, over ``rounds`` rounds, every provider is timed
    for about ``target_ms`` with CUDA events, in an order that rotates each round so that no
    provider always runs first or after a given one. The result per provider is the median of
    its per-call times over the rounds, with min and max. With ``graphs``, each provider is
    captured in a CUDA graph after warm-up and its replays are timed (device time only).
    """
    live: dict[str, Callable] = {}
    out: dict[str, Timing | Exception] = {}
    iters: dict[str, int] = {}
    # One memory pool for all the graphs of this call: they replay one at a time and their
    # outputs are discarded, so each provider's temporaries need not stay reserved apart (a
    # pool per provider holds them all at once: about 100 GiB at the so2 benchmark's lmax-6
    # shape).
    pool = torch.cuda.graph_pool_handle() if graphs else None
    for name, fn in providers.items():
        try:
            fn()
            torch.cuda.synchronize()
            if graphs:
                fn = as_graph(fn, pool)
                fn()
                torch.cuda.synchronize()
            probe = _time_calls(fn, 3)
        except Exception as e:  # noqa: BLE001 - a failing peer is reported, not dropped
            torch.cuda.synchronize()
            out[name] = e
            continue
        live[name] = fn
        iters[name] = max(3, min(2000, int(target_ms / max(probe, 1e-3))))
    samples: dict[str, list[float]] = {n: [] for n in live}
    names = list(live)
    for r in range(rounds):
        k = r % max(len(names), 1)
        for name in names[k:] + names[:k]:
            samples[name].append(_time_calls(live[name], iters[name]))
    for name, s in samples.items():
        out[name] = Timing(statistics.median(s), min(s), max(s), len(s))
    return out


def copy_ceiling_gbs(numel: int, dtype: torch.dtype, rounds: int = 7) -> float:
    """Device-to-device copy bandwidth in GB/s (bytes read + written), measured now."""
    src = torch.randn(numel, device="cuda").to(dtype)
    dst = torch.empty_like(src)
    t = interleaved({"copy": lambda: dst.copy_(src)}, rounds=rounds)["copy"]
    return 2 * numel * src.element_size() / (t.median_ms * 1e-3) / 1e9


def error_text(exc: Exception, limit: int = 300) -> str:
    """A failed provider's exception for the report: its type, first line and, when the
    message has more, its last line (wrapped errors such as torch.compile's put the cause
    there)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = " ... ".join(dict.fromkeys(lines[:1] + lines[-1:]))
    return f"{type(exc).__name__}: {text}"[:limit]


def timing_fields(t: "Timing | Exception") -> dict:
    """A benchmark row's status fields: ``status`` "ok" with the median ``ms`` and its
    ``spread``, or "failed" with the ``error``."""
    if isinstance(t, Exception):
        return {"status": "failed", "error": error_text(t)}
    return {"status": "ok", "ms": t.median_ms, "spread": t.spread}

