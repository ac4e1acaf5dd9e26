"""Issue 16 (GPU): where the second stream's host cost goes. -ag run 8 measured the op's forward
+ backward call 1.17-1.33x as long on the host with the side stream as without (170-340 us).
Here, per operation, host microseconds (perf_counter over 2000 calls, median of 5 batches,
on an idle GPU) of what streams.py does a call:

- ``current_stream``: torch.cuda.current_stream(device);
- ``wait_stream``: side.wait_stream(caller) (a new torch.cuda.Event recorded and waited for);
- ``event reuse``: one event made once, ev.record(caller) then side.wait_event(ev);
- ``stream context``: entering and leaving torch.cuda.stream(side);
- ``record_stream``: t.record_stream(caller);
- ``launch, one stream`` / ``launch, alternating``: an empty Triton kernel launched on the
  caller's stream every time, or alternately on the caller's and the side stream (through
  the stream context), per launch.

Then a torch.profiler CPU + CUDA-runtime table of 20 forward + backward calls at the spec's
shape 2 with the side stream and without, the top host entries by self CPU time.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ah/host_stream_parts.py
"""
import statistics
import time

import torch
import triton
import triton.language as tl

import tilefuse
from tilefuse.ops.grouped_glu_mlp import streams
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES


@triton.jit
def _empty(x_ptr):
    pass


def per_call_us(fn, calls=2000, batches=5):
    out = []
    for _ in range(batches):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(out)


def parts():
    dev = torch.device("cuda")
    caller = torch.cuda.current_stream(dev)
    side = torch.cuda.Stream(dev)
    ev = torch.cuda.Event()
    t = torch.empty(1024, device=dev)
    x = torch.empty(16, device=dev)
    _empty[(1,)](x)

    def reuse():
        ev.record(caller)
        side.wait_event(ev)

    def context():
        with torch.cuda.stream(side):
            pass

    def launch_one():
        _empty[(1,)](x)

    flip = [False]

    def launch_alternating():
        flip[0] = not flip[0]
        if flip[0]:
            with torch.cuda.stream(side):
                _empty[(1,)](x)
        else:
            _empty[(1,)](x)

    rows = {"current_stream": lambda: torch.cuda.current_stream(dev),
            "wait_stream": lambda: side.wait_stream(caller),
            "event reuse": reuse,
            "stream context": context,
            "record_stream": lambda: t.record_stream(caller),
            "launch, one stream": launch_one,
            "launch, alternating (incl. context every other)": launch_alternating}
    print("| operation | host us per call |\n|---|---|")
    for name, fn in rows.items():
        print(f"| {name} | {per_call_us(fn):.2f} |", flush=True)


def profile():
    E, T, H, Fd = DEFAULT_SHAPES[1]
    i = random_inputs([T // E] * E, H, Fd, torch.bfloat16, bias=False, device="cuda",
                      generator=torch.Generator().manual_seed(2))
    c, dy = i["counts"], i["dy"]
    leaves = [i[k].detach().requires_grad_() for k in ("x", "probs", "w1", "w2")]

    def step():
        out = tilefuse.grouped_glu_mlp(*leaves[:1], c, *leaves[1:], glu_interleave=32)
        return torch.autograd.grad(out, leaves, dy)
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    for beside in (True, False):
        streams.BESIDE = beside
        for _ in range(5):
            step()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(20):
                step()
                torch.cuda.synchronize()
        print(f"\n## side stream {'on' if beside else 'off'}: 20 calls, top host entries by self CPU time\n")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=60))
    streams.BESIDE = True


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    parts()
    profile()
