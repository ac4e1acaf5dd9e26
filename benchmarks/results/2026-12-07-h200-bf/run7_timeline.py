"""Run 7: one step's kernel launches in order, bf16 and fp8_block as called (the built-in table,
interleave 32, balanced counts), at the spec's shapes: each launch's stream, start (us from the
step's first launch), duration, and the step's GPU-busy time (the union of its kernels'
intervals) against its span. What fp8_block's step spends beside bf16's, launch by launch,
with the ws GLU and dGLU in it (the last per-kernel profile, -ae run 1, predates both).
Also fp8_block with its weights quantized once and reused (``tilefuse.reuse_quantized_weights``
held open across calls, in a context of its own: the steady state of gradient accumulation's
micro-batches, the same bits): its timeline, then the three steps as eager calls in 5
interleaved rounds (the reuse is not used under CUDA-graph capture).

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run7_timeline.py [--shapes 2,3]
"""

from __future__ import annotations

import argparse
import contextvars
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from grouped_compose_gpu_check import SHAPES, providers_for  # noqa: E402

import tilefuse  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs  # noqa: E402
from tilefuse.tuning import timing  # noqa: E402


def launches(step):
    """The CUDA kernels of one profiled step after two unprofiled ones: (start_us, dur_us,
    stream, name), by start."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    kernels = [(e.start_ns() / 1e3, e.duration_ns() / 1e3, e.device_resource_id(), e.name())
               for e in prof.profiler.kineto_results.events()
               if e.device_type() == torch.autograd.DeviceType.CUDA]
    return sorted(kernels)


def report(label, kernels):
    t0 = kernels[0][0]
    span = max(s + d for s, d, _, _ in kernels) - t0
    busy, end = 0.0, t0
    for s, d, _, _ in sorted(kernels):
        if s + d > end:
            busy += s + d - max(s, end)
            end = s + d
    total = sum(d for _, d, _, _ in kernels)
    print(f"\n{label}: {len(kernels)} launches, span {span / 1e3:.3f} ms, GPU busy {busy / 1e3:.3f} ms, "
          f"kernel sum {total / 1e3:.3f} ms", flush=True)
    for s, d, stream, name in kernels:
        if d < 3.0:
            continue
        print(f"  {s - t0:9.1f} us  {d:8.1f} us  stream {stream:3d}  {name[:90]}")
    by = {}
    for _, d, _, name in kernels:
        key = name[:60]
        by[key] = by.get(key, 0.0) + d
    for key, d in sorted(by.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  sum {d / 1e3:8.3f} ms  {key}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    for s in (int(v) for v in args.shapes.split(",")):
        E, T, H, F = SHAPES[s]
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(0))
        providers = providers_for(i, 32, names=("tilefuse", "fp8_block"))
        reuse = contextvars.copy_context()   # a block left open in a context of its own
        block = tilefuse.reuse_quantized_weights()
        reuse.run(block.__enter__)
        providers["fp8_block, weights reused"] = lambda step=providers["fp8_block"]: reuse.run(step)
        for name, step in providers.items():
            report(f"shape {s} (E {E} T {T} H {H} F {F}) {name}", launches(step))
        r = timing.interleaved(providers, rounds=5, graphs=False)
        base = r["tilefuse"]
        for name, t in r.items():
            if isinstance(t, Exception):
                print(f"  eager {name}: FAILED {t!r}", flush=True)
                continue
            vs = "" if isinstance(base, Exception) else f"  bf16 / this {timing.ratio(base, t):.3f}x"
            print(f"  eager {name:28s} {t.median_ms:8.3f} ms [{t.min_ms:.3f} - {t.max_ms:.3f}]{vs}", flush=True)
        reuse.run(block.__exit__, None, None, None)
        del providers, i
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
