"""Run 6 (prepared, not run this session: the device time was spent): issue 15's level-3 GEMM
with its weights resident in shared memory.

Runs 3-4 (Nsight Compute of the wgmma relay's |m| = 1 backward pass at Neo, 64x64) left L2 the
busiest unit (77%; DRAM 50%). Of the L2 traffic of that pass about 3.0 GB is weight tiles: every
program reads its column tile's weight heads and tails for all of K (48 KB at 64x64, as much as
its activation rows), and there are 60660 programs. Here a program keeps its (focus, column
tile)'s weights for the whole K in shared memory (loaded once by TMA) and walks a strided set of
row blocks, so the weights cross L2 once per program instead of once per row block. Programs
p, p + 1, ... take the column tiles of one row block at about the same time (p % n_tiles is the
column tile), so the activation rows are still read once from DRAM and again from L2.

The arithmetic per tile is so2_gemm3x_wgmma_kernel's (the same split of the register A operand,
the same three products, K order and epilogue): the outputs must be bitwise equal (checked). The
K walk over (row block, K tile) pairs is flattened, so the first K tile of the next row block is
loaded while the last of this one is multiplied.

Shared memory: the weights, 4 * K * BLOCK_N bytes (Neo |m| = 1 at BLOCK_N 64: 48 KB; (300000,
6, 32): 96 KB), plus the epilogue's tile. BWD mode only (the backward's layer GEMM). sm_90
compile (triton 3.6): 226 registers at 64x64 on 4 warps and 128x64 on 8, no stack (two 4-warp
programs an SM by registers, against the relay kernel's 125 registers and four); BLOCK_N 128
spills 312-344 bytes, so only BLOCK_N 64 is timed.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-u/run6_weight_stationary.py
"""

from __future__ import annotations

import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, warpgroup_mma, warpgroup_mma_wait

from tilefuse.ops.so2_mixing_stack.kernels import BWD
from tilefuse.ops.so2_mixing_stack.wgmma_kernels import (_a_layout, _column_scales, _cta_barrier, _epilogue,
                                                         _mma_layout, _pow2_scale, _tma_load)


