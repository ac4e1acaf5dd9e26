"""Run 1: the so2 GEMMs' column tiles adjacent (this tree's kernels._tile, a 1-D grid) against the
kernels before it (run1_kernels_before.py, ``git show 2542f51:src/tilefuse/ops/so2_mixing_stack/
kernels.py`` with an absolute import: the column tile as the 2-D grid's slow dimension).

Per shape: the GEMM pairs alone (forward gated pair, backward pair; exact at the table's tiles and
3xfp16 at the level-3 key's tiles), then the whole op as users call it (forward + force backward)
at level 2 and level 3, old against new, interleaved (timing.interleaved, 5 rounds); outputs and
gradients of old and new compared bitwise (the products and the K walk are unchanged).

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-p/run1_order_ab.py
    TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-p/run1_order_ab.py --tiny  # CPU
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path

import torch

import tilefuse
from tilefuse.ops.so2_mixing_stack import kernels, launch, op
from tilefuse.ops.so2_mixing_stack.reference import So2Dims
from tilefuse.tuning import timing
from tilefuse.utils import cdiv

spec = importlib.util.spec_from_file_location("kernels_before", Path(__file__).with_name("run1_kernels_before.py"))
before = importlib.util.module_from_spec(spec)
spec.loader.exec_module(before)

F, NL = 2, 3
SHAPES = ((647000, 3, 32), (300000, 6, 32), (400000, 2, 64))


@contextlib.contextmanager
def old_kernels():
    """The kernels before this change, launched on their 2-D grid."""
    saved = kernels.so2_gemm_kernel, kernels.so2_bwd_fused_kernel, launch.tiled_grid
    kernels.so2_gemm_kernel, kernels.so2_bwd_fused_kernel = before.so2_gemm_kernel, before.so2_bwd_fused_kernel
    launch.tiled_grid = lambda f, e, n_len, cfg: (f * cdiv(e, cfg.block_m), cdiv(n_len, cfg.block_n))
    try:
        yield
    finally:
        kernels.so2_gemm_kernel, kernels.so2_bwd_fused_kernel, launch.tiled_grid = saved


def run_old(fn):
    def call():
        with old_kernels():
            return fn()
    return call


def same(x, y) -> bool:
    """Bitwise equal, NaN where NaN (the columns a pair does not write stay poisoned)."""
    return bool(((x == y) | (x.isnan() & y.isnan())).all())


def main():
    tiny = "--tiny" in sys.argv      # CPU smoke run in Triton's interpreter (TRITON_INTERPRET=1)
    dev = "cpu" if tiny else "cuda"
    shapes = ((37, 1, 16), (40, 2, 32)) if tiny else SHAPES
    kw = dict(timer=timing.WallTimer()) if tiny else {}
    print(f"# {torch.cuda.get_device_name() if not tiny else 'CPU'}; torch {torch.__version__}; old = 2-D grid (column tile slow), "
          f"new = 1-D grid (a row block's column tiles adjacent)")
    for E, lmax, cf in shapes:
        d = So2Dims(lmax, cf)
        g = torch.Generator(device=dev).manual_seed(E)

        def randn(*shape, scale=1.0):
            return torch.randn(shape, generator=g, device=dev) * scale

        u0 = randn(F, E, d.row, scale=0.5).requires_grad_()
        alpha = (torch.rand(E, F, generator=g, device=dev) + 0.2).requires_grad_()
        w0 = randn(NL, F, d.m0, d.m0, scale=d.m0 ** -0.5)
        w1 = randn(NL, F, d.m1, d.m1, scale=d.m1 ** -0.5)
        gw = randn(NL - 1, F, cf, d.lg, scale=cf ** -0.5)
        go = randn(E, F, d.row)
        cfg2 = op.backward_config(d, torch.float32, E, F, NL, False)
        fcfg2 = op.forward_config(d, torch.float32, E, F, NL) or cfg2
        with tilefuse.level(3):
            cfg3 = op.level3_config(d, torch.float32, E, F, NL)
        print(f"\n## E={E} lmax={lmax} Cf={cf}: level 2 fwd {fcfg2.name} bwd {cfg2.name}; level 3 "
              f"{cfg3.name if cfg3 else None}")

        # GEMM pairs alone
        a, res, out = randn(F, E, d.row, scale=0.5), randn(F, E, d.row), torch.empty(F, E, d.row, device=dev)
        z, sigma = torch.empty_like(out), torch.rand(F, E, d.lg, generator=g, device=dev)
        providers = {}
        for tag, cfg_f, cfg_b in (("exact", fcfg2, cfg2), ("3xfp16", cfg3, cfg3)):
            if cfg_b is None or cfg_b.fused or cfg_b.compose:
                continue
            w0g, w1g = launch._weights(w0[0:1].contiguous(), cfg_f), launch._weights(w1[0:1].contiguous(), cfg_f)
            w0t, w1t = launch._weights(w0[0:1], cfg_b, transpose=True), launch._weights(w1[0:1], cfg_b, transpose=True)
            w0g, w1g, w0t, w1t = (launch._layer(x, 0) for x in (w0g, w1g, w0t, w1t))

            def fwd_pair(w0g=w0g, w1g=w1g, cfg=cfg_f):
                launch._gemm(kernels.FWD_GATED, a, w0g, a, out, d, cfg, k_start=0, k_len=d.m0, n_start=cf,
                             n_len=d.m0 - cf, z=z, sigma=sigma)
                launch._gemm(kernels.FWD_GATED, a, w1g, a, out, d, cfg, k_start=d.m0, k_len=d.m1, n_start=d.m0,
                             n_len=d.m1, z=z, sigma=sigma)

            def bwd_pair(w0t=w0t, w1t=w1t, cfg=cfg_b):
                launch._gemm_t(a, w0t, w1t, res, out, d, cfg)

            for name, fn in ((f"{tag} fwd gated pair", fwd_pair), (f"{tag} bwd pair", bwd_pair)):
                providers[f"{name} new"] = fn
                providers[f"{name} old"] = run_old(fn)
                out.fill_(float("nan"))
                fn()
                new_out = out.clone()
                out.fill_(float("nan"))
                run_old(fn)()
                print(f"  bitwise {name}: {same(new_out, out)}")
                del new_out
        res_t = timing.interleaved(providers, rounds=5, graphs=True, **kw)
        for name, t in res_t.items():
            if name.endswith("new"):
                o = res_t[name[:-3] + "old"]
                print(f"  {name[:-4]:26s} new {t.median_ms:8.3f} ms  old {o.median_ms:8.3f} ms  "
                      f"old/new {timing.ratio(o, t):.3f}  (spread {t.spread:.1%} / {o.spread:.1%})")
        del a, res, out, z, sigma

        # whole op, as users call it
        def step(level):
            def fn():
                with tilefuse.level(level):
                    x = tilefuse.so2_mixing_stack(u0, alpha, w0, w1, gw, lmax=lmax, focus_dim=cf)
                    return (x, *torch.autograd.grad(x, (u0, alpha), go))
            return fn

        whole = {}
        for level in (2, 3):
            new_r = [t.clone() for t in step(level)()]
            old_r = run_old(step(level))()
            all_equal = all(torch.equal(a_, b_) for a_, b_ in zip(new_r, old_r))
            print(f"  bitwise whole op level {level} (x, grad u0, grad alpha): {all_equal}")
            del new_r, old_r
            whole[f"level {level} new"] = step(level)
            whole[f"level {level} old"] = run_old(step(level))
        res_w = timing.interleaved(whole, rounds=5, graphs=False, **kw)
        for name, t in res_w.items():
            if name.endswith("new"):
                o = res_w[name[:-3] + "old"]
                print(f"  whole op {name[:-4]:17s} new {t.median_ms:8.3f} ms  old {o.median_ms:8.3f} ms  "
                      f"old/new {timing.ratio(o, t):.3f}  (spread {t.spread:.1%} / {o.spread:.1%})")
        del u0, alpha, w0, w1, gw, go
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
