#!/bin/bash
# H200 run 2 of 2026-11-30-h200-e (tree: main with the paired dGLU and the kernel amax of the
# nvfp4 weights): nvfp4 weights batched vs per expert; the fp8_block profile at shape 1 (per
# role and tiling); a dry-run fp8_block sweep of the tuner at shape 1; whole steps of every
# recipe at shape 1.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/benchmarks TILEFUSE_CACHE_DIR=$PWD/.tfcache
timeout 60 python3 - <<'PY' 2>&1 | tee $OUT/nvfp4-weights.txt
import torch, triton
from tilefuse.ops.grouped_glu_mlp import recipes
from tilefuse.quant import quantize_nvfp4
from tilefuse.quant import launch as ql
from grouped_profile_fp8 import SHAPES, problem
b = lambda fn: triton.testing.do_bench(fn, warmup=10, rep=100)
for s in (1, 2):
    E, T, H, F = SHAPES[s]
    counts, x, probs, w1, w2, dy = problem(E, T, H, F)
    for wn, w in (("W1", w1), ("W2", w2)):
        amax = ql.batch_amax(w)
        assert torch.equal(amax, w.abs().amax(dim=(1, 2)).float())
        batched = b(lambda: recipes.quantize_weight("nvfp4", w))
        dgrad = b(lambda: recipes.quantize_weight("nvfp4", w, transpose=True))
        am = b(lambda: ql.batch_amax(w))
        loop = b(lambda: [quantize_nvfp4(w[e], amax=amax[e], block_2d=True, swizzle=True) for e in range(E)])
        print(f"shape {s} nvfp4 {wn} {tuple(w.shape)}: batched {batched*1e3:.0f} us (amax {am*1e3:.0f} us,"
              f" {w.numel() * 2 / am / 1e6:.0f} GB/s), dgrad usage {dgrad*1e3:.0f} us, per expert (amax given)"
              f" {loop*1e3:.0f} us; batched moves {w.numel() * 4.5625 / batched / 1e6:.0f} GB/s")
PY
timeout 170 python3 benchmarks/grouped_profile_fp8.py --shapes 1 2>&1 | tee $OUT/fp8-profile-1.txt
timeout 110 python3 benchmarks/grouped_profile_fp8.py --steps-only --shapes 1 2>&1 | tee $OUT/steps-all-recipes-1.txt
timeout 150 python3 -m tilefuse.cli tune --op grouped_glu_mlp --dtype fp8_block --shape 8x16384x4096x3584 --dry-run --rounds 5 --no-progress 2>&1 | tail -30 | tee $OUT/tune-fp8.txt
