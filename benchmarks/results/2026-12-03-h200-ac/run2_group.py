"""Run 2: ws_rows' tile order grouped by GROUP_M row tiles (``_tile_coords``; the programs at
work then share B's columns and A's rows in L2) against the order so far (GROUP_M 1: a row
tile's column tiles side by side) and CUTLASS (torch._grouped_mm).

1. Correct: -ab run 1's small problems (experts ending inside a tile, empty experts, T below a
   tile, N off the tile), bf16, the four GEMMs, tiles 256x3 and 128x5, GROUP_M 1 / 3 / 8 / 16,
   1, 3 or all programs, outputs poisoned with NaN: bits against torch._grouped_mm.
2. Time: the four GEMMs (fc1, fc2, fc2 dgrad, fc1 dgrad) at the spec's three shapes, balanced
   and routed counts, interleaved, graph replay; each GEMM's outputs bitwise _grouped_mm's.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-ac/run2_group.py [--rounds 7]
"""
import argparse
import importlib.util
import pathlib

import torch

from tilefuse.ops.grouped_glu_mlp import ws_rows
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
from tilefuse.tuning import timing

_AB = pathlib.Path(__file__).resolve().parent.parent / "2026-12-03-h200-ab" / "run1_ws_rows.py"
_spec = importlib.util.spec_from_file_location("ab_run1", _AB)
ab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ab)   # roles, tensors, routed: -ab run 1's problems

TILES = ((256, 3), (128, 5))
GROUPS = (1, 8, 16)
VARIANTS = [(bn, s, g) for bn, s in TILES for g in GROUPS]


def check_small():
    cases = [([300, 0, 211, 17], 256, 192), ([64, 128, 192], 128, 128), ([1, 63, 65, 0, 640], 384, 256),
             ([0, 0, 513, 0], 256, 320), ([5, 7, 90, 20], 128, 136), ([40], 64, 96), ([130, 0, 0, 2], 200, 64),
             ([129] * 9 + [0, 1000], 256, 512)]
    n = same = skipped = 0
    for i, (counts, H, F) in enumerate(cases):
        t, w1, w2 = ab.tensors(counts, H, F, torch.bfloat16, i)
        c = torch.tensor(counts, dtype=torch.int32, device="cuda")
        offs = torch.cumsum(c, 0).to(torch.int32)
        for role, (a, w, rows, (ga, gb)) in ab.roles(t["x"], t["dy"], t["h"], t["dz"], w1, w2).items():
            want = torch._grouped_mm(ga, gb, offs=offs)
            for block_n, stages in TILES:
                for group_m in (1, 3, 8, 16):
                    for programs in (None, 1, 3):
                        got = torch.full_like(want, float("nan"))
                        if not ws_rows.launch(a, w, got, c, rows=rows, block_n=block_n, stages=stages,
                                              programs=programs, group_m=group_m):
                            skipped += 1
                            continue
                        n += 1
                        if torch.equal(got.view(torch.int16), want.view(torch.int16)):
                            same += 1
                        else:
                            print(f"  DIFFERS {role} counts {counts} H {H} F {F} tile {block_n}x{stages} "
                                  f"group {group_m} programs {programs}: nan {got.isnan().sum().item()}")
    print(f"small problems: {n} runs ({skipped} not applicable), {same} bitwise _grouped_mm", flush=True)


def time_shape(index, E, T, H, F, kind, rounds):
    counts = [T // E] * E if kind == "balanced" else ab.routed(E, T, index)
    t, w1, w2 = ab.tensors(counts, H, F, torch.bfloat16, index)
    c = torch.tensor(counts, dtype=torch.int32, device="cuda")
    offs = torch.cumsum(c, 0).to(torch.int32)
    total = {}
    for role, (a, w, rows, (ga, gb)) in ab.roles(t["x"], t["dy"], t["h"], t["dz"], w1, w2).items():
        want = torch._grouped_mm(ga, gb, offs=offs)
        out = torch.full_like(want, float("nan"))
        flop = 2 * T * a.shape[1] * want.shape[1]
        same = all(ws_rows.launch(a, w, out.fill_(float("nan")), c, rows=rows, block_n=bn, stages=s, group_m=g)
                   and torch.equal(out.view(torch.int16), want.view(torch.int16)) for bn, s, g in VARIANTS)

        def ours(bn, s, g):
            return lambda: ws_rows.launch(a, w, out, c, rows=rows, block_n=bn, stages=s, group_m=g)
        providers = {"CUTLASS": lambda: torch._grouped_mm(ga, gb, offs=offs),
                     **{f"ws {bn}x{s} g{g}": ours(bn, s, g) for bn, s, g in VARIANTS}}
        res = timing.interleaved(providers, rounds=rounds, graphs=True)
        print(f"shape {index} {kind} {role} (every variant bitwise _grouped_mm: {same}), ms, graph replay")
        for name, r in res.items():
            if isinstance(r, Exception):
                print(f"  {name:14s} FAILED {r}")
                continue
            total[name] = total.get(name, 0.0) + r.median_ms
            print(f"  {name:14s} {r.median_ms:7.3f} {flop / r.median_ms / 1e9:6.0f} TFLOP/s "
                  f"{timing.ratio(res['CUTLASS'], r):5.3f}x CUTLASS", flush=True)
    print(f"shape {index} {kind} four GEMMs: " + ", ".join(
        f"{k} {v:.3f} ms ({total['CUTLASS'] / v:.3f}x)" for k, v in total.items()), flush=True)


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
