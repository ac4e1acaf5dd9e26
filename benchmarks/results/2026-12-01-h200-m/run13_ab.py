"""Run 13 (issue 15): the level-3 stack at Neo with c1b31e4's one-launch weight split against the
split before it (13 torch ops per stack on a contiguous W^T copy, restored here by a patch of
launch._weights), interleaved in one process: run 12 timed level 3 2-10% slower than run 10b.

    PYTHONPATH=src:benchmarks python3 benchmarks/results/2026-12-01-h200-m/run13_ab.py
"""
import sys

import torch

import tilefuse
from tilefuse import policy
from tilefuse.ops.so2_mixing_stack import launch
from tilefuse.ops.so2_mixing_stack.configs import FP16X3, TF32X3
from tilefuse.tuning import timing

sys.path.insert(0, "benchmarks")
from so2_peers import make_inputs   # noqa: E402

new_weights = launch._weights


def old_split(w):
    w = w.contiguous()
    _, exponent = torch.frexp(w.abs().amax(dim=-2))
    shift = (15 - exponent).clamp(-126, 126)
    one = torch.ones(shift.shape, dtype=w.dtype, device=w.device)
    scaled = w * torch.ldexp(one, shift).unsqueeze(-2)
    hi = scaled.to(torch.float16)
    return hi, (scaled - hi.to(w.dtype)).to(torch.float16), torch.ldexp(one, -shift)


def old_weights(w, cfg, transpose=False):
    precision = cfg.dot_precision(w.dtype == torch.float32)
    w = launch.transposed(w) if transpose else w
    if precision == FP16X3:
        return old_split(w)
    if precision == TF32X3:
        return (*launch.split_tf32(w), None)
    return w


for shape in ((647000, 3, 32), (300000, 6, 32)):
    E, lmax, cf = shape
    inp = make_inputs(E, lmax, cf, "cuda", 7)

    def step(weights):
        def run():
            launch._weights = weights
            with policy.level(3):
                x = tilefuse.so2_mixing_stack(*inp.args(), lmax=lmax, focus_dim=cf)
                out = (x, *torch.autograd.grad(x, inp.grad_args(), inp.grad_out))
            launch._weights = new_weights
            return out
        return run

    a, b = step(new_weights)(), step(old_weights)()
    same = all(torch.equal(x, y) for x, y in zip(a, b))
    del a, b
    t = timing.interleaved({"one-launch split": step(new_weights), "torch-op split": step(old_weights)},
                           rounds=8, target_ms=100)
    print(shape, "bitwise equal:", same, {k: f"{v.median_ms:.3f} ms [{v.min_ms:.3f}-{v.max_ms:.3f}]"
                                          for k, v in t.items()}, flush=True)
    del inp
    torch.cuda.empty_cache()
