"""Run 9 (issue 15): the relay's pointwise backward kernel and the forward gate kernel at Cf 64
and Cf 32 over (BLOCK_M, num_warps): does run 8's slow launch shape (8 rows per warp at Cf 64)
hit them too? do_bench medians; outputs compared bitwise across launch shapes.

    PYTHONPATH=src python3 benchmarks/results/2026-12-01-h200-h/run9_pointwise_kernels.py
"""
import torch
from triton.testing import do_bench

from tilefuse.ops.so2_mixing_stack import kernels
from tilefuse.ops.so2_mixing_stack.configs import cf_padded
from tilefuse.ops.so2_mixing_stack.reference import So2Dims
from tilefuse.utils import cdiv

F = 2
SHAPES = ((32, 4), (64, 4), (32, 8), (16, 4), (64, 8), (128, 8))
for lmax, cf, E in ((2, 64, 400000), (3, 32, 647000)):
    d = So2Dims(lmax, cf)
    g = torch.Generator(device="cuda").manual_seed(0)
    z = torch.randn((F, E, d.row), generator=g, device="cuda")
    gc = torch.randn((F, E, d.row), generator=g, device="cuda")
    gw = torch.randn((F, cf, d.lg), generator=g, device="cuda") * cf ** -0.5
    w0 = torch.randn((F, d.m0, d.m0), generator=g, device="cuda") * d.m0 ** -0.5
    sigma = torch.rand((F, E, d.lg), generator=g, device="cuda")
    print(f"lmax {lmax} Cf {cf} E {E}")
    refs = {}
    for bm, nw in SHAPES:
        gz = torch.full_like(z, float("nan"))
        gq = torch.full((F, E, d.lg), float("nan"), device="cuda")
        zo = torch.full_like(z, float("nan"))
        un = torch.full_like(z, float("nan"))
        so = torch.full((F, E, d.lg), float("nan"), device="cuda")
        grid = (F * cdiv(E, bm),)

        def pointwise():
            kernels.so2_bwd_pointwise_kernel[grid](gc, z, sigma, gw, gz, gq, E, d.row, d.m0, d.lg, cf, WRITE_GQ=True,
                                                   IEEE=True, BLOCK_M=bm, CF_P=cf_padded(cf), num_warps=nw,
                                                   num_stages=1)

        def gate():
            kernels.so2_fwd_gate_kernel[grid](z, w0, gw, zo, un, so, E, d.row, d.m0, d.lg, cf, IEEE=True,
                                              BLOCK_M=bm, CF_P=cf_padded(cf), BLOCK_K=cf if cf <= 64 else 32,
                                              num_warps=nw)
        for name, fn, outs in (("pointwise", pointwise, (gz, gq)), ("gate", gate, (zo[..., :cf], un[..., :cf], so))):
            try:
                fn()
                torch.cuda.synchronize()
                got = [o.clone() for o in outs]
                same = ""
                if name in refs:
                    same = "bitwise equal" if all(torch.equal(a, b) for a, b in zip(got, refs[name])) else "DIFFERS"
                else:
                    refs[name] = got
                ms = do_bench(fn, warmup=3, rep=30)
                print(f"  {name:9s} BLOCK_M {bm:4d} warps {nw}: {ms:7.3f} ms  {same}")
            except Exception as exc:  # noqa: BLE001
                print(f"  {name:9s} BLOCK_M {bm:4d} warps {nw}: failed {str(exc)[:100]}")
