"""How close to a bf16 copy's bandwidth does each quantizer run?

Bytes moved (read + written) per second, as a share of a device copy (``x.clone()``) timed in
the same rounds, with the one harness (``tilefuse.tuning.timing.interleaved``: warm-up, CUDA
graph replay, interleaved rotating rounds, medians; the share is the median of the per-round
ratios). Sections (``--sections``, default both):

- ``step``: the fp8_block launches of a grouped_glu_mlp step, at the tiles
  ``quant.launch.FP8_TILES`` holds (``--tiles``: every candidate tile of each layout), on the
  tensors of the spec's shapes (``--shapes``, default 1; balanced counts): x (T, H) and h
  (T, F) row-wise (1x128, scales transposed) and column-wise (128x1 by expert, written
  transposed: recipes.quantize_cols), dz (T, 2F) column-wise, the weight pairs of W1 (E, 2F,
  H) and W2 (E, H, F) (the forward copy and the transposed dgrad copy from one read); dy is
  x's shape. Each tensor's launches share a round with a copy of that tensor (the floor: a
  pair moves a copy's bytes, a one-way copy 3/4 of them). The issue-6 target is 80% of copy.
- ``formats``: every format of ``tilefuse.quant`` on x 16384 x 4096: fp8_block 1x128 /
  128x128 / transposed layouts / a strided read, mxfp8 compact and swizzled, nvfp4 with the
  amax given or computed, 2-D swizzled, RHT, stochastic rounding.

    PYTHONPATH=src python3 benchmarks/quant_bandwidth.py [--sections step,formats] [--tiles] [--shapes 1,2,3] [--rounds 7]
    PYTHONPATH=src python3 benchmarks/quant_bandwidth.py --tiny     # CPU smoke test (interpreter, ~20 s)

Prints the versions, then per quantizer: tile (step), microseconds per call, GB/s, share of
copy. Time on the H200: about 30 s at shape 1 (the step section alone ~10 s, ~30 s with
``--tiles``); with ``--shapes 1,2,3 --tiles`` a few minutes (not yet timed).
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

from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES  # noqa: E402
from tilefuse.quant import launch  # noqa: E402
from tilefuse.tuning import timing  # noqa: E402
from tilefuse.tuning.sweep import poisoned_allocations  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

# layout: (block, launch kwargs, candidate tiles (BLOCK_M, widest BLOCK_K, warps), bytes per element);
# the column copy's kwargs get the counts (its tiles: 128 rows, a block of the grouped layout).
STEP = {
    "rows 1x128, scales transposed": ((1, 128), dict(scales_transposed=True),
                                      [(32, 128, 4), (64, 128, 4), (64, 128, 8), (128, 128, 8), (16, 128, 2),
                                       (32, 256, 4), (16, 512, 4)], 3),
    "cols 128x1 by expert, transposed": ((128, 1), dict(transpose=True),
                                         [(128, 64, 4), (128, 32, 4), (128, 64, 8), (128, 128, 8), (128, 128, 4),
                                          (128, 32, 2)], 3),
    "W 128x128 pair": ((128, 128), dict(with_transposed=True),
                       [(128, 128, 8), (128, 128, 16), (128, 128, 4), (256, 128, 8), (128, 256, 8)], 4),
}
# The layouts each tensor of a step goes through (dy: x's shape and layouts).
STEP_TENSORS = {"x": ("rows 1x128, scales transposed", "cols 128x1 by expert, transposed"),
                "h": ("rows 1x128, scales transposed", "cols 128x1 by expert, transposed"),
                "dz": ("cols 128x1 by expert, transposed",), "W1": ("W 128x128 pair",), "W2": ("W 128x128 pair",)}
TINY_SHAPE = (2, 256, 256, 128)


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


def step_tensors(shape):
    """The step's tensors at (E, T, H, F) and the experts' counts (balanced)."""
    e, t, h, f = shape
    counts = torch.full((e,), t // e, dtype=torch.int32, device=DEVICE)
    counts[0] += t - int(counts.sum())
    make = lambda *size: torch.randn(*size, device=DEVICE, dtype=torch.bfloat16)  # noqa: E731
    return {"x": make(t, h), "h": make(t, f), "dz": make(t, 2 * f), "W1": make(e, 2 * f, h), "W2": make(e, h, f)}, counts


def _bits(out) -> list:
    pairs = out if isinstance(out[0], tuple) else (out,)
    return [a.view(torch.uint8) for pair in pairs for a in pair]


def step_cases(t, layouts, counts, all_tiles):
    """Cases (name: (fn, bytes)) of ``t``'s layouts; with ``all_tiles`` each other tile's
    outputs are first compared bitwise with the shipped tile's, and one that differs (or
    raises) is printed and left out."""
    cases = {}
    for name in layouts:
        block, kw, tiles, per_elt = STEP[name]
        kw = dict(kw, counts=counts) if block == (128, 1) else kw
        shipped = launch.FP8_TILES[block]
        # Each tile's outputs made in poisoned memory (NaN), the shipped tile's too: the caching
        # allocator would otherwise hand a tile the block the last one's correct outputs left,
        # and a tile that writes nothing would compare equal
        if all_tiles:
            with poisoned_allocations():
                want = _bits(launch.fp8_block(t, block, False, **kw))
        else:
            want = None
        for tile in tiles if all_tiles else [shipped]:
            fn = with_tile(block, tile, lambda block=block, kw=kw: launch.fp8_block(t, block, False, **kw))
            if tile != shipped:
                try:
                    with poisoned_allocations():
                        got = _bits(fn())
                    same = all(torch.equal(a, b) for a, b in zip(got, want))
                except Exception as exc:  # noqa: BLE001 - a tile that does not compile or fit is reported
                    same = f"{type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''}"
                if same is not True:
                    print(f"  {name} tile {tile}: left out: {'outputs differ from the shipped tile' if same is False else same}")
                    continue
            cases[f"{name:32s} tile {str(tile):15s}"] = (fn, per_elt * t.numel())
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
    ap.add_argument("--shapes", default="1", help="step: the spec's shapes, e.g. 1,2,3 (default 1)")
    ap.add_argument("--tiny", action="store_true", help="small tensors; on a CPU, Triton's interpreter")
    args = ap.parse_args()
    gpu = torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU (Triton interpreter: numbers mean nothing)"
    print(f"torch {torch.__version__}, triton {triton.__version__}, {gpu}")
    torch.manual_seed(0)
    timer = None if DEVICE == "cuda" else timing.WallTimer()
    rounds = 2 if args.tiny and DEVICE == "cpu" else args.rounds
    sections = args.sections.split(",")
    if "step" in sections:
        shapes = {"tiny": TINY_SHAPE} if args.tiny else {int(s): DEFAULT_SHAPES[int(s) - 1]
                                                        for s in args.shapes.split(",")}
        for label, shape in shapes.items():
            tensors, counts = step_tensors(shape)
            for name, layouts in STEP_TENSORS.items():
                t = tensors[name]
                measure(f"shape {label} {shape}, {name}", step_cases(t, layouts, counts, args.tiles), t, rounds,
                        timer)
            del tensors
    if "formats" in sections:
        x = torch.randn(*((256, 256) if args.tiny else (16384, 4096)), device=DEVICE, dtype=torch.bfloat16)
        measure("every format", format_cases(x), x, rounds, timer)


if __name__ == "__main__":
    main()
