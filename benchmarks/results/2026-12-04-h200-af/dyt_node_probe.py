"""Issue 17 probe (GPU): does a C++ autograd node launching tilefuse's compiled DyT kernels bring
the host cost per call to F.layer_norm's? Not product code (dyt_node.cpp, beside this file).

1. Builds dyt_node.cpp with torch.utils.cpp_extension.load (timed).
2. For a few problems, runs tilefuse.dyt once (compiling its kernels), turns the call plan's
   compiled kernels (triton 3.6: CompiledKernel.function, .src.signature, .metadata) into the
   node's launch lists, and checks y and every gradient bitwise against tilefuse.dyt.
3. Host microseconds per call at 64x256 fp32, forward and forward + backward
   (torch.autograd.grad), the issue's measurement (check.dyt.median_per_call_us: synchronised,
   median of rounds of calls), the providers interleaved round by round.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-af/dyt_node_probe.py [--rounds 7]
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import tilefuse
from tilefuse.check import dyt as check_dyt
from tilefuse.ops.dyt import plan as plans

HERE = os.path.dirname(os.path.abspath(__file__))


def build():
    from torch.utils.cpp_extension import load
    t0 = time.perf_counter()
    mod = load(name="tilefuse_dyt_node_probe", sources=[os.path.join(HERE, "dyt_node.cpp")],
               extra_ldflags=["-ldl"], verbose=False)
    print(f"build: {time.perf_counter() - t0:.1f} s", flush=True)
    return mod


def kernel_spec(mod, launcher, n_tensors, device):
    """The node's launch list for a CompiledLauncher that has launched once (all pointers
    16-byte aligned)."""
    entry = launcher._entries.get((device, True))
    assert entry is not None, "the launcher has no compiled entry for aligned pointers"
    _, function, _, kernel = entry
    md = kernel.metadata
    assert md.global_scratch_size == 0 and md.profile_scratch_size == 0, "scratch-using kernel"
    assert getattr(md, "num_ctas", 1) == 1 and not md.launch_cooperative_grid and not md.launch_pdl
    assert len(launcher.grid) == 1 or all(g == 1 for g in launcher.grid[1:])
    k = mod.Kernel()
    k.function, k.grid, k.threads, k.smem = function, launcher.grid[0], 32 * md.num_warps, md.shared
    slots, values = [], []
    for i, (name, ty) in enumerate(kernel.src.signature.items()):
        if ty == "constexpr":
            continue
        if i < n_tensors:
            assert ty.startswith("*"), (name, ty)
            slots.append(i)
            values.append(0)
        else:
            v = launcher.scalars[i - n_tensors]
            assert ty in ("i32", "i64"), (name, ty)
            slots.append(-1 if ty == "i32" else -2)
            values.append(int(v))
    slots += [-3, -3]          # global_scratch, profile_scratch
    values += [0, 0]
    k.slots, k.values = slots, values
    return k


def native_plan(mod, x, a, w, b, dy):
    """Run tilefuse.dyt forward + backward once (compiles), then the node's Plan from its plan."""
    y = tilefuse.dyt(x, a, w, b)
    torch.autograd.grad(y, [t for t in (x, a, w, b) if t is not None], dy)
    p = plans.lookup(x, a, w, b, True)
    assert p.kernels and not (p.x_copy or p.w_copy or p.b_copy or p.layout.moved or p.layout.param_per_row)
    dev = torch.cuda.current_device()
    bwd = p._bwd[(dy.stride(), dy.dtype)][0]
    plan = mod.Plan()
    plan.fwd = kernel_spec(mod, p._fwd.launch, 5, dev)
    plan.bwd_main = kernel_spec(mod, bwd.main, 8, dev)
    plan.bwd_reduce = kernel_spec(mod, bwd.reduce, 6, dev)
    plan.wpart, plan.bpart, plan.apart = bwd.sizes
    return plan


