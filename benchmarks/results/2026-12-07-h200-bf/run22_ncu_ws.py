"""Run 22: what holds fp8_block's four warp-specialised GEMM launches (fp8_ws_gemm_kernel: fc1 +
GLU, fc2, the fc1 dgrad, the fc2 dgrad + dGLU) at shape 2 (E 64, T 32768, H 2048, F 1408,
balanced counts, interleave 32, the op as called): run under Nsight Compute, which profiles the
third step's four launches (two warm-up steps before it compile and tune nothing: the built-in
table's entry).

    ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis ... \\
        --kernel-name regex:fp8_ws_gemm_kernel --launch-skip 8 --launch-count 4 \\
        python3 benchmarks/results/2026-12-07-h200-bf/run22_ncu_ws.py
"""
import torch

import tilefuse
from tilefuse import launches
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs

E, T, H, F = 64, 32768, 2048, 1408
i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                  generator=torch.Generator().manual_seed(22))
leaves = {k: i[k].detach().requires_grad_(True) for k in ("x", "probs", "w1", "w2")}


def step():
    y = tilefuse.grouped_glu_mlp(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"],
                                 activation="swiglu", glu_interleave=32, recipe="fp8_block")
    return torch.autograd.grad(y, list(leaves.values()), i["dy"])


for n in range(3):
    with launches.counting() as launched:
        step()
    torch.cuda.synchronize()
    print(f"step {n}:", {k: v for k, v in launched.items() if "ws" in k}, flush=True)
