"""Run 2 (GPU only): where does the block-scaled fp8 GEMM lose against cuBLAS's fp8 (run 1:
815-870 TFLOP/s for the best Triton / Gluon tiles at fp8_block's forward layout, 1066-1277 for
cuBLAS row-wise _scaled_mm)? Same dense problem as run 1 (run1_kernels.py), forward layout.

- "scaled": the recipe's form, a rescale per 128-K chunk (what the op runs), at 64x128 w4 s4
  (run 1's best) and 128x64 w4 s4;
- "BK 256": one 256-wide dot and one rescale per 256 K (NOT the recipe: half the rescales; a
  sensitivity probe of the rescale's cost);
- "no scale": a plain fp8 GEMM, the accumulator carried through K (Triton's fp8 ceiling at the
  tile: no rescale, no wait per chunk), at 64x128 w4 s4, 128x128 w8 s4, 128x256 w8 s3;
- cuBLAS fp8 row-wise _scaled_mm and cuBLAS bf16 mm.

With argument `ncu`: each of scaled 64x128, no scale 64x128 and no scale 128x256 runs once at
shape 2's fc1 (for `ncu -k regex:fp8_gemm`), nothing timed.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-t/run2_fp8_promotion_cost.py [ncu]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import torch  # noqa: E402
import triton  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from grouped_profile import table  # noqa: E402
from run1_kernels import fp8_gemm_triton  # noqa: E402

NCU = sys.argv[1:] == ["ncu"]
SHAPES = {"shape2 fc1": (32768, 2816, 2048)} if NCU else {
    "shape1 fc1": (16384, 7168, 4096), "shape2 fc1": (32768, 2816, 2048), "shape3 fc1": (65536, 1536, 2048)}
# (label, BM, BN, warps, stages, NOSCALE, BK)
VARIANTS = [("scaled 64x128 w4 s4", 64, 128, 4, 4, 0, 128), ("scaled 128x64 w4 s4", 128, 64, 4, 4, 0, 128),
            ("BK 256 (not the recipe) 64x128 w4 s3", 64, 128, 4, 3, 0, 256),
            ("no scale 64x128 w4 s4", 64, 128, 4, 4, 1, 128), ("no scale 128x128 w8 s4", 128, 128, 8, 4, 1, 128),
            ("no scale 128x256 w8 s3", 128, 256, 8, 3, 1, 128)]
if NCU:
    VARIANTS = [VARIANTS[0], VARIANTS[3], VARIANTS[5]]
print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)

for name, (M, N, K) in SHAPES.items():
    g = torch.Generator().manual_seed(0)
    a8 = (torch.randn(M, K, generator=g) * 8).clamp(-448, 448).to(torch.float8_e4m3fn).cuda()
    b8 = (torch.randn(N, K, generator=g) * 8).clamp(-448, 448).to(torch.float8_e4m3fn).cuda()
    sa = torch.exp2(torch.randint(-6, 6, (M, K // 128), generator=g).float()).cuda()
    sb = torch.exp2(torch.randint(-6, 6, (triton.cdiv(N, 128), K // 128), generator=g).float()).cuda()
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)

    def launch(BM, BN, W, S, NS, BK):
        ad = TensorDescriptor.from_tensor(a8, [BM, BK])
        bd = TensorDescriptor.from_tensor(b8, [BN, BK])
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        return lambda: fp8_gemm_triton[grid](ad, bd, sa, sb, c, M, N, K, K // 128, K // 128, BM=BM, BN=BN, COLS=0,
                                             NOSCALE=NS, BK=BK, num_warps=W, num_stages=S)

    provs = {label: launch(*cfg) for label, *cfg in VARIANTS}
    if NCU:
        for fn in provs.values():
            fn()
        torch.cuda.synchronize()
        continue
    print(f"\n## {name}: M {M} N {N} K {K}", flush=True)
    abf, bbf = a8.to(torch.bfloat16), b8.to(torch.bfloat16)
    ra, rb = torch.ones(M, 1, device="cuda"), torch.ones(1, N, device="cuda")
    provs["cuBLAS fp8 _scaled_mm rowwise"] = lambda: torch._scaled_mm(a8, b8.t(), scale_a=ra, scale_b=rb,
                                                                       out_dtype=torch.bfloat16)
    provs["cuBLAS bf16 mm"] = lambda: torch.mm(abf, bbf.t())
    table(f"{name} (ms, graph replay)", provs, 2.0 * M * N * K, 5)
    del a8, b8, abf, bbf, c
    torch.cuda.empty_cache()
