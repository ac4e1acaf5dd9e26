"""Run 1 (issue 15): the so2 stack's non-GEMM kernels at one of the three benchmark shapes (E, lmax,
Cf from RUN_E, RUN_LMAX, RUN_CF; F 2), each at the row-block sizes and warp counts it could launch
with, against a reference choice (64 rows, 4 warps; the head's 16 rows, 4 warps, BLOCK_C 128, as
launch.py has it since 80641a6). A copy of results/2026-12-01-h200-m/run12_aux.py with the shape
as a parameter, so that the gate's launch shape can be judged at Cf 64 too. Outputs are compared
bitwise with the current choice's; "of copy" = the bytes the kernel must move / time / the
copy ceiling measured here. do_bench medians.

    RUN_E=400000 RUN_LMAX=2 RUN_CF=64 PYTHONPATH=src \
        python3 benchmarks/results/2026-12-02-h200-n/run1_so2_aux.py
"""
import os
import time

import torch
from triton.testing import do_bench as _do_bench

from tilefuse.ops.so2_mixing_stack import kernels as K
from tilefuse.ops.so2_mixing_stack.configs import cf_padded
from tilefuse.ops.so2_mixing_stack.reference import So2Dims
from tilefuse.utils import cdiv

DEV = "cuda" if torch.cuda.is_available() else "cpu"     # cpu: a smoke run in the interpreter
F, E = 2, int(os.environ.get("RUN_E", 647000))


def do_bench(fn, warmup=5, rep=40):
    if DEV == "cuda":
        return _do_bench(fn, warmup=warmup, rep=rep)
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3

d = So2Dims(int(os.environ.get("RUN_LMAX", 3)), int(os.environ.get("RUN_CF", 32)))
cf_p = cf_padded(d.focus_dim)
g = torch.Generator(device=DEV).manual_seed(0)
rnd = lambda *s: torch.randn(s, generator=g, device=DEV)      # noqa: E731
src = rnd(1 << 28 if DEV == "cuda" else 1 << 12)
dst = torch.empty_like(src)
copy_gbs = 2 * src.numel() * 4 / do_bench(lambda: dst.copy_(src), rep=50) / 1e6
del src, dst
print(f"E {E} lmax {d.lmax} Cf {d.focus_dim}; copy ceiling {copy_gbs:.0f} GB/s; ROW {d.row}, M0 {d.m0}, LG {d.lg}")
surface = F * E * d.row * 4


def sweep(name, run, outputs, nbytes, choices, current):
    """run(**choice) launches into ``outputs`` (poisoned before each check launch)."""
    ref = None
    print(f"{name:<10}{'choice':<28}{'ms':>8}{'of copy':>9}  bitwise")
    for choice in [current] + [c for c in choices if c != current]:
        for t in outputs:
            t.fill_(float("nan"))
        try:
            run(**choice)
        except Exception as exc:  # noqa: BLE001
            print(f"{name:<10}{str(choice):<28} failed: {type(exc).__name__}: {str(exc)[:80]}")
            continue
        torch.cuda.synchronize() if DEV == "cuda" else None
        got = [t.clone() for t in outputs]
        same = "(current)" if ref is None else all(torch.equal(a, b) for a, b in zip(got, ref))
        ref = ref if ref is not None else got
        ms = do_bench(lambda: run(**choice), warmup=5, rep=40)
        label = " ".join(f"{k}{v}" for k, v in choice.items())
        print(f"{name:<10}{label:<28}{ms:8.3f}{nbytes / ms / 1e6 / copy_gbs:9.2f}  {same}", flush=True)


grid = lambda bm: (F * cdiv(E, bm),)                                       # noqa: E731
rows_warps = [dict(bm=bm, w=w) for bm in (16, 32, 64, 128) for w in (2, 4, 8)]

# pointwise (relay step 2): reads g, z (two surfaces), sigma; writes gz (a surface), gq
gcur, z, gz = rnd(F, E, d.row), rnd(F, E, d.row), torch.empty(F, E, d.row, device=DEV)
sigma = torch.sigmoid(rnd(F, E, d.lg))
gw = rnd(F, d.focus_dim, d.lg) * 0.1
gq = torch.empty(F, E, d.lg, device=DEV)


def pointwise(bm, w):
    K.so2_bwd_pointwise_kernel[grid(bm)](gcur, z, sigma, gw, gz, gq, E, d.row, d.m0, d.lg, d.focus_dim,
                                         WRITE_GQ=True, IEEE=True, BLOCK_M=bm, CF_P=cf_p, num_warps=w, num_stages=1)


sweep("pointwise", pointwise, [gz, gq], 3 * surface + 2 * F * E * d.lg * 4, rows_warps, dict(bm=64, w=4))


def sigma_k(bm, w):
    K.so2_bwd_sigma_kernel[grid(bm)](z, gw, sigma, E, d.row, d.lg, d.focus_dim, IEEE=True, BLOCK_M=bm, CF_P=cf_p,
                                     num_warps=w, num_stages=1)


sweep("sigma", sigma_k, [sigma], F * E * (d.focus_dim + d.lg) * 4, rows_warps, dict(bm=64, w=4))

# head: reads grad_out, x_local (E, F, ROW); writes g (F, E, ROW) and grad_alpha
grad_out, x_local, alpha = rnd(E, F, d.row), rnd(E, F, d.row), rnd(E, F).abs() + 0.5
gh, ga = torch.empty(F, E, d.row, device=DEV), torch.empty(E, F, device=DEV)


def head(bm, w, bc=128):
    K.so2_bwd_head_kernel[grid(bm)](grad_out, x_local, alpha, gh, ga, F, E, d.row, APPLY_ALPHA=True, BLOCK_M=bm,
                                    BLOCK_C=bc, num_warps=w)


sweep("head", head, [gh, ga], 3 * surface, [dict(bm=bm, w=w, bc=bc) for bm in (16, 32, 64) for w in (4, 8)
                                            for bc in (64, 128, 256)], dict(bm=16, w=4, bc=128))
del grad_out, x_local, gh

# forward gate: reads u's m0 block, writes z's and u_next's first CF columns and sigma
u, w0 = rnd(F, E, d.row), rnd(F, d.m0, d.m0) * 0.1
zf, un, sg = torch.empty_like(u), torch.empty_like(u), torch.empty(F, E, d.lg, device=DEV)


def gate(bm, w, bk=32):
    K.so2_fwd_gate_kernel[grid(bm)](u, w0, gw, zf, un, sg, E, d.row, d.m0, d.lg, d.focus_dim, IEEE=True,
                                    BLOCK_M=bm, CF_P=cf_p, BLOCK_K=bk, num_warps=w)


sweep("gate", gate, [zf[..., :d.focus_dim], un[..., :d.focus_dim], sg],
      F * E * (d.m0 + 2 * d.focus_dim + d.lg) * 4,
      [dict(bm=bm, w=w, bk=bk) for bm in (16, 32, 64, 128) for w in (2, 4, 8) for bk in (32, 64)], dict(bm=64, w=4, bk=32))
