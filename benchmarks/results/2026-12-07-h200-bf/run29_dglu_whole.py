"""Run 29 (GPU): the ws dGLU epilogue with SwiGLU's whole-tile z loaded before either half is
computed (one memory round trip a tile in the interleaved layouts, where it takes two: one a
half) against the package's ws_kernels. The form is the package's source with WHOLE's three
code edits of 01eb86d applied (run28_scale_bound.variant: written to a temporary file, loaded
under the package; an edit that no longer matches the source fails its assert).
run23_dglu_batched.py's role(): the launch alone at the spec's three shapes, SwiGLU at interleave 32 with dz's fp8
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


# 01eb86d's code edits to _dglu_epilogue (its docstring and comment edits left out)
EDITS = [("""        BATCH: gl.constexpr = 64 if ACT == SWIGLU else 32
""", """        BATCH: gl.constexpr = 64 if ACT == SWIGLU else 32
        WHOLE: gl.constexpr = ACT == SWIGLU and INTERLEAVE != 0
"""),
         ("""        for half in gl.static_range(BLOCK_N // 64):
            partial = gl.zeros([HALF], gl.float32, row_l)""", """        zga = ()   # WHOLE: every chunk's gate and up runs of the tile, half by half
        zua = ()
        if WHOLE:
            for h in gl.static_range(BLOCK_N // 64):
                for c in gl.static_range(0, 64, CHUNK):
                    gate, up_off = _dglu_cols(col0, h, c, cols, F, INTERLEAVE)
                    z_at = z_ptr + rows64[:, None] * ldz + gate[None, :]
                    zga = zga + (gl.load(z_at, mask=mask, other=0.0),)
                    zua = zua + (gl.load(z_at + up_off, mask=mask, other=0.0),)
        for half in gl.static_range(BLOCK_N // 64):
            partial = gl.zeros([HALF], gl.float32, row_l)"""),
         ("""                for c in gl.static_range(b, b + BATCH, CHUNK):
                    gate, up_off = _dglu_cols(col0, half, c, cols, F, INTERLEAVE)
                    z_at = z_ptr + rows64[:, None] * ldz + gate[None, :]
                    zgs = zgs + (gl.load(z_at, mask=mask, other=0.0),)
                    zus = zus + (gl.load(z_at + up_off, mask=mask, other=0.0),)
""", """                for c in gl.static_range(b, b + BATCH, CHUNK):
                    if WHOLE:
                        zgs = zgs + (zga[half * (64 // CHUNK) + c // CHUNK],)
                        zus = zus + (zua[half * (64 // CHUNK) + c // CHUNK],)
                    else:
                        gate, up_off = _dglu_cols(col0, half, c, cols, F, INTERLEAVE)
                        z_at = z_ptr + rows64[:, None] * ldz + gate[None, :]
                        zgs = zgs + (gl.load(z_at, mask=mask, other=0.0),)
                        zus = zus + (gl.load(z_at + up_off, mask=mask, other=0.0),)
""")]
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
        for interleave in (32, 0):
            print(f"dGLU launch, shape {s} (E {E} T {T} H {H} F {F}), interleave {interleave}", flush=True)
            RUN23.role(E, T, H, F, interleave, args.rounds)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
