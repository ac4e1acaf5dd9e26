"""Issue 16 (GPU): fp8_block's fc1 + GLU through the warp-specialised Gluon kernel
(ws_kernels.launch with ``glu``: z tile rounded into shared memory, stored, and the GLU read
from it) against the launch the table's fp8 configs ran so far (grouped_gemm_kernel's EPI_GLU at
glu_config of the heuristic tile, as launch.forward runs it), per spec shape, SwiGLU,
interleave 32, the tuner's ragged counts: z and h compared bit for bit, then timed
(``tilefuse.tuning.timing.interleaved``, CUDA-graph replay, rotating rounds; medians, TFLOP/s
of fc1, ws / Triton per round). Also the store roles (fc2, fc1 dgrad) through the ws kernel as
it now runs (chunk pairs, MAX_STAGES ring) beside the Triton launch of the heuristic tile.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ai/ws_glu_roles.py [--rounds 7]
"""
import argparse
import sys
from pathlib import Path

import torch

from tilefuse.ops.grouped_glu_mlp import launch, recipes, ws_kernels
from tilefuse.ops.grouped_glu_mlp.configs import glu_config, heuristic
from tilefuse.ops.grouped_glu_mlp.kernels import EPI_GLU, EPI_STORE
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
from tilefuse.tuning import timing

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ws_overlap_roles import routed_counts  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    cfg = heuristic("fwd", 2, "fp8_block")
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__}; Triton tile {cfg.name}, "
          f"its GLU launch {glu_config(cfg, 'fp8_block').name}", flush=True)
    for si, (E, T, H, F) in enumerate(DEFAULT_SHAPES, 1):
        counts = routed_counts(E, T, dev, g)
        x = torch.randn(T, H, generator=g, device=dev).bfloat16()
        w1 = (torch.randn(E, 2 * F, H, generator=g, device=dev) * H ** -0.5).bfloat16()
        probs = torch.rand(T, generator=g, device=dev)
        qx, qw1 = recipes.quantize_rows("fp8_block", x), recipes.quantize_weight("fp8_block", w1)
        outs = {}
        for name in ("triton", "ws"):
            outs[name] = (torch.full((T, 2 * F), float("nan"), dtype=torch.bfloat16, device=dev),
                          torch.full((T, F), float("nan"), dtype=torch.bfloat16, device=dev))

        def triton_glu(z=outs["triton"][0], h=outs["triton"][1]):
            launch._gemm(EPI_GLU, qx, qw1, h, counts, glu_config(cfg, "fp8_block"), K=H, N=F, b_strides=(0, 0, 0),
                         ldc=F, F=F, probs=probs, z=z, act=0, interleave=32, recipe="fp8_block")

        def ws_glu(z=outs["ws"][0], h=outs["ws"][1]):
            assert ws_kernels.launch(qx, qw1, z, counts, N=2 * F, probs=probs, glu=(h, 0, 32))

        triton_glu()
        ws_glu()
        print(f"shape {si} fc1 + GLU: z bitwise {torch.equal(outs['ws'][0].view(torch.int16), outs['triton'][0].view(torch.int16))}"
              f", h bitwise {torch.equal(outs['ws'][1].view(torch.int16), outs['triton'][1].view(torch.int16))}",
              flush=True)
        res = timing.interleaved({"fc1 + GLU triton": triton_glu, "fc1 + GLU ws": ws_glu}, rounds=args.rounds,
                                 graphs=True)
        flops = 2 * T * H * 2 * F
        base = res["fc1 + GLU triton"]
        for name, r in res.items():
            print(f"  shape {si} ({E}, {T}, {H}, {F}) {name:17s} {r.median_ms:7.3f} ms [{r.min_ms:.3f}-{r.max_ms:.3f}] "
                  f"{flops / r.median_ms / 1e9:6.0f} TFLOP/s  {timing.ratio(base, r):.3f}x triton", flush=True)
        del qx, qw1, outs
        for role, K in (("fc2", F), ("fc1 dgrad", 2 * F)):
            a = torch.randn(T, K, generator=g, device=dev).bfloat16()
            w = (torch.randn(E, H, K, generator=g, device=dev) * K ** -0.5).bfloat16()
            qa, qw = recipes.quantize_rows("fp8_block", a), recipes.quantize_weight("fp8_block", w)
            ct = torch.full((T, H), float("nan"), dtype=torch.bfloat16, device=dev)
            cw = torch.full_like(ct, float("nan"))

            def triton_store(c=ct):
                launch._gemm(EPI_STORE, qa, qw, c, counts, cfg, K=K, N=H, b_strides=(0, 0, 0), ldc=H,
                             recipe="fp8_block")

            def ws_store(c=cw):
                assert ws_kernels.launch(qa, qw, c, counts, N=H)

            triton_store()
            ws_store()
            print(f"shape {si} {role}: bitwise {torch.equal(ct.view(torch.int16), cw.view(torch.int16))}", flush=True)
            res = timing.interleaved({"triton": triton_store, "ws": ws_store}, rounds=args.rounds, graphs=True)
            flops = 2 * T * H * K
            for name, r in res.items():
                print(f"  shape {si} {role:9s} {name:6s} {r.median_ms:7.3f} ms [{r.min_ms:.3f}-{r.max_ms:.3f}] "
                      f"{flops / r.median_ms / 1e9:6.0f} TFLOP/s  {timing.ratio(res['triton'], r):.3f}x triton",
                      flush=True)


if __name__ == "__main__":
    main()
