"""Run 6 (run 5's script, which stopped on a provider's exception without printing it: the
eager steps' results kept their autograd graphs, and with them the leaves' AccumulateGrad
nodes, alive into the graph captures; here they are detached, each step is synchronised and
checked eagerly first, every provider's exception is printed, and providers that fail under
graph capture are timed eagerly instead): fc1 with the GLU in ws_rows' epilogue in the halves layout (glu_interleave None), the
op as users call it, forward + backward under graph replay, against the same op with that
epilogue turned off (fc1, then compose_glu_kernel: the tree before) and against interleave 32,
interleaved rounds (tilefuse.tuning.timing.interleaved); y and every gradient compared bitwise
between on and off first. The spec's three shapes, bf16, SwiGLU, no bias, balanced counts, the
built-in table. Call plans off, so that each provider's graph is captured on its own path.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ad/run6_halves.py
"""
import torch

import tilefuse
from tilefuse.ops.grouped_glu_mlp import plan as plans, ws_rows
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
from tilefuse.tuning import timing
from tilefuse import launches

ORIGINAL = ws_rows.glu_applies
OFF = {"halves": False}


def glu_applies(z_shape, block_n, h, probs, b1, act, interleave):
    if OFF["halves"] and (interleave is None or interleave == 0):
        return False
    return ORIGINAL(z_shape, block_n, h, probs, b1, act, interleave)


def main():
    ws_rows.glu_applies = glu_applies
    plans.ENABLED = False
    print(torch.__version__, torch.cuda.get_device_name(), "level", tilefuse.policy.get_level())
    print("| shape | halves, epilogue on ms | halves, epilogue off ms | on / off speedup [min-max over rounds] "
          "| interleave 32 ms | GLU epilogue launches on / off | bits on == off |")
    print("|---|---|---|---|---|---|---|")
    for index, (E, T, H, F) in enumerate(DEFAULT_SHAPES, 1):
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(index))
        c = i["counts"]
        leaves = [i[k].detach().requires_grad_() for k in ("x", "probs", "w1", "w2")]
        dy = torch.randn(T, H, dtype=torch.bfloat16, device="cuda")

        def step(inter):
            y = tilefuse.grouped_glu_mlp(leaves[0], c, *leaves[1:], glu_interleave=inter)
            return (y, *torch.autograd.grad(y, leaves, dy))

        def off():
            OFF["halves"] = True
            try:
                return step(None)
            finally:
                OFF["halves"] = False
        with launches.counting() as on_launches:
            got_on = tuple(t.detach() for t in step(None))   # no autograd graph kept alive (it
            torch.cuda.synchronize()                           # holds the leaves' AccumulateGrad
                                                               # nodes, which break a later capture)
        with launches.counting() as off_launches:
            got_off = tuple(t.detach() for t in off())
            torch.cuda.synchronize()
        ref = tuple(t.detach() for t in step(32))
        torch.cuda.synchronize()
        print(f"shape {index}: eager steps ran; y on / off / interleave 32 finite:",
              [bool(t[0].isfinite().all()) for t in (got_on, got_off, ref)], flush=True)
        same = all(torch.equal(a.view(torch.int16) if a.dtype == torch.bfloat16 else a,
                               b.view(torch.int16) if b.dtype == torch.bfloat16 else b)
                   for a, b in zip(got_on, got_off))
        providers = {"on": lambda: step(None), "off": off, "i32": lambda: step(32)}
        res = timing.interleaved(providers, rounds=5, graphs=True)
        failed = {n: r for n, r in res.items() if isinstance(r, Exception)}
        for n, r in failed.items():
            print(f"shape {index}: {n} under graph capture: {r!r}"[:600], flush=True)
        if failed:
            torch.cuda.synchronize()
            res = timing.interleaved(providers, rounds=5, graphs=False)
            print(f"shape {index}: all three timed eagerly (host costs included)", flush=True)
        on, off_t, i32 = res["on"], res["off"], res["i32"]
        ratios = [b / a for a, b in zip(on.samples_ms, off_t.samples_ms)]
        print(f"| {index} | {on.median_ms:.3f} | {off_t.median_ms:.3f} | {off_t.median_ms / on.median_ms:.3f} "
              f"[{min(ratios):.3f}-{max(ratios):.3f}] | {i32.median_ms:.3f} "
              f"| {on_launches['grouped_ws_rows_glu']} / {off_launches['grouped_ws_rows_glu']} | {same} |", flush=True)
        del i, leaves, got_on, got_off, ref
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
