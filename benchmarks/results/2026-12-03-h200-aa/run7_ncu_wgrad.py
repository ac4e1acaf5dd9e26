"""Run 7's Nsight Compute target: one dW1 launch of ws_wgrad (the 128-column tile on 5 slots,
the H200 table's) and one of torch._grouped_mm's bf16 wgrad (CUTLASS) at a spec shape,
balanced counts.

    ncu --kernel-name regex:"ws_wgrad|device_kernel" --launch-skip 2 --launch-count 2 ... \
        python3 benchmarks/results/2026-12-03-h200-aa/run7_ncu_wgrad.py --shape 2
"""
import argparse

import torch

from tilefuse.ops.grouped_glu_mlp import ws_wgrad
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES

ap = argparse.ArgumentParser()
ap.add_argument("--shape", type=int, default=2)
E, T, H, F = DEFAULT_SHAPES[ap.parse_args().shape - 1]
g = torch.Generator().manual_seed(0)
dz = torch.randn(T, 2 * F, generator=g).bfloat16().cuda()
x = torch.randn(T, H, generator=g).bfloat16().cuda()
counts = torch.full((E,), T // E, dtype=torch.int32, device="cuda")
ends = torch.cumsum(counts, 0).to(torch.int32)
dw1 = torch.empty(E, 2 * F, H, dtype=torch.bfloat16, device="cuda")
for _ in range(2):   # warm-up (compiles), then the profiled pair
    assert ws_wgrad.launch(dz, x, dw1, counts, block_m=128, stages=5)
    torch._grouped_mm(dz.t(), x, offs=ends)
torch.cuda.synchronize()
print("done")
