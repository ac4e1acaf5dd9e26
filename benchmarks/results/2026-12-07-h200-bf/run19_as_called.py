"""Issue 16 (GPU): fp8_block in the halves layout as users call it (tilefuse.grouped_glu_mlp,
glu_interleave=None), now that the card's built-in table holds the halves keys (run 18's sweep):
which kernels a call launches (the ws store GEMMs, fc1 + GLU and the fc2 dgrad + dGLU), and its
time against the heuristic config (what such a call ran before those entries), the bf16 op as
called in the same layout and fp8_block as called at interleave 32; CUDA-graph replays,
interleaved rounds, balanced counts, the spec's shapes.

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run19_as_called.py [--rounds 5] [--shapes 1,2,3]
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run17_halves import HEUR, SHAPES, fp8_step, leaves_of, op_step  # noqa: E402

from tilefuse import launches  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs  # noqa: E402
from tilefuse.tuning import timing  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    for s in map(int, args.shapes.split(",")):
        E, T, H, F = SHAPES[s]
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(20 + s))
        leaves = leaves_of(i)
        providers = {"fp8 halves, the op as called": op_step(i, leaves, None, "fp8_block"),
                     "fp8 halves, heuristic config": fp8_step(i, leaves, HEUR),
                     "bf16 halves, the op as called": op_step(i, leaves, None),
                     "fp8 interleave 32, the op as called": op_step(i, leaves, 32, "fp8_block")}
        with launches.counting() as launched:
            providers["fp8 halves, the op as called"]()
        torch.cuda.synchronize()
        ran = {k: launched[k] for k in ("grouped_fp8_ws_gemm", "grouped_fp8_ws_glu", "grouped_fp8_ws_dglu",
                                        "grouped_mlp_fwd", "grouped_mlp_bwd")}
        print(f"shape {s} (E {E} T {T} H {H} F {F}): the fp8 halves call launched {ran}", flush=True)
        r = timing.interleaved(providers, rounds=args.rounds, graphs=True)
        bf16, heur = r["bf16 halves, the op as called"], r["fp8 halves, heuristic config"]
        for name, t in r.items():
            print(f"  {name:38s} {t.median_ms:7.3f} ms [{t.min_ms:.3f}-{t.max_ms:.3f}]  {timing.ratio(bf16, t):.3f}x bf16"
                  f"  {timing.ratio(heur, t):.3f}x the heuristic", flush=True)
        del i, leaves, providers
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
