"""Run 15 (probe, GPU; not product code): run 8's Gluon fp8 weight gradient with no global load
a tile waits for (``NEXT``).

Why. Nsight Compute on run 8's best form (ping-pong, TMA store, scales a block ahead) at shape 2's
dW1 (run 14, H100): 643 us, SM throughput 42%, L2 44%, DRAM 41%: bound by neither, and its warps
spend 31% of their cycles between issues waiting on L1TEX (global) loads. Per tile (4 blocks at
512 tokens an expert) each consumer warp group reads the next tile's expert cursor from the
device-side counts at the tile's start (kernels' _tile: a load and its wait) and the tile's
first block's scales there too, with nothing of its own in flight; at ~500 cycles each against
~2000 cycles of the tile's tensor-core work, that is about the share Nsight Compute reports.
Here the next tile's cursor is read after this tile's first wgmma is issued (its load under
the product), and the next tile's first block's scales after its last wgmma is issued. The
tile's arithmetic and order are run 8's (so grouped_wgrad_kernel's: bitwise).

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run15_wgrad_next.py --compile   # CPU: sm_90 build
    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run15_wgrad_next.py [--rounds 5] [--shapes 1,2,3]
"""
import argparse
import json
import sys

import torch

from tilefuse.device import num_sms
from tilefuse.ops.gluon_hopper import (TensorDescriptor, available, fence_async_shared, gl, gluon, mbarrier, tma,
                                       tma_load, tma_store, warpgroup_mma, warpgroup_mma_wait)
from tilefuse.ops.grouped_glu_mlp import launch, recipes
from tilefuse.ops.grouped_glu_mlp.configs import heuristic
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES

R = "fp8_block"
WCFG = heuristic("wgrad", 2, R)
BLOCK = 128
MAX_STAGES = 5
MAXNREG = 168
CONSUMER_REGS = 232
PRODUCER_REGS = 40

