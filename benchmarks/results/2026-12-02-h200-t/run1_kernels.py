"""Run 1's probe kernels: a dense block-scaled fp8 GEMM (fp8_block's forward layout: A (M, K)
with 1x128 row scales sa (M, K/128), B (N, K) with 128x128 block scales sb (N/128, K/128)),
C bf16 = sum over 128-K chunks of (A @ B^T)[chunk] * sa * sb. M, N multiples of the tile, K of
128. fp8_gemm_triton: what Triton emits for `acc += dot * scale` (a wait after each chunk's
wgmma). COLS: sb (N, K/128) per column instead (the wgrad's 1x128 x 1x128 layout).
fp8_gemm_gluon: the same through TMA and an mbarrier ring; OVERLAP keeps one chunk's
wgmma in flight while the previous chunk is rescaled (two accumulators)."""
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (mbarrier, tma, warpgroup_mma, warpgroup_mma_init,
                                                             warpgroup_mma_wait)

_tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared


@gluon.jit
def fp8_gemm_gluon(a_desc, b_desc, sa_ptr, sb_ptr, c_ptr, M, N, K, lsa, lsb,
                   BM: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr, OVERLAP: gl.constexpr,
                   COLS: gl.constexpr, num_warps: gl.constexpr):
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 32])
    pid = gl.program_id(0)
    nt = gl.cdiv(N, BN)
    pm = pid // nt
    pn = pid % nt
    a_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BM, 128], a_desc.layout)
    b_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BN, 128], b_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for p0 in gl.static_range(STAGES):
        mbarrier.init(bars.index(p0), count=1)
    nk = K // 128
    nbytes: gl.constexpr = (BM + BN) * 128
    for p in gl.static_range(STAGES - 1):
        mbarrier.expect(bars.index(p), nbytes, pred=p < nk)
        _tma_load(a_desc, [pm * BM, p * 128], bars.index(p), a_s.index(p), pred=p < nk)
        _tma_load(b_desc, [pn * BN, p * 128], bars.index(p), b_s.index(p), pred=p < nk)
    rows = pm * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, mma))
    # column scales load one per thread, then move to the accumulator's column layout (loading
    # them there would hold BN / 4 64-bit addresses a thread: spills)
    sbl: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    cols = pn * BN + gl.arange(0, BN, layout=sbl)
    sb_base = sb_ptr + (pn * BN // 128) * lsb
    zero = gl.zeros([BM, BN], gl.float32, mma)
    acc = gl.zeros([BM, BN], gl.float32, mma)
    if OVERLAP:
        prev = warpgroup_mma_init(zero)
        prev_sa = gl.zeros([BM], gl.float32, gl.SliceLayout(1, mma))
        for i in range(nk):
            s = i % STAGES
            mbarrier.wait(bars.index(s), (i // STAGES) & 1)
            cur = warpgroup_mma(a_s.index(s), b_s.index(s).permute((1, 0)), zero, use_acc=False, is_async=True)
            if COLS:   # chunk i-1's scales, loaded now (carrying them a chunk costs registers: spills)
                j = gl.maximum(i - 1, 0)
                psa = gl.load(sa_ptr + rows * lsa + j)
                psb = gl.convert_layout(gl.load(sb_ptr + cols * lsb + j), gl.SliceLayout(0, mma))
                done = warpgroup_mma_wait(1, deps=[prev])
                acc = acc + (done * psb[None, :]) * psa[:, None]
            else:
                sa = gl.load(sa_ptr + rows * lsa + i) * gl.load(sb_base + i)
                done = warpgroup_mma_wait(1, deps=[prev])
                acc = acc + done * prev_sa[:, None]
                prev_sa = sa
            prev = cur
            nxt = i + STAGES - 1
            t = nxt % STAGES
            mbarrier.expect(bars.index(t), nbytes, pred=nxt < nk)
            _tma_load(a_desc, [pm * BM, nxt * 128], bars.index(t), a_s.index(t), pred=nxt < nk)
            _tma_load(b_desc, [pn * BN, nxt * 128], bars.index(t), b_s.index(t), pred=nxt < nk)
        done = warpgroup_mma_wait(0, deps=[prev])
        if COLS:
            psb = gl.convert_layout(gl.load(sb_ptr + cols * lsb + nk - 1), gl.SliceLayout(0, mma))
            acc = acc + (done * psb[None, :]) * gl.load(sa_ptr + rows * lsa + nk - 1)[:, None]
        else:
            acc = acc + done * prev_sa[:, None]
    else:
        for i in range(nk):
            s = i % STAGES
            mbarrier.wait(bars.index(s), (i // STAGES) & 1)
            cur = warpgroup_mma(a_s.index(s), b_s.index(s).permute((1, 0)), zero, use_acc=False, is_async=True)
            done = warpgroup_mma_wait(0, deps=[cur])
            if COLS:
                psb = gl.convert_layout(gl.load(sb_ptr + cols * lsb + i), gl.SliceLayout(0, mma))
                acc = acc + (done * psb[None, :]) * gl.load(sa_ptr + rows * lsa + i)[:, None]
            else:
                acc = acc + done * (gl.load(sa_ptr + rows * lsa + i) * gl.load(sb_base + i))[:, None]
            nxt = i + STAGES - 1
            t = nxt % STAGES
            mbarrier.expect(bars.index(t), nbytes, pred=nxt < nk)
            _tma_load(a_desc, [pm * BM, nxt * 128], bars.index(t), a_s.index(t), pred=nxt < nk)
            _tma_load(b_desc, [pn * BN, nxt * 128], bars.index(t), b_s.index(t), pred=nxt < nk)
    for p1 in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(p1))
    oblk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    out = gl.convert_layout(acc.to(gl.bfloat16), oblk)
    r = pm * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, oblk))
    c = pn * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, oblk))
    gl.store(c_ptr + r[:, None].to(gl.int64) * N + c[None, :], out)


