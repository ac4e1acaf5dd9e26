"""Run 10a (issue 15, prepared for the next device session): one so2 backward layer GEMM pair
(BWD mode, the m=0 and |m|=1 segments) at the Neo shape (E 647000, lmax 3, Cf 32, F 2) in each
dot precision and tile: the exact IEEE FMA dots, 3xtf32 and the new 3xfp16 (335b4b3), BLOCK_K
32 and 64. do_bench medians, TFLOP/s (2 M N K per segment), the share of the segment's memory
floor (read a and res, write out: the copy ceiling measured here on a 1 GiB float32 copy), and
the normwise error against float64 beside the exact path's.

    PYTHONPATH=src python3 benchmarks/results/2026-12-01-h200-l/run10_gemm_precision.py
"""
import torch
from triton.testing import do_bench

from tilefuse.ops.so2_mixing_stack import kernels, launch
from tilefuse.ops.so2_mixing_stack.configs import So2Config
from tilefuse.ops.so2_mixing_stack.reference import So2Dims

F, E = 2, 647000
d = So2Dims(3, 32)
g = torch.Generator(device="cuda").manual_seed(0)
a = torch.randn((F, E, d.row), generator=g, device="cuda")
res = torch.randn((F, E, d.row), generator=g, device="cuda")
w0 = torch.randn((1, F, d.m0, d.m0), generator=g, device="cuda") * d.m0 ** -0.5
w1 = torch.randn((1, F, d.m1, d.m1), generator=g, device="cuda") * d.m1 ** -0.5
segments = (("m0", launch.transposed(w0), 0, d.m0), ("m1", launch.transposed(w1), d.m0, d.m1))

src = torch.empty(2 ** 28, device="cuda")
dst = torch.empty_like(src)
copy_ms = do_bench(lambda: dst.copy_(src), warmup=5, rep=50)
copy_gbs = 2 * src.numel() * 4 / copy_ms / 1e6
del src, dst
print(f"copy ceiling {copy_gbs:.0f} GB/s (1 GiB float32 copy)")

TILES = ((32, 64, 4, 2), (64, 64, 4, 2), (64, 64, 4, 3), (128, 64, 4, 3), (64, 128, 4, 3), (128, 128, 8, 3))
PLANS = [("ieee", bm, bn, 32, nw, ns) for bm, bn, nw, ns in TILES[:3]]
PLANS += [(p, bm, bn, bk, nw, ns) for p in ("3xtf32", "3xfp16") for bm, bn, nw, ns in TILES for bk in (32, 64)
          if not (p == "3xtf32" and bk == 64)]
print(f"{'segment':<8}{'precision':<9}{'tile':<22}{'ms':>8}{'TFLOP/s':>9}{'of floor':>9}{'err vs f64':>12}")
for name, wt, k0, kl in segments:
    want = res[..., k0:k0 + kl].double() + a[..., k0:k0 + kl].double() @ wt[0].double()
    flops = 2 * F * E * kl * kl
    floor_ms = 3 * F * E * kl * 4 / (copy_gbs * 1e6)       # a and res read, out written
    for prec, bm, bn, bk, nw, ns in PLANS:
        cfg = So2Config(bm, bn, bk, nw, ns, precision=prec)
        weights = launch._layer(launch._weights(wt, cfg), 0)
        out = torch.full_like(res, float("nan"))

        def call():
            launch._gemm(kernels.BWD, a, weights, res, out, d, cfg, k_start=k0, k_len=kl, n_start=k0, n_len=kl)
        tile = f"{bm}x{bn}x{bk} w{nw} s{ns}"
        try:
            call()
            torch.cuda.synchronize()
            got = out[..., k0:k0 + kl].double()
            err = float((got - want).norm() / want.norm())
            ms = do_bench(call, warmup=5, rep=40)
            print(f"{name:<8}{prec:<9}{tile:<22}{ms:8.3f}{flops / ms / 1e9:9.1f}{floor_ms / ms:9.2f}{err:12.3e}",
                  flush=True)
        except Exception as exc:  # noqa: BLE001  (a tile that does not fit is reported, not fatal)
            print(f"{name:<8}{prec:<9}{tile:<22} failed: {str(exc)[:80]}", flush=True)
