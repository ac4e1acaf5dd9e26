"""How far can a route built on CUTLASS's grouped GEMMs get past `_grouped_mm` + torch.compile?

Per spec shape (bf16, SwiGLU, interleave 32, no bias, balanced counts), interleaved CUDA-graph
replay (10 rounds) of:
  - compose: tilefuse's compose route (compose_apply + autograd.grad of x, probs, W1, W2);
  - compiled: torch.compile of the plain composition (grouped_glu_mlp_unfused), autograd.grad;
  - gemms only: the six torch._grouped_mm GEMMs of one forward + backward on ready operands
    (z, h, dh, dz, dx, dW1, dW2 with the same shapes and layouts compose.py uses), nothing else:
    the time any route that keeps CUTLASS's GEMMs spends at least.
then torch.profiler kernel time per step of compose and compiled, split into the CUTLASS GEMM
kernels and everything else. Prints a table: ms, the ratio compiled / provider, and the bound
compiled / gemms-only (the most a CUTLASS-GEMM route can reach over the compiled composition).

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-o/run2_grouped_bound.py
"""
import torch

from tilefuse.check.bench import kernel_times
from tilefuse.check.grouped import _balanced_counts, _inputs
from tilefuse.ops.grouped_glu_mlp.op import compose_apply
from tilefuse.ops.grouped_glu_mlp.reference import grouped_glu_mlp_unfused
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
from tilefuse.tuning import timing


def gemm_split(rows):
    gemm = sum(r["us"] for r in rows if "cutlass" in r["kernel"] or "gemm" in r["kernel"].lower())
    return gemm / 1e3, sum(r["us"] for r in rows) / 1e3 - gemm / 1e3


def main():
    print("torch", torch.__version__, torch.cuda.get_device_name())
    for E, T, H, F in DEFAULT_SHAPES:
        torch.manual_seed(0)
        i = _inputs(_balanced_counts(E, T), H, F, torch.bfloat16, False, "cuda")
        leaves = (i["x"], i["probs"], i["w1"], i["w2"])
        dy = i["dy"]
        x, w1, w2 = (t.detach() for t in (i["x"], i["w1"], i["w2"]))
        ends = torch.cumsum(i["counts"], 0, dtype=torch.int32)
        z = torch._grouped_mm(x, w1.transpose(-2, -1), offs=ends)
        h = z[:, :F].contiguous()
        dz = torch.randn_like(z)

        def compose_step():
            y = compose_apply(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], None, None, "swiglu", 32)
            return torch.autograd.grad(y, leaves, dy)

        def unfused():
            return grouped_glu_mlp_unfused(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], glu_interleave=32)
        compiled = torch.compile(unfused, dynamic=False)

        def compiled_step():
            return torch.autograd.grad(compiled(), leaves, dy)

        def gemms_only():
            return (torch._grouped_mm(x, w1.transpose(-2, -1), offs=ends),
                    torch._grouped_mm(h, w2.transpose(-2, -1), offs=ends),
                    torch._grouped_mm(dy, w2, offs=ends),
                    torch._grouped_mm(dz, w1, offs=ends),
                    torch._grouped_mm(dz.t(), x, offs=ends),
                    torch._grouped_mm(dy.t(), h, offs=ends))

        t = timing.interleaved({"compose": compose_step, "compiled": compiled_step, "gemms only": gemms_only},
                               graphs=True, rounds=10)
        prof = {name: gemm_split(kernel_times(fn, "cuda", 5)[0])
                for name, fn in (("compose", compose_step), ("compiled", compiled_step), ("gemms only", gemms_only))}
        print(f"\nshape E {E} T {T} H {H} F {F}")
        print("| provider | graph ms (median [min-max]) | compiled / provider | profiled GEMM ms | other ms |")
        print("|---|---|---|---|---|")
        for name, tm in t.items():
            g, o = prof[name]
            print(f"| {name} | {tm.median_ms:.3f} [{tm.min_ms:.3f}-{tm.max_ms:.3f}] | "
                  f"{timing.ratio(t['compiled'], tm):.3f}x | {g:.3f} | {o:.3f} |")
        print(f"bound (compiled / gemms only, graph medians): {t['compiled'].median_ms / t['gemms only'].median_ms:.3f}x;"
              f" profiled: {sum(prof['compiled']) / sum(prof['gemms only']):.3f}x")


if __name__ == "__main__":
    main()
