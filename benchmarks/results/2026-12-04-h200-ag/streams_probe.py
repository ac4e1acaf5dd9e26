"""Issue 16 probe (GPU): the compose route's backward with its two independent GEMM pairs on two
streams. The backward's five launches run one after another today: fc2 dgrad (dh), the dGLU,
fc1 dgrad (dx), dW1, dW2. dW2 needs only dy and h, and dW1 only dz and x, so each weight
gradient can run beside a dgrad. Each GEMM is persistent, one program an SM; its last wave
leaves SMs idle (about 3% of a row GEMM at shape 1). On a second stream the next kernel's
programs take those SMs as the first one's programs finish.

Variants, same kernels and tiles (the table's entry for the key), bitwise the same gradients:
- ``one stream``: compose.backward as shipped;
- ``streams dh|dx first``: main stream dh, dGLU, dx; a side stream forked at the start runs dW2,
  then waits for the dGLU and runs dW1; the dgrads enqueued before the weight gradients;
- ``streams dw first``: the same streams, each weight gradient enqueued before its dgrad.

Timed: the backward alone at the spec's three shapes (balanced counts, SwiGLU, interleave 32,
no bias), graph replay, interleaved rounds.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ag/streams_probe.py [--rounds 7]
"""
import argparse

import torch

from tilefuse.ops.grouped_glu_mlp import compose
from tilefuse.ops.grouped_glu_mlp.api import problem_for
from tilefuse.ops.grouped_glu_mlp.compose import (ACTIVATIONS, E_CHUNK, DEFAULT_GLUE, _glue_kernels, _launcher,
                                                  _rows_gemm, _wgrad)
from tilefuse.ops.grouped_glu_mlp.op import route
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
from tilefuse.tuning import timing
from tilefuse.utils import cdiv

SHAPES = ((8, 16384, 4096, 3584), (64, 32768, 2048, 1408), (128, 65536, 2048, 768))
SIDE = {}


def backward_streams(dy, x, counts, ends, probs, w1, w2, z, h, activation, interleave, wgrad_block_m, wgrad_stages,
                     rows_block_n, rows_stages, dw_first):
    """compose.backward without biases, dW2 and dW1 on a side stream."""
    glue = DEFAULT_GLUE
    _, dglu_kernel, _ = _glue_kernels()
    T, H = x.shape
    E, F = w2.shape[0], w2.shape[2]
    main = torch.cuda.current_stream()
    side = SIDE.setdefault(x.device, torch.cuda.Stream(x.device))
    rows_tile = dict(counts=counts, ends=ends, block_n=rows_block_n, stages=rows_stages)
    side.wait_stream(main)

    def dw2():
        with torch.cuda.stream(side):
            return _wgrad(dy, h, counts, ends, E, wgrad_block_m, wgrad_stages)

    if dw_first:
        out_dw2 = dw2()
    dh = _rows_gemm(dy, w2, by_rows=False, **rows_tile)
    if not dw_first:
        out_dw2 = dw2()
    dz = torch.empty((T, 2 * F), dtype=x.dtype, device=x.device)
    dprobs = torch.empty((T,), dtype=probs.dtype, device=x.device)
    _launcher(dglu_kernel, glue.num_warps)(
        (cdiv(T, glue.dglu_block_m),),
        (dh, z, z, ends, probs, dy, z, dz, dprobs, T, F, H, E, dh.stride(0), z.stride(0), dz.stride(0), dy.stride(0),
         0, 0),
        (ACTIVATIONS[activation], interleave or 0, False, False, glue.dglu_block_m, glue.dglu_block_f,
         glue.dglu_block_f, E_CHUNK))

    def dw1():
        side.wait_stream(main)
        with torch.cuda.stream(side):
            return _wgrad(dz, x, counts, ends, E, wgrad_block_m, wgrad_stages)

    if dw_first:
        out_dw1 = dw1()
    dx = _rows_gemm(dz, w1, by_rows=False, **rows_tile)
    if not dw_first:
        out_dw1 = dw1()
    main.wait_stream(side)
    return dx, dprobs, out_dw1, out_dw2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    for index, (E, T, H, F) in enumerate(SHAPES, 1):
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(index))
        path = route(problem_for(i["x"], i["w2"], "swiglu", 32, False), torch.device("cuda"))
        tile = compose.gluon_tiles(path)
        x, counts, probs, w1, w2, dy = i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["dy"]
        y, z, h, ends = compose.forward(x, counts, probs, w1, w2, None, None, "swiglu", 32, *tile[2:])
        args_ = (dy, x, counts, ends, probs, w1, w2, z, h, "swiglu", 32, *tile[:4])
        ref = compose.backward(dy, x, counts, ends, probs, w1, w2, None, None, z, h, "swiglu", 32, *tile[:4])[:4]
        for dw_first in (False, True):
            got = backward_streams(*args_, dw_first)
            torch.cuda.synchronize()
            same = all(torch.equal(a, b) for a, b in zip(ref, got))
            print(f"shape {index} (tile {tile}): streams dw_first={dw_first} bitwise one stream: {same}", flush=True)
        providers = {
            "one stream": lambda: compose.backward(dy, x, counts, ends, probs, w1, w2, None, None, z, h, "swiglu", 32,
                                                   *tile[:4]),
            "streams dh|dx first": lambda: backward_streams(*args_, False),
            "streams dw first": lambda: backward_streams(*args_, True),
        }
        res = timing.interleaved(providers, rounds=args.rounds, graphs=True)
        base = res["one stream"]
        for name, r in res.items():
            if isinstance(r, Exception):
                print(f"  {name:22s} FAILED {r!r}"[:300], flush=True)
                continue
            print(f"  {name:22s} {r.median_ms:8.3f} ms [{r.min_ms:.3f} - {r.max_ms:.3f}]  "
                  f"{timing.ratio(base, r):.3f}x one stream", flush=True)
        del i, providers, ref, y, z, h
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
