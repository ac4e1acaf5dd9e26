"""Run 2 (issue 15): exact layer-GEMM tiles with 64 outputs a thread on 4 warps.

Run 1's Nsight Compute of the exact backward GEMM (so2_gemm_kernel, 64x64 on 4 warps, one Neo
m = 1 pass) puts it at the issue limit, not at memory: 76% of issue slots busy, FFMA about 80%
of the issued instructions (47.7 G FMAs = 1.49 G warp FFMA of 1.86 G), the FMA pipe at 62%,
DRAM at 26%. Fewer non-FMA instructions per FMA need more outputs per thread: the FMA dot's
operand loads from shared memory are shared by a thread's row and column of outputs. The
exact candidates (configs.RELAY_TILES) have 64 outputs a thread only on 8 warps (128x128);
here 128x64 and 64x128 on 4 warps (sm_90, triton 3.6: 166-168 registers for BWD, three
programs an SM; 198-206 for the forward modes, no stack at Cf 32) beside the shipped tiles:
the backward GEMM pair and the whole exact forward, bitwise the 64x64 tile's (every output is
the same FMA chain over k in order whatever the tile).

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-z/run2_exact_tiles.py   # GPU
"""

from __future__ import annotations

import sys

import torch
import triton

from tilefuse.ops.so2_mixing_stack import launch
from tilefuse.ops.so2_mixing_stack.configs import So2Config
from tilefuse.ops.so2_mixing_stack.reference import So2Dims
from tilefuse.tuning import timing

SHAPES = ((647000, 3, 32), (300000, 6, 32), (400000, 2, 64))
TILES = ((64, 64, 4, 2), (32, 128, 4, 2), (128, 64, 4, 2), (128, 64, 4, 3), (64, 128, 4, 2), (64, 128, 4, 3),
         (128, 128, 8, 2))


def show(t, base_name, flop):
    base = t[base_name].median_ms
    for name, r in t.items():
        if isinstance(r, Exception):
            print(f"  {name:20s} {type(r).__name__}: {str(r)[:200]}", flush=True)
            continue
        print(f"  {name:20s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})  {base / r.median_ms:.3f}x"
              f"  {flop / r.median_ms * 1e-9:6.1f} TFLOP/s", flush=True)


def main():
    print(f"# {torch.cuda.get_device_name()}; torch {torch.__version__}; triton {triton.__version__}", flush=True)
    F, NL, ok = 2, 3, True
    for E, lmax, cf in SHAPES:
        d = So2Dims(lmax, cf)
        g = torch.Generator(device="cuda").manual_seed(E)
        u0 = torch.randn(F, E, d.row, generator=g, device="cuda") * 0.5
        w0 = torch.randn(NL, F, d.m0, d.m0, generator=g, device="cuda") * d.m0 ** -0.5
        w1 = torch.randn(NL, F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
        gw = torch.randn(NL - 1, F, cf, d.lg, generator=g, device="cuda") * cf ** -0.5
        alpha = torch.rand(E, F, generator=g, device="cuda") + 0.2
        res = torch.randn(F, E, d.row, generator=g, device="cuda")
        out = torch.empty_like(res)
        w0t, w1t = launch.transposed(w0[0]), launch.transposed(w1[0])
        cfgs = {f"{bm}x{bn} w{w} s{s}": So2Config(bm, bn, cf, w, s) for bm, bn, w, s in TILES}
        base = next(iter(cfgs))
        pair = {n: (lambda c=c: launch._gemm_t(u0, w0t, w1t, res, out, d, c)) for n, c in cfgs.items()}
        fwd = {n: (lambda c=c: launch.forward(u0, alpha, w0, w1, gw, d, True, c)) for n, c in cfgs.items()}
        want_pair = want_fwd = None
        for n in cfgs:
            out.fill_(float("nan"))
            pair[n]()
            x = fwd[n]()[0]
            torch.cuda.synchronize()
            if want_pair is None:
                want_pair, want_fwd = out.clone(), x.clone()
                continue
            same = (torch.equal(out.view(torch.int32), want_pair.view(torch.int32))
                    and torch.equal(x.view(torch.int32), want_fwd.view(torch.int32)))
            ok &= same
            print(f"  {n}: pair and forward bitwise the {base} tile's: {same}", flush=True)
        del want_pair, want_fwd, x
        pair_flop = 2 * F * E * (d.m0 ** 2 + d.m1 ** 2)
        print(f"\n## E={E} lmax={lmax} Cf={cf}: exact backward GEMM pair, ms (7 rounds, graph replay)", flush=True)
        show(timing.interleaved(pair, graphs=True, rounds=7), base, pair_flop)
        print(f"## E={E} lmax={lmax} Cf={cf}: exact forward (gate kernels included), ms", flush=True)
        show(timing.interleaved(fwd, graphs=True, rounds=7), base, NL * pair_flop)
        del u0, w0, w1, gw, alpha, res, out
        torch.cuda.empty_cache()
    print(f"bitwise: {ok}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
