"""Run 2: issue 15's level-3 backward layer with gz resident in shared memory (a probe).

Why: by bytes, the level-3 step is close to its memory floor for the relay's data flow
(README, "the floor"). The relay's layer writes gz (F, E, ROW) and the GEMM reads it back;
the fused route that keeps gz in registers (runs of 2026-12-02-h200-u) re-formed it for every
column tile and lost to L1/L2 traffic. Here one program owns a 64-row block and BOTH column
segments:

  phase 1  reads its rows of g, z and sigma once, forms every gz K tile as the relay's
           pointwise kernel does (gz_s through the same ordered FMA chain as the Gluon fused
           kernel of 8806286, which was bitwise on the H200), scales and splits each K tile
           into float16 head and tail (kernels.tile_product's per-row power-of-two scale) and
           keeps them in shared memory (3L+1 tiles of 64 x Cf, head + tail);
  phase 2  for each segment and 64-column chunk, the 3xfp16 K walk of so2_gemm3x_wgmma_kernel
           (three wgmma a K tile from a zero accumulator, waited for once, joined as
           (part * inv_col) * inv_row) with A from that shared memory and the weights' head
           and tail tiles by TMA into a two-slot ring; out = g + acc.

So the layer reads g, z, sigma and writes out: 3 surfaces + sigma against the relay's
pointwise (3 + sigma) plus GEMM (3). The sigma kernel still runs first (the fused route's
sigma pass). Checked against the relay (sigma kernel, pointwise kernel, wgmma GEMM pair at the
same 64x64 tiles): bitwise, else the normwise difference; then timed interleaved under graph
replay at the benchmark shapes, Neo first.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-w/run2_row_resident.py
"""

from __future__ import annotations

import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, warpgroup_mma, \
    warpgroup_mma_wait

from tilefuse.ops.so2_mixing_stack import wgmma_kernels as W
from tilefuse.ops.so2_mixing_stack.wgmma_kernels import _cta_barrier, _mma_layout, _pow2_scale, _tma_load

BLOCK_M = 64
BLOCK_N = 64


@gluon.jit
def _sigmoid(x):
    return 1.0 / (1.0 + gl.exp(-x))


@gluon.jit
def _stash(a, t, hi_s, lo_s, inv_s):
    """K tile t of gz (float32, any layout): row scale, float16 head and tail into slot t."""
    scale, inv = _pow2_scale(gl.max(gl.abs(a), axis=1))
    a_s = a * scale[:, None]
    a_hi = a_s.to(gl.float16)
    hi_s.index(t).store(a_hi)
    lo_s.index(t).store((a_s - a_hi.to(gl.float32)).to(gl.float16))
    inv_s.index(t).store(inv)


@gluon.jit
def _issue(wd, wlod, bars, w_s, wlo_s, slot, row, col, CF: gl.constexpr, BLOCK_N: gl.constexpr):
    """TMA: one K tile's weight head and tail tiles into ring slot ``slot``."""
    mbarrier.expect(bars.index(slot), 2 * CF * BLOCK_N * 2)
    _tma_load(wd, [row, col], bars.index(slot), w_s.index(slot))
    _tma_load(wlod, [row, col], bars.index(slot), wlo_s.index(slot))


