"""Run 7's Nsight Compute target (prepared, not run: the session's device time was spent): the
six GEMMs of a bf16 step at the spec's shape 1 (balanced counts) as the H200 table runs them
(ws_rows at 256 columns on 3 slots: fc1 with the GLU epilogue at interleave 32, fc2, the fc2
dgrad and the fc1 dgrad by columns; ws_wgrad at 256 columns on 3 slots: dW1 and dW2), each
beside torch._grouped_mm's (CUTLASS) GEMM: which of them is furthest from the SM's throughput
(run 1 measured fc1 alone at 92.5%). One warm-up round, then the profiled round (12 kernels).

    ncu --section SpeedOfLight --launch-skip 12 --launch-count 12 \\
        --kernel-name regex:"ws_rows|ws_wgrad|device_kernel" \\
        python3 benchmarks/results/2026-12-04-h200-ad/run7_ncu_six.py
"""
import torch

from tilefuse.ops.grouped_glu_mlp import ws_rows, ws_wgrad
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES

E, T, H, F = DEFAULT_SHAPES[0]
g = torch.Generator().manual_seed(0)


def rand(*shape, scale=1.0):
    return (torch.randn(*shape, generator=g) * scale).bfloat16().cuda()


x, dy, dz, h = rand(T, H), rand(T, H), rand(T, 2 * F), rand(T, F)
w1, w2 = rand(E, 2 * F, H, scale=0.05), rand(E, H, F, scale=0.05)
probs = torch.rand(T, generator=g).cuda()
counts = torch.full((E,), T // E, dtype=torch.int32, device="cuda")
ends = torch.cumsum(counts, 0).to(torch.int32)
z, hh = torch.empty(T, 2 * F, dtype=torch.bfloat16, device="cuda"), torch.empty_like(h)
y, dh, dx = torch.empty_like(x), torch.empty_like(h), torch.empty_like(x)
dw1, dw2 = torch.empty_like(w1), torch.empty_like(w2)
for _ in range(2):   # warm-up (compiles), then the profiled round
    assert ws_rows.launch(x, w1, z, counts, rows=True, glu=(hh, probs, None, 0, 32))
    torch._grouped_mm(x, w1.transpose(-2, -1), offs=ends)
    assert ws_rows.launch(h, w2, y, counts, rows=True)
    torch._grouped_mm(h, w2.transpose(-2, -1), offs=ends)
    assert ws_rows.launch(dy, w2, dh, counts, rows=False)
    torch._grouped_mm(dy, w2, offs=ends)
    assert ws_rows.launch(dz, w1, dx, counts, rows=False)
    torch._grouped_mm(dz, w1, offs=ends)
    assert ws_wgrad.launch(dz, x, dw1, counts, block_m=256, stages=3)
    torch._grouped_mm(dz.t(), x, offs=ends)
    assert ws_wgrad.launch(dy, h, dw2, counts, block_m=256, stages=3)
    torch._grouped_mm(dy.t(), h, offs=ends)
torch.cuda.synchronize()
print("done")
