"""Run 8 (issue 15): why so2_bwd_sigma_kernel takes 8.7 ms a call at (400000, 2, 64) (run 7):
the kernel alone at Cf 64 and Cf 32 over BLOCK_M, num_warps and num_stages, do_bench medians,
against the forward gate kernel (which computes the same sigma after a K = M0 GEMM), and the
bitwise equality of sigma across the launch parameters.

    PYTHONPATH=src python3 benchmarks/results/2026-12-01-h200-h/run8_sigma_kernel.py
"""
import torch
from triton.testing import do_bench

from tilefuse.ops.so2_mixing_stack import kernels
from tilefuse.ops.so2_mixing_stack.configs import cf_padded
from tilefuse.ops.so2_mixing_stack.reference import So2Dims
from tilefuse.utils import cdiv

F = 2
for lmax, cf, E in ((2, 64, 400000), (3, 32, 647000)):
    d = So2Dims(lmax, cf)
    g = torch.Generator(device="cuda").manual_seed(0)
    z = torch.randn((F, E, d.row), generator=g, device="cuda")
    gw = torch.randn((F, cf, d.lg), generator=g, device="cuda") * cf ** -0.5
    ref = None
    print(f"lmax {lmax} Cf {cf} E {E}: sigma (F, E, LG={d.lg})")
    for bm, nw, ns in ((32, 4, None), (32, 4, 1), (16, 4, 1), (16, 2, 1), (64, 4, 1), (64, 8, 1), (128, 8, 1),
                       (32, 8, 1), (16, 1, 1), (8, 1, 1)):
        sigma = torch.full((F, E, d.lg), float("nan"), device="cuda")
        kw = {} if ns is None else {"num_stages": ns}

        def call():
            kernels.so2_bwd_sigma_kernel[(F * cdiv(E, bm),)](z, gw, sigma, E, d.row, d.lg, cf, IEEE=True, BLOCK_M=bm,
                                                           CF_P=cf_padded(cf), num_warps=nw, **kw)
        try:
            call()
            torch.cuda.synchronize()
            same = "" if ref is None else ("bitwise equal" if torch.equal(sigma, ref) else "DIFFERS")
            ref = sigma.clone() if ref is None else ref
            ms = do_bench(call, warmup=3, rep=30)
            print(f"  BLOCK_M {bm:4d} warps {nw} stages {ns}: {ms:7.3f} ms  {same}")
        except Exception as exc:  # noqa: BLE001
            print(f"  BLOCK_M {bm:4d} warps {nw} stages {ns}: failed {str(exc)[:100]}")
