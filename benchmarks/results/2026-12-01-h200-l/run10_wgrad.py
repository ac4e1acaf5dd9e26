"""Run 10a (issue 15, prepared for the next device session): the training backward's weight
gradients at Neo (E 647000, lmax 3, Cf 32, F 2), one GEMM per focus stream (the code before
launch.weight_grad) against launch.weight_grad's chunks, on column slices of (F, E, ROW) float32
surfaces as the backward passes them. do_bench medians, TFLOP/s, the largest difference.

    PYTHONPATH=src python3 benchmarks/results/2026-12-01-h200-l/run10_wgrad.py
"""
import torch
from triton.testing import do_bench

from tilefuse.ops.so2_mixing_stack import launch
from tilefuse.ops.so2_mixing_stack.reference import So2Dims

F, E = 2, 647000
d = So2Dims(3, 32)
g = torch.Generator(device="cuda").manual_seed(0)
u = torch.randn((F, E, d.row), generator=g, device="cuda")
gz = torch.randn((F, E, d.row), generator=g, device="cuda")
gq = torch.randn((F, E, d.lg), generator=g, device="cuda")
cases = (("dw0", u[..., :d.m0], gz[..., :d.m0]), ("dw1", u[..., d.m0:], gz[..., d.m0:]),
         ("dgw", u[..., :d.focus_dim], gq))
print(f"{'gradient':<9}{'path':<26}{'ms':>8}{'TFLOP/s':>9}{'max |diff|':>12}")
for name, a, b in cases:
    out_one = torch.empty((F, a.shape[-1], b.shape[-1]), device="cuda")
    out_chunked = torch.empty_like(out_one)
    flops = 2 * F * E * a.shape[-1] * b.shape[-1]
    one = lambda: torch.matmul(a.transpose(-1, -2), b, out=out_one)          # noqa: E731
    chunked = lambda: launch.weight_grad(a, b, out_chunked)                 # noqa: E731
    one(), chunked()
    torch.cuda.synchronize()
    diff = float((out_one - out_chunked).abs().max())
    for label, fn in (("one GEMM per focus", one), (f"chunked ({launch.WGRAD_MAX_CHUNKS} max)", chunked)):
        ms = do_bench(fn, warmup=5, rep=40)
        print(f"{name:<9}{label:<26}{ms:8.3f}{flops / ms / 1e9:9.1f}{diff:12.3e}", flush=True)
