"""Issue 16 (GPU): fp8_block's fc2 dgrad + dGLU as one launch, grouped_gemm_kernel's EPI_DGLU
(the Triton launch at dglu_config of the fp8 ws config, what the op ran before) against the
warp-specialised Gluon kernel (ws_kernels.launch with ``dglu``, rings of 4 and 5 slots), at the
spec's three shapes, balanced counts, interleave 32, SwiGLU, dz's fp8 copy written: first the
outputs of both compared (dz and its copy bitwise, the dprob partials to rounding), then
triton.testing.do_bench medians in interleaved rounds, TFLOP/s of 2 T H F.

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run4_dglu_role.py [--rounds 5]
"""
import argparse
import dataclasses

import torch
import triton

from tilefuse.ops.grouped_glu_mlp import launch, recipes, ws_kernels
from tilefuse.ops.grouped_glu_mlp.configs import dglu_config, heuristic
from tilefuse.ops.grouped_glu_mlp.kernels import EPI_DGLU

SHAPES = {1: (8, 16384, 4096, 3584), 2: (64, 32768, 2048, 1408), 3: (128, 65536, 2048, 768)}


def operands(E, T, H, F):
    g = torch.Generator(device="cuda").manual_seed(T + F)
    counts = torch.full((E,), T // E, dtype=torch.int32, device="cuda")
    dy = torch.randn(T, H, generator=g, device="cuda").bfloat16()
    w2 = (torch.randn(E, H, F, generator=g, device="cuda") * 0.02).bfloat16()
    z = (torch.randn(T, 2 * F, generator=g, device="cuda") * 2).bfloat16()
    probs = torch.rand(T, generator=g, device="cuda")
    return counts, recipes.quantize_rows("fp8_block", dy), recipes.quantize_weight("fp8_block", w2, transpose=True), z, probs


def runs(E, T, H, F):
    counts, qa, qw, z, probs = operands(E, T, H, F)
    dcfg = dglu_config(dataclasses.replace(heuristic("fwd", 2, "fp8_block"), ws=True), "fp8_block")
    outs = {}

    def make(name, stages=None):
        dz = torch.empty(T, 2 * F, dtype=torch.bfloat16, device="cuda")
        part = torch.empty(T, 2 * F // 128, dtype=torch.float32, device="cuda")
        rows = recipes.empty_fp8_rows(T, 2 * F, "cuda")
        outs[name] = (dz, part, rows)
        if stages is None:
            return lambda: launch._gemm(EPI_DGLU, qa, qw, dz, counts, dcfg, K=H, N=F, b_strides=(0, 0, 0), ldc=2 * F,
                                        F=F, probs=probs, z=z, part=part, act=0, interleave=32, recipe="fp8_block",
                                        dz_rows=rows)

        def ws():
            assert ws_kernels.launch(qa, qw, dz, counts, N=F, probs=probs, stages=stages,
                                     dglu=(z, part, 0, 32, rows))
        return ws

    fns = {"triton dGLU": make("triton dGLU"), "ws dGLU 4 slots": make("ws dGLU 4 slots", 4),
           "ws dGLU 5 slots": make("ws dGLU 5 slots", 5)}
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    want = outs["triton dGLU"]
    for name in ("ws dGLU 4 slots", "ws dGLU 5 slots"):
        got = outs[name]
        same = (torch.equal(got[0].view(torch.int16), want[0].view(torch.int16)) and torch.equal(got[2].data, want[2].data)
                and torch.equal(got[2].scales.view(torch.int32), want[2].scales.view(torch.int32)))
        part_err = ((got[1] - want[1]).abs().max() / want[1].abs().max()).item()
        print(f"  {name}: dz and its fp8 copy bitwise the Triton launch's: {same}; "
              f"partials max |diff| / max |partial| {part_err:.2e}", flush=True)
    return fns


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    for s in map(int, args.shapes.split(",")):
        E, T, H, F = SHAPES[s]
        print(f"shape {s}: E {E} T {T} H {H} F {F}", flush=True)
        fns = runs(E, T, H, F)
        times = {n: [] for n in fns}
        for _ in range(args.rounds):
            for n, fn in fns.items():
                times[n].append(triton.testing.do_bench(fn, warmup=25, rep=200))
        flop = 2 * T * H * F
        base = sorted(times["triton dGLU"])[len(times["triton dGLU"]) // 2]
        for n, t in times.items():
            med = sorted(t)[len(t) // 2]
            print(f"  {n:18s} {med * 1e3:8.1f} us  {flop / med / 1e9:7.1f} TFLOP/s  {base / med:.3f}x "
                  f"[rounds {min(t) * 1e3:.1f}-{max(t) * 1e3:.1f} us]", flush=True)


if __name__ == "__main__":
    main()
