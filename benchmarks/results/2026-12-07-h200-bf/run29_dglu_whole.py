"""Run 29 (GPU): the ws dGLU epilogue with SwiGLU's whole-tile z loaded before either half is
computed (one memory round trip a tile in the interleaved layouts, where it took two: one a
half; run29_ws_whole.py, ws_kernels.py as 01eb86d had it, loaded under the package so its
relative imports resolve) against the package's ws_kernels (3256e44's: the change was taken
back out of the package until a GPU has measured it). run23_dglu_batched.py's
role(): the launch alone at the spec's three shapes, SwiGLU at interleave 32 with dz's fp8
copy (and the halves layout, unchanged, as a control), dz, its copy and the dprob partials of
both modules against the Triton launch (dz and the copy bitwise, partials to rounding), then
do_bench medians of interleaved rounds.

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run29_dglu_whole.py [--rounds 5] [--shapes 1,2,3]
"""
import argparse
import importlib.util
from pathlib import Path

import torch
import triton

from tilefuse.ops.grouped_glu_mlp import ws_kernels


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


RUN23 = _load("run23_dglu_batched", "run23_dglu_batched.py")
WHOLE = _load("tilefuse.ops.grouped_glu_mlp.ws_whole29", "run29_ws_whole.py")
RUN23.MODULES = {"before": ws_kernels, "whole": WHOLE}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    for s in (int(x) for x in args.shapes.split(",")):
        E, T, H, F = RUN23.SHAPES[s]
        for interleave in (32, 0):
            print(f"dGLU launch, shape {s} (E {E} T {T} H {H} F {F}), interleave {interleave}", flush=True)
            RUN23.role(E, T, H, F, interleave, args.rounds)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
