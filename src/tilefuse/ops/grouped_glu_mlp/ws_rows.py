"""The compose route's four row-ragged 16-bit GEMMs warp-specialised in Gluon, one program an SM:
C[rows of e] = A[rows of e] @ B_e, with A (T, K) row-major and B_e an expert's weight read either
by rows (``rows=True``: W (E, N, K), B_e = W[e]^T: fc1 and fc2) or by columns (``rows=False``:
W (E, K, N), B_e = W[e]: the fc2 and fc1 dgrads). What the compose route runs on
``torch._grouped_mm`` otherwise. Only ``@gluon.jit`` code, its layout check and its launch
(``available``: ops/gluon_hopper.py).

The loop is ws_wgrad.py's: one producer warp issues every TMA (a BLOCK_K-wide chunk of A's 128
rows and of B's BLOCK_N columns under one mbarrier, STAGES chunks ahead); two consumer warp
groups each own 64 of the tile's rows and chain each chunk's wgmma on one accumulator before
waiting for the previous one, whose ring slot goes back then. Row tiles run expert by expert,
BLOCK_M rows at a time from the expert's first row (a cursor over the device-side counts, no
host sync), each row tile's column tiles side by side; rows past the expert are the next
expert's (their products are computed and dropped). A warp group's 64 rows leave through shared
memory and an asynchronous TMA store when they all belong to the expert (columns past N clipped
by the copy engine), else through stores from registers with the rows past the expert masked.
For fc1 with ``glu`` the warp group also computes the GLU of its rows from the rounded z it
just wrote to shared memory (compose_kernels.compose_glu_kernel's float32 math, the same bits
wherever compared) and stores h from registers: a tile holds whole (gate, up) groups when the
interleave divides half its columns (``glu_applies``). In the halves layout (z = [gate | up])
the producer loads a tile's BLOCK_N / 2 gate rows of W[e] and their up rows, F further, into
the two halves of one ring slot, so the tile's products are its gate columns and then their up
columns; z's two halves leave by two asynchronous TMA stores, F apart, and the GLU reads the
tile as above (F a multiple of BLOCK_N / 2). As called it ran 1.003x / 0.998x / 0.977x the GLU
kernel's route at the spec's shapes (results/2026-12-04-h200-ae run 2; a first form storing z's
halves from registers 1.002x / 0.979x / 0.964x, -ad run 6).

Edges: past K the copy engine reads zeros from A and, by rows, from W[e]; by columns a chunk of
W[e]'s rows must not reach the next expert's, so K must be a multiple of BLOCK_K there
(``applies``). Past N a tile reads the next expert's weight rows (by rows) or zeros (by
columns), into columns that are never stored.

Measured on the H200 (benchmarks/results/2026-12-03-h200-ab run 1; the four GEMMs of a step
together, balanced / routed counts, graph replay): the 256-column tile on a 3-slot ring ran
1.06x / 1.14x, 1.13x / 1.23x and 1.15x / 1.28x CUTLASS's (``torch._grouped_mm``) at the spec's
shapes 1-3, and gave CUTLASS's bits on every problem compared (624 small ones, bf16 and fp16,
and every timed one). The same kernel storing every tile from registers (a probe, results/
2026-12-03-h200-aa run 8) ran 1.02-1.12x a GEMM at balanced counts. fc1 with the GLU in its
epilogue against ws_rows' fc1 and the GLU kernel (interleave 32, run 4): 1.05x against 1.01x
CUTLASS + GLU kernel at shape 1 (256 columns), within 1% of the unfused pair at shapes 2-3 (the
GLU's math and stores then hold up the warp group's next tile about as long as the saved pass
of z took). The tuner decides per key whether the compose route takes it (GemmConfig.
rows_block_n) and whether fc1's GLU goes into its epilogue (GemmConfig.rows_glu).
"""

from __future__ import annotations

import functools

import torch

from ...device import num_sms
from ...utils import cdiv
from ..gluon_hopper import (available, fence_async_shared, gl, gluon, mbarrier, tma, tma_load, tma_store,
                            warpgroup_mma, warpgroup_mma_wait)
