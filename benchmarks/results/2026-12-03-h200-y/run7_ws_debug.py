"""Run 7 (issue 15): where run 6's producer-warp kernel differs from the shipped one.

One BWD pass at small shapes (lmax 3, Cf 32; partial row blocks), shipped kernel against
run6_ws.gemm3x_ws_kernel (2 slots, maxnreg 80): NaN count (the output is poisoned first),
the largest difference, and which rows / columns / K-tile counts differ, also with a single
K tile (K_LEN = BLOCK_K) and with one-row-block grids, to localise the bug.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-y/run7_ws_debug.py
"""

from __future__ import annotations

import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import run1_persistent as R1  # noqa: E402
import run6_ws as R6  # noqa: E402


def main():
    from tilefuse.ops.so2_mixing_stack import launch
    from tilefuse.ops.so2_mixing_stack.configs import FP16X3, So2Config
    from tilefuse.ops.so2_mixing_stack.kernels import BWD
    from tilefuse.ops.so2_mixing_stack.reference import So2Dims
    d = So2Dims(3, 32)
    cfg = So2Config(64, 64, 32, 4, 2, precision=FP16X3, wgmma=True)
    for E, k_len in ((64, 32), (64, 192), (1000, 32), (1000, 192)) + tuple((e, 192) for e in sys.argv[1:] and map(int, sys.argv[1:])):
        g = torch.Generator(device="cuda").manual_seed(E)
        F = 2
        a = torch.randn(F, E, d.row, generator=g, device="cuda")
        res = torch.randn(F, E, d.row, generator=g, device="cuda")
        w1 = torch.randn(1, F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
        weights = launch._layer(launch.split_fp16(w1), 0)
        outs = []
        probe = R6.WS(2, int(__import__("os").environ.get("WS_MAXNREG", "80")))
        for v in (None, probe, probe):   # the probe twice: a race would differ run to run
            out = torch.full_like(res, float("nan"))
            with R1.variant(v):
                launch._gemm(BWD, a, weights, res, out, d, cfg, k_start=d.m0, k_len=k_len, n_start=d.m0, n_len=d.m1)
            torch.cuda.synchronize()
            outs.append(out[:, :, d.m0:])
        ref, got, again = outs
        print(f"   the probe's two runs bitwise equal: {torch.equal(got.view(torch.int32), again.view(torch.int32))}")
        diff = (got - ref).abs()
        bad = ~(got.view(torch.int32) == ref.view(torch.int32))
        rows = bad.any(dim=2).nonzero()
        cols = bad.any(dim=1).nonzero()
        print(f"E={E} K_LEN={k_len}: NaN {int(got.isnan().sum())} of {got.numel()}, differing {int(bad.sum())}, "
              f"max |diff| {float(diff.nan_to_num(0).max()):.3e}, max |ref| {float(ref.abs().max()):.3e}", flush=True)
        if len(rows):
            print(f"   differing (focus, edge) rows: first {rows[:6].tolist()}, count {len(rows)}; "
                  f"(focus, col) cols: first {cols[:6].tolist()}, count {len(cols)}", flush=True)
            i = tuple(bad.nonzero()[0].tolist())
            print(f"   first differing element {i}: ref {float(ref[i]):.9g} got {float(got[i]):.9g} "
                  f"res {float(res[i[0], i[1], d.m0 + i[2]]):.9g}", flush=True)


if __name__ == "__main__":
    main()