@gluon.jit
def _refill(a_desc, b_desc, a_s, b_s, bars, c, nk, pm, pn, BM: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr):
    """Load chunk c into its ring stage (c % STAGES), if c is a chunk (0 <= c < nk)."""
    t = c % STAGES
    ok = (c >= 0) & (c < nk)
    mbarrier.expect(bars.index(t), (BM + BN) * 128, pred=ok)
    _tma_load(a_desc, [pm * BM, c * 128], bars.index(t), a_s.index(t), pred=ok)
    _tma_load(b_desc, [pn * BN, c * 128], bars.index(t), b_s.index(t), pred=ok)


@gluon.jit
def _promote(acc, d, sa_ptr, sb_ptr, rows, cols, sb_base, c, lsa, lsb, COLS: gl.constexpr):
    """acc + d * (chunk c's scales): row scales of A times B's block scale, or (COLS) times
    B's column scales, loaded one per thread and moved to the accumulator's column layout."""
    if COLS:
        sb = gl.convert_layout(gl.load(sb_ptr + cols * lsb + c), gl.SliceLayout(0, d.type.layout))
        return acc + (d * sb[None, :]) * gl.load(sa_ptr + rows * lsa + c)[:, None]
    else:
        return acc + d * (gl.load(sa_ptr + rows * lsa + c) * gl.load(sb_base + c))[:, None]


