"""Run 6's Nsight Compute target (prepared): one fc1 launch of ws_rows (256 columns on 3 slots,
the H200 table's shape-1 tile, with the GLU epilogue and without) and one of torch._grouped_mm's
fc1 (CUTLASS) at a spec shape, balanced counts: what holds the row GEMMs at ~640 TFLOP/s at
shape 1 (issue 16's remaining 2% there).

    ncu --kernel-name regex:"ws_rows|device_kernel" --launch-skip 3 --launch-count 3 ... \\
        python3 benchmarks/results/2026-12-03-h200-ab/run6_ncu_rows.py --shape 1
"""
import argparse

import torch

from tilefuse.ops.grouped_glu_mlp import ws_rows
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES

ap = argparse.ArgumentParser()
ap.add_argument("--shape", type=int, default=1)
E, T, H, F = DEFAULT_SHAPES[ap.parse_args().shape - 1]
g = torch.Generator().manual_seed(0)
x = torch.randn(T, H, generator=g).bfloat16().cuda()
w1 = (torch.randn(E, 2 * F, H, generator=g) * 0.05).bfloat16().cuda()
probs = torch.rand(T, generator=g).cuda()
counts = torch.full((E,), T // E, dtype=torch.int32, device="cuda")
ends = torch.cumsum(counts, 0).to(torch.int32)
z = torch.empty(T, 2 * F, dtype=torch.bfloat16, device="cuda")
h = torch.empty(T, F, dtype=torch.bfloat16, device="cuda")
for _ in range(2):   # warm-up (compiles), then the profiled three
    assert ws_rows.launch(x, w1, z, counts, rows=True, block_n=256, stages=3)
    assert ws_rows.launch(x, w1, z, counts, rows=True, block_n=256, stages=3, glu=(h, probs, None, 0, 32))
    torch._grouped_mm(x, w1.transpose(-2, -1), offs=ends)
torch.cuda.synchronize()
print("done")
