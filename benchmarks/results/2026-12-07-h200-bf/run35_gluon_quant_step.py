"""Run 35 (GPU): does the Gluon quantizer move fp8_block's step? The op as called (benchmarks/
grouped_compose_gpu_check.py's fp8_block provider, the device's table, interleave 32 and the
halves layout, balanced counts) with x's, h's and dy's copies and dz's column-wise copy through
fp8_block's Triton launches (recipes.GLUON_COLS_STAGES None, the default) and through
quant.launch.fp8_cols_gluon (its tile kernel, 0, and its TMA ring of 3), each set while that
provider's step runs and is captured: outputs and gradients bitwise first, then interleaved rounds
as CUDA-graph replays (device time), then each one's GPU kernel times per step (torch.profiler).

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run35_gluon_quant_step.py [--rounds 5] [--shapes 1,2,3]
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/
import grouped_compose_gpu_check as check  # noqa: E402

from tilefuse.check import bench  # noqa: E402
from tilefuse.ops.grouped_glu_mlp import recipes  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs  # noqa: E402
from tilefuse.tuning import timing  # noqa: E402

SHAPES = {1: (8, 16384, 4096, 3584), 2: (64, 32768, 2048, 1408), 3: (128, 65536, 2048, 768)}
FORMS = {"triton": None, "gluon tile": 0, "gluon ring": 3}


def with_stages(step, stages):
    def run():
        recipes.GLUON_COLS_STAGES = stages
        try:
            return step()
        finally:
            recipes.GLUON_COLS_STAGES = None
    return run


def flat(out):
    """The step's tensors (y, then each gradient) in order."""
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for part in out for t in flat(part)]


def same(a, b):
    a, b = flat(a), flat(b)
    return len(a) == len(b) > 1 and all(
        u.dtype == v.dtype and u.shape == v.shape and torch.equal(u.view(torch.uint8), v.view(torch.uint8))
        for u, v in zip(a, b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    for s in map(int, args.shapes.split(",")):
        E, T, H, F = SHAPES[s]
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(s))
        for interleave in (32, None):
            step = check.providers_for(i, interleave, names=("fp8_block",))["fp8_block"]
            providers = {name: with_stages(step, stages) for name, stages in FORMS.items()}
            outs = {name: fn() for name, fn in providers.items()}
            bits = {name: same(out, outs["triton"]) for name, out in outs.items() if name != "triton"}
            print(f"shape {s}: E {E} T {T} H {H} F {F}, interleave {interleave}; bitwise the Triton launches' step: "
                  f"{bits}", flush=True)
            del outs
            r = timing.interleaved(providers, rounds=args.rounds, graphs=True)
            for name in FORMS:
                m = r[name]
                print(f"  graph replay {name:10s} {m.median_ms:.3f} ms [{m.min_ms:.3f}-{m.max_ms:.3f}]"
                      f"  {timing.ratio(r['triton'], m):.4f}x the Triton launches' step", flush=True)
            for name, fn in providers.items():
                fn()
                rows, _ = bench.kernel_times(fn, "cuda", 5)
                total = sum(row["us"] for row in rows) / 1e3
                quant = sum(row["us"] for row in rows if "fp8" in row["kernel"] and "gemm" not in row["kernel"]) / 1e3
                print(f"  profile {name}: GPU kernel time per step {total:.3f} ms, quantizers {quant:.3f} ms",
                      flush=True)
            del providers, step
            torch.cuda.empty_cache()
        del i
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