@gluon.jit
def fp8_gemm_gluon2(a_desc, b_desc, sa_ptr, sb_ptr, c_ptr, M, N, K, lsa, lsb,
                    BM: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr, num_warps: gl.constexpr,
                    COLS: gl.constexpr = 0):
    """Run 3: two chunks an iteration, both wgmma issued before the first wait; the first
    chunk's rescale runs while the second's wgmma does, the second's after a full wait, so no
    unfinished product crosses the loop's back edge. fp8_gemm_gluon's OVERLAP carries one
    across it, and ptxas then serialises every wgmma (C7514: "non wgmma instructions reading
    accumulator registers ... between start and end of the pipeline stage"; a WARPGROUP.DEPBAR
    after each wgmma in its SASS), which is why run 1 measured it slower. COLS (run 4): the
    wgrads' layout, as fp8_gemm_gluon's."""
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 32])
    pid = gl.program_id(0)
    nt = gl.cdiv(N, BN)
    pm = pid // nt
    pn = pid % nt
    a_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BM, 128], a_desc.layout)
    b_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BN, 128], b_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for p0 in gl.static_range(STAGES):
        mbarrier.init(bars.index(p0), count=1)
    nk = K // 128
    for p in gl.static_range(STAGES):
        _refill(a_desc, b_desc, a_s, b_s, bars, p, nk, pm, pn, BM, BN, STAGES)
    rows = pm * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, mma))
    cols = pn * BN + gl.arange(0, BN, layout=gl.BlockedLayout([1], [32], [num_warps], [0]))
    sb_base = sb_ptr + (pn * BN // 128) * lsb
    zero = gl.zeros([BM, BN], gl.float32, mma)
    acc = gl.zeros([BM, BN], gl.float32, mma)
    for j in range(nk // 2):
        c0 = 2 * j
        c1 = c0 + 1
        mbarrier.wait(bars.index(c0 % STAGES), (c0 // STAGES) & 1)
        t_a = warpgroup_mma(a_s.index(c0 % STAGES), b_s.index(c0 % STAGES).permute((1, 0)), zero, use_acc=False,
                            is_async=True)
        mbarrier.wait(bars.index(c1 % STAGES), (c1 // STAGES) & 1)
        t_b = warpgroup_mma(a_s.index(c1 % STAGES), b_s.index(c1 % STAGES).permute((1, 0)), zero, use_acc=False,
                            is_async=True)
        d_a = warpgroup_mma_wait(1, deps=[t_a])
        acc = _promote(acc, d_a, sa_ptr, sb_ptr, rows, cols, sb_base, c0, lsa, lsb, COLS)
        _refill(a_desc, b_desc, a_s, b_s, bars, c0 + STAGES, nk, pm, pn, BM, BN, STAGES)
        d_b = warpgroup_mma_wait(0, deps=[t_b])
        acc = _promote(acc, d_b, sa_ptr, sb_ptr, rows, cols, sb_base, c1, lsa, lsb, COLS)
        _refill(a_desc, b_desc, a_s, b_s, bars, c1 + STAGES, nk, pm, pn, BM, BN, STAGES)
    if nk % 2 == 1:
        c0 = nk - 1
        mbarrier.wait(bars.index(c0 % STAGES), (c0 // STAGES) & 1)
        t_a = warpgroup_mma(a_s.index(c0 % STAGES), b_s.index(c0 % STAGES).permute((1, 0)), zero, use_acc=False,
                            is_async=True)
        d_a = warpgroup_mma_wait(0, deps=[t_a])
        acc = _promote(acc, d_a, sa_ptr, sb_ptr, rows, cols, sb_base, c0, lsa, lsb, COLS)
    for p1 in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(p1))
    oblk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    out = gl.convert_layout(acc.to(gl.bfloat16), oblk)
    r = pm * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, oblk))
    c = pn * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, oblk))
    gl.store(c_ptr + r[:, None].to(gl.int64) * N + c[None, :], out)


@triton.jit
def fp8_gemm_triton(a_desc, b_desc, sa_ptr, sb_ptr, c_ptr, M, N, K, lsa, lsb, BM: tl.constexpr, BN: tl.constexpr,
                    COLS: tl.constexpr, NOSCALE: tl.constexpr = 0, BK: tl.constexpr = 128):
    pid = tl.program_id(0)
    nt = tl.cdiv(N, BN)
    pm = pid // nt
    pn = pid % nt
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    if NOSCALE:   # run 2's ceiling: a plain fp8 GEMM (one accumulator carried through K, no scales)
        for i in range(K // 128):
            acc = tl.dot(a_desc.load([pm * BM, i * 128]), b_desc.load([pn * BN, i * 128]).T, acc)
        rn = pn * BN + tl.arange(0, BN)
        tl.store(c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], acc.to(tl.bfloat16))
        return
    if BK > 128:   # run 2's sensitivity probe (not the recipe): one BK-wide dot and one rescale per BK
        for i in range(K // BK):
            sc = tl.load(sa_ptr + rm * lsa + i) * tl.load(sb_ptr + (pn * BN // 128) * lsb + i)
            acc = acc + tl.dot(a_desc.load([pm * BM, i * BK]), b_desc.load([pn * BN, i * BK]).T) * sc[:, None]
        rn = pn * BN + tl.arange(0, BN)
        tl.store(c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], acc.to(tl.bfloat16))
        return
    for i in range(K // 128):
        a = a_desc.load([pm * BM, i * 128])
        b = b_desc.load([pn * BN, i * 128])
        if COLS:
            acc = acc + tl.dot(a, b.T) * (tl.load(sa_ptr + rm * lsa + i)[:, None] * tl.load(sb_ptr + rn * lsb + i)[None, :])
        else:
            sc = tl.load(sa_ptr + rm * lsa + i) * tl.load(sb_ptr + (pn * BN // 128) * lsb + i)
            acc = acc + tl.dot(a, b.T) * sc[:, None]
    tl.store(c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], acc.to(tl.bfloat16))
