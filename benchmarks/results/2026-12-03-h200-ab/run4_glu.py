"""Run 4: fc1 with the GLU in ws_rows' epilogue (compose._fc1_glu) against the two unfused
ways, at the spec's three shapes (balanced counts, interleave 32, SwiGLU, no bias; interleaved,
graph replay): CUTLASS's z then compose_glu_kernel (the compose route), ws_rows' z then
compose_glu_kernel, and the fused launch, at tiles 256x3 and 128x5. z and h checked bitwise
against the compose route's before timing.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-ab/run4_glu.py [--rounds 7]
"""
import argparse

import torch

from tilefuse.ops.grouped_glu_mlp import compose
from tilefuse.ops.grouped_glu_mlp.launch import ACTIVATIONS
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
from tilefuse.tuning import timing
from tilefuse.utils import cdiv

TILES = ((256, 3), (128, 5))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    print(torch.__version__, torch.cuda.get_device_name())
    glu_kernel = compose._glue_kernels()[0]
    glue = compose.DEFAULT_GLUE
    for index, (E, T, H, F) in enumerate(DEFAULT_SHAPES, 1):
        g = torch.Generator().manual_seed(index)
        x = torch.randn(T, H, generator=g).bfloat16().cuda()
        w1 = (torch.randn(E, 2 * F, H, generator=g) * 0.05).bfloat16().cuda()
        probs = torch.rand(T, generator=g).cuda()
        counts = torch.full((E,), T // E, dtype=torch.int32, device="cuda")
        ends = torch.cumsum(counts, 0).to(torch.int32)

        def glu(z, h):
            glu_kernel[(cdiv(T, glue.glu_block_m), cdiv(F, glue.glu_block_f))](
                z, z, ends, probs, h, T, F, E, z.stride(0), h.stride(0), 0, ACT=ACTIVATIONS["swiglu"], INTERLEAVE=32,
                HAS_BIAS=False, BLOCK_M=glue.glu_block_m, BLOCK_F=glue.glu_block_f, E_CHUNK=compose.E_CHUNK,
                num_warps=glue.num_warps)
            return z, h

        def cutlass():
            return glu(torch._grouped_mm(x, w1.transpose(-2, -1), offs=ends), torch.empty(T, F, dtype=x.dtype,
                                                                                         device="cuda"))

        def rows(bn, s):
            return lambda: glu(compose._rows_gemm(x, w1, by_rows=True, counts=counts, ends=ends, block_n=bn,
                                                  stages=s), torch.empty(T, F, dtype=x.dtype, device="cuda"))

        def fused(bn, s):
            def run():
                h = torch.empty(T, F, dtype=x.dtype, device="cuda")
                return compose._fc1_glu(x, w1, counts, probs, None, h, "swiglu", 32, bn, s), h
            return run
        want_z, want_h = cutlass()
        providers = {"CUTLASS + GLU kernel": cutlass}
        for bn, s in TILES:
            providers[f"ws_rows {bn}x{s} + GLU kernel"] = rows(bn, s)
            providers[f"ws_rows {bn}x{s} GLU epilogue"] = fused(bn, s)
        for name, fn in providers.items():
            z, h = fn()
            same = z is not None and torch.equal(z.view(torch.int16), want_z.view(torch.int16)) and torch.equal(
                h.view(torch.int16), want_h.view(torch.int16))
            print(f"shape {index} {name}: z and h bitwise the compose route's: {same}")
        res = timing.interleaved(providers, rounds=args.rounds, graphs=True)
        base = res["CUTLASS + GLU kernel"]
        for name, r in res.items():
            if isinstance(r, Exception):
                print(f"  {name:32s} FAILED {r}")
                continue
            print(f"  shape {index} {name:32s} {r.median_ms:7.3f} ms {timing.ratio(base, r):5.3f}x", flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
