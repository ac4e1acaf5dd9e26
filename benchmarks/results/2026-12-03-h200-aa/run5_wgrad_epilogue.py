"""Run 5: run 3's program with ws_wgrad's epilogue as a choice: the tile stored through a TMA
store from shared memory (EPI_TMA, each consumer's buffer written by stmatrix, the store
asynchronous: the next tile's products start while it drains) or through pointers (run 3's).
(Run 3's docstring follows.) The 16-bit weight gradients warp-specialised in Gluon
(ops/grouped_glu_mlp/ws_wgrad.py) against torch._grouped_mm's (CUTLASS: what the compose
route runs) and grouped_wgrad_kernel.

1. Correct: small grouped problems (experts whose rows end inside a chunk, empty experts, T
   not a multiple of 64, M not a multiple of the tile), tiles 128 / 256 columns, rings of 2-4,
   1, 3 or all programs: normwise error against float64, and whether the bits equal
   grouped_wgrad_kernel's (bf16 heuristic tile, same chunk order) and _grouped_mm's.
2. Time: dW1 (dz^T x) + dW2 (dy^T h) at the spec's three shapes, balanced and routed
   (multinomial) counts, interleaved, CUDA-graph replay.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-aa/run5_wgrad_epilogue.py [--rounds 7]
"""
import argparse

import torch

from tilefuse.ops.grouped_glu_mlp import launch, ws_wgrad
from tilefuse.ops.grouped_glu_mlp.configs import heuristic
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
from tilefuse.tuning import timing
from tilefuse.utils import normwise_rel_error

# (block_m, stages, epilogue through TMA)
TILES = ((256, 3, False), (256, 4, False), (256, 3, True), (128, 4, True), (128, 5, True))


def reference(a, b, counts):
    out, s = [], 0
    for c in counts:
        out.append(a[s:s + c].double().t() @ b[s:s + c].double())
        s += c
    return torch.stack(out)


def check_small():
    cases = [([300, 0, 211, 17], 256, 384), ([64, 128, 192], 128, 128), ([1, 63, 65, 0, 640], 384, 256),
             ([1000], 128, 512), ([0, 0, 513, 0], 256, 320), ([5, 7, 90, 20], 128, 128), ([0, 0], 128, 128)]
    worst, same_triton, same_cutlass, n = 0.0, 0, 0, 0
    for i, (counts, N, M) in enumerate(cases):
        g = torch.Generator().manual_seed(i)
        T = sum(counts)
        a = torch.randn(T, N, generator=g).bfloat16().cuda()
        b = torch.randn(T, M, generator=g).bfloat16().cuda()
        c = torch.tensor(counts, dtype=torch.int32, device="cuda")
        ref = reference(a, b, counts)
        tri = torch.empty(len(counts), N, M, dtype=torch.bfloat16, device="cuda")
        launch._wgrad(a, b, tri, c, T, heuristic("wgrad", 2), None)
        cut = torch._grouped_mm(a.t(), b, offs=torch.cumsum(c, 0).to(torch.int32)) if T else tri
        for block_m, stages, epi in TILES:
            for programs in (None, 1, 3):
                got = torch.full_like(tri, float("nan"))
                ran = ws_wgrad.launch(a, b, got, c, block_m=block_m, stages=stages, programs=programs, epi_tma=epi)
                if T == 0:
                    print(f"  T 0: launch ran {ran} (expected False)")
                    continue
                err = normwise_rel_error(got, ref)
                worst = max(worst, err)
                n += 1
                same_triton += torch.equal(got.view(torch.int16), tri.view(torch.int16))
                same_cutlass += torch.equal(got.view(torch.int16), cut.view(torch.int16))
                if not err < 1e-2 or got.isnan().any():
                    print(f"  BAD counts {counts} N {N} M {M} tile {block_m} s{stages} tma {epi} p{programs}: "
                          f"err {err:.2e}")
    print(f"small problems: {n} runs, worst normwise error vs float64 {worst:.2e}; bitwise grouped_wgrad_kernel "
          f"in {same_triton}, _grouped_mm in {same_cutlass}", flush=True)


def routed(E, T, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.bincount(torch.multinomial(torch.rand(E, generator=g), T, replacement=True, generator=g),
                          minlength=E).tolist()


def time_shape(index, E, T, H, F, kind, rounds):
    counts = [T // E] * E if kind == "balanced" else routed(E, T, index)
    g = torch.Generator().manual_seed(index)
    dz, x = torch.randn(T, 2 * F, generator=g).bfloat16().cuda(), torch.randn(T, H, generator=g).bfloat16().cuda()
    dy, h = torch.randn(T, H, generator=g).bfloat16().cuda(), torch.randn(T, F, generator=g).bfloat16().cuda()
    c = torch.tensor(counts, dtype=torch.int32, device="cuda")
    ends = torch.cumsum(c, 0).to(torch.int32)
    dw1 = torch.empty(E, 2 * F, H, dtype=torch.bfloat16, device="cuda")
    dw2 = torch.empty(E, H, F, dtype=torch.bfloat16, device="cuda")
    cut1, cut2 = torch._grouped_mm(dz.t(), x, offs=ends), torch._grouped_mm(dy.t(), h, offs=ends)
    for block_m, stages, epi in TILES:
        dw1.fill_(float("nan"))
        dw2.fill_(float("nan"))
        assert ws_wgrad.launch(dz, x, dw1, c, block_m=block_m, stages=stages, epi_tma=epi)
        assert ws_wgrad.launch(dy, h, dw2, c, block_m=block_m, stages=stages, epi_tma=epi)
        same = torch.equal(dw1.view(torch.int16), cut1.view(torch.int16)) and torch.equal(dw2.view(torch.int16),
                                                                                         cut2.view(torch.int16))
        print(f"  shape {index} {kind} tile {block_m} s{stages} tma {epi}: {'bitwise' if same else 'NOT bitwise'} "
              f"_grouped_mm (normwise dW1 {normwise_rel_error(dw1, cut1):.2e})", flush=True)
    flop = 2 * T * 2 * F * H + 2 * T * H * F

    def ws(block_m, stages, epi):
        def run():
            ws_wgrad.launch(dz, x, dw1, c, block_m=block_m, stages=stages, epi_tma=epi)
            ws_wgrad.launch(dy, h, dw2, c, block_m=block_m, stages=stages, epi_tma=epi)
        return run

    def cutlass():
        torch._grouped_mm(dz.t(), x, offs=ends)
        torch._grouped_mm(dy.t(), h, offs=ends)

    def triton_heur():
        launch._wgrad(dz, x, dw1, c, T, heuristic("wgrad", 2), None)
        launch._wgrad(dy, h, dw2, c, T, heuristic("wgrad", 2), None)

    providers = {"bf16 _grouped_mm (CUTLASS)": cutlass,
                 **{f"ws {bm} s{s} {'tma' if e else 'ptr'}": ws(bm, s, e) for bm, s, e in TILES}}
    res = timing.interleaved(providers, rounds=rounds, graphs=True)
    base = res["bf16 _grouped_mm (CUTLASS)"]
    print(f"shape {index} (E {E} T {T} H {H} F {F}) {kind}: dW1 + dW2, ms, {rounds} rounds, graph replay")
    for name, r in res.items():
        if isinstance(r, Exception):
            print(f"  {name:30s} FAILED {r}")
            continue
        print(f"  {name:30s} {r.median_ms:7.3f} [{r.min_ms:.3f}-{r.max_ms:.3f}] {flop / r.median_ms / 1e9:6.0f} "
              f"TFLOP/s  {timing.ratio(base, r):5.2f}x CUTLASS", flush=True)


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
