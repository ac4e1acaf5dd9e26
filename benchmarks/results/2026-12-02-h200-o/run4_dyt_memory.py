"""Does tilefuse.dyt's forward + backward grow Python memory per call on the GPU, or only once?

tests/test_dyt_lean.py::test_repeated_calls_do_not_grow_memory failed in run 3 (6962 bytes, 139
blocks over 120 calls at ops/dyt/op.py's C++ autograd apply) and passed in 2026-12-01-h200-m
run 12. This runs the test's step (a (16, 32) fp32 forward + backward, gradients dropped) for a
warm-up and then four windows (40, 120, 120, 480 calls) and prints, per window, the bytes and
blocks tilefuse's traced allocations grew by, the three largest sites with their stacks, and
which Python object types grew in number (gc.get_objects): a leak grows in every window, in
proportion to its calls; a one-time replacement does not.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-o/run4_dyt_memory.py [cpu]
"""
import collections
import gc
import sys
import tracemalloc

import torch

sys.path.insert(0, "tests")
import tilefuse  # noqa: E402
from dyt_helpers import make_inputs  # noqa: E402

DEVICE = sys.argv[1] if len(sys.argv) > 1 else "cuda"   # "cpu": Triton's interpreter, a smoke test
x, a, w, b, dy = make_inputs((16, 32), torch.float32, torch.float32, True, True, DEVICE, seed=0)


def step():
    tilefuse.dyt(x, a, w, b).backward(dy)
    x.grad = a.grad = w.grad = b.grad = None


def types():
    return collections.Counter(type(o).__name__ for o in gc.get_objects())


for _ in range(5):
    step()
gc.collect()
tracemalloc.start(12)
prev, prev_types = tracemalloc.take_snapshot(), types()
for n in (40, 120, 120, 480):
    for _ in range(n):
        step()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    gc.collect()
    snap, now_types = tracemalloc.take_snapshot(), types()
    diff = [s for s in snap.compare_to(prev, "traceback") if "tilefuse" in str(s.traceback)]
    grown = sum(s.size_diff for s in diff)
    blocks = sum(s.count_diff for s in diff)
    print(f"window of {n} calls: tilefuse sites grew {grown} B, {blocks:+d} blocks ({grown / n:.1f} B a call)")
    for s in sorted(diff, key=lambda s: -s.size_diff)[:3]:
        print(f"  +{s.size_diff} B ({s.count_diff:+d} blocks):")
        for line in s.traceback.format()[-12:]:
            print("    " + line)
    grew = {k: now_types[k] - prev_types.get(k, 0) for k in now_types if now_types[k] != prev_types.get(k, 0)}
    print("  object counts changed:", dict(sorted(grew.items(), key=lambda kv: -abs(kv[1]))[:8]))
    prev, prev_types = snap, now_types
tracemalloc.stop()
