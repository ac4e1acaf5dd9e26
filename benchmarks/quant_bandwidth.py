"""How close to a bf16 copy's bandwidth does each quantizer run?

Bytes moved (read + written) per second, as a share of a device copy (``x.clone()``) timed in
the same rounds, with the one harness (``tilefuse.tuning.timing.interleaved``: warm-up, CUDA
graph replay, interleaved rotating rounds, medians; the share is the median of the per-round
ratios). Sections (``--sections``, default both):

- ``step``: the three fp8_block layouts a grouped_glu_mlp step launches, at the tiles
  ``quant.launch.FP8_TILES`` holds (``--tiles``: every candidate tile of each layout):
  rows 1x128 with scales transposed and columns 128x1 written transposed (x 16384 x 4096), the
  128x128 weight pair (W 8 x 7168 x 4096: the forward copy and the transposed dgrad copy from
  one read). The issue-6 target is 80% of copy.
- ``formats``: every format of ``tilefuse.quant`` on x 16384 x 4096: fp8_block 1x128 /
  128x128 / transposed layouts / a strided read, mxfp8 compact and swizzled, nvfp4 with the
  amax given or computed, 2-D swizzled, RHT, stochastic rounding.

    PYTHONPATH=src python3 benchmarks/quant_bandwidth.py [--sections step,formats] [--tiles] [--rounds 7]
    PYTHONPATH=src python3 benchmarks/quant_bandwidth.py --tiny     # CPU smoke test (interpreter, ~20 s)

Prints the versions, then per quantizer: tile (step), microseconds per call, GB/s, share of
copy. Time on the H200: about 30 s (the step section alone ~10 s, ~30 s with ``--tiles``).
Replaces quant_bench.py (``formats``) and grouped_fp8_variants.py's ``--quantizers-only``
(``step``; results/2026-11-30-h200-f holds that script).
"""

import argparse
import os
import sys

import torch

TINY = "--tiny" in sys.argv
if TINY and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")   # before tilefuse imports triton.language

import triton  # noqa: E402

from tilefuse.quant import launch  # noqa: E402
from tilefuse.tuning import timing  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

# layout: (block, launch kwargs, candidate tiles (BLOCK_M, widest BLOCK_K, warps), tensor, bytes per element)
STEP = {
    "rows 1x128, scales transposed": ((1, 128), dict(scales_transposed=True),
                                      [(32, 128, 4), (64, 128, 4), (64, 128, 8), (128, 128, 8), (32, 256, 4),
                                       (16, 512, 4)], "x", 3),
    "cols 128x1, written transposed": ((128, 1), dict(transpose=True, pad_rows=True),
                                       [(128, 64, 4), (128, 128, 8), (128, 32, 4), (256, 64, 8)], "x", 3),
    "W 128x128 pair": ((128, 128), dict(with_transposed=True), [(128, 128, 8), (128, 128, 16)], "w", 4),
}


def with_tile(block, tile, fn):
    """``fn`` run with FP8_TILES[block] = tile (read at launch time, so a captured graph keeps
    the tile it was captured with)."""
    def run():
        old = launch.FP8_TILES[block]
        launch.FP8_TILES[block] = tile
        try:
            return fn()
        finally:
            launch.FP8_TILES[block] = old
    return run


def step_cases(x, w, all_tiles):
    cases = {}
    for name, (block, kw, tiles, which, per_elt) in STEP.items():
        t = {"x": x, "w": w}[which]
        for tile in tiles if all_tiles else [launch.FP8_TILES[block]]:
            cases[f"{name:32s} tile {str(tile):15s}"] = (
                with_tile(block, tile, lambda t=t, block=block, kw=kw: launch.fp8_block(t, block, False, **kw)),
                per_elt * t.numel())
    return cases


