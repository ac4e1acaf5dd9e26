"""Run 1: one so2 backward GEMM pair at Neo (647000, 3, 32) under Nsight Compute: exact at the table's
tiles (this tree's 1-D grid and the 2-D grid before it) and 3xfp16 at the level-3 key's tiles.

    ncu --profile-from-start off ... python3 benchmarks/results/2026-12-02-h200-p/run1_ncu.py
"""
import importlib.util
import sys
from pathlib import Path

import torch

import tilefuse
from tilefuse.ops.so2_mixing_stack import launch, op
from tilefuse.ops.so2_mixing_stack.reference import So2Dims

sys.path.insert(0, str(Path(__file__).parent))
from run1_order_ab import old_kernels  # noqa: E402

E, lmax, cf, F, NL = 647000, 3, 32, 2, 3
d = So2Dims(lmax, cf)
g = torch.Generator(device="cuda").manual_seed(1)
a = torch.randn(F, E, d.row, generator=g, device="cuda") * 0.5
res = torch.randn(F, E, d.row, generator=g, device="cuda")
out = torch.empty_like(a)
w0 = torch.randn(1, F, d.m0, d.m0, generator=g, device="cuda") * d.m0 ** -0.5
w1 = torch.randn(1, F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
cfg2 = op.backward_config(d, torch.float32, E, F, NL, False)
with tilefuse.level(3):
    cfg3 = op.level3_config(d, torch.float32, E, F, NL)
runs = []
for cfg, old in ((cfg2, False), (cfg2, True), (cfg3, False)):
    w0t, w1t = (launch._layer(launch._weights(w, cfg, transpose=True), 0) for w in (w0, w1))
    runs.append((cfg, old, w0t, w1t))
for cfg, old, w0t, w1t in runs:       # compile and warm up outside the profiled range
    if old:
        with old_kernels():
            launch._gemm_t(a, w0t, w1t, res, out, d, cfg)
    else:
        launch._gemm_t(a, w0t, w1t, res, out, d, cfg)
torch.cuda.synchronize()
torch.cuda.profiler.start()
for cfg, old, w0t, w1t in runs:
    print(cfg.name, "old 2-D grid" if old else "new 1-D grid", flush=True)
    if old:
        with old_kernels():
            launch._gemm_t(a, w0t, w1t, res, out, d, cfg)
    else:
        launch._gemm_t(a, w0t, w1t, res, out, d, cfg)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
