"""Run 2's probe: Liger-Kernel's fused MoE step as `tilefuse bench` builds it
(check.grouped._liger_moe_step), captured in a CUDA graph (how the bench timed it before: its
forward calls .item()) and eagerly beside the op as called (how it is timed now), at a small
shape so Liger's autotuning stays short."""
import sys
import time

import torch

from tilefuse import policy
from tilefuse.check import grouped as g
from tilefuse.ops.grouped_glu_mlp.api import grouped_glu_mlp
from tilefuse.tuning import timing

E, T, H, F = (int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "8x4096x1024x512").split("x"))
i = g._inputs(g._balanced_counts(E, T), H, F, torch.bfloat16, False, "cuda")
dy = i["dy"]
leaves = (i["x"], i["probs"], i["w1"], i["w2"])


def as_called():
    with policy.level(2):
        return torch.autograd.grad(grouped_glu_mlp(i["x"], i["counts"], i["probs"], i["w1"], i["w2"]), leaves, dy)


liger = g._liger_moe_step(i, dy, leaves)
t0 = time.time()
liger()
torch.cuda.synchronize()
print(f"Liger's first call (autotuning) {time.time() - t0:.1f} s at E {E}, T {T}, H {H}, F {F}")
got = timing.interleaved({g.LIGER_MOE: liger}, graphs=True, rounds=2)[g.LIGER_MOE]
print("under CUDA-graph capture:", got if isinstance(got, Exception) else f"{got.median_ms:.3f} ms")
t = timing.interleaved({g.EAGER_AS_CALLED: as_called, g.LIGER_MOE: liger}, rounds=3)
rows = g.provider_rows(E, T, H, F, 3 * (2 * T * H * 2 * F + 2 * T * F * H), t, {})
print("\n".join(g.benchmark_markdown({"rows": rows})[2:]))
