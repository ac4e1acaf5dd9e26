"""Run 23 (GPU): the ws dGLU epilogue with each half's z loaded at once and dz's fp8 codes from
registers (ws_kernels._dglu_epilogue now) against the epilogue before it (run23_ws_before.py, the
module as it was at b00e1f5, loaded under the package so its relative imports resolve), whose
chunks each waited a memory round trip for their z and their dz read-back.

1. The fc2 dgrad + dGLU launch alone (ws_kernels.launch with ``dglu``), fp8_block, the spec's
   three shapes, balanced counts, SwiGLU: interleave 32 with dz's fp8 row-wise copy and the
   halves layout (without it); dz, its copy and the dprob partials of both modules against the
   Triton launch (grouped_gemm_kernel's EPI_DGLU: dz and the copy bitwise, partials to
   rounding), then do_bench medians in interleaved rounds.
2. fp8_block's forward + backward as users call it (interleave 32 and None), with either module
   in place (the package attribute swapped around each call, so a graph captures that module's
   kernel), CUDA-graph replays in interleaved rounds, the bf16 op as called beside them.

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run23_dglu_batched.py [--rounds 5] [--shapes 1,2,3]
"""
import argparse
import dataclasses
import importlib.util
from pathlib import Path

import torch
import triton

import tilefuse
import tilefuse.ops.grouped_glu_mlp as pkg
from tilefuse.ops.grouped_glu_mlp import launch, recipes, ws_kernels
from tilefuse.ops.grouped_glu_mlp.configs import dglu_config, heuristic
from tilefuse.ops.grouped_glu_mlp.kernels import EPI_DGLU
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
from tilefuse.tuning import timing

SHAPES = {1: (8, 16384, 4096, 3584), 2: (64, 32768, 2048, 1408), 3: (128, 65536, 2048, 768)}
_spec = importlib.util.spec_from_file_location("tilefuse.ops.grouped_glu_mlp.ws_before",
                                               Path(__file__).with_name("run23_ws_before.py"))
BEFORE = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(BEFORE)
MODULES = {"before": BEFORE, "batched": ws_kernels}


def role(E, T, H, F, interleave, rounds):
    g = torch.Generator(device="cuda").manual_seed(T + F + interleave)
    counts = torch.full((E,), T // E, dtype=torch.int32, device="cuda")
    qa = recipes.quantize_rows("fp8_block", torch.randn(T, H, generator=g, device="cuda").bfloat16())
    qw = recipes.quantize_weight("fp8_block", (torch.randn(E, H, F, generator=g, device="cuda") * 0.02).bfloat16(),
                                 transpose=True)
    z = (torch.randn(T, 2 * F, generator=g, device="cuda") * 2).bfloat16()
    probs = torch.rand(T, generator=g, device="cuda")
    dcfg = dglu_config(dataclasses.replace(heuristic("fwd", 2, "fp8_block"), ws=True), "fp8_block")
    quant = interleave != 0
    outs, fns = {}, {}
    for name in ("triton", *MODULES):
        dz = torch.full((T, 2 * F), float("nan"), dtype=torch.bfloat16, device="cuda")
        part = torch.full((T, 2 * F // 128), float("nan"), device="cuda")
        rows = recipes.empty_fp8_rows(T, 2 * F, "cuda") if quant else None
        outs[name] = (dz, part, rows)
        if name == "triton":
            fns[name] = (lambda dz=dz, part=part, rows=rows: launch._gemm(
                EPI_DGLU, qa, qw, dz, counts, dcfg, K=H, N=F, b_strides=(0, 0, 0), ldc=2 * F, F=F, probs=probs, z=z,
                part=part, act=0, interleave=interleave, recipe="fp8_block", dz_rows=rows))
        else:
            def ws(m=MODULES[name], dz=dz, part=part, rows=rows):
                assert m.launch(qa, qw, dz, counts, N=F, probs=probs, dglu=(z, part, 0, interleave, rows))
            fns[name] = ws
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    want = outs["triton"]
    for name in MODULES:
        got = outs[name]
        same = torch.equal(got[0].view(torch.int16), want[0].view(torch.int16))
        if quant:
            same = same and torch.equal(got[2].data.view(torch.uint8), want[2].data.view(torch.uint8)) and \
                torch.equal(got[2].scales.view(torch.int32), want[2].scales.view(torch.int32))
        err = ((got[1] - want[1]).abs().max() / want[1].abs().max()).item()
        print(f"  {name:8s}: dz{' and its fp8 copy' if quant else ''} bitwise the Triton launch's: {same}; "
              f"partials max |diff| / max |partial| {err:.2e}", flush=True)
    times = {n: [] for n in fns}
    for r in range(rounds):
        order = list(fns)[r % len(fns):] + list(fns)[:r % len(fns)]
        for n in order:
            times[n].append(triton.testing.do_bench(fns[n], warmup=25, rep=200))
    med = {n: sorted(t)[len(t) // 2] for n, t in times.items()}
    for n, t in times.items():
        print(f"  {n:8s} {med[n] * 1e3:8.1f} us  {2 * T * H * F / med[n] / 1e9:7.1f} TFLOP/s  "
              f"{med['before'] / med[n]:.3f}x before [rounds {min(t) * 1e3:.1f}-{max(t) * 1e3:.1f} us]", flush=True)


def step(i, leaves, interleave, recipe, module=None):
    def run():
        saved = pkg.ws_kernels
        if module is not None:
            pkg.ws_kernels = module
        try:
            y = tilefuse.grouped_glu_mlp(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"],
                                         activation="swiglu", glu_interleave=interleave, recipe=recipe)
            return (y, *torch.autograd.grad(y, list(leaves.values()), i["dy"]))
        finally:
            pkg.ws_kernels = saved
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default="1,2,3")
    ap.add_argument("--skip-role", action="store_true")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    shapes = [int(s) for s in args.shapes.split(",")]
    if not args.skip_role:
        for s in shapes:
            E, T, H, F = SHAPES[s]
            for interleave in (32, 0):
                print(f"dGLU launch, shape {s} (E {E} T {T} H {H} F {F}), interleave {interleave}", flush=True)
                role(E, T, H, F, interleave, args.rounds)
                torch.cuda.empty_cache()
    for s in shapes:
        E, T, H, F = SHAPES[s]
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(23 + s))
        leaves = {k: i[k].detach().requires_grad_(True) for k in ("x", "probs", "w1", "w2")}
        outs = {m: step(i, leaves, 32, "fp8_block", MODULES[m])() for m in MODULES}
        same = [torch.equal(a.view(torch.uint8), b.view(torch.uint8)) for a, b in zip(outs["before"], outs["batched"])]
        print(f"step, shape {s}: y, dx, dprobs, dw1, dw2 bitwise between the modules: {same}", flush=True)
        del outs
        providers = {}
        for il in (32, None):
            for m in MODULES:
                providers[f"fp8 il {il}, {m}"] = step(i, leaves, il, "fp8_block", MODULES[m])
            providers[f"bf16 il {il}"] = step(i, leaves, il, None)
        r = timing.interleaved(providers, rounds=args.rounds, graphs=True)
        for name, t in r.items():
            il = name.split(",")[0].split(" il ")[1]
            base = r[f"fp8 il {il}, before"] if name.startswith("fp8") else t
            print(f"  {name:24s} {t.median_ms:7.3f} ms [{t.min_ms:.3f}-{t.max_ms:.3f}]  "
                  f"{timing.ratio(base, t):.3f}x before  {timing.ratio(r[f'bf16 il {il}'], t):.3f}x bf16", flush=True)
        del i, leaves, providers, r
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
