"""Run 3 (issue 15): the shipped level-3 wgmma GEMM with registers capped for five or six
programs an SM.

Runs 1-2 (run2/ncu.txt) show the Neo m = 1 backward pass issuing 0.54 instructions a cycle a
scheduler with no eligible warp in 46% of the cycles, at four 4-warp programs an SM (119-128
registers): latency, not a unit, sets its pace, and a persistent grid did not change that.
More warps an SM is the other way to hide it. At Cf 32 shared memory (33 KB a program) holds
six programs; registers hold five at 96 a thread (stack 96-120 bytes in the sm_90 compile,
triton 3.6) and six at 80 (208-272 bytes). -x run 1 measured caps that keep the stack at zero
(three or four programs); these spill, and the question is whether the spill's local-memory
traffic costs less than the extra warps win. Arithmetic unchanged: bitwise the uncapped kernel.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-y/run3_occupancy_caps.py
"""

from __future__ import annotations

import pathlib
import sys

import torch
import triton

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import run1_persistent as R1  # noqa: E402


class Capped:
    """Stands in for wgmma_kernels.so2_gemm3x_wgmma_kernel: the shipped kernel and grid with
    ``maxnreg`` = cap where BLOCK_K is 32 and the mode is not FWD_GATED (elsewhere uncapped)."""

    def __init__(self, cap):
        self.cap, self.name = cap, f"shipped, maxnreg {cap}"

    def __getitem__(self, grid):
        from tilefuse.ops.so2_mixing_stack.kernels import FWD_GATED

        def launch(*args, **kw):
            if kw["BLOCK_K"] == 32 and int(kw["MODE"]) != int(FWD_GATED):
                kw["maxnreg"] = self.cap
            return SHIPPED[grid](*args, **kw)
        return launch


SHIPPED = R1.W.so2_gemm3x_wgmma_kernel


def pairs(rounds):
    from tilefuse.ops.so2_mixing_stack import launch
    from tilefuse.ops.so2_mixing_stack.configs import FP16X3, So2Config
    from tilefuse.ops.so2_mixing_stack.reference import So2Dims
    from tilefuse.tuning import timing
    F, ok = 2, True
    for E, lmax, cf in ((647000, 3, 32), (300000, 6, 32)):
        d = So2Dims(lmax, cf)
        g = torch.Generator(device="cuda").manual_seed(E)
        gz = torch.randn(F, E, d.row, generator=g, device="cuda")
        res = torch.randn(F, E, d.row, generator=g, device="cuda")
        out = torch.empty_like(gz)
        w0 = torch.randn(1, F, d.m0, d.m0, generator=g, device="cuda") * d.m0 ** -0.5
        w1 = torch.randn(1, F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
        w0t = launch._layer(launch.split_fp16(w0.transpose(-1, -2)), 0)
        w1t = launch._layer(launch.split_fp16(w1.transpose(-1, -2)), 0)
        cfg = So2Config(64, 64, cf, 4, 2, precision=FP16X3, wgmma=True)
        print(f"\n## E={E} lmax={lmax} Cf={cf}: the backward GEMM pair (both segments), 64x64, ms", flush=True)
        providers = {}
        for v in (None, Capped(96), Capped(80)):
            def run(v=v):
                with R1.variant(v):
                    launch._gemm_t(gz, w0t, w1t, res, out, d, cfg)
            providers["shipped" if v is None else v.name] = run
        outs = {}
        for name, fn in providers.items():
            out.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            outs[name] = out.clone()
        for name, o in outs.items():
            same = torch.equal(o.view(torch.int32), outs["shipped"].view(torch.int32))
            ok &= same
            print(f"  {name}: bitwise the shipped kernel's: {same}", flush=True)
        t = timing.interleaved(providers, graphs=True, rounds=rounds)
        base = t["shipped"].median_ms
        for name, r in t.items():
            if isinstance(r, Exception):
                print(f"  {name:24s} {type(r).__name__}: {str(r)[:200]}", flush=True)
                continue
            print(f"  {name:24s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})  {base / r.median_ms:.3f}x", flush=True)
        del gz, res, out, outs
        torch.cuda.empty_cache()
    return ok


def main():
    print(f"# {torch.cuda.get_device_name()}; torch {torch.__version__}; triton {triton.__version__}", flush=True)
    ok = pairs(rounds=7)
    if "--step" in sys.argv:
        ok &= R1.whole_step(rounds=5, programs=(Capped(96), Capped(80)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