from .kernels import glu_act
from .ws_wgrad import CONSUMER_REGS, MAXNREG, PRODUCER_REGS, SMEM, DescriptorLaunch, _rows_ok, counts_ok

BLOCK_M = 128     # rows a tile: 64 a consumer warp group
BLOCK_K = 64      # the contraction a chunk
TILES = (128, 256)   # BLOCK_N, the output columns a tile


def _smem_bytes(block_n: int, stages: int, itemsize: int = 2) -> int:
    """Shared memory a launch takes, an upper bound: the ring, the two consumers' epilogue
    buffers (64 x BLOCK_N each) and the barriers."""
    return stages * BLOCK_K * (BLOCK_M + block_n) * itemsize + 2 * 64 * block_n * itemsize + 1024


def applies(a, w, c, counts, *, rows: bool, block_n: int, stages: int) -> bool:
    """Whether ``launch`` runs: a (T, K) and c (T, N) 16-bit row-major with 16-byte aligned rows,
    T > 0; w contiguous of their dtype, (E, N, K) by rows or (E, K, N) by columns with K a
    multiple of BLOCK_K, its rows 16-byte aligned; counts (E,) contiguous; a tile of 128 or 256 columns and
    a ring that fits shared memory, on a device where the kernel runs."""
    if not (available(c.device) and block_n in TILES and stages >= 2 and _smem_bytes(block_n, stages) <= SMEM
            and _rows_ok(a) and _rows_ok(c) and a.dtype == w.dtype == c.dtype and w.dim() == 3
            and w.is_contiguous() and w.shape[-1] * w.element_size() % 16 == 0 and w.data_ptr() % 16 == 0
            and counts_ok(counts, w.shape[0]) and a.shape[0] == c.shape[0]):
        return False
    K, N = a.shape[1], c.shape[1]
    return tuple(w.shape[1:]) == ((N, K) if rows else (K, N)) and (rows or K % BLOCK_K == 0)


