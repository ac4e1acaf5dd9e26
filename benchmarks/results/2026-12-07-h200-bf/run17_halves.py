"""Issue 16 (GPU): fp8_block in the halves layout (glu_interleave=None, Hugging Face's gate_up_proj
order) with fc1 + GLU and the fc2 dgrad + dGLU through the warp-specialised kernel
(ws_kernels' halves path), against what that layout ran before: the same ws config with the
Triton GLU and dGLU launches (rows_glu False), and the heuristic tiles (what the op runs at a key
without a table entry, as every fp8_block halves key is today).

1. Bits: on small ragged problems and on each timed shape's inputs, forward + backward through
   op.fused_apply with each config; y, dx, dw1, dw2 (and db1, db2 with biases) bitwise between
   all three, dprobs to rounding (the ws dGLU sums each 64-wide half's partials in another
   order), the ws GLU and dGLU launches counted.
2. Time: forward + backward, balanced counts, CUDA-graph replays in interleaved rounds: the
   three fp8 configs, the bf16 op as called in the same layout and fp8_block as called at
   interleave 32 (the layout whose key the tables hold); then each fp8 step's kernels
   (torch.profiler), the GLU and dGLU launches among them.

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run17_halves.py [--rounds 5] [--shapes 1,2,3]
"""
import argparse
import dataclasses

import torch

import tilefuse
from tilefuse import launches
from tilefuse.check import bench
from tilefuse.ops.grouped_glu_mlp.configs import heuristic
from tilefuse.ops.grouped_glu_mlp.op import fused_apply
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
from tilefuse.tuning import timing

SHAPES = {1: (8, 16384, 4096, 3584), 2: (64, 32768, 2048, 1408), 3: (128, 65536, 2048, 768)}
HEUR = heuristic("fwd", 2, "fp8_block")
WS = dataclasses.replace(HEUR, ws=True, side_stream=False)      # the tables' fp8 winner at interleave 32
CONFIGS = {"ws, ws GLU + dGLU": WS, "ws, Triton GLU + dGLU": dataclasses.replace(WS, rows_glu=False),
           "heuristic": HEUR}
NAMES = ("x", "probs", "w1", "w2", "b1", "b2")


def leaves_of(i):
    return {k: i[k].detach().requires_grad_(True) for k in NAMES if i[k] is not None}


def fp8_step(i, leaves, cfg, interleave=None):
    def run():
        y = fused_apply(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"], leaves.get("b1"),
                        leaves.get("b2"), "swiglu", interleave, cfg, recipe="fp8_block")
        return (y, *torch.autograd.grad(y, list(leaves.values()), i["dy"]))
    return run


def op_step(i, leaves, interleave, recipe=None):
    def run():
        y = tilefuse.grouped_glu_mlp(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"],
                                     activation="swiglu", glu_interleave=interleave, fc1_bias=leaves.get("b1"),
                                     fc2_bias=leaves.get("b2"), recipe=recipe)
        return (y, *torch.autograd.grad(y, list(leaves.values()), i["dy"]))
    return run


