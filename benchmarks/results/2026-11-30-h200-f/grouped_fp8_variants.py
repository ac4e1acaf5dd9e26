"""H200: variants of grouped_glu_mlp's fp8_block pieces that the heuristics choose between:
the fp8 quantizer's tile per operand layout, and the wgrad's program order (GROUP_N) and tiles.
Bandwidth against a device copy measured in the same run; do_bench medians.

    PYTHONPATH=src:benchmarks python3 benchmarks/results/2026-11-30-h200-f/grouped_fp8_variants.py [--quantizers-only] [--default-tiles]

(As of 85c9125, the version runs 1-4 here ran, moved from benchmarks/: run it from the root
of a tree whose benchmarks/ holds grouped_profile_fp8.py (9519587 to 19941c5). Earlier runs
ran earlier versions: `git show <tree>:benchmarks/grouped_fp8_variants.py`. Its quantizer
half is now benchmarks/quant_bandwidth.py --sections step [--tiles].)
"""
import functools

import torch
import triton

from tilefuse.ops.grouped_glu_mlp import launch, recipes
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig
from tilefuse.quant import launch as qlaunch

from grouped_profile_fp8 import SHAPES, bench, problem

bench = functools.partial(bench, rep=100)


def quantizer_tiles(default_only=False):
    """Each fp8 quantizer layout of a step at its tiles: the 1x128 rows copy, the 128x1 column
    copy written transposed, and the weights' 128x128 pair (forward and transposed dgrad copies
    from one read). default_only: the tiles quant.launch.FP8_TILES holds."""
    x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8, 7168, 4096, device="cuda", dtype=torch.bfloat16)
    copy_ms = bench(lambda: x.clone())
    copy_gbs = 4 * x.numel() / copy_ms / 1e6
    print(f"copy bf16 16384x4096: {copy_gbs:.0f} GB/s")
    cases = {   # name: (block, kwargs, tiles (BLOCK_M, widest BLOCK_K, warps), tensor, bytes per element)
        "rows 1x128, scales transposed": ((1, 128), dict(scales_transposed=True),
                                          [(32, 128, 4), (64, 128, 4), (64, 128, 8), (128, 128, 8), (32, 256, 4),
                                           (16, 512, 4)], x, 3),
        "cols 128x1, written transposed": ((128, 1), dict(transpose=True, pad_rows=True),
                                           [(128, 64, 4), (128, 128, 8), (128, 32, 4), (256, 64, 8)], x, 3),
        "W 128x128 pair": ((128, 128), dict(with_transposed=True), [(128, 128, 8), (128, 128, 16)], w, 4),
    }
    tiles0 = dict(qlaunch.FP8_TILES)
    for name, (block, kw, tiles, t, per_elt) in cases.items():
        nbytes = per_elt * t.numel()
        for tile in [tiles0[block]] if default_only else tiles:
            qlaunch.FP8_TILES[block] = tile
            label = f"{name:32s} tile {str(tile):15s}"
            try:
                ms = bench(lambda: qlaunch.fp8_block(t, block, False, **kw))
                gbs = nbytes / ms / 1e6
                print(f"  {label}: {ms * 1e3:7.1f} us {gbs:6.0f} GB/s = {gbs / copy_gbs:4.0%} of copy", flush=True)
            except Exception as exc:   # noqa: BLE001 (a tile that does not fit is reported)
                print(f"  {label}: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}")
        qlaunch.FP8_TILES[block] = tiles0[block]


def wgrad_order(shape):
    E, T, H, F = SHAPES[shape]
    counts, x, probs, w1, w2, dy = problem(E, T, H, F)
    h = torch.randn(T, F, device="cuda", dtype=torch.bfloat16)
    dz = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
    cols = {n: recipes.quantize_cols("fp8_block", t) for n, t in (("x", x), ("h", h), ("dy", dy), ("dz", dz))}
    dw1, dw2 = torch.empty_like(w1), torch.empty_like(w2)
    flop = 2 * T * 2 * F * H + 2 * T * H * F
    print(f"\nwgrads (dW1 + dW2), E {E} T {T} H {H} F {F}")
    default = launch.WGRAD_GROUP_N
    for cfg in (GemmConfig(64, 128, 128, 4, 3), GemmConfig(64, 128, 128, 4, 4), GemmConfig(128, 128, 128, 8, 3)):
        for group in (1, 4, 8, 16, 64):
            launch.WGRAD_GROUP_N = group
            ms = bench(lambda: (launch._wgrad(cols["dz"], cols["x"], dw1, counts, T, cfg, "fp8_block"),
                                launch._wgrad(cols["dy"], cols["h"], dw2, counts, T, cfg, "fp8_block")))
            print(f"  {cfg.name:24s} GROUP_N {group:3d}: {ms:7.3f} ms {flop / ms / 1e9:6.0f} TFLOP/s", flush=True)
    launch.WGRAD_GROUP_N = default


if __name__ == "__main__":
    import sys
    print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    quantizer_tiles(default_only="--default-tiles" in sys.argv)
    if "--quantizers-only" not in sys.argv:
        for s in (1, 2):
            wgrad_order(s)
