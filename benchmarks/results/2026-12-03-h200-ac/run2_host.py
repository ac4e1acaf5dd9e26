"""Run 2: host time per call of grouped_glu_mlp as users call it (the built-in table's route)
against the plain composition it replaces (reference.grouped_glu_mlp_unfused:
torch._grouped_mm + the GLU as torch ops), the spec's measurement: warm, synchronise before
each call, time only the call, p50 over 300 calls (check.grouped._host_p50_us), the median of
three such p50s. Forward on inputs without grad, and forward + backward (autograd.grad of every
input). bf16, SwiGLU, no bias, balanced counts, interleave 32 and None.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-ac/run2_host.py
"""
import statistics

import torch

import tilefuse
from tilefuse import launches
from tilefuse.check.grouped import _host_p50_us
from tilefuse.ops.grouped_glu_mlp.reference import grouped_glu_mlp_unfused, random_inputs
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES


def p50(fn):
    return statistics.median(_host_p50_us(fn) for _ in range(3))


def main():
    print(torch.__version__, torch.cuda.get_device_name(), "level", tilefuse.policy.get_level())
    print("| shape | interleave | path | tilefuse fwd us | composition fwd us | ratio | tilefuse fwd+bwd us "
          "| composition fwd+bwd us | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for index, (E, T, H, F) in enumerate(DEFAULT_SHAPES, 1):
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(index))
        leaves = [i[k].detach().requires_grad_() for k in ("x", "probs", "w1", "w2")]
        detached = [t.detach() for t in leaves]
        dy = torch.randn(T, H, dtype=torch.bfloat16, device="cuda")
        for inter in (32, None):
            def ours(x, p, w1, w2):
                return tilefuse.grouped_glu_mlp(x, i["counts"], p, w1, w2, glu_interleave=inter)

            def plain(x, p, w1, w2):
                return grouped_glu_mlp_unfused(x, i["counts"], p, w1, w2, glu_interleave=inter)
            with launches.counting() as launched:
                ours(*detached)
            path = "+".join(k for k in ("grouped_mlp_compose", "grouped_ws_rows", "grouped_ws_rows_glu",
                                        "grouped_mlp_fwd") if launched[k])
            row = [p50(lambda f=f: f(*detached)) for f in (ours, plain)]
            row += [p50(lambda f=f: torch.autograd.grad(f(*leaves), leaves, dy)) for f in (ours, plain)]
            print(f"| {index} | {inter} | {path} | {row[0]:.1f} | {row[1]:.1f} | {row[0] / row[1]:.2f} "
                  f"| {row[2]:.1f} | {row[3]:.1f} | {row[2] / row[3]:.2f} |", flush=True)
        del i, leaves, detached
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