def bits(i, label) -> bool:
    """Every config's outputs against the heuristic's: bitwise but dprobs (to rounding)."""
    leaves = leaves_of(i)
    names = ("y",) + tuple(k for k in NAMES if i[k] is not None)
    outs, ran = {}, {}
    for name, cfg in CONFIGS.items():
        with launches.counting() as launched:
            outs[name] = fp8_step(i, leaves, cfg)()
        torch.cuda.synchronize()
        ran[name] = (launched["grouped_fp8_ws_glu"], launched["grouped_fp8_ws_dglu"], launched["grouped_fp8_ws_gemm"])
    want = outs["heuristic"]
    ok = ran["ws, ws GLU + dGLU"] == (1, 1, 2) and ran["ws, Triton GLU + dGLU"] == (0, 0, 2) and ran["heuristic"] == (
        0, 0, 0)
    bad = []
    for name in CONFIGS:
        for n, g, w in zip(names, outs[name], want):
            if n == "probs":   # dprobs: each 64-wide half's partials summed in another order
                tol = 128 * torch.finfo(torch.float32).eps * w.float().abs().max().item()
                if not ((g.float() - w.float()).abs().max().item() <= tol and torch.equal(g.isnan(), w.isnan())):
                    bad.append(f"{name}: d{n}")
            elif not torch.equal(g.view(torch.int16) if g.dtype == torch.bfloat16 else g,
                                 w.view(torch.int16) if w.dtype == torch.bfloat16 else w):
                bad.append(f"{name}: {'y' if n == 'y' else 'd' + n}")
    print(f"  bits {label}: launches (ws GLU, ws dGLU, ws store GEMMs) {ran}; "
          f"{'every output as the heuristic' if not bad and ok else 'DIFFERENT ' + str(bad) + ' ' + str(ok)}",
          flush=True)
    return not bad and ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    all_ok = True
    for seed, (counts, H, F, bias) in enumerate((([70, 0, 45, 13], 256, 128, True), ([300, 1, 0, 211], 384, 384, False),
                                                  ([513], 128, 256, True))):
        i = random_inputs(counts, H, F, torch.bfloat16, bias=bias, device="cuda",
                          generator=torch.Generator().manual_seed(seed))
        all_ok &= bits(i, f"counts {counts} H {H} F {F} bias {bias}")
    for s in map(int, args.shapes.split(",")):
        E, T, H, F = SHAPES[s]
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(10 + s))
        all_ok &= bits(i, f"shape {s}")
        leaves = leaves_of(i)
        providers = {f"fp8 halves, {name}": fp8_step(i, leaves, cfg) for name, cfg in CONFIGS.items()}
        providers["bf16 halves, the op as called"] = op_step(i, leaves, None)
        providers["fp8 interleave 32, the op as called"] = op_step(i, leaves, 32, "fp8_block")
        r = timing.interleaved(providers, rounds=args.rounds, graphs=True)
        flops = 3 * 2 * T * H * 3 * F
        bf16 = r["bf16 halves, the op as called"]
        print(f"shape {s} (E {E} T {T} H {H} F {F}), forward + backward, graph replay, {args.rounds} rounds:",
              flush=True)
        for name, t in r.items():
            if isinstance(t, Exception):
                print(f"  {name:40s} FAILED {bench.error_text(t)}", flush=True)
                continue
            print(f"  {name:40s} {t.median_ms:7.3f} ms [{t.min_ms:.3f}-{t.max_ms:.3f}] {flops / t.median_ms / 1e9:6.0f}"
                  f" TFLOP/s  {timing.ratio(bf16, t):.3f}x bf16", flush=True)
        base = r["fp8 halves, heuristic"]
        for name in ("fp8 halves, ws, ws GLU + dGLU", "fp8 halves, ws, Triton GLU + dGLU"):
            print(f"  {name} / heuristic: {timing.ratio(base, r[name]):.3f}x faster", flush=True)
        print(f"  ws GLU + dGLU / Triton GLU + dGLU: "
              f"{timing.ratio(r['fp8 halves, ws, Triton GLU + dGLU'], r['fp8 halves, ws, ws GLU + dGLU']):.3f}x faster",
              flush=True)
        for name in ("fp8 halves, ws, ws GLU + dGLU", "fp8 halves, ws, Triton GLU + dGLU"):
            fn = providers[name]
            fn()
            rows, _ = bench.kernel_times(fn, "cuda", 3)
            print(f"  profile {name}: GPU kernel time per step {sum(x['us'] for x in rows) / 1e3:.3f} ms", flush=True)
            for x in rows[:7]:
                print(f"    {x['us'] / 1e3:8.3f} ms {x['calls']:5.1f}x  {x['kernel'][:80]}", flush=True)
        del i, leaves, providers
        torch.cuda.empty_cache()
    print("ALL BITS OK" if all_ok else "SOME BITS DIFFER", flush=True)


if __name__ == "__main__":
    main()
