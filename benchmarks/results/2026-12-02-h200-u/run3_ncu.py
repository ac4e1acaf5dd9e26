"""Run 3's Nsight Compute driver: one relay wgmma GEMM |m| = 1 pass (BWD) and one fused Gluon
|m| = 1 pass at Neo, 64x64 on 4 warps, each launched once (ncu profiles both launches).

    ncu --set ... python3 benchmarks/results/2026-12-02-h200-u/run3_ncu.py
"""
import torch


def main():
    from tilefuse.ops.so2_mixing_stack import launch, wgmma_kernels
    from tilefuse.ops.so2_mixing_stack.configs import FP16X3, So2Config
    from tilefuse.ops.so2_mixing_stack.kernels import BWD
    from tilefuse.ops.so2_mixing_stack.reference import So2Dims
    E, lmax, cf, F = 647000, 3, 32, 2
    d = So2Dims(lmax, cf)
    g = torch.Generator(device="cuda").manual_seed(0)
    g_cur = torch.randn(F, E, d.row, generator=g, device="cuda")
    gz = torch.randn(F, E, d.row, generator=g, device="cuda")
    sigma = torch.rand(F, E, d.lg, generator=g, device="cuda")
    gz_s = torch.randn(F, E, cf, generator=g, device="cuda")
    w1 = torch.randn(1, F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
    w, w_lo, w_scale = launch._layer(launch.split_fp16(w1.transpose(-1, -2)), 0)
    out = torch.empty_like(g_cur)
    cfg = So2Config(64, 64, cf, 4, 2, precision=FP16X3, wgmma=True)
    launch._gemm(BWD, gz, (w, w_lo, w_scale), g_cur, out, d, cfg, k_start=d.m0, k_len=d.m1, n_start=d.m0, n_len=d.m1)
    descs = wgmma_kernels.descriptors(w, w_lo, cfg.block_k, cfg.block_n)
    wgmma_kernels.so2_bwd_fused3x_wgmma_kernel[launch.tiled_grid(F, E, d.m1, cfg)](
        g_cur, gz_s, sigma, *descs, w_scale, out, E, d.row, d.lg, d.m0, d.m1, d.m0, d.m1, w.shape[1],
        w_scale.stride(0), SEGMENT_M0=False, BLOCK_M=64, BLOCK_N=64, CF=cf, num_warps=4)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
