"""Run 1 (GPU only): is a block-scaled fp8 GEMM whose per-chunk rescale overlaps the next
chunk's wgmma faster than the one Triton emits? Issue 16's fp8_block roles run at a third of
the FP8 peak; the suspected cause is that Triton waits for each 128-K chunk's wgmma (wait 0)
before the rescale `acc += dot(a, b) * scale`, so the tensor cores idle while the CUDA cores
rescale. Triton emits wait 0 even with two chunks unrolled (checked on the CPU: sm_90 PTX under
triton 3.6 and 3.8). Gluon lets the kernel issue chunk i's wgmma, wait with one group
outstanding (chunk i-1 done) and rescale chunk i-1 while chunk i runs (two accumulators).

A dense probe, not the grouped kernel: C (M, N) bf16 = sum over 128-K chunks of
(A8 @ B8^T)[chunk] * sa[row, chunk] * sb[N-block, chunk], A8 (M, K) and B8 (N, K) float8_e4m3
with 1x128 row scales for A and 128x128 block scales for B (fp8_block's forward layout), or
1x128 scales on both (the wgrads' layout, "column scales 1", as one dense GEMM).
Providers, interleaved, CUDA-graph replay:
- triton: the algorithm the shipped grouped kernel runs (TMA descriptors, acc + dot * scale);
- gluon wait0: the same in Gluon with the wait after each chunk (isolates Gluon from the overlap);
- gluon overlap: two accumulators, wait 1;
- cuBLAS bf16 (torch.mm) and cuBLAS fp8 _scaled_mm with row-wise scales (a vendor ceiling; not
  the same numerics).
Bitwise: gluon wait0 / overlap against triton; normwise error against float64 on 256 rows.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-t/run1_gluon_fp8_probe.py
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
from run1_kernels import fp8_gemm_gluon, fp8_gemm_triton  # noqa: E402

print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
SHAPES = {"shape1 fc1": (16384, 7168, 4096, 0), "shape1 fc2": (16384, 4096, 3584, 0),
          "shape2 fc1": (32768, 2816, 2048, 0), "shape3 fc1": (65536, 1536, 2048, 0), "shape2 fc2": (32768, 2048, 1408, 0),
          # the wgrads' layout (1x128 scales on both operands, K the tokens), as one dense GEMM
          "shape1 dW1 dense": (7168, 4096, 16384, 1), "shape2 dW1 dense": (2816, 2048, 32768, 1)}
TRITON = [(128, 128, 8, 4), (64, 128, 4, 4)]
GLUON = [(128, 128, 8, 4), (128, 128, 8, 6), (64, 128, 4, 4)]


def pow2(shape, g):
    return torch.exp2(torch.randint(-6, 6, shape, generator=g).float()).cuda()


for name, (M, N, K, COLS) in SHAPES.items():
    g = torch.Generator().manual_seed(0)
    a8 = (torch.randn(M, K, generator=g) * 8).clamp(-448, 448).to(torch.float8_e4m3fn).cuda()
    b8 = (torch.randn(N, K, generator=g) * 8).clamp(-448, 448).to(torch.float8_e4m3fn).cuda()
    sa = pow2((M, K // 128), g) * torch.rand(M, K // 128, generator=g).cuda().add(0.5)
    sb = pow2((N if COLS else triton.cdiv(N, 128), K // 128), g)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    print(f"\n## {name}: M {M} N {N} K {K} column scales {COLS}", flush=True)

    def run_triton(BM, BN, W, S):
        ad = TensorDescriptor.from_tensor(a8, [BM, 128])
        bd = TensorDescriptor.from_tensor(b8, [BN, 128])
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        return lambda: fp8_gemm_triton[grid](ad, bd, sa, sb, c, M, N, K, K // 128, K // 128, BM=BM, BN=BN,
                                             COLS=COLS, num_warps=W, num_stages=S)

    def run_gluon(BM, BN, W, S, OV):
        ad = GluonDesc.from_tensor(a8, [BM, 128], gl.NVMMASharedLayout.get_default_for([BM, 128], gl.float8e4nv))
        bd = GluonDesc.from_tensor(b8, [BN, 128], gl.NVMMASharedLayout.get_default_for([BN, 128], gl.float8e4nv))
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        return lambda: fp8_gemm_gluon[grid](ad, bd, sa, sb, c, M, N, K, K // 128, K // 128, BM=BM, BN=BN,
                                            STAGES=S, OVERLAP=OV, COLS=COLS, num_warps=W)

    # float64 reference on 256 rows
    rows = torch.arange(0, M, M // 256, device="cuda")[:256]
    ad64 = a8[rows].double().view(256, K // 128, 128) * sa[rows].double()[:, :, None]
    bs = sb.double() if COLS else sb.double().repeat_interleave(128, 0)[:N]
    bd64 = b8.double().view(N, K // 128, 128) * bs[:, :, None]
    ref = ad64.reshape(256, K) @ bd64.reshape(N, K).t()
    outs = {}
    provs = {}
    for cfg in TRITON:
        provs[f"triton {cfg[0]}x{cfg[1]} w{cfg[2]} s{cfg[3]}"] = run_triton(*cfg)
    for cfg in GLUON:
        for ov in (0, 1):
            provs[f"gluon {'overlap' if ov else 'wait0  '} {cfg[0]}x{cfg[1]} w{cfg[2]} s{cfg[3]}"] = run_gluon(*cfg, ov)
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
        print(f"  {label}: error vs float64 {err:.3e}, finite {bool(torch.isfinite(c).all())}", flush=True)
    base = next(iter(outs))
    for label, o in outs.items():
        if label != base:
            print(f"  {label} bitwise equal to {base}: {torch.equal(o, outs[base])}", flush=True)
    abf = (a8.to(torch.bfloat16))
    bbf = (b8.to(torch.bfloat16))
    ra = torch.ones(M, 1, device="cuda")
    rb = torch.ones(1, N, device="cuda")
    provs["cuBLAS bf16 mm"] = lambda: torch.mm(abf, bbf.t())
    provs["cuBLAS fp8 _scaled_mm rowwise"] = lambda: torch._scaled_mm(a8, b8.t(), scale_a=ra, scale_b=rb,
                                                                       out_dtype=torch.bfloat16)
    table(f"{name} (ms, graph replay)", provs, 2.0 * M * N * K, 5)
    del a8, b8, abf, bbf, c, outs
    torch.cuda.empty_cache()