@gluon.jit
def _segment(hi_s, lo_s, inv_s, w_s, wlo_s, bars, wd, wlod, wscale_ptr, nwd, nwlod, n_row0, g_base, out_base,
             emask_o, orow, focus, it, T0: gl.constexpr, NK: gl.constexpr, N: gl.constexpr, COL0: gl.constexpr,
             HAS_NEXT: gl.constexpr, ROW: gl.constexpr, CF: gl.constexpr, BLOCK_M: gl.constexpr,
             BLOCK_N: gl.constexpr, num_warps: gl.constexpr, OVERLAP: gl.constexpr):
    """One column segment: out[:, COL0 + n] = g[:, COL0 + n] + sum over its NK K tiles (from
    slot T0) of gz_t @ W^T[t, n], in BLOCK_N-column chunks. ``it`` counts the weight ring's
    K tiles so far (slot it % 2, phase (it // 2) & 1); the segment's first weight tiles are
    already on their way into slot it % 2 (the caller's, or the last segment's last step), and
    its last step issues the next chunk's first tiles, or with HAS_NEXT the next segment's
    (descriptors nwd / nwlod, its rows from n_row0). Returns it."""
    mma: gl.constexpr = _mma_layout(BLOCK_N, num_warps)
    cvec: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    CHUNKS: gl.constexpr = (N + BLOCK_N - 1) // BLOCK_N
    w_row0 = focus * N
    for c in gl.static_range(CHUNKS):
        n0 = c * BLOCK_N
        cn = n0 + gl.arange(0, BLOCK_N, layout=cvec)
        inv_col = gl.convert_layout(gl.load(wscale_ptr + focus.to(gl.int64) * N + cn, mask=cn < N, other=0.0),
                                    gl.SliceLayout(0, mma))
        acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
        p = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
        if OVERLAP:
            # run 4: step k's three wgmma are issued before step k - 1's product is waited for and
            # joined, so the tensor cores work while the last product is rescaled (two product
            # registers sets live; the loop is unrolled, so nothing in flight crosses a back edge)
            for k in gl.static_range(NK):
                slot = it % 2
                mbarrier.wait(bars.index(slot), (it // 2) & 1)
                part = warpgroup_mma(lo_s.index(T0 + k), w_s.index(slot), p, use_acc=False, is_async=True)
                part = warpgroup_mma(hi_s.index(T0 + k), wlo_s.index(slot), part, is_async=True)
                part = warpgroup_mma(hi_s.index(T0 + k), w_s.index(slot), part, is_async=True)
                if k > 0:
                    prev = warpgroup_mma_wait(num_outstanding=3, deps=[prev])
                _cta_barrier()   # every warp is past step k - 1's wait: its slot is free
                if k + 1 < NK:
                    _issue(wd, wlod, bars, w_s, wlo_s, (it + 1) % 2, w_row0 + (k + 1) * CF, n0, CF, BLOCK_N)
                elif c + 1 < CHUNKS:
                    _issue(wd, wlod, bars, w_s, wlo_s, (it + 1) % 2, w_row0, n0 + BLOCK_N, CF, BLOCK_N)
                elif HAS_NEXT:
                    _issue(nwd, nwlod, bars, w_s, wlo_s, (it + 1) % 2, n_row0, 0, CF, BLOCK_N)
                if k > 0:
                    inv_row = inv_s.index(T0 + k - 1).load(gl.SliceLayout(1, mma))
                    acc += (prev * inv_col[None, :]) * inv_row[:, None]
                prev = part
                it += 1
            prev = warpgroup_mma_wait(num_outstanding=0, deps=[prev])
            inv_row = inv_s.index(T0 + NK - 1).load(gl.SliceLayout(1, mma))
            acc += (prev * inv_col[None, :]) * inv_row[:, None]
        for k in gl.static_range(NK if not OVERLAP else 0):
            slot = it % 2
            _cta_barrier()   # every warp is past the last wait: the other slot is free
            if k + 1 < NK:
                _issue(wd, wlod, bars, w_s, wlo_s, (it + 1) % 2, w_row0 + (k + 1) * CF, n0, CF, BLOCK_N)
            elif c + 1 < CHUNKS:
                _issue(wd, wlod, bars, w_s, wlo_s, (it + 1) % 2, w_row0, n0 + BLOCK_N, CF, BLOCK_N)
            elif HAS_NEXT:
                _issue(nwd, nwlod, bars, w_s, wlo_s, (it + 1) % 2, n_row0, 0, CF, BLOCK_N)
            mbarrier.wait(bars.index(slot), (it // 2) & 1)
            part = warpgroup_mma(lo_s.index(T0 + k), w_s.index(slot), p, use_acc=False, is_async=True)
            part = warpgroup_mma(hi_s.index(T0 + k), wlo_s.index(slot), part, is_async=True)
            part = warpgroup_mma(hi_s.index(T0 + k), w_s.index(slot), part, is_async=True)
            p = warpgroup_mma_wait(num_outstanding=0, deps=[part])
            inv_row = inv_s.index(T0 + k).load(gl.SliceLayout(1, mma))
            acc += (p * inv_col[None, :]) * inv_row[:, None]
            it += 1
        # epilogue: out = g + acc, straight from the accumulator's layout (each thread's column
        # pairs are 8-byte runs, four threads a 32-byte sector): no staging buffer, so that two
        # programs fit an SM's shared memory
        n = COL0 + n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma))
        mask = emask_o[:, None] & (n < COL0 + N)[None, :]
        offs = orow[:, None] * ROW + n[None, :]
        res = gl.load(g_base + offs, mask=mask, other=0.0)
        gl.store(out_base + offs, res + acc, mask=mask)
    return it


@gluon.jit
def row_resident_layer_kernel(g_ptr, z_ptr, gw_ptr, sigma_ptr, w0d, w0lod, w0scale_ptr, w1d, w1lod, w1scale_ptr,
                              out_ptr, E, L: gl.constexpr, CF: gl.constexpr, BLOCK_M: gl.constexpr,
                              BLOCK_N: gl.constexpr, num_warps: gl.constexpr, PHASES: gl.constexpr = 3,
                              FMA_CHAIN: gl.constexpr = False, OVERLAP: gl.constexpr = False):
    # PHASES (run 3's decomposition, results wrong unless 3): bit 0 runs phase 1, bit 1 phase 2
    M0: gl.constexpr = (L + 1) * CF
    M1: gl.constexpr = 2 * L * CF
    LG: gl.constexpr = L * CF
    ROW: gl.constexpr = M0 + M1
    NKT: gl.constexpr = 3 * L + 1
    ablk: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [num_warps, 1], [1, 0])
    mma: gl.constexpr = _mma_layout(BLOCK_N, num_warps)
    a_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, CF], gl.float16)
    flat: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    hi_s = gl.allocate_shared_memory(gl.float16, [NKT, BLOCK_M, CF], a_sl)
    lo_s = gl.allocate_shared_memory(gl.float16, [NKT, BLOCK_M, CF], a_sl)
    inv_s = gl.allocate_shared_memory(gl.float32, [NKT, BLOCK_M], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    gq_s = gl.allocate_shared_memory(gl.float32, [BLOCK_M, CF], flat)
    gwt_s = gl.allocate_shared_memory(gl.float32, [CF, CF], flat)
    w_s = gl.allocate_shared_memory(gl.float16, [2, CF, BLOCK_N], w0d.layout)
    wlo_s = gl.allocate_shared_memory(gl.float16, [2, CF, BLOCK_N], w0d.layout)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(bars.index(0), count=1)
    mbarrier.init(bars.index(1), count=1)

    pid = gl.program_id(0)
    n_row_blocks = gl.cdiv(E, BLOCK_M)
    focus = pid // n_row_blocks
    edge0 = (pid % n_row_blocks).to(gl.int64) * BLOCK_M
    first = focus.to(gl.int64) * E + edge0
    g_base = g_ptr + first * ROW
    z_base = z_ptr + first * ROW
    sig_base = sigma_ptr + first * LG
    gw_base = gw_ptr + focus.to(gl.int64) * CF * LG

    # phase 1: every gz K tile, split into shared memory (the relay's pointwise arithmetic)
    rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, ablk))
    kk = gl.arange(0, CF, layout=gl.SliceLayout(0, ablk))
    jj = gl.arange(0, CF, layout=gl.SliceLayout(1, ablk))
    amask = ((edge0 + rows) < E)[:, None]
    a_row = rows[:, None] * ROW
    s_row = rows[:, None] * LG
    DOT_K: gl.constexpr = 16
    acc_s = gl.zeros([BLOCK_M, CF], gl.float32, layout=ablk)
    for j in range(L if PHASES % 2 == 1 else 0):   # a loop, not unrolled: each group's seven tiles, not all groups' at once
        g0 = j * CF
        sigma = gl.load(sig_base + s_row + (g0 + kk)[None, :], mask=amask, other=0.0)
        g_a = gl.load(g_base + a_row + (CF + g0 + kk)[None, :], mask=amask, other=0.0)
        z_a = gl.load(z_base + a_row + (CF + g0 + kk)[None, :], mask=amask, other=0.0)
        g_b = gl.load(g_base + a_row + (M0 + g0 + kk)[None, :], mask=amask, other=0.0)
        z_b = gl.load(z_base + a_row + (M0 + g0 + kk)[None, :], mask=amask, other=0.0)
        g_c = gl.load(g_base + a_row + (M0 + LG + g0 + kk)[None, :], mask=amask, other=0.0)
        z_c = gl.load(z_base + a_row + (M0 + LG + g0 + kk)[None, :], mask=amask, other=0.0)
        gsigma = g_a * z_a + g_b * z_b
        gsigma += g_c * z_c
        gq = gsigma * sigma * (1.0 - sigma)
        _stash(g_a * sigma, 1 + j, hi_s, lo_s, inv_s)
        _stash(g_b * sigma, L + 1 + j, hi_s, lo_s, inv_s)
        _stash(g_c * sigma, 2 * L + 1 + j, hi_s, lo_s, inv_s)
        _cta_barrier()   # the last group's chunks are read
        gq_s.store(gq)
        gwt_s.store(gl.load(gw_base + kk[None, :] * LG + (g0 + jj)[:, None]))   # (j, c) = gw[c, g0 + j]
        _cta_barrier()
        if FMA_CHAIN:
            # the same chain one k at a time: c = fma(gq[:, k], gw^T[k, :], c), k ascending, with
            # a column of gq and a row of gw^T read from shared memory per k (8 registers, where
            # dot_fma's operands of 16 k take 128)
            for k in gl.static_range(CF):
                acc_s = gl.fma(gq_s.slice(k, 1, dim=1).load(ablk), gwt_s.slice(k, 1, dim=0).load(ablk), acc_s)
        else:
            for k0 in gl.static_range(0, CF, DOT_K):
                acc_s = gl.dot_fma(gq_s.slice(k0, DOT_K, dim=1).load(gl.DotOperandLayout(0, ablk, 0)),
                                   gwt_s.slice(k0, DOT_K, dim=0).load(gl.DotOperandLayout(1, ablk, 0)), acc_s)
    if PHASES % 2 == 1:
        g_s = gl.load(g_base + a_row + kk[None, :], mask=amask, other=0.0)
        s = gl.load(z_base + a_row + kk[None, :], mask=amask, other=0.0)
        s0 = _sigmoid(s)
        _stash(g_s * s0 * (1.0 + s * (1.0 - s0)) + acc_s, 0, hi_s, lo_s, inv_s)
    fence_async_shared()
    _cta_barrier()
    if PHASES // 2 == 0:   # phase 1 only: one element out, so that nothing is dead code
        gl.store(out_ptr + first * ROW + rows, hi_s.index(0).load(ablk).to(gl.float32).sum(axis=1), mask=(edge0 + rows) < E)
        return

    # phase 2: both segments' GEMMs from the resident tiles
    orow = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, mma))
    emask_o = (edge0 + orow) < E
    out_base = out_ptr + first * ROW
    it = 0
    _issue(w0d, w0lod, bars, w_s, wlo_s, 0, focus * M0, 0, CF, BLOCK_N)
    it = _segment(hi_s, lo_s, inv_s, w_s, wlo_s, bars, w0d, w0lod, w0scale_ptr, w1d, w1lod, focus * M1, g_base,
                  out_base, emask_o, orow, focus, it, 0, L + 1, M0, 0, True, ROW, CF, BLOCK_M, BLOCK_N, num_warps,
                  OVERLAP)
    it = _segment(hi_s, lo_s, inv_s, w_s, wlo_s, bars, w1d, w1lod, w1scale_ptr, w1d, w1lod, 0, g_base,
                  out_base, emask_o, orow, focus, it, L + 1, 2 * L, M1, M0, False, ROW, CF, BLOCK_M, BLOCK_N,
                  num_warps, OVERLAP)
    mbarrier.invalidate(bars.index(0))
    mbarrier.invalidate(bars.index(1))


