"""Issue 16 (GPU): grouped_glu_mlp's fp8_block forward + backward as called, with the weights'
pair quantizer (quant.launch.FP8_TILES[(128, 128)]) on 4 warps (the tile since this run's
commit) and on 8 (the tile before), bf16 as called beside them, in one process: 3 interleaved
rounds of ``triton.testing.do_bench`` medians (-al layout.py's op_step and bench), the spec's
three shapes, balanced counts, interleave 32, SwiGLU, this GPU's table (built-in or cache).
The two tiles' outputs are first checked bitwise equal on one weight pair of each shape.

    PYTHONPATH=src python3 benchmarks/results/2026-12-05-h200-aq/wtile.py [--shapes 1,2,3] [--json F]
    TRITON_INTERPRET=1 PYTHONPATH=src python3 .../wtile.py --smoke   # CPU: the script only
"""
import argparse
import dataclasses
import importlib.util
import json
import os
import statistics
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2]))          # benchmarks/: quant_bandwidth's with_tile
if "--smoke" in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")
from quant_bandwidth import with_tile  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import recipes  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES  # noqa: E402
from tilefuse.quant import launch  # noqa: E402

SHAPES = dict(enumerate(DEFAULT_SHAPES, 1))
SHAPES[0] = (2, 256, 256, 128)   # --smoke
PAIR = (128, 128)
TILES = {"w4": (128, 128, 4), "w8": (128, 128, 8)}


def load_layout():
    path = HERE.parents[1] / "2026-12-05-h200-al" / "layout.py"
    spec = importlib.util.spec_from_file_location("al_layout", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def leaves(out):
    """The tensors of a quantize_weight_pair result (dataclasses, in a tuple or alone)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if dataclasses.is_dataclass(out):
        return [t for f in dataclasses.fields(out) for t in leaves(getattr(out, f.name))]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in leaves(o)]
    return []


def same_bits(w):
    """The weight pair quantized at both tiles: bitwise equal (data and scales, both copies)."""
    a, b = (leaves(with_tile(PAIR, t, lambda: recipes.quantize_weight_pair("fp8_block", w))())
            for t in TILES.values())
    assert len(a) == len(b) > 0
    return all(torch.equal(x.view(torch.uint8), y.view(torch.uint8)) for x, y in zip(a, b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1,2,3")
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    device = "cpu" if args.smoke else "cuda"
    layout = load_layout()
    layout.DEVICE = device
    if not args.smoke:
        print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    for shape in ([0] if args.smoke else [int(s) for s in args.shapes.split(",")]):
        E, T, H, F = SHAPES[shape]
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device=device,
                          generator=torch.Generator().manual_seed(shape))
        print(f"shape {shape}: weight pair bitwise equal at both tiles: {same_bits(i['w2'])}", flush=True)
        for k in ("x", "w1", "w2", "probs"):
            i[k].requires_grad_(True)
        i["leaves"] = [i[k] for k in ("x", "w1", "w2", "probs")]
        fp8 = layout.op_step(i, "fp8_block")
        providers = {"bf16": layout.op_step(i, None), **{f"fp8 {n}": with_tile(PAIR, t, fp8) for n, t in TILES.items()}}
        times = {k: [] for k in providers}
        rounds = 1 if args.smoke else 3
        for r in range(rounds):
            order = list(providers)[r % len(providers):] + list(providers)[:r % len(providers)]
            for k in order:
                providers[k]()
                times[k].append(layout.bench(providers[k], rep=200))
        ms = {k: statistics.median(v) for k, v in times.items()}
        print(f"shape {shape}: " + "  ".join(f"{k} {v:.3f} ms" for k, v in ms.items())
              + f"  | w4/w8 {ms['fp8 w8'] / ms['fp8 w4']:.3f}x  fp8 w4/bf16 {ms['bf16'] / ms['fp8 w4']:.3f}x"
              + f"  fp8 w8/bf16 {ms['bf16'] / ms['fp8 w8']:.3f}x", flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps({"shape": shape, "ms": ms, "rounds": times}) + "\n")
        del i, providers, fp8
        if device == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
