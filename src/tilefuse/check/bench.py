"""Benchmark helpers of the check report: the copy ceiling, per-kernel profiles and a row's
status fields.

The timing itself is ``tilefuse.tuning.timing`` (``interleaved``, ``Timing``), the one harness
the tuner and benchmarks/ use too.
"""

from __future__ import annotations

import contextlib

import torch

from ..tuning.timing import Timing, interleaved, sync_if_cuda


@contextlib.contextmanager
def compile_limits(limit: int = 256):
    """Dynamo's per-code recompile limit raised to ``limit`` while a benchmark runs (restored
    after), and hitting it made an error. A benchmark compiles the same peer function (one
    code object) at every shape and pass, each a graph of its own; at Dynamo's default of 8
    the ninth would run the function's eager code under its "torch.compile" row (check/so2.py's
    three passes at three shapes). With the limit an error, such a row fails, with the error,
    instead. Used as a decorator of each section's ``benchmark``."""
    import torch._dynamo
    config = torch._dynamo.config
    knobs = {k: limit for k in ("recompile_limit", "cache_size_limit") if hasattr(config, k)}
    if hasattr(config, "fail_on_recompile_limit_hit"):
        knobs["fail_on_recompile_limit_hit"] = True
    with config.patch(**knobs):
        yield


def copy_ceiling_gbs(numel: int, dtype: torch.dtype, rounds: int = 7) -> float:
    """Device-to-device copy bandwidth in GB/s (bytes read + written), measured now."""
    src = torch.randn(numel, device="cuda").to(dtype)
    dst = torch.empty_like(src)
    t = interleaved({"copy": lambda: dst.copy_(src)}, rounds=rounds)["copy"]
    if isinstance(t, Exception):
        raise t
    return 2 * numel * src.element_size() / (t.median_ms * 1e-3) / 1e9


def kernel_times(step, device: str, n_steps: int):
    """Run ``step`` once, then ``n_steps`` times under torch.profiler: (rows, profiler). Rows,
    largest first: ``{"kernel", "calls", "us"}`` per step, CUDA kernels' device time on a GPU
    (``device`` "cuda"), each op's self CPU time otherwise; empty where the profiler's events
    carry no device type this torch names (its own table is then the profiler's)."""
    from torch.profiler import ProfilerActivity, profile
    gpu = device == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    cuda_type = getattr(torch.autograd, "DeviceType", None)
    step()
    sync_if_cuda()
    with profile(activities=acts) as prof:
        for _ in range(n_steps):
            step()
        sync_if_cuda()
    rows = []
    for evt in prof.key_averages():
        if gpu:
            if cuda_type is None or evt.device_type != cuda_type.CUDA:
                continue
            us = evt.device_time_total
        else:
            us = evt.self_cpu_time_total
        if us > 0:
            rows.append({"kernel": evt.key, "calls": evt.count / n_steps, "us": us / n_steps})
    rows.sort(key=lambda r: -r["us"])
    return rows, prof


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
