"""Issue 16 (GPU): where does fp8_block's step lose time between its kernels?

-aj run 3's torch.profiler sums fp8_block's kernel time per forward + backward at 5.69 / 3.43 /
4.08 ms at the spec's shapes, while the op as called (graph replay, run 1) takes 6.6 / 4.0 / 4.6
ms; bf16 tilefuse's sum and its as-called time agree within 3%. This program times each
provider's step (benchmarks/grouped_compose_gpu_check.py's, balanced counts, interleave 32) as a
CUDA-graph replay with CUDA events, then profiles three replays and three eager steps and
prints, for each, the span from the first kernel's start to the last one's end, the busy time
(the union of kernel intervals), the sum of kernel durations, and the largest idle gaps with the
kernels on either side.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-aj/replay_gaps.py [--shapes 1,2,3]
"""
import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/
import grouped_compose_gpu_check as check  # noqa: E402

from tilefuse.ops.grouped_glu_mlp.reference import random_inputs  # noqa: E402
from tilefuse.utils import capture_cuda_graph  # noqa: E402


def device_events(prof):
    """(start_us, end_us, name) of every device-side event, sorted by start."""
    out = []
    cuda = torch.autograd.DeviceType.CUDA
    for e in prof.events():
        if e.device_type == cuda and e.time_range.end > e.time_range.start:
            out.append((e.time_range.start, e.time_range.end, e.name))
    return sorted(out)


def report(label, events, n_steps):
    if not events:
        print(f"  {label}: no device events recorded")
        return
    span = events[-1][1] - events[0][0]
    total = sum(e - s for s, e, _ in events)
    busy, cur_s, cur_e, gaps = 0.0, events[0][0], events[0][1], []
    prev_name = events[0][2]
    for s, e, name in events[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            gaps.append((s - cur_e, prev_name, name))
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
        prev_name = name if e >= cur_e else prev_name
    busy += cur_e - cur_s
    idle = span - busy
    print(f"  {label}: per step span {span / n_steps / 1e3:.3f} ms, busy {busy / n_steps / 1e3:.3f} ms, "
          f"idle {idle / n_steps / 1e3:.3f} ms, kernel sum {total / n_steps / 1e3:.3f} ms, {len(events) / n_steps:.0f} "
          f"events a step, {len(gaps)} gaps")
    for g, a, b in sorted(gaps, reverse=True)[:8]:
        print(f"      gap {g:8.1f} us  after {a[:60]}  before {b[:60]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1,2,3")
    ap.add_argument("--providers", default="tilefuse,fp8_block")
    args = ap.parse_args()
    names = args.providers.split(",")
    print(torch.__version__, torch.cuda.get_device_name())
    for index in (int(s) for s in args.shapes.split(",")):
        E, T, H, F = check.SHAPES[index]
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(0))
        providers = check.providers_for(i, 32, names=names)
        print(f"\nshape {index}: E {E} T {T} H {H} F {F}, balanced counts, interleave 32")
        for name in names:
            step = providers[name]
            step()
            torch.cuda.synchronize()
            graph, _ = capture_cuda_graph(step)
            for _ in range(3):
                graph.replay()
            torch.cuda.synchronize()
            times = []
            for _ in range(10):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                graph.replay()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b))
            eager = []
            for _ in range(5):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                a.record()
                step()
                b.record()
                b.synchronize()
                eager.append(a.elapsed_time(b))
            print(f" {name}: graph replay {statistics.median(times):.3f} ms (min {min(times):.3f}), eager step "
                  f"{statistics.median(eager):.3f} ms (events around it)")
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    graph.replay()
                torch.cuda.synchronize()
            report("graph replay", device_events(prof), 3)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    step()
                torch.cuda.synchronize()
            report("eager", device_events(prof), 3)
            del graph
            torch.cuda.synchronize()
        del providers, i
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