def format_cases(x):
    n = x.numel()
    amax = x.float().abs().amax()
    bits = torch.randint(-2**31, 2**31 - 1, x.shape, device=x.device, dtype=torch.int32)
    return {
        "fp8_block 1x128": (lambda: launch.fp8_block(x, (1, 128), False), 3 * n + n // 32),
        "fp8_block 128x128": (lambda: launch.fp8_block(x, (128, 128), False), 3 * n),
        "fp8_block 1x128 scales transposed": (lambda: launch.fp8_block(x, (1, 128), False, scales_transposed=True),
                                              3 * n + n // 32),
        "fp8_block 128x1 written transposed": (lambda: launch.fp8_block(x, (128, 1), False, transpose=True),
                                               3 * n + n // 32),
        "fp8_block 128x128 written transposed": (lambda: launch.fp8_block(x, (128, 128), False, transpose=True),
                                                 3 * n),
        "fp8_block 1x128 of x^T (strided read)": (lambda: launch.fp8_block(x.t(), (1, 128), False),
                                                  3 * n + n // 32),
        "mxfp8 compact": (lambda: launch.mxfp8(x, False), 3 * n + n // 32),
        "mxfp8 swizzled": (lambda: launch.mxfp8(x, True), 3 * n + n // 32),
        "nvfp4 amax given": (lambda: launch.nvfp4(x, amax, False, False, None, False), 2.5 * n + n // 16),
        "nvfp4 amax computed": (lambda: launch.nvfp4(x, None, False, False, None, False), 4.5 * n + n // 16),
        "nvfp4 2d swizzled": (lambda: launch.nvfp4(x, amax, True, False, None, True), 2.5 * n + n // 16),
        "nvfp4 rht": (lambda: launch.nvfp4(x, amax, False, True, None, False), 2.5 * n + n // 16),
        "nvfp4 stochastic": (lambda: launch.nvfp4(x, amax, False, False, bits, False), 6.5 * n + n // 16),
    }


def measure(title, cases, x, rounds, timer):
    """Time ``cases`` (name: (fn, bytes)) beside a copy of ``x`` in the same rounds; print."""
    copy_bytes = 2 * x.numel() * x.element_size()
    providers = {"copy": lambda: x.clone(), **{name: fn for name, (fn, _) in cases.items()}}
    t = timing.interleaved(providers, rounds=rounds, graphs=True, timer=timer)
    copy = t["copy"]
    if isinstance(copy, Exception):
        raise copy
    print(f"\n{title}: copy {tuple(x.shape)} {x.dtype}: {copy_bytes / copy.median_ms / 1e6:.0f} GB/s "
          f"({copy.median_ms * 1e3:.1f} us)")
    for name, (_, nbytes) in cases.items():
        r = t[name]
        if isinstance(r, Exception):
            print(f"  {name}: {type(r).__name__}: {str(r).splitlines()[0][:90] if str(r) else ''}")
            continue
        share = nbytes / copy_bytes * timing.ratio(copy, r)
        print(f"  {name}: {r.median_ms * 1e3:8.1f} us {nbytes / r.median_ms / 1e6:6.0f} GB/s = {share:4.0%} of copy"
              f" (spread {r.spread:.0%})", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="step,formats", help="step, formats or both (default)")
    ap.add_argument("--tiles", action="store_true", help="step: every candidate tile, not only the default")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    ap.add_argument("--tiny", action="store_true", help="small tensors; on a CPU, Triton's interpreter")
    args = ap.parse_args()
    gpu = torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU (Triton interpreter: numbers mean nothing)"
    print(f"torch {torch.__version__}, triton {triton.__version__}, {gpu}")
    torch.manual_seed(0)
    rows, cols, experts, wrows = (256, 256, 2, 128) if args.tiny else (16384, 4096, 8, 7168)
    x = torch.randn(rows, cols, device=DEVICE, dtype=torch.bfloat16)
    timer = None if DEVICE == "cuda" else timing.WallTimer()
    rounds = 2 if args.tiny and DEVICE == "cpu" else args.rounds
    sections = args.sections.split(",")
    if "step" in sections:
        w = torch.randn(experts, wrows, cols, device=DEVICE, dtype=torch.bfloat16)
        measure("fp8_block layouts of a grouped_glu_mlp step", step_cases(x, w, args.tiles), x, rounds, timer)
        del w
    if "formats" in sections:
        measure("every format", format_cases(x), x, rounds, timer)


if __name__ == "__main__":
    main()
