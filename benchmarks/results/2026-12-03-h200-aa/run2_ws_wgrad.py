"""Run 2: fp8_block's weight gradients through the warp-specialised Gluon kernel
(ws_kernels.fp8_ws_wgrad_kernel) against grouped_wgrad_kernel at its heuristic tile.

1. Bitwise: small grouped problems with experts sharing 128-token blocks, empty experts, an
   expert inside one block, every token in one expert; ring depths 2, 3, 5; 1, 3 or all
   programs. Then the timed problems themselves.
2. Time: dW1 (dz^T x) and dW2 (dy^T h) on the column-wise copies at the spec's three shapes,
   balanced and routed (multinomial) counts, interleaved, CUDA-graph replay: the Triton
   heuristic, ws at ring depths 3 / 4 / 5, and torch._grouped_mm's bf16 wgrads (CUTLASS, the
   compose route's) on the same bf16 tensors.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-aa/run2_ws_wgrad.py [--rounds 7]
"""
import argparse

import torch

from tilefuse.ops.grouped_glu_mlp import launch, recipes, ws_kernels
from tilefuse.ops.grouped_glu_mlp.configs import heuristic
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
from tilefuse.tuning import timing

R = "fp8_block"
WCFG = heuristic("wgrad", 2, R)


def operands(counts, N, M, seed):
    g = torch.Generator().manual_seed(seed)
    T = sum(counts)
    a = torch.randn(T, N, generator=g).bfloat16().cuda()
    b = torch.randn(T, M, generator=g).bfloat16().cuda()
    return a, b, torch.tensor(counts, dtype=torch.int32, device="cuda")


def bitwise(qa, qb, counts, E, N, M, T, stages=3, programs=None):
    want = torch.full((E, N, M), float("nan"), dtype=torch.bfloat16, device="cuda")
    got = torch.full_like(want, float("nan"))
    launch._wgrad(qa, qb, want, counts, T, WCFG, R)
    assert ws_kernels.launch_wgrad(qa, qb, got, counts, stages=stages, programs=programs)
    return torch.equal(got.view(torch.int16), want.view(torch.int16)), (got.float() - want.float()).abs().max().item()


def check_small():
    cases = [([300, 0, 211, 17], 256, 384), ([128, 256, 384], 128, 128), ([1, 127, 129, 0, 640], 384, 128),
             ([1000], 128, 256), ([0, 0, 513, 0], 256, 256), ([5, 7, 90, 20], 128, 128), ([700, 0], 512, 128)]
    ok = bad = 0
    for i, (counts, N, M) in enumerate(cases):
        a, b, c = operands(counts, N, M, i)
        qa, qb = recipes.quantize_cols(R, a), recipes.quantize_cols(R, b)
        for stages in (2, 3, ws_kernels.MAX_STAGES):
            for programs in (None, 1, 3):
                same, diff = bitwise(qa, qb, c, len(counts), N, M, sum(counts), stages, programs)
                ok += same
                bad += not same
                if not same:
                    print(f"  MISMATCH counts {counts} N {N} M {M} stages {stages} programs {programs}: max |diff| {diff}")
    print(f"small problems: {ok} bitwise, {bad} not", flush=True)
    return bad == 0


def routed(E, T, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(E, generator=g)
    return torch.bincount(torch.multinomial(w, T, replacement=True, generator=g), minlength=E).tolist()


def time_shape(index, E, T, H, F, counts_kind, rounds):
    counts = [T // E] * E if counts_kind == "balanced" else routed(E, T, index)
    g = torch.Generator().manual_seed(index)
    dz = torch.randn(T, 2 * F, generator=g).bfloat16().cuda()
    x = torch.randn(T, H, generator=g).bfloat16().cuda()
    dy = torch.randn(T, H, generator=g).bfloat16().cuda()
    h = torch.randn(T, F, generator=g).bfloat16().cuda()
    c = torch.tensor(counts, dtype=torch.int32, device="cuda")
    ends = torch.cumsum(c, 0).to(torch.int32)
    q = {k: recipes.quantize_cols(R, t) for k, t in (("dz", dz), ("x", x), ("dy", dy), ("h", h))}
    dw1 = torch.empty(E, 2 * F, H, dtype=torch.bfloat16, device="cuda")
    dw2 = torch.empty(E, H, F, dtype=torch.bfloat16, device="cuda")
    # bitwise at the timed problem first
    for name, (qa, qb, out) in {"dW1": (q["dz"], q["x"], dw1), "dW2": (q["dy"], q["h"], dw2)}.items():
        same, diff = bitwise(qa, qb, c, E, out.shape[1], out.shape[2], T)
        print(f"  shape {index} {counts_kind} {name}: {'bitwise' if same else f'NOT bitwise (max {diff})'}", flush=True)
    flop = 2 * T * 2 * F * H + 2 * T * H * F

    def triton_heur():
        launch._wgrad(q["dz"], q["x"], dw1, c, T, WCFG, R)
        launch._wgrad(q["dy"], q["h"], dw2, c, T, WCFG, R)

    def ws(stages):
        def run():
            ws_kernels.launch_wgrad(q["dz"], q["x"], dw1, c, stages=stages)
            ws_kernels.launch_wgrad(q["dy"], q["h"], dw2, c, stages=stages)
        return run

    def cutlass():
        torch._grouped_mm(dz.t(), x, offs=ends)
        torch._grouped_mm(dy.t(), h, offs=ends)

    providers = {"triton heuristic (128x64 w4 s3 r168)": triton_heur, "ws s3": ws(3), "ws s4": ws(4),
                 "ws s5": ws(5), "bf16 _grouped_mm": cutlass}
    res = timing.interleaved(providers, rounds=rounds, graphs=True)
    base = res["triton heuristic (128x64 w4 s3 r168)"]
    print(f"shape {index} (E {E} T {T} H {H} F {F}) {counts_kind}: dW1 + dW2, ms, {rounds} rounds, graph replay")
    for name, r in res.items():
        if isinstance(r, Exception):
            print(f"  {name:38s} FAILED {r}")
            continue
        print(f"  {name:38s} {r.median_ms:7.3f} [{r.min_ms:.3f}-{r.max_ms:.3f}] {flop / r.median_ms / 1e9:6.0f} TFLOP/s"
              f"  {timing.ratio(base, r):5.2f}x triton", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    print(torch.__version__, torch.cuda.get_device_name())
    check_small()
    for s in [int(v) for v in args.shapes.split(",")]:
        for kind in ("balanced", "routed"):
            time_shape(s, *DEFAULT_SHAPES[s - 1], kind, args.rounds)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
