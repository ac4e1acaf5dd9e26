"""Run 8 (prepared, not run: this session's device time is spent): bisect run 7's fault.

Run 6's producer-warp kernel is bitwise the shipped one with one program an SM and wrong, run
to run differently, with three (run 7). This checks one BWD pass at E = 100,000 (lmax 3,
Cf 32), each variant twice against the shipped kernel:
- maxnreg 255 / 128 / 80: one, two, three programs an SM (does two already fail?);
- INIT_FENCE: a proxy fence and a CTA barrier after the mbarrier inits (the TMA unit updates
  the barriers through the async proxy);
- WORKER_REGS = the launch budget: no register reallocation between the partitions.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-y/run8_ws_bisect.py
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
    d, F, E = So2Dims(3, 32), 2, 100000
    cfg = So2Config(64, 64, 32, 4, 2, precision=FP16X3, wgmma=True)
    g = torch.Generator(device="cuda").manual_seed(E)
    a = torch.randn(F, E, d.row, generator=g, device="cuda")
    res = torch.randn(F, E, d.row, generator=g, device="cuda")
    w1 = torch.randn(1, F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
    weights = launch._layer(launch.split_fp16(w1), 0)

    def run(v):
        out = torch.full_like(res, float("nan"))
        with R1.variant(v):
            launch._gemm(BWD, a, weights, res, out, d, cfg, k_start=d.m0, k_len=d.m1, n_start=d.m0, n_len=d.m1)
        torch.cuda.synchronize()
        return out
    ref = run(None)
    print(f"# {torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
    for v in (R6.WS(2, 255), R6.WS(2, 128), R6.WS(2, 80), R6.WS(2, 80, INIT_FENCE=True),
              R6.WS(2, 80, WORKER_REGS=80), R6.WS(2, 128, INIT_FENCE=True)):
        try:
            n_bad = [int((run(v).view(torch.int32) != ref.view(torch.int32)).sum()) for _ in range(2)]
            print(f"  {v.name:40s} differing outputs, two runs: {n_bad}", flush=True)
        except Exception as exc:  # noqa: BLE001 - a probe: reported
            print(f"  {v.name:40s} {type(exc).__name__}: {str(exc)[:200]}", flush=True)


if __name__ == "__main__":
    main()