if gluon is not None:
    @gluon.jit
    def _tile(tile, counts_ptr, cur_expert, cur_blocks, N, M, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
              BLOCK_K: gl.constexpr):
        """Tile ``tile``: (expert, first gradient row, first column, the expert's first block in
        the grouped copies, its block count, the cursor's expert, the cursor's blocks before
        it). Tiles run expert by expert, (N / BLOCK_N) x (M / BLOCK_M) each, row-major; the
        cursor only moves forward, as a program's tiles do."""
        m_tiles = M // BLOCK_M
        per_expert = (N // BLOCK_N) * m_tiles
        expert = tile // per_expert
        local = tile % per_expert
        while cur_expert < expert:
            cur_blocks += gl.cdiv(gl.load(counts_ptr + cur_expert).to(gl.int32), BLOCK_K)
            cur_expert += 1
        n_blocks = gl.cdiv(gl.load(counts_ptr + expert).to(gl.int32), BLOCK_K)
        return (expert, (local // m_tiles) * BLOCK_N, (local % m_tiles) * BLOCK_M, cur_blocks, n_blocks,
                cur_expert, cur_blocks)

    @gluon.jit
    def _producer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                  b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
                  BLOCK_K: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr, TMA_STORE: gl.constexpr,
                  AHEAD: gl.constexpr, NEXT: gl.constexpr):
        """One warp: every tile's blocks (A's BLOCK_N rows, B's BLOCK_M rows, 128 tokens each)
        into the ring, each slot once both consumers have handed it back."""
        pid = gl.program_id(0)
        cur_expert = pid * 0
        cur_blocks = pid * 0
        it = 0
        for tile in range(pid, n_tiles, gl.num_programs(0)):
            expert, row_n, col_m, first, n_blocks, cur_expert, cur_blocks = _tile(
                tile, counts_ptr, cur_expert, cur_blocks, N, M, BLOCK_N, BLOCK_M, BLOCK_K)
            for j in range(n_blocks):
                slot = it % STAGES
                mbarrier.wait(empty.index(slot), ((it // STAGES) & 1) ^ 1)   # the first pass finds it free
                bar = ready.index(slot)
                mbarrier.expect(bar, BLOCK_K * (BLOCK_N + BLOCK_M))
                tma_load(a_desc, [row_n, (first + j) * BLOCK_K], bar, a_s.index(slot))
                tma_load(b_desc, [col_m, (first + j) * BLOCK_K], bar, b_s.index(slot))
                it += 1

    @gluon.jit
    def _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                  b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, WG: gl.constexpr, BLOCK_N: gl.constexpr,
                  BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr,
                  TMA_STORE: gl.constexpr, AHEAD: gl.constexpr, NEXT: gl.constexpr):
        """One warp group: gradient rows [64 WG, 64 WG + 64) of every tile. Per block: (in turn
        with the other warp group) its wgmma from zero, its scales loaded under it, the wait,
        the slot handed back, acc + part * (a_scale * b_scale); then the tile rounded and
        stored."""
        HALF: gl.constexpr = BLOCK_N // 2
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                      instr_shape=[16, BLOCK_M, 32])
        row_l: gl.constexpr = gl.SliceLayout(1, mma)
        col_l: gl.constexpr = gl.SliceLayout(0, mma)
        store_l: gl.constexpr = gl.BlockedLayout([1, 8], [32 // (BLOCK_M // 8), BLOCK_M // 8], [4, 1], [1, 0])
        pid = gl.program_id(0)
        cur_expert = pid * 0
        cur_blocks = pid * 0
        it = 0
        part = gl.zeros([HALF, BLOCK_M], gl.float32, mma)
        if NEXT:
            # The next tile's cursor is read after this tile's first wgmma is issued, and the next
            # tile's first block's scales after its last one: no global load a tile waits for.
            # Scale addresses: a scalar base a block and tile (int64) plus the tile-independent
            # lane offsets (int32), so no 64-bit index vector stays live across the loop.
            P = gl.num_programs(0)
            r32 = WG * HALF + gl.arange(0, HALF, layout=row_l)
            c32 = gl.arange(0, BLOCK_M, layout=col_l)
            expert, row_n, col_m, first, n_blocks, cur_expert, cur_blocks = _tile(
                gl.minimum(pid, n_tiles - 1), counts_ptr, cur_expert, cur_blocks, N, M, BLOCK_N, BLOCK_M, BLOCK_K)
            blk = gl.maximum(first + gl.minimum(n_blocks, 1) - 1, 0).to(gl.int64)
            a_next = gl.load(a_scale_ptr + (blk * a_scale_ld + row_n) + r32)
            b_next = gl.load(b_scale_ptr + (blk * b_scale_ld + col_m) + c32)
            for tile in range(pid, n_tiles, P):
                nt = gl.minimum(tile + P, n_tiles - 1)   # the next tile (this one again past the last)
                x_expert = expert
                x_row_n = row_n
                x_col_m = col_m
                x_first = first
                x_n_blocks = n_blocks
                acc = gl.zeros([HALF, BLOCK_M], gl.float32, mma)
                for j in range(n_blocks):
                    slot = it % STAGES
                    mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
                    if PINGPONG:
                        mbarrier.wait(turn.index(WG), (it & 1) ^ (1 - WG))
                    part = warpgroup_mma(a_s.index(slot).slice(WG * HALF, HALF), b_s.index(slot).permute((1, 0)),
                                         part, use_acc=False, is_async=True)
                    if PINGPONG:
                        mbarrier.arrive(turn.index(1 - WG), count=1)
                    if j == 0:
                        x_expert, x_row_n, x_col_m, x_first, x_n_blocks, cur_expert, cur_blocks = _tile(
                            nt, counts_ptr, cur_expert, cur_blocks, N, M, BLOCK_N, BLOCK_M, BLOCK_K)
                    a_scale = a_next
                    b_scale = b_next
                    if j + 1 < n_blocks:   # this tile's next block
                        nxt = (first + j + 1).to(gl.int64)
                        a_next = gl.load(a_scale_ptr + (nxt * a_scale_ld + row_n) + r32)
                        b_next = gl.load(b_scale_ptr + (nxt * b_scale_ld + col_m) + c32)
                    else:   # the next tile's first block, at its rows and columns
                        nxt = gl.maximum(x_first + gl.minimum(x_n_blocks, 1) - 1, 0).to(gl.int64)
                        a_next = gl.load(a_scale_ptr + (nxt * a_scale_ld + x_row_n) + r32)
                        b_next = gl.load(b_scale_ptr + (nxt * b_scale_ld + x_col_m) + c32)
                    part = warpgroup_mma_wait(num_outstanding=0, deps=[part])
                    mbarrier.arrive(empty.index(slot), count=1)
                    acc = acc + part * (a_scale[:, None] * b_scale[None, :])
                    it += 1
                if n_blocks == 0:   # an expert without tokens: no wgmma to read the next cursor under
                    x_expert, x_row_n, x_col_m, x_first, x_n_blocks, cur_expert, cur_blocks = _tile(
                        nt, counts_ptr, cur_expert, cur_blocks, N, M, BLOCK_N, BLOCK_M, BLOCK_K)
                    nxt = gl.maximum(x_first + gl.minimum(x_n_blocks, 1) - 1, 0).to(gl.int64)
                    a_next = gl.load(a_scale_ptr + (nxt * a_scale_ld + x_row_n) + r32)
                    b_next = gl.load(b_scale_ptr + (nxt * b_scale_ld + x_col_m) + c32)
                tma.store_wait(0)   # the last tile's store has read this warp group's buffer
                c_s.index(WG).store(acc.to(c_desc.dtype))
                fence_async_shared()
                tma_store(c_desc, [expert * N + row_n + WG * HALF, col_m], c_s.index(WG))
                expert = x_expert
                row_n = x_row_n
                col_m = x_col_m
                first = x_first
                n_blocks = x_n_blocks
            tma.store_wait(0)
        else:
            for tile in range(pid, n_tiles, gl.num_programs(0)):
                expert, row_n, col_m, first, n_blocks, cur_expert, cur_blocks = _tile(
                    tile, counts_ptr, cur_expert, cur_blocks, N, M, BLOCK_N, BLOCK_M, BLOCK_K)
                n64 = (row_n + WG * HALF + gl.arange(0, HALF, layout=row_l)).to(gl.int64)
                m64 = (col_m + gl.arange(0, BLOCK_M, layout=col_l)).to(gl.int64)
                acc = gl.zeros([HALF, BLOCK_M], gl.float32, mma)
                if AHEAD:   # the first block's scales (an index inside the copies where there is none)
                    blk = gl.maximum(first + gl.minimum(n_blocks, 1) - 1, 0).to(gl.int64)
                    a_next = gl.load(a_scale_ptr + blk * a_scale_ld + n64)
                    b_next = gl.load(b_scale_ptr + blk * b_scale_ld + m64)
                for j in range(n_blocks):
                    blk = (first + j).to(gl.int64)
                    slot = it % STAGES
                    mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
                    if PINGPONG:   # warp group 0 issues block `it` first (its first wait passes), then 1
                        mbarrier.wait(turn.index(WG), (it & 1) ^ (1 - WG))
                    part = warpgroup_mma(a_s.index(slot).slice(WG * HALF, HALF), b_s.index(slot).permute((1, 0)),
                                         part, use_acc=False, is_async=True)
                    if PINGPONG:
                        mbarrier.arrive(turn.index(1 - WG), count=1)
                    if AHEAD:   # this block's scales came a block ahead; the next one's load under this wgmma
                        a_scale = a_next
                        b_scale = b_next
                        nxt = (first + gl.minimum(j + 1, n_blocks - 1)).to(gl.int64)
                        a_next = gl.load(a_scale_ptr + nxt * a_scale_ld + n64)
                        b_next = gl.load(b_scale_ptr + nxt * b_scale_ld + m64)
                    else:
                        a_scale = gl.load(a_scale_ptr + blk * a_scale_ld + n64)
                        b_scale = gl.load(b_scale_ptr + blk * b_scale_ld + m64)
                    part = warpgroup_mma_wait(num_outstanding=0, deps=[part])
                    mbarrier.arrive(empty.index(slot), count=1)
                    acc = acc + part * (a_scale[:, None] * b_scale[None, :])
                    it += 1
                if TMA_STORE:
                    tma.store_wait(0)   # the last tile's store has read this warp group's buffer
                    c_s.index(WG).store(acc.to(c_desc.dtype))
                    fence_async_shared()
                    tma_store(c_desc, [expert * N + row_n + WG * HALF, col_m], c_s.index(WG))
                else:
                    out = gl.convert_layout(acc.to(c_ptr.dtype.element_ty), store_l)
                    srows = row_n + WG * HALF + gl.arange(0, HALF, layout=gl.SliceLayout(1, store_l))
                    scols = col_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, store_l))
                    base = c_ptr + expert.to(gl.int64) * N * M
                    gl.store(base + srows.to(gl.int64)[:, None] * M + scols[None, :], out)
            if TMA_STORE:
                tma.store_wait(0)

    @gluon.jit
    def _consumer0(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                   b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
                   BLOCK_K: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr, TMA_STORE: gl.constexpr,
                  AHEAD: gl.constexpr, NEXT: gl.constexpr):
        _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                  b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, 0, BLOCK_N, BLOCK_M, BLOCK_K, STAGES, PINGPONG,
                  TMA_STORE, AHEAD, NEXT)

    @gluon.jit
    def _consumer1(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                   b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
                   BLOCK_K: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr, TMA_STORE: gl.constexpr,
                  AHEAD: gl.constexpr, NEXT: gl.constexpr):
        _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                  b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, 1, BLOCK_N, BLOCK_M, BLOCK_K, STAGES, PINGPONG,
                  TMA_STORE, AHEAD, NEXT)

    @gluon.jit
    def pingpong_fp8_wgrad_kernel(a_desc, b_desc, c_desc, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, N, M, n_tiles,
                                  a_scale_ld, b_scale_ld, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
                                  BLOCK_K: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr,
                                  TMA_STORE: gl.constexpr, AHEAD: gl.constexpr, NEXT: gl.constexpr,
                                  CONSUMER_REGS: gl.constexpr,
                                  PRODUCER_REGS: gl.constexpr):
        """C[e] (N, M) = A[tokens of e]^T @ B[tokens of e], fp8_block (grouped_wgrad_kernel with
        RECIPE_FP8_BLOCK): a_desc over the column-wise copy A^T (N, Tp) float8, tiles [BLOCK_N,
        BLOCK_K]; b_desc over B^T (M, Tp), tiles [BLOCK_M, BLOCK_K]; a_scale_ptr (Tp / 128, N)
        and b_scale_ptr (Tp / 128, M) float32, row strides a_scale_ld, b_scale_ld; C (E, N, M)
        contiguous (c_ptr; c_desc over it as (E * N, M), tiles [BLOCK_N / 2, BLOCK_M]), written
        in full (zeros for experts without tokens). n_tiles: E * (N / BLOCK_N) * (M / BLOCK_M)."""
        a_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_N, BLOCK_K], a_desc.layout)
        b_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_M, BLOCK_K], b_desc.layout)
        c_s = gl.allocate_shared_memory(c_desc.dtype, [2, BLOCK_N // 2, BLOCK_M], c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(ready.index(s), count=1)
            mbarrier.init(empty.index(s), count=2)   # both consumer warp groups hand a slot back
        for w in gl.static_range(2):
            mbarrier.init(turn.index(w), count=1)    # the other warp group's issue
        gl.warp_specialize([
            (_consumer0, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                          b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N, BLOCK_M, BLOCK_K, STAGES,
                          PINGPONG, TMA_STORE, AHEAD, NEXT)),
            (_consumer1, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                          b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N, BLOCK_M, BLOCK_K, STAGES,
                          PINGPONG, TMA_STORE, AHEAD, NEXT)),
            (_producer, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                         b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N, BLOCK_M, BLOCK_K, STAGES,
                         PINGPONG, TMA_STORE, AHEAD, NEXT)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


def _layouts(block_m):
    return (gl.NVMMASharedLayout.get_default_for([BLOCK, BLOCK], gl.float8e4nv),
            gl.NVMMASharedLayout.get_default_for([block_m, BLOCK], gl.float8e4nv),
            gl.NVMMASharedLayout.get_default_for([BLOCK // 2, block_m], gl.bfloat16))


def applies(a, b, c, stages):
    d = c.device
    return (available(d) and 2 <= stages <= MAX_STAGES and c.dim() == 3 and c.is_contiguous()
            and c.dtype == torch.bfloat16 and c.shape[1] % BLOCK == 0 and c.shape[2] % BLOCK == 0
            and tuple(c.shape[1:]) == (a.data.shape[0], b.data.shape[0]) and a.data.shape[1] == b.data.shape[1]
            and a.data.shape[1] % BLOCK == 0 and a.data.shape[1] > 0)


def launch_wgrad(a, b, c, counts, *, stages=MAX_STAGES, pingpong=True, tma_store=True, ahead=False, nxt=False,
                 programs=None) -> bool:
    """c[e] = A[:, tokens of e] @ B[:, tokens of e]^T from the column-wise copies a (N, Tp), b
    (M, Tp) (recipes.QuantRows), c (E, N, M) bf16 contiguous; False where it does not apply."""
    if not applies(a, b, c, stages):
        return False
    E, N, M = c.shape
    lay_a, lay_b, lay_c = _layouts(BLOCK)
    a_desc = TensorDescriptor.from_tensor(a.data.view(torch.float8_e4m3fn), [BLOCK, BLOCK], lay_a)
    b_desc = TensorDescriptor.from_tensor(b.data.view(torch.float8_e4m3fn), [BLOCK, BLOCK], lay_b)
    c_desc = TensorDescriptor.from_tensor(c.view(E * N, M), [BLOCK // 2, BLOCK], lay_c)
    n_tiles = E * (N // BLOCK) * (M // BLOCK)
    pingpong_fp8_wgrad_kernel[(max(1, min(n_tiles, programs or num_sms(c.device))),)](
        a_desc, b_desc, c_desc, counts, c, a.scales, b.scales, N, M, n_tiles, a.scale_ld, b.scale_ld,
        BLOCK_N=BLOCK, BLOCK_M=BLOCK, BLOCK_K=BLOCK, STAGES=stages, PINGPONG=pingpong, TMA_STORE=tma_store,
        AHEAD=ahead, NEXT=nxt, CONSUMER_REGS=CONSUMER_REGS, PRODUCER_REGS=PRODUCER_REGS, num_warps=4, maxnreg=MAXNREG)
    return True


# (pingpong, tma_store, ahead, next): run 8's best form; with the next tile's cursor and first
# scales read under this tile's wgmma (NEXT takes the TMA store and reads every scale a block
# ahead), with and without the turns
FORMS = ((True, True, True, False), (True, True, False, True), (False, True, False, True))


def compile_report():
    """sm_90 registers, stack and shared memory of each form at rings 3 and 5 (no GPU needed)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    sys.path.insert(0, "tests")
    from sm90_helpers import cubin_report
    lay_a, lay_b, lay_c = _layouts(BLOCK)
    sig = {"a_desc": "tensordesc<fp8e4nv[%d, %d],%s>" % (BLOCK, BLOCK, lay_a),
           "b_desc": "tensordesc<fp8e4nv[%d, %d],%s>" % (BLOCK, BLOCK, lay_b),
           "c_desc": "tensordesc<bf16[%d, %d],%s>" % (BLOCK // 2, BLOCK, lay_c), "counts_ptr": "*i32",
           "c_ptr": "*bf16", "a_scale_ptr": "*fp32", "b_scale_ptr": "*fp32",
           **{n: "i32" for n in ("N", "M", "n_tiles", "a_scale_ld", "b_scale_ld")}}
    for pingpong, tma_store, ahead, nxt in FORMS:
        for stages in (3, MAX_STAGES):
            ce = dict(BLOCK_N=BLOCK, BLOCK_M=BLOCK, BLOCK_K=BLOCK, STAGES=stages, PINGPONG=pingpong,
                      TMA_STORE=tma_store, AHEAD=ahead, NEXT=nxt, CONSUMER_REGS=CONSUMER_REGS,
                      PRODUCER_REGS=PRODUCER_REGS)
            src = GluonASTSource(pingpong_fp8_wgrad_kernel, {**sig, **{k: "constexpr" for k in ce}}, constexprs=ce)
            c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": MAXNREG})
            u = cubin_report(c)
            print(json.dumps({"pingpong": pingpong, "tma_store": tma_store, "ahead": ahead, "next": nxt,
                              "stages": stages, "stack": u["stack"],
                              "regs": u.get("regs"), "smem": c.metadata.shared,
                              "qgmma": u["sass"].count("QGMMA")}), flush=True)


def operands(counts, N, M, seed):
    g = torch.Generator().manual_seed(seed)
    T = sum(counts)
    a = torch.randn(T, N, generator=g).bfloat16().cuda()
    b = torch.randn(T, M, generator=g).bfloat16().cuda()
    return a, b, torch.tensor(counts, dtype=torch.int32, device="cuda")


def routed(E, T, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(E, generator=g)
    return torch.bincount(torch.multinomial(w, T, replacement=True, generator=g), minlength=E).tolist()


def bitwise(qa, qb, counts, E, N, M, T, stages, form, programs=None):
    want = torch.full((E, N, M), float("nan"), dtype=torch.bfloat16, device="cuda")
    got = torch.full_like(want, float("nan"))
    launch._wgrad(qa, qb, want, counts, T, WCFG, R)
    pingpong, tma_store, ahead, nxt = form
    assert launch_wgrad(qa, qb, got, counts, stages=stages, pingpong=pingpong, tma_store=tma_store, ahead=ahead,
                        nxt=nxt, programs=programs)
    return torch.equal(got.view(torch.int16), want.view(torch.int16))


def check_small():
    cases = [([300, 0, 211, 17], 256, 384), ([128, 256, 384], 128, 128), ([1, 127, 129, 0, 640], 384, 128),
             ([1000], 128, 256), ([0, 0, 513, 0], 256, 256), ([5, 7, 90, 20], 128, 128), ([700, 0], 512, 128),
             ([0, 3, 0], 128, 256)]
    ok = bad = 0
    for i, (counts, N, M) in enumerate(cases):
        a, b, c = operands(counts, N, M, i)
        qa, qb = recipes.quantize_cols(R, a, c), recipes.quantize_cols(R, b, c)
        for stages in (2, 3, MAX_STAGES):
            for programs in (None, 1, 3):
                for form in FORMS:
                    same = bitwise(qa, qb, c, len(counts), N, M, sum(counts), stages, form, programs)
                    ok += same
                    bad += not same
                    if not same:
                        print(f"  MISMATCH counts {counts} N {N} M {M} stages {stages} programs {programs} form {form}")
    print(f"small problems: {ok} bitwise, {bad} not", flush=True)
    return bad == 0


def time_shape(index, E, T, H, F, counts_kind, rounds):
    from tilefuse.tuning import timing
    counts = [T // E] * E if counts_kind == "balanced" else routed(E, T, index)
    g = torch.Generator().manual_seed(index)
    t = {k: torch.randn(T, n, generator=g).bfloat16().cuda() for k, n in (("dz", 2 * F), ("x", H), ("dy", H), ("h", F))}
    c = torch.tensor(counts, dtype=torch.int32, device="cuda")
    q = {k: recipes.quantize_cols(R, v, c) for k, v in t.items()}
    dw1 = torch.empty(E, 2 * F, H, dtype=torch.bfloat16, device="cuda")
    dw2 = torch.empty(E, H, F, dtype=torch.bfloat16, device="cuda")
    same_all = True
    for name, (qa, qb, out) in {"dW1": (q["dz"], q["x"], dw1), "dW2": (q["dy"], q["h"], dw2)}.items():
        for form in FORMS:
            same = bitwise(qa, qb, c, E, out.shape[1], out.shape[2], T, MAX_STAGES, form)
            same_all = same_all and same
            if not same:
                print(f"  shape {index} {counts_kind} {name} {form}: NOT bitwise", flush=True)
    print(f"  shape {index} {counts_kind}: every form {'bitwise' if same_all else 'NOT bitwise'}", flush=True)

    def triton_heur():
        launch._wgrad(q["dz"], q["x"], dw1, c, T, WCFG, R)
        launch._wgrad(q["dy"], q["h"], dw2, c, T, WCFG, R)

    def ws(form, stages=MAX_STAGES):
        def run():
            pingpong, tma_store, ahead, nxt = form
            for qa, qb, out in ((q["dz"], q["x"], dw1), (q["dy"], q["h"], dw2)):
                launch_wgrad(qa, qb, out, c, stages=stages, pingpong=pingpong, tma_store=tma_store, ahead=ahead,
                             nxt=nxt)
        return run

    providers = {"triton (the op's)": triton_heur, "run 8's best": ws(FORMS[0]),
                 "next, ping-pong": ws(FORMS[1]), "next, in step": ws(FORMS[2]),
                 "next, ping-pong, s4": ws(FORMS[1], 4)}
    res = timing.interleaved(providers, rounds=rounds, graphs=True)
    base = res["triton (the op's)"]
    flop = 2 * T * 2 * F * H + 2 * T * H * F
    print(f"shape {index} (E {E} T {T} H {H} F {F}) {counts_kind}: dW1 + dW2, ms, {rounds} rounds, graph replay")
    for name, r in res.items():
        if isinstance(r, Exception):
            print(f"  {name:26s} FAILED {r}")
            continue
        print(f"  {name:26s} {r.median_ms:7.3f} [{r.min_ms:.3f}-{r.max_ms:.3f}] {flop / r.median_ms / 1e9:6.0f} TFLOP/s"
              f"  {timing.ratio(base, r):5.3f}x triton", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default="1,2,3")
    ap.add_argument("--compile", action="store_true", help="sm_90 compile report only (no GPU)")
    args = ap.parse_args()
    if args.compile:
        compile_report()
        return
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    check_small()
    for s in [int(v) for v in args.shapes.split(",")]:
        for kind in ("balanced", "routed"):
            time_shape(s, *DEFAULT_SHAPES[s - 1], kind, args.rounds)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
