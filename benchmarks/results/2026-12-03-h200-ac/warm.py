"""Compile ahead of a sweep (run on the GPU): every choice the grouped_glu_mlp sweep times at
the keys of the standard grid not yet in this GPU's table, run once on the sweep's own inputs,
one process per epilogue (activation, interleave, bias) so Triton's compiles run side by side
on the host's cores. Nothing is timed or recorded; the sweep that follows finds the kernels in
Triton's cache.
    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-ac/warm.py [--jobs 8]
"""
import argparse
import multiprocessing as mp
import time
import traceback

import torch


def _uncovered():
    from tilefuse.ops.grouped_glu_mlp.tune import FAMILY
    from tilefuse.tuning import table
    out = {}
    for p in FAMILY.default_problems():
        if not table.is_covered("grouped_glu_mlp", p):
            out.setdefault((p.activation, p.interleave, p.has_bias), []).append(p)
    return out


def _warm(problems):
    from tilefuse.ops.grouped_glu_mlp.tune import FAMILY
    t0 = time.time()
    for p in problems:
        inputs = FAMILY.make_inputs(p, torch.device("cuda"), 0)
        for choice in [FAMILY.baseline(p)] + FAMILY.candidates(p):
            try:
                FAMILY.run(p, choice, inputs)
            except Exception as exc:  # noqa: BLE001 - the sweep reports it; this only warms
                print(f"  {FAMILY.key(p)} {FAMILY.describe(choice)}: {type(exc).__name__}: {str(exc)[:200]}")
        torch.cuda.synchronize()
        del inputs
        torch.cuda.empty_cache()
    return f"{problems[0].activation} s{problems[0].interleave} bias={problems[0].has_bias}: " \
           f"{len(problems)} keys in {time.time() - t0:.0f} s"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=8)
    args = ap.parse_args()
    groups = list(_uncovered().values())
    print(f"warming {sum(map(len, groups))} keys in {len(groups)} processes", flush=True)
    with mp.get_context("spawn").Pool(min(args.jobs, max(1, len(groups)))) as pool:
        for line in pool.imap_unordered(_warm, groups):
            print(" ", line, flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        raise
