"""Run 4 probe: where do the Python objects that tests/test_dyt_lean.py's
test_repeated_calls_do_not_grow_memory saw growing on the GPU (5914 bytes over 40 calls,
run 3) come from? The test's loop with 8-frame tracebacks; prints the top growth sites."""
import gc
import tracemalloc

import torch

import tilefuse

dev = "cuda"
g = torch.Generator().manual_seed(0)
x = torch.randn(16, 32, generator=g).to(dev).requires_grad_(True)
a = torch.tensor([0.5], device=dev, requires_grad=True)
w = torch.randn(32, generator=g).to(dev).requires_grad_(True)
b = torch.randn(32, generator=g).to(dev).requires_grad_(True)
dy = torch.randn(16, 32, generator=g).to(dev)


def step():
    tilefuse.dyt(x, a, w, b).backward(dy)
    x.grad = a.grad = w.grad = b.grad = None


for n_calls in (40, 40, 200):
    for _ in range(5):
        step()
    gc.collect()
    tracemalloc.start(8)
    before = tracemalloc.take_snapshot()
    for _ in range(n_calls):
        step()
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    stats = [s for s in after.compare_to(before, "traceback") if "tilefuse" in str(s.traceback)]
    print(f"== {n_calls} calls: tilefuse growth {sum(s.size_diff for s in stats)} bytes")
    for s in sorted(stats, key=lambda s: -s.size_diff)[:6]:
        print(f"  +{s.size_diff} B in {s.count_diff} blocks")
        for line in s.traceback.format()[-8:]:
            print("    " + line)