@gluon.jit
def gemm3x_ws_kernel(a_ptr, wd, wlod, wscale_ptr, res_ptr, out_ptr, F, E, ROW, K_START, K_LEN, N_START, N_LEN,
                     w_rows, w_stride_k, GROUPS,
                     N_K: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                     num_warps: gl.constexpr):
    """BWD: out = res + a[:, K_START:K_START + K_LEN] @ W for the column tile pid % n_tiles of
    focus (pid // n_tiles) // GROUPS, over row blocks (pid // n_tiles) % GROUPS + j GROUPS.
    Grid: F * GROUPS * n_tiles. N_K = K_LEN // BLOCK_K (constexpr: the weights' slots)."""
    a_layout: gl.constexpr = _a_layout(BLOCK_N, num_warps)
    mma: gl.constexpr = _mma_layout(BLOCK_N, num_warps)
    pid = gl.program_id(0)
    n_tiles = gl.cdiv(N_LEN, BLOCK_N)
    tile = pid % n_tiles
    q = pid // n_tiles
    focus = q // GROUPS
    j0 = q % GROUPS
    n0 = tile * BLOCK_N
    n_row_blocks = gl.cdiv(E, BLOCK_M)
    n_mine = gl.cdiv(gl.maximum(n_row_blocks - j0, 0), GROUPS)

    w_s = gl.allocate_shared_memory(gl.float16, [N_K, BLOCK_K, BLOCK_N], wd.layout)
    wlo_s = gl.allocate_shared_memory(gl.float16, [N_K, BLOCK_K, BLOCK_N], wd.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    mbarrier.init(bar.index(0), count=1)
    w_row0 = focus * w_rows
    w_col0 = N_START - K_START + n0
    mbarrier.expect(bar.index(0), N_K * 2 * BLOCK_K * BLOCK_N * 2)
    for k in gl.static_range(N_K):
        _tma_load(wd, [w_row0 + k * BLOCK_K, w_col0], bar.index(0), w_s.index(k))
        _tma_load(wlod, [w_row0 + k * BLOCK_K, w_col0], bar.index(0), wlo_s.index(k))
    inv_col = _column_scales(wscale_ptr, focus, w_stride_k, N_START, N_LEN, K_START, n0, BLOCK_N, num_warps)

    rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, a_layout))
    kk = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, a_layout))
    a_row = rows[:, None] * ROW
    total = n_mine * N_K
    # the first K tile of the first row block
    edge0 = j0.to(gl.int64) * BLOCK_M
    a = gl.load(a_ptr + (focus.to(gl.int64) * E + edge0) * ROW + K_START + (a_row + kk[None, :]),
                mask=((edge0 + rows) < E)[:, None] & (total > 0), other=0.0)
    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    p = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    mbarrier.wait(bar.index(0), 0)
    for it in range(total):
        i = it % N_K
        rb = j0 + (it // N_K) * GROUPS
        edge0 = rb.to(gl.int64) * BLOCK_M
        # prefetch (row block, K tile) of it + 1
        nx = it + 1
        edge_n = (j0 + (nx // N_K) * GROUPS).to(gl.int64) * BLOCK_M
        a_next = gl.load(a_ptr + (focus.to(gl.int64) * E + edge_n) * ROW + K_START
                         + (a_row + ((nx % N_K) * BLOCK_K + kk)[None, :]),
                         mask=((edge_n + rows) < E)[:, None] & (nx < total), other=0.0)
        scale, inv = _pow2_scale(gl.max(gl.abs(a), axis=1))
        a_s = a * scale[:, None]
        a_hi = a_s.to(gl.float16)
        a_lo = (a_s - a_hi.to(gl.float32)).to(gl.float16)
        part = warpgroup_mma(a_lo, w_s.index(i), p, use_acc=False, is_async=True)
        part = warpgroup_mma(a_hi, wlo_s.index(i), part, is_async=True)
        part = warpgroup_mma(a_hi, w_s.index(i), part, is_async=True)
        p = warpgroup_mma_wait(num_outstanding=0, deps=[part])
        acc += (p * inv_col[None, :]) * gl.convert_layout(inv, gl.SliceLayout(1, mma))[:, None]
        if i == N_K - 1:
            _epilogue(acc, out_ptr, res_ptr, out_ptr, out_ptr, out_ptr, F, E, ROW, 0, 1, N_START, N_LEN, focus,
                      edge0, n0, BWD, False, BLOCK_M, BLOCK_N, num_warps)
            _cta_barrier()   # the epilogue's shared tile is read before the next one is written
            acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
            # a fresh ignored accumulator operand: the last product's registers need not live
            # through the epilogue
            p = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
        a = a_next
    mbarrier.invalidate(bar.index(0))


def ws_gemm(a, w, w_lo, w_scale, res, out, E, row, k_start, k_len, block_m, block_n, block_k, warps, programs_per_sm):
    """One BWD column segment through gemm3x_ws_kernel; GROUPS from the SM count."""
    from tilefuse.ops.so2_mixing_stack import wgmma_kernels
    F = w.shape[0]
    n_tiles = -(-k_len // block_n)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    groups = max(1, min(-(-E // block_m), sms * programs_per_sm // (F * n_tiles)))
    descs = wgmma_kernels.descriptors(w, w_lo, block_k, block_n)
    gemm3x_ws_kernel[(F * groups * n_tiles,)](
        a, *descs, w_scale, res, out, F, E, row, k_start, k_len, k_start, k_len, w.shape[1], w_scale.stride(0),
        groups, N_K=k_len // block_k, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=warps)


def main():
    from tilefuse.ops.so2_mixing_stack import launch
    from tilefuse.ops.so2_mixing_stack.configs import FP16X3, So2Config
    from tilefuse.ops.so2_mixing_stack.reference import So2Dims
    from tilefuse.tuning import timing
    F = 2
    print(f"# {torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
    for E, lmax, cf in ((647000, 3, 32), (300000, 6, 32), (400000, 2, 64)):
        d = So2Dims(lmax, cf)
        g = torch.Generator(device="cuda").manual_seed(E)
        gz = torch.randn(F, E, d.row, generator=g, device="cuda")
        res = torch.randn(F, E, d.row, generator=g, device="cuda")
        out = torch.empty_like(gz)
        w0 = torch.randn(1, F, d.m0, d.m0, generator=g, device="cuda") * d.m0 ** -0.5
        w1 = torch.randn(1, F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
        w0t = launch._layer(launch.split_fp16(w0.transpose(-1, -2)), 0)
        w1t = launch._layer(launch.split_fp16(w1.transpose(-1, -2)), 0)
        print(f"\n## E={E} lmax={lmax} Cf={cf}: the backward GEMM pair (both segments), ms", flush=True)
        providers, outs = {}, {}
        for bm, bn, warps in ((64, 64, 4), (64, 128, 4), (128, 64, 8)):
            cfg = So2Config(bm, bn, cf, warps, 2, precision=FP16X3, wgmma=True)
            providers[f"wgmma relay M{bm} N{bn} w{warps}"] = \
                lambda cfg=cfg: launch._gemm_t(gz, w0t, w1t, res, out, d, cfg)
            for per_sm in ((2, 3) if bn == 64 else ()):   # BLOCK_N 128 spills 312-344 bytes (sm_90 compile)
                def fn(bm=bm, bn=bn, warps=warps, per_sm=per_sm):
                    for (w, w_lo, w_scale), start, length in ((w0t, 0, d.m0), (w1t, d.m0, d.m1)):
                        ws_gemm(gz, w, w_lo, w_scale, res, out, E, d.row, start, length, bm, bn, cf, warps, per_sm)
                providers[f"weight-stationary M{bm} N{bn} w{warps} {per_sm}/SM"] = fn
        for name, fn in providers.items():
            out.fill_(float("nan"))
            try:
                fn()
                torch.cuda.synchronize()
                outs[name] = out.clone()
            except Exception as exc:  # noqa: BLE001 - e.g. shared memory at 128 columns: reported
                print(f"  {name}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
        providers = {k: v for k, v in providers.items() if k in outs}
        for name, o in outs.items():
            base = outs[f"wgmma relay {name.split(' ', 1)[1].rsplit(' ', 1)[0]}"] if name.startswith("weight") \
                else outs[name]
            print(f"  {name:40s} bitwise the wgmma relay's at its tile: {torch.equal(o, base)}", flush=True)
        del outs
        t = timing.interleaved(providers, graphs=True, rounds=5)
        for name, r in t.items():
            print(f"  {name:40s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})", flush=True)
        del gz, res, out, providers
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