def inputs(shape, dtype, bias=True, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(shape, device="cuda", dtype=dtype, generator=g).requires_grad_(True)
    a = torch.full((1,), 0.7, device="cuda").requires_grad_(True)
    w = torch.randn(shape[-1], device="cuda", generator=g).requires_grad_(True)
    b = torch.randn(shape[-1], device="cuda", generator=g).requires_grad_(True) if bias else None
    dy = torch.randn(shape, device="cuda", dtype=dtype, generator=g)
    return x, a, w, b, dy


def check(mod):
    bad = 0
    for shape, dtype, bias in (((64, 256), torch.float32, True), ((1000, 100), torch.float32, False),
                               ((4096, 1024), torch.bfloat16, True), ((333, 4096), torch.float16, True),
                               ((8, 16384, 64), torch.bfloat16, False)):
        x, a, w, b, dy = inputs(shape, dtype, bias)
        plan = native_plan(mod, x, a, w, b, dy)
        leaves = [t for t in (x, a, w, b) if t is not None]
        ref_y = tilefuse.dyt(x, a, w, b)
        ref = (ref_y, *torch.autograd.grad(ref_y, leaves, dy))
        for attempt in range(2):
            y = mod.forward(plan, x, a, w, b)
            got = (y, *torch.autograd.grad(y, leaves, dy))
            same = all(p.dtype == q.dtype and p.shape == q.shape and torch.equal(p, q) for p, q in zip(ref, got))
            bad += not same
        print(f"check {shape} {dtype} bias={bias}: grad_fn {y.grad_fn.name()}, "
              f"{'bitwise tilefuse.dyt' if same else 'DIFFERS'}", flush=True)
    with torch.no_grad():
        y = mod.forward(plan, x, a, w, b)
    print(f"no grad: requires_grad {y.requires_grad}, bitwise {torch.equal(y, ref[0])}")
    return bad


def host(mod, rounds, calls):
    x, a, w, b, dy = inputs((64, 256), torch.float32, True)
    plan = native_plan(mod, x, a, w, b, dy)
    leaves = (x, a, w, b)
    fwd = {
        "F.layer_norm": lambda: F.layer_norm(x, (256,), w, b),
        "tilefuse.dyt": lambda: tilefuse.dyt(x, a, w, b),
        "node, plan held": lambda: mod.forward(plan, x, a, w, b),
        "node + plan lookup": lambda: (plans.lookup(x, a, w, b, True), mod.forward(plan, x, a, w, b))[1],
        "eager DyT (3 ATen ops)": lambda: w * torch.tanh(a * x) + b,
        "torch.tanh": lambda: torch.tanh(x),
    }
    used = {"F.layer_norm": (x, w, b), "torch.tanh": (x,)}
    cases = {}
    for name, f in fwd.items():
        cases[(name, "fwd")] = f
        cases[(name, "fwd+bwd")] = (lambda f=f, inp=used.get(name, leaves): torch.autograd.grad(f(), inp, dy))
    samples = {k: [] for k in cases}
    keys = list(cases)
    for r in range(rounds):
        order = keys[r % len(keys):] + keys[:r % len(keys)]
        for k in order:
            samples[k].append(check_dyt.median_per_call_us(cases[k], calls, 1))
    print(f"\nhost us per call, 64x256 fp32, median of {rounds} interleaved rounds of {calls} synchronised calls")
    print("| provider | fwd us | x layer_norm | fwd+bwd us | x layer_norm |\n|---|---|---|---|---|")
    ref = {p: statistics.median(samples[("F.layer_norm", p)]) for p in ("fwd", "fwd+bwd")}
    for name in fwd:
        cells = []
        for p in ("fwd", "fwd+bwd"):
            v = statistics.median(samples[(name, p)])
            cells += [f"{v:.1f}", f"{v / ref[p]:.2f}x"]
        print(f"| {name} | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    print(torch.__version__, __import__("triton").__version__, torch.cuda.get_device_name(), flush=True)
    mod = build()
    bad = check(mod)
    host(mod, args.rounds, args.calls)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
