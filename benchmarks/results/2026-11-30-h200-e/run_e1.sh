#!/bin/bash
# H200 run 1 of 2026-11-30-h200-e: GPU tests of the changed modules on the WIP tree (main's
# paired dGLU + one-read rows/cols fp8 copies of dy and dz); whole steps of three trees per
# shape (.snap/old = df06673, this tree = main with the paired dGLU, .snap/wip = main + rows/cols);
# rows+cols quantizer vs the two launches; nvfp4 weights batched vs one launch per expert.
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache
MAIN=$PWD/src OLD=$PWD/.snap/old/src WIP=$PWD/.snap/wip/src
(cd .snap/wip && PYTHONPATH=$WIP timeout 200 python3 -m pytest -q -p no:cacheprovider -x \
  tests/test_quant_kernels.py tests/test_grouped_mlp_recipes.py tests/test_grouped_mlp_kernels.py 2>&1 | tail -4) | tee $OUT/pytest-wip.txt
for s in 1 2 3; do
  for t in OLD MAIN WIP; do
    echo "== tree $t" | tee -a $OUT/steps.txt
    PYTHONPATH=${!t} timeout 60 python3 benchmarks/grouped_profile_fp8.py --steps-only --shapes $s --providers bf16,fp8_block 2>&1 | grep -v "^torch\|dense" | tee -a $OUT/steps.txt
  done
done
PYTHONPATH=$WIP:$PWD/benchmarks timeout 60 python3 - <<'PY' 2>&1 | tee $OUT/quant.txt
import torch, triton
from tilefuse.ops.grouped_glu_mlp import recipes
from tilefuse.quant import quantize_nvfp4
from grouped_profile_fp8 import SHAPES, problem
b = lambda fn: triton.testing.do_bench(fn, warmup=10, rep=100)
for s in (1, 2):
    E, T, H, F = SHAPES[s]
    counts, x, probs, w1, w2, dy = problem(E, T, H, F)
    dz = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
    for name, t in (("dy", dy), ("dz", dz)):
        sep = b(lambda: (recipes.quantize_rows("fp8_block", t), recipes.quantize_cols("fp8_block", t)))
        one = b(lambda: recipes.quantize_rows_and_cols("fp8_block", t))
        print(f"shape {s} {name} {tuple(t.shape)}: rows+cols one read {one*1e3:.0f} us vs two launches {sep*1e3:.0f} us"
              f" ({t.numel() * 2 / one / 1e6:.0f} GB/s read, {t.numel() * 4 / one / 1e6:.0f} GB/s moved)")
    for wn, w in (("W1", w1), ("W2", w2)):
        amax = w.abs().amax(dim=(1, 2)).float()
        batched = b(lambda: recipes.quantize_weight("nvfp4", w))
        loop = b(lambda: [quantize_nvfp4(w[e], amax=amax[e], block_2d=True, swizzle=True) for e in range(E)])
        print(f"shape {s} nvfp4 {wn} {tuple(w.shape)}: batched {batched*1e3:.0f} us vs per expert {loop*1e3:.0f} us"
              f" ({w.numel() * 2.5625 / batched / 1e6:.0f} GB/s moved by the batched launch)")
    src = torch.empty(T, 2 * F, device="cuda", dtype=torch.bfloat16)
    print(f"shape {s} copy ceiling (bf16 clone of dz): {dz.numel() * 4 / b(lambda: src.copy_(dz)) / 1e6:.0f} GB/s")
PY
