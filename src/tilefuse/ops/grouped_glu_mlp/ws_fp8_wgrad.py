"""fp8_block's weight gradients warp-specialised in Gluon, one program an SM: dW_e = A_e^T B_e
over each expert's ragged token rows, from the column-wise copies (recipes.quantize_cols: A^T
(N, Tp) and B^T (M, Tp), 128-token blocks aligned to the global token index, one float32 scale
per block and column). Only ``@gluon.jit`` code, its layout check and its launch
(``available``: ops/gluon_hopper.py).

Why: kernels.grouped_wgrad_kernel (RECIPE_FP8_BLOCK) waits for each 128-token block's wgmma
before it rescales the block into the float32 accumulator, with nothing to run meanwhile; on
the H200 its two wgrads ran at about 590 TFLOP/s at the spec's shape 2, no faster than the
16-bit Gluon wgrads (ws_wgrad.py), against an FP8 tensor-core peak twice theirs
(results/2026-12-04-h200-aj run 3). Here the structure is ws_kernels.fp8_ws_gemm_kernel's:
one producer warp issues every TMA (a block of A's 128 rows and of B's BLOCK_M rows, 128
tokens each, K-contiguous as FP8 wgmma takes both operands, under one mbarrier, STAGES
blocks ahead), two consumer warp groups each own 64 of the tile's 128 gradient rows and take
the blocks two at a time: both blocks' wgmma issued (each from zero), the first rescaled into
the accumulator while the tensor cores run the second.

The arithmetic per output is grouped_wgrad_kernel's, operation for operation (kernels.
fp8_scaled_dot: acc + dot(a8, b8) * (a_scale[n] * b_scale[m]) per block, each block's dot
from zero; the blocks wholly inside the expert's rows in token order, then the block it
shares with the expert before it, then the one it shares with the expert after it, those two
with the other expert's tokens zeroed in the A tile, kernels.wgrad_fp8_masked_tma), so the
result is bitwise its (tests/test_grouped_ws_fp8_wgrad.py). The tile leaves through shared
memory and an asynchronous TMA store, as ws_wgrad's. Tiles run expert by expert (ws_wgrad's
cursor over the device-side counts: no host sync); an expert without tokens gets zeros.

Not in Triton's interpreter nor off Hopper: ``launch`` returns False and launch._wgrad takes
grouped_wgrad_kernel, with the same bits.
"""

from __future__ import annotations

import functools

import torch

from ...device import num_sms
from ...utils import cdiv
from ..gluon_hopper import (available, fence_async_shared, gl, gluon, mbarrier, tma, tma_load, tma_store,
                            warpgroup_mma, warpgroup_mma_wait)
from .ws_wgrad import DescriptorLaunch

BLOCK_N = 128     # gradient rows a tile (A's copy's rows): 64 a consumer warp group
BLOCK_K = 128     # tokens a block: fp8_block's scaling block
BLOCK_MS = (128,)   # gradient columns a tile (B's copy's rows)
MAXNREG = 168
CONSUMER_REGS = 232
PRODUCER_REGS = 40
MAX_STAGES = 5
SMEM = 227 * 1024
# A ``ws`` config's weight gradients through this kernel where it applies (else
# grouped_wgrad_kernel at the wgrad heuristic's tile); benchmarks set it False to time that one.
TAKES_WGRAD = True


def _smem_bytes(block_m: int, stages: int, itemsize: int = 2) -> int:
    """Shared memory a launch takes, an upper bound: the ring of float8 blocks, the two
    consumers' epilogue buffers (64 x BLOCK_M of the gradient's dtype each) and the barriers."""
    return stages * BLOCK_K * (BLOCK_N + block_m) + 2 * 64 * block_m * itemsize + 1024


