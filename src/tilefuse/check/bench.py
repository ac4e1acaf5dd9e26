"""Benchmark helpers of the check report: the copy ceiling and a row's status fields.

The timing itself is ``tilefuse.tuning.timing`` (``interleaved``, ``Timing``), the one harness
the tuner and benchmarks/ use too.
"""

from __future__ import annotations

import torch

from ..tuning.timing import Timing, interleaved


def copy_ceiling_gbs(numel: int, dtype: torch.dtype, rounds: int = 7) -> float:
    """Device-to-device copy bandwidth in GB/s (bytes read + written), measured now."""
    src = torch.randn(numel, device="cuda").to(dtype)
    dst = torch.empty_like(src)
    t = interleaved({"copy": lambda: dst.copy_(src)}, rounds=rounds)["copy"]
    if isinstance(t, Exception):
        raise t
    return 2 * numel * src.element_size() / (t.median_ms * 1e-3) / 1e9


def error_text(exc: Exception, limit: int = 300) -> str:
    """A failed provider's exception for the report: its type, first line and, when the
    message has more, its last line (wrapped errors such as torch.compile's put the cause
    there)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = " ... ".join(dict.fromkeys(lines[:1] + lines[-1:]))
    return f"{type(exc).__name__}: {text}"[:limit]


def timing_fields(t: Timing | Exception) -> dict:
    """A benchmark row's status fields: ``status`` "ok" with the median ``ms`` and its
    ``spread``, or "failed" with the ``error``."""
    if isinstance(t, Exception):
        return {"status": "failed", "error": error_text(t)}
    return {"status": "ok", "ms": t.median_ms, "spread": t.spread}
