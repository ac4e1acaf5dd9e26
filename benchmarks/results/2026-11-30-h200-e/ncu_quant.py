"""Run the fp8 quantizer layouts of a grouped_glu_mlp step once each after a warm-up, for
Nsight Compute (the H200 run of 2026-11-30-h200-e, run 5):

    ncu --section SpeedOfLight --section Occupancy --section WarpStateStats -k regex:fp8_block_kernel \
        --launch-skip 3 --launch-count 3 python3 benchmarks/results/2026-11-30-h200-e/ncu_quant.py

(Moved here from benchmarks/; runs 5 and 9 list the exact ncu sections.)
"""
import torch

from tilefuse.ops.grouped_glu_mlp import recipes

x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(8, 4096, 3584, device="cuda", dtype=torch.bfloat16)
for _ in range(2):
    recipes.quantize_rows("fp8_block", x)          # 1x128, scales transposed
    recipes.quantize_cols("fp8_block", x)          # 128x1, written transposed
    recipes.quantize_weight_pair("fp8_block", w)   # 128x128 and its transposed copy
    x.clone()
torch.cuda.synchronize()
