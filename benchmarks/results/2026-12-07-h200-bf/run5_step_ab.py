"""Issue 16 (GPU): does the ws dGLU (ws_kernels.TAKES_DGLU) move fp8_block's step? The op as
called (benchmarks/grouped_compose_gpu_check.py's fp8_block provider, the device's table,
interleave 32, balanced counts) with the fc2 dgrad + dGLU through the ws kernel and through the
Triton launch (TAKES_DGLU False while that provider's step runs and is captured), timed in
interleaved rounds as CUDA-graph replays (device time) and as eager calls; then each one's GPU
kernel times per step (torch.profiler), the dGLU launch among them.

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run5_step_ab.py [--rounds 15] [--shapes 1,2,3]
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/
import grouped_compose_gpu_check as check  # noqa: E402

from tilefuse.check import bench  # noqa: E402
from tilefuse.ops.grouped_glu_mlp import ws_kernels  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs  # noqa: E402
from tilefuse.tuning import timing  # noqa: E402

SHAPES = {1: (8, 16384, 4096, 3584), 2: (64, 32768, 2048, 1408), 3: (128, 65536, 2048, 768)}


def triton_dglu(step):
    def run():
        ws_kernels.TAKES_DGLU = False
        try:
            return step()
        finally:
            ws_kernels.TAKES_DGLU = True
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    for s in map(int, args.shapes.split(",")):
        E, T, H, F = SHAPES[s]
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(s))
        step = check.providers_for(i, 32, names=("fp8_block",))["fp8_block"]
        providers = {"ws dGLU": step, "triton dGLU": triton_dglu(step)}
        print(f"shape {s}: E {E} T {T} H {H} F {F}, interleave 32", flush=True)
        for graphs in (True, False):
            r = timing.interleaved(providers, rounds=args.rounds, graphs=graphs)
            ws, tr = r["ws dGLU"], r["triton dGLU"]
            print(f"  {'graph replay' if graphs else 'eager'}: ws dGLU {ws.median_ms:.3f} ms "
                  f"[{ws.min_ms:.3f}-{ws.max_ms:.3f}], triton dGLU {tr.median_ms:.3f} ms [{tr.min_ms:.3f}-{tr.max_ms:.3f}]"
                  f"; ws faster by {timing.ratio(tr, ws):.4f}x (median of per-round ratios)", flush=True)
        for name, fn in providers.items():
            fn()
            rows, _ = bench.kernel_times(fn, "cuda", 5)
            total = sum(r["us"] for r in rows) / 1e3
            print(f"  profile {name}: GPU kernel time per step {total:.3f} ms", flush=True)
            for r in rows[:8]:
                print(f"    {r['us'] / 1e3:8.3f} ms {r['calls']:5.1f}x  {r['kernel'][:90]}", flush=True)
        del i, providers, step
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