if gluon is not None:
    @gluon.jit
    def _advance(row_tile, counts_ptr, E, expert, tiles_before, rows_before, m, BLOCK_M: gl.constexpr):
        """Move the cursor (an expert, the row tiles and rows before it, its row count m) to the
        expert of row tile ``row_tile``, or to E past the last one. It only moves forward, as a
        program's tiles do."""
        while (expert < E) & (row_tile >= tiles_before + gl.cdiv(m, BLOCK_M)):
            tiles_before += gl.cdiv(m, BLOCK_M)
            rows_before += m
            expert += 1
            m = gl.load(counts_ptr + gl.minimum(expert, E - 1)).to(gl.int32)
        return expert, tiles_before, rows_before, m

    @gluon.jit
    def _producer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, c_ptr, N, K, E, n_tiles, ldc,
                  h_ptr, probs_ptr, b1_ptr, ldh, b1_stride, F, ROWS: gl.constexpr, BLOCK_M: gl.constexpr,
                  BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr, GLU: gl.constexpr,
                  INTERLEAVE: gl.constexpr, HAS_BIAS: gl.constexpr):
        """One warp: every tile's K chunks (A's rows, B's columns) into the ring, each slot once
        both consumers have handed it back."""
        n_col_tiles = gl.cdiv(N, BLOCK_N)
        pid = gl.program_id(0)
        expert = pid * 0
        tiles_before = pid * 0
        rows_before = pid * 0
        m = gl.load(counts_ptr).to(gl.int32)
        it = 0
        for tile in range(pid, n_tiles, gl.num_programs(0)):
            row_tile = tile // n_col_tiles
            expert, tiles_before, rows_before, m = _advance(row_tile, counts_ptr, E, expert, tiles_before,
                                                            rows_before, m, BLOCK_M)
            if expert < E:
                row0 = rows_before + (row_tile - tiles_before) * BLOCK_M
                col0 = (tile % n_col_tiles) * BLOCK_N
                for k0 in range(0, K, BLOCK_K):
                    slot = it % STAGES
                    mbarrier.wait(empty.index(slot), ((it // STAGES) & 1) ^ 1)   # the first pass finds it free
                    bar = ready.index(slot)
                    mbarrier.expect(bar, BLOCK_K * (BLOCK_M + BLOCK_N) * 2)
                    tma_load(a_desc, [row0, k0], bar, a_s.index(slot))
                    if ROWS and GLU >= 0 and INTERLEAVE == 0:
                        # fc1 in the halves layout: the tile's BLOCK_N / 2 gate rows of W[e]
                        # (from col0 / 2) into the slot's first half, their up rows (F further)
                        # into its second: the tile's columns are [gate | up], interleave
                        # BLOCK_N / 2 within the tile
                        HB: gl.constexpr = BLOCK_N // 2
                        gate0 = expert * N + col0 // 2
                        tma_load(b_desc, [gate0, k0], bar, b_s.index(slot).slice(0, HB))
                        tma_load(b_desc, [gate0 + F, k0], bar, b_s.index(slot).slice(HB, HB))
                    elif ROWS:
                        tma_load(b_desc, [expert * N + col0, k0], bar, b_s.index(slot))
                    else:
                        tma_load(b_desc, [expert * K + k0, col0], bar, b_s.index(slot))
                    it += 1

    @gluon.jit
    def _glu_epilogue(z_s, row0, end, col0, expert, h_ptr, probs_ptr, b1_ptr, ldh, b1_stride, F,
                      HALF: gl.constexpr, BLOCK_N: gl.constexpr, GLU: gl.constexpr, INTERLEAVE: gl.constexpr,
                      HAS_BIAS: gl.constexpr):
        """h = p * act(z_gate + b1_gate, z_up + b1_up) for the tile's activation columns, from
        the rounded z tile in shared memory (z_s: HALF x BLOCK_N, the tile's FC1 columns), the
        math and rounding of compose_kernels.compose_glu_kernel; rows at or past ``end`` (the
        expert's) and columns past F masked. With INTERLEAVE i the tile (z's columns col0...)
        holds BLOCK_N / 2i whole (gate, up) groups of i columns each; with INTERLEAVE 0 (the
        halves layout, loaded in pairs) it holds the gate columns col0 / 2 ... and then their
        up columns, one group of BLOCK_N / 2, read 64 columns at a time (a whole 128-column
        half at once left the consumer a stack)."""
        GROUP: gl.constexpr = BLOCK_N // 2 if INTERLEAVE == 0 else INTERLEAVE
        CHUNK: gl.constexpr = 64 if GROUP > 64 else GROUP
        glu_l: gl.constexpr = gl.BlockedLayout([1, 8], [32 // (CHUNK // 8), CHUNK // 8], [4, 1], [1, 0])
        rows = row0 + gl.arange(0, HALF, layout=gl.SliceLayout(1, glu_l))
        rmask = rows < end
        rows64 = rows.to(gl.int64)
        p = gl.load(probs_ptr + rows64, mask=rmask, other=0.0).to(gl.float32)
        cols = gl.arange(0, CHUNK, layout=gl.SliceLayout(0, glu_l))
        for g in gl.static_range(BLOCK_N // (2 * GROUP)):
            for q in gl.static_range(GROUP // CHUNK):
                zg = z_s.slice(g * 2 * GROUP + q * CHUNK, CHUNK, dim=1).load(glu_l).to(gl.float32)
                zu = z_s.slice(g * 2 * GROUP + GROUP + q * CHUNK, CHUNK, dim=1).load(glu_l).to(gl.float32)
                j = (col0 // 2) + g * GROUP + q * CHUNK + cols
                jmask = j < F
                if HAS_BIAS:
                    # b1's gate and up columns: in W1's row order (the halves' F apart)
                    if INTERLEAVE == 0:
                        gate = j
                        up = j + F
                    else:
                        gate = col0 + g * 2 * GROUP + q * CHUNK + cols
                        up = gate + GROUP
                    bias = b1_ptr + expert.to(gl.int64) * b1_stride
                    zg += gl.load(bias + gate, mask=jmask, other=0.0).to(gl.float32)[None, :]
                    zu += gl.load(bias + up, mask=jmask, other=0.0).to(gl.float32)[None, :]
                h = p[:, None] * glu_act(zg, zu, GLU)
                gl.store(h_ptr + rows64[:, None] * ldh + j[None, :], h.to(h_ptr.dtype.element_ty),
                         mask=rmask[:, None] & jmask[None, :])

    @gluon.jit
    def _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, c_ptr, N, K, E, n_tiles, ldc,
                  h_ptr, probs_ptr, b1_ptr, ldh, b1_stride, F, WG: gl.constexpr, ROWS: gl.constexpr,
                  BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr,
                  GLU: gl.constexpr, INTERLEAVE: gl.constexpr, HAS_BIAS: gl.constexpr):
        """One warp group: rows [64 WG, 64 WG + 64) of every tile, the chunks chained on the
        accumulator, then stored, and with GLU >= 0 the GLU of the tile (module docstring)."""
        HALF: gl.constexpr = BLOCK_M // 2
        PAIRED: gl.constexpr = ROWS and GLU >= 0 and INTERLEAVE == 0   # fc1 in the halves layout
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                      instr_shape=[16, BLOCK_N, 16])
        n_col_tiles = gl.cdiv(N, BLOCK_N)
        pid = gl.program_id(0)
        expert = pid * 0
        tiles_before = pid * 0
        rows_before = pid * 0
        m = gl.load(counts_ptr).to(gl.int32)
        it = 0
        for tile in range(pid, n_tiles, gl.num_programs(0)):
            row_tile = tile // n_col_tiles
            expert, tiles_before, rows_before, m = _advance(row_tile, counts_ptr, E, expert, tiles_before,
                                                            rows_before, m, BLOCK_M)
            if expert < E:
                row0 = rows_before + (row_tile - tiles_before) * BLOCK_M + WG * HALF
                col0 = (tile % n_col_tiles) * BLOCK_N
                acc = gl.zeros([HALF, BLOCK_N], gl.float32, mma)
                for j in range(gl.cdiv(K, BLOCK_K)):
                    slot = it % STAGES
                    mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
                    if ROWS:
                        b = b_s.index(slot).permute((1, 0))
                    else:
                        b = b_s.index(slot)
                    acc = warpgroup_mma(a_s.index(slot).slice(WG * HALF, HALF), b, acc, is_async=True)
                    acc = warpgroup_mma_wait(num_outstanding=1, deps=[acc])
                    # the previous chunk's product is done: its slot goes back
                    mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=j > 0)
                    it += 1
                acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
                mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
                end = rows_before + m
                full = row0 + HALF <= end
                if full or GLU >= 0:
                    # through this warp group's buffer: the last store has read it
                    tma.store_wait(0)
                    c_s.index(WG).store(acc.to(c_desc.dtype))
                    fence_async_shared()
                if full:
                    # all 64 rows are the expert's: an asynchronous TMA store, so the next
                    # tile's products start while it drains
                    if PAIRED:
                        # the halves layout: the tile's gate and up halves go F apart
                        tma_store(c_desc, [row0, col0 // 2], c_s.index(WG).slice(0, BLOCK_N // 2, dim=1))
                        tma_store(c_desc, [row0, F + col0 // 2], c_s.index(WG).slice(BLOCK_N // 2, BLOCK_N // 2, dim=1))
                    else:
                        tma_store(c_desc, [row0, col0], c_s.index(WG))
                else:
                    # straight from the accumulator's layout: a layout change would take
                    # scratch shared memory that the ring then could not have
                    srows = row0 + gl.arange(0, HALF, layout=gl.SliceLayout(1, mma))
                    local = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma))
                    if PAIRED:
                        scols = col0 // 2 + local % (BLOCK_N // 2) + (local // (BLOCK_N // 2)) * F
                    else:
                        scols = col0 + local
                    smask = (srows < end)[:, None] & (scols < N)[None, :]
                    gl.store(c_ptr + srows.to(gl.int64)[:, None] * ldc + scols[None, :], acc.to(c_ptr.dtype.element_ty),
                             mask=smask)
                if GLU >= 0:
                    _glu_epilogue(c_s.index(WG), row0, end, col0, expert, h_ptr, probs_ptr, b1_ptr, ldh, b1_stride,
                                  F, HALF, BLOCK_N, GLU, INTERLEAVE, HAS_BIAS)
        tma.store_wait(0)

    # One wrapper a consumer warp group (ws_kernels' reason: a literal in a partition's
    # argument tuple did not survive Gluon's flattening under triton 3.6).
    @gluon.jit
    def _consumer0(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, c_ptr, N, K, E, n_tiles, ldc,
                   h_ptr, probs_ptr, b1_ptr, ldh, b1_stride, F, ROWS: gl.constexpr, BLOCK_M: gl.constexpr,
                   BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr, GLU: gl.constexpr,
                   INTERLEAVE: gl.constexpr, HAS_BIAS: gl.constexpr):
        _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, c_ptr, N, K, E, n_tiles, ldc, h_ptr,
                  probs_ptr, b1_ptr, ldh, b1_stride, F, 0, ROWS, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GLU, INTERLEAVE,
                  HAS_BIAS)

    @gluon.jit
    def _consumer1(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, c_ptr, N, K, E, n_tiles, ldc,
                   h_ptr, probs_ptr, b1_ptr, ldh, b1_stride, F, ROWS: gl.constexpr, BLOCK_M: gl.constexpr,
                   BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr, GLU: gl.constexpr,
                   INTERLEAVE: gl.constexpr, HAS_BIAS: gl.constexpr):
        _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, c_ptr, N, K, E, n_tiles, ldc, h_ptr,
                  probs_ptr, b1_ptr, ldh, b1_stride, F, 1, ROWS, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GLU, INTERLEAVE,
                  HAS_BIAS)

    @gluon.jit
    def ws_rows_kernel(a_desc, b_desc, c_desc, counts_ptr, c_ptr, N, K, E, n_tiles, ldc, h_ptr, probs_ptr, b1_ptr,
                       ldh, b1_stride, F, ROWS: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                       BLOCK_K: gl.constexpr, STAGES: gl.constexpr, GLU: gl.constexpr, INTERLEAVE: gl.constexpr,
                       HAS_BIAS: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
        """C[rows of e] = A[rows of e] @ B_e: a_desc over A (T, K), tiles [BLOCK_M, BLOCK_K];
        b_desc over W (E, N, K) as (E * N, K), tiles [BLOCK_N, BLOCK_K] (ROWS), or over W
        (E, K, N) as (E * K, N), tiles [BLOCK_K, BLOCK_N]; c_desc over C (T, N), tiles
        [BLOCK_M / 2, BLOCK_N], and c_ptr its data with row stride ldc. n_tiles:
        (cdiv(T, BLOCK_M) + E) * cdiv(N, BLOCK_N), a bound on the row tiles (the tiles past the
        last expert's do nothing).

        GLU >= 0 (fc1: C is z, N = 2F, the activation code of launch.ACTIVATIONS): also h (T, F)
        at h_ptr, row stride ldh, = p * act(z + b1_e) per compose_glu_kernel, with probs_ptr
        (T,) contiguous, b1_ptr (E, 2F) row stride b1_stride (HAS_BIAS) and z's gate / up
        columns interleaved by INTERLEAVE (a power of two, 8 to BLOCK_N / 2), or INTERLEAVE 0:
        the halves layout (z = [gate | up], F a multiple of BLOCK_N / 2), where b_desc's tiles
        are [BLOCK_N / 2, BLOCK_K] (a tile's gate rows of W[e], then their up rows F further,
        into one ring slot) and c_desc's [BLOCK_M / 2, BLOCK_N / 2] (the tile's two halves
        stored F apart). GLU -1: those arguments are not read."""
        a_s = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BLOCK_M, BLOCK_K], a_desc.layout)
        if ROWS:
            b_s = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BLOCK_N, BLOCK_K], b_desc.layout)
        else:
            b_s = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BLOCK_K, BLOCK_N], b_desc.layout)
        c_s = gl.allocate_shared_memory(c_desc.dtype, [2, BLOCK_M // 2, BLOCK_N], c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(ready.index(s), count=1)
            mbarrier.init(empty.index(s), count=2)   # both consumer warp groups hand a slot back
        gl.warp_specialize([
            (_consumer0, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, c_ptr, N, K, E, n_tiles,
                          ldc, h_ptr, probs_ptr, b1_ptr, ldh, b1_stride, F, ROWS, BLOCK_M, BLOCK_N, BLOCK_K, STAGES,
                          GLU, INTERLEAVE, HAS_BIAS)),
            (_consumer1, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, c_ptr, N, K, E, n_tiles,
                          ldc, h_ptr, probs_ptr, b1_ptr, ldh, b1_stride, F, ROWS, BLOCK_M, BLOCK_N, BLOCK_K, STAGES,
                          GLU, INTERLEAVE, HAS_BIAS)),
            (_producer, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, c_ptr, N, K, E, n_tiles,
                         ldc, h_ptr, probs_ptr, b1_ptr, ldh, b1_stride, F, ROWS, BLOCK_M, BLOCK_N, BLOCK_K, STAGES,
                         GLU, INTERLEAVE, HAS_BIAS)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


def halves(interleave) -> bool:
    """Whether ``interleave`` names the halves layout (z = [gate | up]): None, or the int 0 as
    the custom ops pass it (not False)."""
    return interleave is None or (interleave.__class__ is int and interleave == 0)


def whole_groups(interleave, block_n: int) -> bool:
    """Whether a tile of ``block_n`` z columns holds whole (gate, up) groups: an int interleave,
    a power of two from 8 to block_n / 2."""
    return (interleave.__class__ is int and 8 <= interleave <= block_n // 2
            and interleave & (interleave - 1) == 0)


def glu_applies(z_shape, block_n: int, h, probs, b1, act: int, interleave) -> bool:
    """Whether ``launch`` can also write fc1's GLU (``glu=(h, probs, b1, act, interleave)``)
    beside a z of ``z_shape`` (T, 2F): gate and up columns interleaved by a power of two from 8
    to block_n / 2 (so a tile holds whole groups), or the halves layout (interleave None, or 0
    as the custom ops pass it) with F a multiple of block_n / 2 (a tile takes block_n / 2 gate
    columns and their up columns); h (T, F) with unit column stride (of z's dtype: ``launch``
    checks), probs (T,) contiguous, b1 None or (E, 2F) with unit column stride, an activation
    code of launch.ACTIVATIONS."""
    T, N = z_shape
    layout_ok = N % block_n == 0 if halves(interleave) else whole_groups(interleave, block_n)
    return (layout_ok and act in (0, 1) and N % 2 == 0 and h.dim() == 2 and tuple(h.shape) == (T, N // 2)
            and h.stride(1) == 1 and probs.dim() == 1 and probs.shape[0] == T
            and probs.is_contiguous() and (b1 is None or (b1.dim() == 2 and b1.shape[1] == N and b1.stride(1) == 1)))


def launch(a, w, c, counts, *, rows: bool, block_n: int = 256, stages: int = 3, programs: int | None = None,
           glu=None, glu_checked: bool = False) -> bool:
    """c[rows of e] = a[rows of e] @ (w[e]^T if rows else w[e]) through ws_rows_kernel, or False
    where it does not apply (``applies``, and with ``glu`` ``glu_applies``): the caller then
    takes its other route. a (T, K), c (T, N), w (E, N, K) or (E, K, N), counts (E,) on the
    device (their sum T: the caller's contract, reference.assert_counts_on_device).
    ``programs``: the persistent program count (default one an SM; tests use fewer).
    ``glu``: (h, probs, b1 or None, activation code, interleave) for fc1 (c = z): h also
    written, compose_glu_kernel's values from the rounded z; ``glu_checked``: the caller has
    asked ``glu_applies`` of these arguments (not asked again)."""
    p = prepare(a, w, c, counts, rows=rows, block_n=block_n, stages=stages, programs=programs, glu=glu,
                glu_checked=glu_checked)
    return p is not None and p(a, w, c, counts, *(glu[:3] if glu is not None else ()))


def _as_2d(w):
    """W (E, N, K) or (E, K, N) as the 2-D tensor its descriptor spans."""
    return w.view(w.shape[0] * w.shape[1], w.shape[2])


class Prepared:
    """One ws_rows launch with every argument's metadata fixed (ws_wgrad.DescriptorLaunch), for
    calls that repeat it (a call plan: compose.ForwardPlan, compose.BackwardPlan), built by
    ``prepare``. ``__call__`` takes tensors of the first call's shapes, strides and dtypes and
    launches with their addresses; False, launching nothing, where a, w or c is not 16-byte
    aligned (the caller runs its other route)."""

    __slots__ = ("scalars", "launch")

    def __init__(self, a, w, c, counts, rows, block_n, stages, programs, glu):
        T, K = a.shape
        E, N = w.shape[0], c.shape[1]
        h, probs, b1, act, interleave = glu if glu is not None else (c, c, None, -1, 8)
        interleave = interleave or 0    # the kernel's INTERLEAVE: 0 the halves layout (glu_applies)
        n_tiles = (cdiv(T, BLOCK_M) + E) * cdiv(N, block_n)
        self.scalars = (N, K, E, n_tiles, c.stride(0), h.stride(0), b1.stride(0) if b1 is not None else 0, N // 2)
        # the halves layout loads W's tile as two blocks of block_n / 2 rows and stores z's as two
        # of block_n / 2 columns
        part = block_n // 2 if interleave == 0 else block_n
        self.launch = DescriptorLaunch(
            _launcher(), (max(1, min(n_tiles, programs or num_sms(c.device))),), (a, _as_2d(w), c),
            ([BLOCK_M, BLOCK_K], [part, BLOCK_K] if rows else [BLOCK_K, block_n], [BLOCK_M // 2, part]),
            self._rest(c, counts, h, probs, b1),
            (rows, BLOCK_M, block_n, BLOCK_K, stages, act, interleave, b1 is not None, CONSUMER_REGS, PRODUCER_REGS))

    def _rest(self, c, counts, h, probs, b1):
        """The kernel's arguments after its three descriptors."""
        N, K, E, n_tiles, ldc, ldh, b1_stride, F = self.scalars
        return (counts, c, N, K, E, n_tiles, ldc, h, probs, b1 if b1 is not None else h, ldh, b1_stride, F)

    def __call__(self, a, w, c, counts, h=None, probs=None, b1=None) -> bool:
        if h is None:
            h = probs = c
        return self.launch((a, _as_2d(w), c), self._rest(c, counts, h, probs, b1))


def prepare(a, w, c, counts, *, rows: bool, block_n: int = 256, stages: int = 3, programs: int | None = None,
            glu=None, glu_checked: bool = False) -> Prepared | None:
    """A Prepared launch for tensors of the metadata of these, or None where ``launch`` would
    not run them (``applies``, ``glu_applies`` unless ``glu_checked``)."""
    if not applies(a, w, c, counts, rows=rows, block_n=block_n, stages=stages):
        return None
    if glu is not None and not (rows and glu[0].dtype == c.dtype
                                and (glu_checked or glu_applies(c.shape, block_n, *glu))):
        return None
    return Prepared(a, w, c, counts, rows, block_n, stages, programs, glu)


@functools.lru_cache(maxsize=1)
def _launcher():
    """ws_rows_kernel's launcher (triton_common.SpecializingLauncher: the JIT once per argument
    specialization, then the compiled kernel's launcher)."""
    from ..triton_common import SpecializingLauncher
    return SpecializingLauncher(ws_rows_kernel, num_warps=4, maxnreg=MAXNREG)