def row_resident_layer(g_cur, z, gw, w0t, w1t, sigma, out, d, phases=3, fma_chain=False, overlap=False):
    """out = the relay layer's result; w0t / w1t one layer's split W^T (launch._weights tuples)."""
    from tilefuse.ops.so2_mixing_stack import launch
    F, E = g_cur.shape[0], g_cur.shape[1]
    launch._sigma(z, gw, sigma, d)
    d0 = W.descriptors(w0t[0], w0t[1], d.focus_dim, BLOCK_N)
    d1 = W.descriptors(w1t[0], w1t[1], d.focus_dim, BLOCK_N)
    row_resident_layer_kernel[(F * -(-E // BLOCK_M),)](
        g_cur, z, gw, sigma, *d0, w0t[2], *d1, w1t[2], out, E, L=d.lmax, CF=d.focus_dim, BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N, num_warps=4, PHASES=phases, FMA_CHAIN=fma_chain, OVERLAP=overlap)


def main(argv):
    from tilefuse.check.so2 import _inputs
    from tilefuse.ops.so2_mixing_stack import launch
    from tilefuse.ops.so2_mixing_stack.configs import FP16X3, So2Config
    from tilefuse.tuning.timing import interleaved
    shapes = [(647000, 3, 32), (300000, 6, 32), (400000, 2, 64)]
    decompose = bool(argv and argv[0] == "--decompose")
    if argv and argv[0] == "--small":
        shapes = [(1000, 3, 32), (1037, 2, 64), (999, 6, 32)]
    if decompose:   # run 3: where the row-resident kernel's time goes, at Neo
        shapes = [(647000, 3, 32)]
    cfg = So2Config(64, 64, 32, 4, 2, precision=FP16X3, wgmma=True)
    print(torch.cuda.get_device_name(), torch.__version__)
    print("| shape | relay layer (sigma + pointwise + GEMM pair), ms | row-resident, ms | speedup | bitwise "
          "| normwise diff |")
    print("|---|---|---|---|---|---|")
    for E, lmax, cf in shapes:
        torch.manual_seed(E)
        d, ins = _inputs(lmax, 2, cf, E, "cuda")
        u0, alpha, w0, w1, gw = (t.detach() for t in ins)
        c = So2Config(64, 64, cf, 4, 2, precision=FP16X3, wgmma=True)
        with torch.no_grad():
            _, z_all, _ = launch.forward(u0, alpha, w0, w1, gw, d, True, config=c)
        z, gwc = z_all[0], gw[0].contiguous()
        w0t = launch._layer(launch._weights(w0, c, transpose=True), 0)
        w1t = launch._layer(launch._weights(w1, c, transpose=True), 0)
        g = torch.randn_like(z)
        sigma = torch.empty((2, E, d.lg), device="cuda")
        gz = torch.empty_like(g)
        want, got = torch.full_like(g, float("nan")), torch.full_like(g, float("nan"))
        launch.relay_layer(g, z, gwc, w0t, w1t, want, sigma, gz, None, d, c)
        try:
            row_resident_layer(g, z, gwc, w0t, w1t, sigma, got, d)
            torch.cuda.synchronize()
        except Exception as exc:   # noqa: BLE001 - a probe: report and go on
            print(f"| ({E}, {lmax}, {cf}) | - | failed: {type(exc).__name__}: {str(exc)[:300]} | | | |", flush=True)
            continue
        same = torch.equal(want, got)
        diff = float((got.double() - want.double()).norm() / (want.double() - g.double()).norm())
        providers = {
            "relay": lambda: launch.relay_layer(g, z, gwc, w0t, w1t, want, sigma, gz, None, d, c),
            "row": lambda: row_resident_layer(g, z, gwc, w0t, w1t, sigma, got, d)}
        if decompose:
            chain = torch.full_like(g, float("nan"))
            row_resident_layer(g, z, gwc, w0t, w1t, sigma, chain, d, fma_chain=True)
            print(f"  gz_s by a gl.fma chain: bitwise the relay's {torch.equal(chain, want)}", flush=True)
            ov = torch.full_like(g, float("nan"))
            row_resident_layer(g, z, gwc, w0t, w1t, sigma, ov, d, overlap=True)
            print(f"  steps overlapped (run 4): bitwise the relay's {torch.equal(ov, want)}", flush=True)
            providers["row, steps overlapped"] = lambda: row_resident_layer(g, z, gwc, w0t, w1t, sigma, ov, d,
                                                                            overlap=True)
            scratch = torch.empty_like(g)
            providers["sigma + phase 2 alone, steps overlapped"] = lambda: row_resident_layer(
                g, z, gwc, w0t, w1t, sigma, scratch, d, phases=2, overlap=True)
            providers["row, gz_s by a gl.fma chain"] = lambda: row_resident_layer(g, z, gwc, w0t, w1t, sigma, chain,
                                                                                  d, fma_chain=True)
            providers.update({
                "sigma kernel alone": lambda: launch._sigma(z, gwc, sigma, d),
                "sigma + phase 1 alone": lambda: row_resident_layer(g, z, gwc, w0t, w1t, sigma, scratch, d, phases=1),
                "sigma + phase 2 alone": lambda: row_resident_layer(g, z, gwc, w0t, w1t, sigma, scratch, d, phases=2),
                "copy of one surface": lambda: scratch.copy_(g)})
        t = interleaved(providers, rounds=7, graphs=True)
        if decompose:
            for name, v in t.items():
                print(f"  {name}: {v.median_ms:.3f} ms [{v.min_ms:.3f}-{v.max_ms:.3f}]", flush=True)
        r, o = t["relay"], t["row"]
        print(f"| ({E}, {lmax}, {cf}) | {r.median_ms:.3f} [{r.min_ms:.3f}-{r.max_ms:.3f}] "
              f"| {o.median_ms:.3f} [{o.min_ms:.3f}-{o.max_ms:.3f}] | {r.median_ms / o.median_ms:.3f}x | {same} "
              f"| {diff:.2e} |", flush=True)
        del z_all, z, g, gz, want, got, sigma
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