def _copy_ok(q, rows: int) -> bool:
    """A recipes.QuantRows column-wise copy (rows, Tp) the descriptors and scale loads read as
    laid out: uint8 data with unit column stride, 16-byte aligned rows, Tp a positive multiple
    of 128; float32 scales (Tp / 128, rows) at row stride scale_ld."""
    d, s = q.data, q.scales
    return (d.dim() == 2 and d.dtype == torch.uint8 and d.shape[0] == rows and d.shape[1] > 0
            and d.shape[1] % BLOCK_K == 0 and d.stride(1) == 1 and d.stride(0) % 16 == 0 and d.data_ptr() % 16 == 0
            and s.dtype == torch.float32 and s.dim() == 2 and s.stride(1) == 1 and s.stride(0) == q.scale_ld
            and tuple(s.shape) == (d.shape[1] // BLOCK_K, rows))


def applies(a, b, c, block_m: int, stages: int) -> bool:
    """Whether ``launch`` runs: a and b fp8_block column-wise copies (recipes.QuantRows of
    shapes (N, Tp) and (M, Tp), ``_copy_ok``), c (E, N, M) contiguous bf16 or fp16 with N and M
    multiples of 128 (fp8_block's widths are), a tile of BLOCK_MS columns on a ring of 2 to
    MAX_STAGES slots within shared memory, on a device where the kernel runs."""
    if not (available(c.device) and block_m in BLOCK_MS and 2 <= stages <= MAX_STAGES and c.dim() == 3
            and c.dtype in (torch.bfloat16, torch.float16) and c.is_contiguous()
            and _smem_bytes(block_m, stages, c.element_size()) <= SMEM):
        return False
    E, N, M = c.shape
    return (N % BLOCK_N == 0 and M % block_m == 0 and N > 0 and M > 0 and _copy_ok(a, N) and _copy_ok(b, M)
            and a.data.shape[1] == b.data.shape[1])


if gluon is not None:
    from .ws_wgrad import _tile   # the expert cursor: tiles expert by expert

    @gluon.jit
    def _blocks(start, count, BLOCK_K: gl.constexpr):
        """An expert's 128-token blocks in grouped_wgrad_kernel's order: (first block wholly
        inside its rows, how many are, whether the block it shares with the expert before it
        runs, that block, whether the one shared with the expert after it runs, that block)."""
        first_full = gl.cdiv(start, BLOCK_K)
        end_full = (start + count) // BLOCK_K
        head = start // BLOCK_K
        has_head = (count > 0) & (head < first_full)
        has_tail = (count > 0) & (end_full * BLOCK_K < start + count) & (end_full >= first_full)
        return first_full, gl.maximum(end_full - first_full, 0), has_head, head, has_tail, end_full

    # The partitions take the same arguments (Gluon's rule for worker partitions).
    @gluon.jit
    def _producer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, a_scale_ptr, b_scale_ptr, N, M,
                  n_tiles, a_scale_ld, b_scale_ld, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
                  BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
        """One warp: every tile's blocks (A's BLOCK_N rows, B's BLOCK_M rows, 128 tokens each) into
        the ring in the consumers' order, each slot once both consumers have handed it back."""
        pid = gl.program_id(0)
        cur_expert = pid * 0
        cur_start = pid * 0
        it = 0
        for tile in range(pid, n_tiles, gl.num_programs(0)):
            expert, row_n, col_m, start, count, cur_expert = _tile(tile, counts_ptr, cur_expert, cur_start, N, M,
                                                                   BLOCK_N, BLOCK_M)
            cur_start = start
            first, n_full, has_head, head, has_tail, tail = _blocks(start, count, BLOCK_K)
            n_blocks = n_full + has_head.to(gl.int32) + has_tail.to(gl.int32)
            for j in range(n_blocks):
                blk = gl.where(j < n_full, first + j, gl.where((j == n_full) & has_head, head, tail))
                slot = it % STAGES
                mbarrier.wait(empty.index(slot), ((it // STAGES) & 1) ^ 1)   # the first pass finds it free
                bar = ready.index(slot)
                mbarrier.expect(bar, BLOCK_K * (BLOCK_N + BLOCK_M))
                tma_load(a_desc, [row_n, blk * BLOCK_K], bar, a_s.index(slot))
                tma_load(b_desc, [col_m, blk * BLOCK_K], bar, b_s.index(slot))
                it += 1

    @gluon.jit
    def _scales(a_scale_ptr, b_scale_ptr, blk, rows_n, cols_m, a_scale_ld, b_scale_ld):
        """Block ``blk``'s scales: A's for the warp group's gradient rows, B's for the tile's
        columns; their outer product, as fp8_scaled_dot forms it."""
        sa = gl.load(a_scale_ptr + blk.to(gl.int64) * a_scale_ld + rows_n)
        sb = gl.load(b_scale_ptr + blk.to(gl.int64) * b_scale_ld + cols_m)
        return sa[:, None] * sb[None, :]

    @gluon.jit
    def _full_pairs(a_s, b_s, ready, empty, a_scale_ptr, b_scale_ptr, rows_n, cols_m, acc, part, part2, it, first,
                    n_full, a_scale_ld, b_scale_ld, WG: gl.constexpr, HALF: gl.constexpr, STAGES: gl.constexpr):
        """The blocks wholly inside the expert's rows two at a time (ws_kernels._chunk_pairs):
        both wgmma issued from zero, the first waited for, its slot handed back and its product
        rescaled into acc while the second runs; then the second. No wgmma is in flight across
        the loop's back edge (ws_kernels._chunk_pairs says why)."""
        for j in range(n_full // 2):
            slot = it % STAGES
            mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
            pa = warpgroup_mma(a_s.index(slot).slice(WG * HALF, HALF), b_s.index(slot).permute((1, 0)), part,
                               use_acc=False, is_async=True)
            slot2 = (it + 1) % STAGES
            mbarrier.wait(ready.index(slot2), ((it + 1) // STAGES) & 1)
            pb = warpgroup_mma(a_s.index(slot2).slice(WG * HALF, HALF), b_s.index(slot2).permute((1, 0)), part2,
                               use_acc=False, is_async=True)
            part = warpgroup_mma_wait(num_outstanding=1, deps=[pa])
            mbarrier.arrive(empty.index(slot), count=1)
            acc = acc + part * _scales(a_scale_ptr, b_scale_ptr, first + 2 * j, rows_n, cols_m, a_scale_ld,
                                       b_scale_ld)
            part2 = warpgroup_mma_wait(num_outstanding=0, deps=[pb])
            mbarrier.arrive(empty.index(slot2), count=1)
            acc = acc + part2 * _scales(a_scale_ptr, b_scale_ptr, first + 2 * j + 1, rows_n, cols_m, a_scale_ld,
                                        b_scale_ld)
            it += 2
        if n_full % 2 == 1:
            slot = it % STAGES
            mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
            pa = warpgroup_mma(a_s.index(slot).slice(WG * HALF, HALF), b_s.index(slot).permute((1, 0)), part,
                               use_acc=False, is_async=True)
            part = warpgroup_mma_wait(num_outstanding=0, deps=[pa])
            mbarrier.arrive(empty.index(slot), count=1)
            acc = acc + part * _scales(a_scale_ptr, b_scale_ptr, first + n_full - 1, rows_n, cols_m, a_scale_ld,
                                       b_scale_ld)
            it += 1
        return acc, part, part2, it

    @gluon.jit
    def _shared_block(a_s, b_s, ready, empty, a_scale_ptr, b_scale_ptr, rows_n, cols_m, acc, part, it, blk, start,
                      count, a_scale_ld, b_scale_ld, a_reg: gl.constexpr, WG: gl.constexpr, HALF: gl.constexpr,
                      BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
        """A block the expert shares with a neighbour: A through registers with the tokens
        outside [start, start + count) zeroed (float8 zero bits; kernels.wgrad_fp8_masked_tma,
        which says what that means for non-finite data), B from shared memory."""
        slot = it % STAGES
        mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
        t = blk * BLOCK_K + gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, a_reg))
        keep = (t >= start) & (t < start + count)
        a = a_s.index(slot).slice(WG * HALF, HALF).load(a_reg).to(gl.uint8, bitcast=True)
        a = gl.where(keep[None, :], a, gl.zeros_like(a)).to(gl.float8e4nv, bitcast=True)
        p = warpgroup_mma(a, b_s.index(slot).permute((1, 0)), part, use_acc=False, is_async=True)
        part = warpgroup_mma_wait(num_outstanding=0, deps=[p])
        mbarrier.arrive(empty.index(slot), count=1)
        acc = acc + part * _scales(a_scale_ptr, b_scale_ptr, blk, rows_n, cols_m, a_scale_ld, b_scale_ld)
        return acc, part, it + 1

    @gluon.jit
    def _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, a_scale_ptr, b_scale_ptr, N, M,
                  n_tiles, a_scale_ld, b_scale_ld, WG: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
                  BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
        """One warp group: gradient rows [64 WG, 64 WG + 64) of every tile: the blocks in the
        producer's order, then the tile rounded to the gradient's dtype and stored through
        shared memory and a TMA store."""
        HALF: gl.constexpr = BLOCK_N // 2
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                      instr_shape=[16, BLOCK_M, 32])
        a_reg: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=4)
        pid = gl.program_id(0)
        cur_expert = pid * 0
        cur_start = pid * 0
        it = 0
        part = gl.zeros([HALF, BLOCK_M], gl.float32, mma)
        part2 = gl.zeros([HALF, BLOCK_M], gl.float32, mma)
        for tile in range(pid, n_tiles, gl.num_programs(0)):
            expert, row_n, col_m, start, count, cur_expert = _tile(tile, counts_ptr, cur_expert, cur_start, N, M,
                                                                   BLOCK_N, BLOCK_M)
            cur_start = start
            first, n_full, has_head, head, has_tail, tail = _blocks(start, count, BLOCK_K)
            rows_n = row_n + WG * HALF + gl.arange(0, HALF, layout=gl.SliceLayout(1, mma))
            cols_m = col_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, mma))
            acc = gl.zeros([HALF, BLOCK_M], gl.float32, mma)
            acc, part, part2, it = _full_pairs(a_s, b_s, ready, empty, a_scale_ptr, b_scale_ptr, rows_n, cols_m, acc,
                                               part, part2, it, first, n_full, a_scale_ld, b_scale_ld, WG, HALF,
                                               STAGES)
            if has_head:
                acc, part, it = _shared_block(a_s, b_s, ready, empty, a_scale_ptr, b_scale_ptr, rows_n, cols_m, acc,
                                              part, it, head, start, count, a_scale_ld, b_scale_ld, a_reg, WG, HALF,
                                              BLOCK_K, STAGES)
            if has_tail:
                acc, part, it = _shared_block(a_s, b_s, ready, empty, a_scale_ptr, b_scale_ptr, rows_n, cols_m, acc,
                                              part, it, tail, start, count, a_scale_ld, b_scale_ld, a_reg, WG, HALF,
                                              BLOCK_K, STAGES)
            tma.store_wait(0)   # the last tile's store has read this warp group's buffer
            c_s.index(WG).store(acc.to(c_desc.dtype))
            fence_async_shared()
            tma_store(c_desc, [expert * N + row_n + WG * HALF, col_m], c_s.index(WG))
        tma.store_wait(0)

    # One wrapper a consumer warp group (ws_kernels' reason: a literal in a partition's
    # argument tuple did not survive Gluon's flattening under triton 3.6).
    @gluon.jit
    def _consumer0(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, a_scale_ptr, b_scale_ptr, N, M,
                   n_tiles, a_scale_ld, b_scale_ld, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
                   BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
        _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, a_scale_ptr, b_scale_ptr, N, M,
                  n_tiles, a_scale_ld, b_scale_ld, 0, BLOCK_N, BLOCK_M, BLOCK_K, STAGES)

    @gluon.jit
    def _consumer1(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, a_scale_ptr, b_scale_ptr, N, M,
                   n_tiles, a_scale_ld, b_scale_ld, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
                   BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
        _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, a_scale_ptr, b_scale_ptr, N, M,
                  n_tiles, a_scale_ld, b_scale_ld, 1, BLOCK_N, BLOCK_M, BLOCK_K, STAGES)

    @gluon.jit
    def ws_fp8_wgrad_kernel(a_desc, b_desc, c_desc, counts_ptr, a_scale_ptr, b_scale_ptr, N, M, n_tiles, a_scale_ld,
                            b_scale_ld, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr,
                            STAGES: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
        """C[e] (N, M) = A[tokens of e]^T @ B[tokens of e], fp8_block: a_desc over A's column-wise
        copy (N, Tp) float8, tiles [BLOCK_N, BLOCK_K]; b_desc over B's (M, Tp), tiles [BLOCK_M,
        BLOCK_K]; a_scale_ptr (Tp / 128, N) and b_scale_ptr (Tp / 128, M) float32 at row strides
        a_scale_ld, b_scale_ld; c_desc over C (E, N, M) contiguous as (E * N, M), tiles
        [BLOCK_N / 2, BLOCK_M], written in full (zeros for experts without tokens). n_tiles:
        E * (N / BLOCK_N) * (M / BLOCK_M)."""
        a_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_N, BLOCK_K], a_desc.layout)
        b_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_M, BLOCK_K], b_desc.layout)
        c_s = gl.allocate_shared_memory(c_desc.dtype, [2, BLOCK_N // 2, BLOCK_M], c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(ready.index(s), count=1)
            mbarrier.init(empty.index(s), count=2)   # both consumer warp groups hand a slot back
        gl.warp_specialize([
            (_consumer0, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, a_scale_ptr, b_scale_ptr,
                          N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N, BLOCK_M, BLOCK_K, STAGES)),
            (_consumer1, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, a_scale_ptr, b_scale_ptr,
                          N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N, BLOCK_M, BLOCK_K, STAGES)),
            (_producer, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, a_scale_ptr, b_scale_ptr,
                         N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N, BLOCK_M, BLOCK_K, STAGES)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


class Prepared:
    """A launch for copies and gradients of one metadata, built by ``prepare``;
    ``__call__(a, b, c, counts)`` launches, False (nothing launched) where a base is not
    16-byte aligned."""

    __slots__ = ("n_experts", "scalars", "launch")

    def __init__(self, a, b, c, counts, block_m, stages, programs):
        E, N, M = c.shape
        n_tiles = E * (N // BLOCK_N) * (M // block_m)
        self.n_experts = E
        self.scalars = (N, M, n_tiles, a.scale_ld, b.scale_ld)
        self.launch = DescriptorLaunch(
            _launcher(), (max(1, min(n_tiles, programs or num_sms(c.device))),), self._bases(a, b, c),
            ([BLOCK_N, BLOCK_K], [block_m, BLOCK_K], [BLOCK_N // 2, block_m]),
            (counts, a.scales, b.scales, *self.scalars),
            (BLOCK_N, block_m, BLOCK_K, stages, CONSUMER_REGS, PRODUCER_REGS))

    def _bases(self, a, b, c):
        return (a.data.view(torch.float8_e4m3fn), b.data.view(torch.float8_e4m3fn),
                c.view(self.n_experts * self.scalars[0], self.scalars[1]))

    def __call__(self, a, b, c, counts) -> bool:
        return self.launch(self._bases(a, b, c), (counts, a.scales, b.scales, *self.scalars))


def prepare(a, b, c, counts, *, block_m: int = 128, stages: int = MAX_STAGES, programs: int | None = None):
    """A Prepared launch for operands of the metadata of these, None where ``launch`` would not
    run them (``applies``), or True where there is nothing to launch (c empty)."""
    if not applies(a, b, c, block_m, stages):
        return None
    if c.numel() == 0:
        return True
    return Prepared(a, b, c, counts, block_m, stages, programs)


def launch(a, b, c, counts, *, block_m: int = 128, stages: int = MAX_STAGES, programs: int | None = None) -> bool:
    """c[e] = A[tokens of e]^T @ B[tokens of e] from the column-wise copies a (N, Tp) and b (M,
    Tp) (recipes.QuantRows) through ws_fp8_wgrad_kernel, or False where it does not apply
    (``applies``): the caller then takes grouped_wgrad_kernel. c (E, N, M). ``programs``: the
    persistent program count (default one an SM; tests use fewer)."""
    p = prepare(a, b, c, counts, block_m=block_m, stages=stages, programs=programs)
    return p is True or (p is not None and p(a, b, c, counts))


@functools.lru_cache(maxsize=1)
def _launcher():
    """ws_fp8_wgrad_kernel's launcher (triton_common.SpecializingLauncher: the JIT once per
    argument specialization, then the compiled kernel's launcher)."""
    from ..triton_common import SpecializingLauncher
    return SpecializingLauncher(ws_fp8_wgrad_kernel, num_warps=4, maxnreg=MAXNREG)
