"""Run 3 (issue 15): one so2 backward layer GEMM (BWD mode, the |m|=1 and m=0 segments) at the
Neo shape (E 647000, lmax 3, Cf 32, F 2) in each dot precision: IEEE FMA dots, 3xTF32 with the
small products in a second tensor-core accumulator ("3xtf32"), and 3xTF32 with every K tile's
three products summed in a fresh tensor-core accumulator and added to the float32 accumulator
with IEEE adds ("3xtf32p", promotion per K tile). do_bench medians; normwise error against float64.

    PYTHONPATH=src python3 benchmarks/results/2026-12-01-h200-h/run3_gemm_precision.py
"""
import torch
import triton
from triton.testing import do_bench

from tilefuse.ops.so2_mixing_stack import kernels
from tilefuse.ops.so2_mixing_stack.launch import split_tf32, transposed
from tilefuse.ops.so2_mixing_stack.reference import So2Dims
from tilefuse.utils import cdiv

F, E = 2, 647000
d = So2Dims(3, 32)
g = torch.Generator(device="cuda").manual_seed(0)
a = torch.randn((F, E, d.row), generator=g, device="cuda")
res = torch.randn((F, E, d.row), generator=g, device="cuda")
w0 = torch.randn((F, d.m0, d.m0), generator=g, device="cuda") * d.m0 ** -0.5
w1 = torch.randn((F, d.m1, d.m1), generator=g, device="cuda") * d.m1 ** -0.5
segments = (("m0", transposed(w0), 0, d.m0), ("m1", transposed(w1), d.m0, d.m1))
ref = {}
for name, wt, k0, kl in segments:
    ref[name] = (res[..., k0:k0 + kl].double() + a[..., k0:k0 + kl].double() @ wt.double())

TILES = ((32, 64, 4, 2), (64, 64, 4, 2), (64, 64, 4, 3), (128, 64, 4, 3), (64, 128, 4, 3), (128, 128, 8, 3))
print(f"{'segment':<8}{'precision':<10}{'tile':<18}{'ms':>8}{'TFLOP/s':>9}{'err vs f64':>12}")
for name, wt, k0, kl in segments:
    flops = 2 * F * E * kl * kl
    hi, lo = split_tf32(wt)
    for prec in ("ieee", "3xtf32", "3xtf32p"):
        w, wl = (wt, wt) if prec == "ieee" else (hi, lo)
        for bm, bn, nw, ns in TILES:
            out = torch.full_like(res, float("nan"))
            grid = (F * cdiv(E, bm), cdiv(kl, bn))

            def call():
                kernels.so2_gemm_kernel[grid](
                    a, w, wl, res, out, out, out, out, F, E, d.row, k0, kl, k0, kl, d.focus_dim, d.lg,
                    w.stride(0), w.stride(1), w.stride(2), MODE=kernels.BWD, APPLY_ALPHA=False,
                    DOT_PRECISION=prec, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=32, num_warps=nw, num_stages=ns)
            try:
                call()
                torch.cuda.synchronize()
                got = out[..., k0:k0 + kl].double()
                err = float((got - ref[name]).norm() / ref[name].norm())
                ms = do_bench(call, warmup=5, rep=40)
                print(f"{name:<8}{prec:<10}{f'{bm}x{bn} w{nw} s{ns}':<18}{ms:8.3f}{flops / ms / 1e9:9.1f}{err:12.3e}")
            except Exception as exc:  # noqa: BLE001
                print(f"{name:<8}{prec:<10}{f'{bm}x{bn} w{nw} s{ns}':<18} failed: {str(exc)[:80]}")
