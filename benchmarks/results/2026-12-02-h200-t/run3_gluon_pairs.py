"""Run 3 (GPU only; with argument `cols`, run 4): fp8_gemm_gluon2 (run1_kernels.py), two 128-K chunks an iteration with both
wgmma in flight before the first wait, so the first chunk's rescale overlaps the second's wgmma
(ptxas does not serialise it: SASS ARRIVE ARRIVE DEPBAR 1 DEPBAR 0 a loop iteration, 228
registers, triton 3.6 and 3.8) against the Triton form (the op's) and run 1's Gluon wait-0, at
fp8_block's forward layout, dense, the shapes of run 1. Bitwise against the Triton form; error
against float64 on 256 rows; interleaved, graph replay, 5 rounds. Plus run 2's no-scale
128x128 w8 (the fp8 ceiling of a Triton tile) and cuBLAS fp8 / bf16.

Run 4 (`cols`): the same at the wgrads' layout (1x128 scales on both operands, COLS), as dense
GEMMs of each shape's dW1 (M = 2F, N = H, K = T), against the Triton form at 64x128 and at the
shipped wgrad heuristic's 128x64 w4 s3 with a 168-register cap.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-t/run3_gluon_pairs.py [cols]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import torch  # noqa: E402
import triton  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDesc  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from grouped_profile import table  # noqa: E402
from run1_kernels import fp8_gemm_gluon, fp8_gemm_gluon2, fp8_gemm_triton  # noqa: E402

print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
COLS = int(sys.argv[1:] == ["cols"])
SHAPES = {"shape1 dW1 dense": (7168, 4096, 16384), "shape2 dW1 dense": (2816, 2048, 32768),
          "shape3 dW1 dense": (1536, 2048, 65536)} if COLS else {
    "shape1 fc1": (16384, 7168, 4096), "shape1 fc2": (16384, 4096, 3584), "shape2 fc1": (32768, 2816, 2048),
    "shape3 fc1": (65536, 1536, 2048), "shape2 fc2": (32768, 2048, 1408)}

for name, (M, N, K) in SHAPES.items():
    g = torch.Generator().manual_seed(0)
    a8 = (torch.randn(M, K, generator=g) * 8).clamp(-448, 448).to(torch.float8_e4m3fn).cuda()
    b8 = (torch.randn(N, K, generator=g) * 8).clamp(-448, 448).to(torch.float8_e4m3fn).cuda()
    sa = torch.exp2(torch.randint(-6, 6, (M, K // 128), generator=g).float()).cuda() * torch.rand(
        M, K // 128, generator=g).cuda().add(0.5)
    sb = torch.exp2(torch.randint(-6, 6, (N if COLS else triton.cdiv(N, 128), K // 128), generator=g).float()).cuda()
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    print(f"\n## {name}: M {M} N {N} K {K}", flush=True)

    def tri(BM, BN, W, S, NS=0, **kw):
        ad, bd = TensorDescriptor.from_tensor(a8, [BM, 128]), TensorDescriptor.from_tensor(b8, [BN, 128])
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        return lambda: fp8_gemm_triton[grid](ad, bd, sa, sb, c, M, N, K, K // 128, K // 128, BM=BM, BN=BN, COLS=COLS,
                                             NOSCALE=NS, num_warps=W, num_stages=S, **kw)

    def glu(kernel, BM, BN, W, S, **kw):
        ad = GluonDesc.from_tensor(a8, [BM, 128], gl.NVMMASharedLayout.get_default_for([BM, 128], gl.float8e4nv))
        bd = GluonDesc.from_tensor(b8, [BN, 128], gl.NVMMASharedLayout.get_default_for([BN, 128], gl.float8e4nv))
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        return lambda: kernel[grid](ad, bd, sa, sb, c, M, N, K, K // 128, K // 128, BM=BM, BN=BN, STAGES=S,
                                    num_warps=W, **kw)

    provs = {"triton 64x128 w4 s4": tri(64, 128, 4, 4), "triton 64x128 w4 s3": tri(64, 128, 4, 3),
             "gluon wait0 64x128 w4 s4": glu(fp8_gemm_gluon, 64, 128, 4, 4, OVERLAP=0, COLS=COLS)}
    if COLS:
        provs["triton 128x64 w4 s3 maxnreg 168"] = tri(128, 64, 4, 3, maxnreg=168)
    for BM, BN, W, S in ((64, 128, 4, 4), (64, 128, 4, 3), (128, 128, 8, 4)) + (((128, 64, 4, 4),) if COLS else ((128, 128, 8, 6),)):
        provs[f"gluon pairs {BM}x{BN} w{W} s{S}"] = glu(fp8_gemm_gluon2, BM, BN, W, S, COLS=COLS)
    rows = torch.arange(0, M, M // 256, device="cuda")[:256]
    ad64 = a8[rows].double().view(256, K // 128, 128) * sa[rows].double()[:, :, None]
    bs = sb.double() if COLS else sb.double().repeat_interleave(128, 0)[:N]
    bd64 = b8.double().view(N, K // 128, 128) * bs[:, :, None]
    ref = ad64.reshape(256, K) @ bd64.reshape(N, K).t()
    outs = {}
    for label, fn in provs.items():
        c.fill_(float("nan"))
        try:
            fn()
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            print(f"  {label}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            continue
        outs[label] = c.clone()
        err = ((c[rows].double() - ref).norm() / ref.norm()).item()
        eq = torch.equal(c, outs["triton 64x128 w4 s4"]) if outs else None
        print(f"  {label}: error vs float64 {err:.3e}, finite {bool(torch.isfinite(c).all())}, "
              f"bitwise equal to triton 64x128 w4 s4: {eq}", flush=True)
    abf, bbf = a8.to(torch.bfloat16), b8.to(torch.bfloat16)
    ra, rb = torch.ones(M, 1, device="cuda"), torch.ones(1, N, device="cuda")
    provs["triton no scale 128x128 w8 s4 (ceiling)"] = tri(128, 128, 8, 4, NS=1)
    provs["cuBLAS fp8 _scaled_mm rowwise"] = lambda: torch._scaled_mm(a8, b8.t(), scale_a=ra, scale_b=rb,
                                                                       out_dtype=torch.bfloat16)
    provs["cuBLAS bf16 mm"] = lambda: torch.mm(abf, bbf.t())
    table(f"{name} (ms, graph replay)", provs, 2.0 * M * N * K, 5)
    del a8, b8, abf, bbf, c, outs
    torch.cuda.empty_cache()
