"""H200: where grouped_glu_mlp's fwd+bwd time goes, kernel by kernel, against torch._grouped_mm
doing the same GEMMs, plus the dense bf16 matmul ceiling measured in the same run.

    PYTHONPATH=src python3 benchmarks/grouped_profile.py
"""
import functools

import torch
import triton

from grouped_profile_fp8 import bench, problem   # benchmarks/ is on the path when this file runs
from tilefuse.ops.grouped_glu_mlp import launch
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig, dglu_config, dglu_tile_n
from tilefuse.ops.grouped_glu_mlp.kernels import EPI_DGLU, EPI_GLU, EPI_STORE

torch.manual_seed(0)
dev = "cuda"
bench = functools.partial(bench, rep=60)

a = torch.randn(16384, 4096, device=dev, dtype=torch.bfloat16)
b = torch.randn(4096, 7168, device=dev, dtype=torch.bfloat16)
ms = bench(lambda: a @ b)
print(f"dense bf16 matmul 16384x4096x7168: {2 * 16384 * 4096 * 7168 / ms / 1e9:.0f} TFLOP/s")

MAIN = GemmConfig(128, 128, 64, 8, 4, 1)
WGRADS = [GemmConfig(64, 64, 32, 4, 3), GemmConfig(128, 128, 64, 8, 3), GemmConfig(128, 128, 64, 8, 4),
          GemmConfig(128, 256, 64, 8, 3), GemmConfig(128, 128, 32, 8, 4), GemmConfig(64, 128, 64, 4, 4)]
for E, T, H, F in [(8, 16384, 4096, 3584), (64, 32768, 2048, 1408), (128, 65536, 2048, 768)]:
    counts, x, probs, w1, w2, dy = problem(E, T, H, F, dev)
    offs = counts.cumsum(0).to(torch.int32)
    z = torch.empty(T, 2 * F, device=dev, dtype=torch.bfloat16)
    h = torch.empty(T, F, device=dev, dtype=torch.bfloat16)
    y = torch.empty(T, H, device=dev, dtype=torch.bfloat16)
    dz = torch.empty_like(z)
    dx = torch.empty_like(x)
    part = torch.empty(T, 2 * triton.cdiv(F, dglu_tile_n(dglu_config(MAIN))), device=dev)   # the larger of the two
    dw1 = torch.empty_like(w1)
    dw2 = torch.empty_like(w2)
    gf = lambda m, n, k: 2 * m * n * k / 1e12   # noqa: E731
    rows = {
        "fc1+GLU": (lambda: launch._gemm(EPI_GLU, x, w1, h, counts, MAIN, K=H, N=F, b_strides=(w1.stride(0), w1.stride(2), w1.stride(1)),
                                         ldc=h.stride(0), F=F, probs=probs, z=z, act=0, interleave=32),
                    lambda: torch._grouped_mm(x, w1.transpose(-2, -1), offs=offs), gf(T, 2 * F, H)),
        "fc2": (lambda: launch._gemm(EPI_STORE, h, w2, y, counts, MAIN, K=F, N=H, b_strides=(w2.stride(0), w2.stride(2), w2.stride(1)),
                                     ldc=y.stride(0), probs=probs),
                lambda: torch._grouped_mm(h, w2.transpose(-2, -1), offs=offs), gf(T, H, F)),
        "dgrad2+dGLU": (lambda: launch._gemm(EPI_DGLU, dy, w2, dz, counts, MAIN, K=H, N=F, b_strides=(w2.stride(0), w2.stride(1), w2.stride(2)),
                                             ldc=dz.stride(0), F=F, probs=probs, z=z, part=part, act=0, interleave=32),
                        lambda: torch._grouped_mm(dy, w2, offs=offs), gf(T, F, H)),
        "dgrad2+dGLU*": (lambda: launch._gemm(EPI_DGLU, dy, w2, dz, counts, dglu_config(MAIN), K=H, N=F,
                                              b_strides=(w2.stride(0), w2.stride(1), w2.stride(2)), ldc=dz.stride(0),
                                              F=F, probs=probs, z=z, part=part, act=0, interleave=32),
                         lambda: torch._grouped_mm(dy, w2, offs=offs), gf(T, F, H)),
        "dgrad1": (lambda: launch._gemm(EPI_STORE, dz, w1, dx, counts, MAIN, K=2 * F, N=H, b_strides=(w1.stride(0), w1.stride(1), w1.stride(2)),
                                        ldc=dx.stride(0)),
                   lambda: torch._grouped_mm(dz, w1, offs=offs), gf(T, H, 2 * F)),
    }
    print(f"\nE {E} T {T} H {H} F {F} (config {MAIN.name}; *: dGLU with {dglu_config(MAIN).name}; balanced counts)")
    for name, (ours, theirs, tf) in rows.items():
        t_o, t_t = bench(ours), bench(theirs)
        print(f"  {name:12s} tilefuse {t_o:7.3f} ms {tf / t_o * 1e3:5.0f} TFLOP/s | _grouped_mm {t_t:7.3f} ms {tf / t_t * 1e3:5.0f}")
    tf_w = gf(T, 2 * F, H) + gf(T, H, F)
    t_t = bench(lambda: (torch._grouped_mm(dz.t(), x, offs=offs), torch._grouped_mm(dy.t(), h, offs=offs)))
    print(f"  {'wgrads':12s} _grouped_mm {t_t:7.3f} ms {tf_w / t_t * 1e3:5.0f} TFLOP/s")
    for wc in WGRADS:
        try:
            t_o = bench(lambda: (launch._wgrad(dz, x, dw1, counts, T, wc), launch._wgrad(dy, h, dw2, counts, T, wc)))
            print(f"  {'wgrads':12s} tilefuse {wc.name} {t_o:7.3f} ms {tf_w / t_o * 1e3:5.0f} TFLOP/s")
        except Exception as exc:   # noqa: BLE001
            print(f"  wgrads {wc.name}: {type(exc).__name__}: {str(exc)[:100]}")
    torch.cuda.empty_cache()
