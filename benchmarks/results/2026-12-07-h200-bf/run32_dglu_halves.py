"""Run 32 (GPU): the ws dGLU epilogue loading the whole tile's z at once for SwiGLU in the
halves layout too (WHOLE for every SwiGLU layout; 5dca66e takes it in the interleaved layouts
only, since the whole tile at once had kept a stack in the halves layout when run 23's form was
written: that build now has none under triton 3.6 or 3.8). The package's module against that
one-line edit of it (run28_scale_bound.variant), with run 23's harness (role(): dz, its copy
and the dprob partials against the Triton launch, then do_bench medians of interleaved
rounds); interleave 32, which the edit leaves as it is, is the control.

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run32_dglu_halves.py [--rounds 5] [--shapes 1,2,3]
"""
import argparse
import importlib.util
from pathlib import Path

import torch
import triton

from tilefuse.ops.grouped_glu_mlp import ws_kernels

EDITS = [("WHOLE: gl.constexpr = ACT == SWIGLU and INTERLEAVE != 0", "WHOLE: gl.constexpr = ACT == SWIGLU")]


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


RUN23 = _load("run23_dglu_batched", "run23_dglu_batched.py")
RUN23.MODULES = {"before": ws_kernels, "whole": _load("run28_scale_bound", "run28_scale_bound.py").variant("whole", EDITS)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    for s in (int(x) for x in args.shapes.split(",")):
        E, T, H, F = RUN23.SHAPES[s]
        for interleave in (0, 32):
            print(f"dGLU launch, shape {s} (E {E} T {T} H {H} F {F}), interleave {interleave}", flush=True)
            RUN23.role(E, T, H, F, interleave, args.rounds)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
