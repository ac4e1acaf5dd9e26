"""grouped_glu_mlp forward + backward as called, bf16 and fp8_block, each with this GPU's swept
table (``--tuned DIR``: a TILEFUSE_CACHE_DIR that ``tilefuse tune`` filled on this GPU) and
without one (an empty cache folder: where no built-in table matches the GPU, every key runs its
baseline: bf16 the compose route on CUTLASS GEMMs, fp8_block the fused Triton kernels at their
heuristic tiles). One process, the table switched between providers (``tuning.reload``; the
op's call plans follow the table's generation), ``triton.testing.do_bench`` medians (-al layout.py's op_step and bench), 3
interleaved rounds, at the spec's three shapes with balanced counts, interleave 32, SwiGLU.
Each provider's launches (``tilefuse.launches``) are printed once, so which kernels ran is on
record.

    PYTHONPATH=src python3 benchmarks/results/2026-12-05-h200-ap/steps.py --tuned DIR [--json F]
    TRITON_INTERPRET=1 PYTHONPATH=src python3 .../steps.py --tuned DIR --smoke   # CPU: the script only
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import tempfile
from pathlib import Path

import torch

from tilefuse import launches, tuning
from tilefuse.ops.grouped_glu_mlp.api import problem_for
from tilefuse.ops.grouped_glu_mlp.op import route
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES

SHAPES = dict(enumerate(DEFAULT_SHAPES, 1))
SHAPES[0] = (2, 256, 256, 128)   # --smoke


def use_table(folder: str) -> None:
    os.environ["TILEFUSE_CACHE_DIR"] = folder
    tuning.reload()


def load_layout():
    """-al's layout.py as a module: its op step (forward + backward as called) and timing."""
    path = Path(__file__).resolve().parents[1] / "2026-12-05-h200-al" / "layout.py"
    spec = importlib.util.spec_from_file_location("al_layout", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tuned", required=True, help="the TILEFUSE_CACHE_DIR tilefuse tune filled on this GPU")
    ap.add_argument("--shapes", default="1,2,3")
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    device = "cpu" if args.smoke else "cuda"
    if args.smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    layout = load_layout()
    layout.DEVICE = device
    if not args.smoke:
        print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    empty = tempfile.mkdtemp()
    tables = {"untuned": empty, "tuned": args.tuned}
    for shape in ([0] if args.smoke else [int(s) for s in args.shapes.split(",")]):
        E, T, H, F = SHAPES[shape]
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device=device,
                          generator=torch.Generator().manual_seed(shape))
        for k in ("x", "w1", "w2", "probs"):
            i[k].requires_grad_(True)
        i["leaves"] = [i[k] for k in ("x", "w1", "w2", "probs")]
        providers = {(r or "bf16", t): (layout.op_step(i, r), folder)
                     for r in (None, "fp8_block") for t, folder in tables.items()}
        for (name, tag), (fn, folder) in providers.items():
            use_table(folder)
            with launches.counting() as launched:
                fn()
            problem = problem_for(i["x"], i["w2"], "swiglu", 32, False, None if name == "bf16" else name)
            found = route(problem, i["x"].device)
            print(f"shape {shape} {name} {tag}: route {getattr(found, 'name', found)}; "
                  f"launches {dict(sorted(launched.items()))}", flush=True)
        times = {k: [] for k in providers}
        rounds = 1 if args.smoke else 3
        for r in range(rounds):
            order = list(providers)[r % len(providers):] + list(providers)[:r % len(providers)]
            for k in order:
                fn, folder = providers[k]
                use_table(folder)
                fn()
                times[k].append(layout.bench(fn, rep=200))
        ms = {f"{n} {t}": statistics.median(v) for (n, t), v in times.items()}
        print(f"shape {shape}: " + "  ".join(f"{k} {v:.3f} ms" for k, v in ms.items())
              + f"  | fp8/bf16 untuned {ms['bf16 untuned'] / ms['fp8_block untuned']:.3f}x"
              + f"  tuned {ms['bf16 tuned'] / ms['fp8_block tuned']:.3f}x"
              + f"  | tuned/untuned bf16 {ms['bf16 untuned'] / ms['bf16 tuned']:.3f}x"
              + f"  fp8 {ms['fp8_block untuned'] / ms['fp8_block tuned']:.3f}x", flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps({"shape": shape, "ms": ms}) + "\n")
        del i, providers
        if device == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
