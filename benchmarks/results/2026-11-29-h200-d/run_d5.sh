#!/bin/bash
# H200 run 5 of 2026-11-29-h200-d: the forward keeps fp8_block's dgrad weight copies (one
# quantizer launch per weight writes both). GPU tests of the changed modules, whole steps,
# the weight quantizers alone and paired.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/benchmarks TILEFUSE_CACHE_DIR=$PWD/.tfcache
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_quant_kernels.py tests/test_grouped_mlp_recipes.py tests/test_grouped_mlp_kernels.py 2>&1 | tail -4 | tee $OUT/pytest-changed.txt
for s in 1 2 3; do
  timeout 60 python3 benchmarks/grouped_profile_fp8.py --steps-only --shapes $s --providers bf16,fp8_block 2>&1 | tee -a $OUT/steps.txt
done
timeout 60 python3 - <<'PY' 2>&1 | tee $OUT/weights.txt
import torch, triton
from tilefuse.ops.grouped_glu_mlp import recipes
from grouped_profile_fp8 import SHAPES, problem
for s in (1, 2):
    E, T, H, F = SHAPES[s]
    w1 = problem(E, T, H, F)[3]
    t = {n: triton.testing.do_bench(fn, warmup=10, rep=100) for n, fn in (
        ("W1", lambda: recipes.quantize_weight("fp8_block", w1)),
        ("W1 dgrad", lambda: recipes.quantize_weight("fp8_block", w1, transpose=True)),
        ("W1 pair", lambda: recipes.quantize_weight_pair("fp8_block", w1)))}
    print(f"shape {s} W1 {tuple(w1.shape)}: " + ", ".join(f"{n} {ms * 1e3:.0f} us" for n, ms in t.items())
          + f"; pair {t['W1 pair'] * 1e3:.0f} us vs separate {(t['W1'] + t['W1 dgrad']) * 1e3:.0f} us"
          + f" ({4 * w1.numel() / t['W1 pair'] / 1e6:.0f} GB/s moved by the pair)")
PY
