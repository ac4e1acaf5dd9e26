"""Gluon kernels of the quantizers (Hopper; launch.py launches them where ``gluon_hopper.available``).

fp8_cols_kernel: an activation's or gradient's column-wise fp8_block copy (128 x 1 blocks, the
grouped layout, written transposed) and, with ROWS, its row-wise copy (1 x 128 blocks) from the
same read: bitwise fp8_block_kernel's GROUPED launches (kernels.py), whose Triton form moves
every code through shared memory one byte at a time to write the transpose (about 50 SASS
instructions an element for both copies, issue-bound).

Here the layout is chosen so that neither copy needs shared memory for its data. A thread holds
an SPT_R x SPT_C patch of the 128 x 128 tile (row-major registers, layout ``tile``): its 16-byte
row pieces load and its 8-byte row pieces store directly. The column-wise codes are computed in
the same threads and only their register order is changed (layout ``tile_t``: the same lanes
and warps, registers column-major, a DistributedLinearLayout), which costs no instruction, so
each thread stores SPT_R consecutive tokens of a column as one vector. The block amaxes are
integer maxima of the magnitudes' bits (kernels.block_amax: exact in any order), the scales and
codes kernels.fp8_block_scales' and fp8_codes' operations; each block's scale is computed once,
its amax moved to a 128-vector layout (``vec``) and the factor moved back.

fp8_cols_tma_kernel: the same work in a persistent program, the tiles ahead loaded by TMA into
a ring, so that their loads run under this tile's arithmetic and stores.

Neither is grouped_glu_mlp's path. On an H100 fp8_cols_kernel was bitwise the Triton launches
and 0.90-0.91x their speed where the calls are GPU-bound (results/2026-12-07-h200-bf run 33):
its program needs 180-220 registers a thread, one program an SM, whose load, arithmetic and
stores follow each other. fp8_cols_tma_kernel has not run on a GPU yet (run 34 is prepared).
"""

from __future__ import annotations

from ..ops.gluon_hopper import fence_async_shared, gl, gluon, mbarrier, thread_barrier, tma_load

if gluon is not None:
    from .formats import E4M3_MAX as _E4M3_MAX_PY
    from .formats import FP32_MAX as _FP32_MAX_PY
    from .kernels import fp8_codes
    import triton.language as tl

    E4M3_MAX = gl.constexpr(_E4M3_MAX_PY)
    FP32_MAX = gl.constexpr(_FP32_MAX_PY)

    @gluon.jit
    def canonical_nan(like):
        """The float32 NaN 0x7FC00000 (kernels.nan_where's) in ``like``'s layout."""
        return (gl.zeros_like(like).to(gl.uint32, bitcast=True) | 0x7FC00000).to(gl.float32, bitcast=True)

    @gluon.jit
    def fp8_block_scales(amax, POW2: gl.constexpr = False):
        """kernels.fp8_block_scales(amax, POW2) (enc, scale) operation for operation, on a Gluon
        tensor: that function makes its constants with tl.full, which needs a layout here."""
        enc = tl.math.div_rn(gl.zeros_like(amax) + E4M3_MAX, amax)
        enc = gl.where(enc != enc, enc, gl.minimum(enc, FP32_MAX))
        enc = gl.where(amax == 0.0, 1.0, enc)
        if POW2:
            pow2 = (enc.to(gl.uint32, bitcast=True) & 0x7F800000).to(gl.float32, bitcast=True)
            enc = gl.where(enc != enc, enc, pow2)
        scale = tl.math.div_rn(gl.zeros_like(enc) + 1.0, enc)
        return enc, gl.where(scale != scale, canonical_nan(scale), scale)

    @gluon.jit
    def bits_amax(bits, axis: gl.constexpr):
        """float32 amax along ``axis`` of magnitudes given as their bits (uint32), NaN where the
        maximum is a NaN's or an inf's (every NaN's bits lie above +inf's)."""
        m = gl.max(bits, axis=axis)
        f = m.to(gl.float32, bitcast=True)
        return gl.where(m >= 0x7F800000, canonical_nan(f), f)

    @gluon.jit
    def _quantize_tile(x, src0, src_end, blk, col_t, N, qt_ptr, qt_scale_ptr, ldqt, q_ptr, q_scale_ptr, T,
                       tile: gl.constexpr, tile_t: gl.constexpr, vec: gl.constexpr, ROWS: gl.constexpr,
                       POW2: gl.constexpr):
        """Both copies of one block's 128 x 128 tile x (float32 in ``tile``, zeros past the
        block's rows): fp8_cols_kernel's stores."""
        r = gl.arange(0, 128, layout=gl.SliceLayout(1, tile))
        cols = col_t * 128 + gl.arange(0, 128, layout=gl.SliceLayout(0, tile))
        rows = src0 + r
        bits = x.to(gl.uint32, bitcast=True) & 0x7FFFFFFF
        col_amax = bits_amax(bits, 0)
        if ROWS:
            row_amax = bits_amax(bits, 1)

        # 128 x 1: one block a column
        enc, scale = fp8_block_scales(gl.convert_layout(col_amax, vec), POW2)
        gl.store(qt_scale_ptr + blk.to(gl.int64) * N + col_t * 128 + gl.arange(0, 128, layout=vec), scale)
        enc = gl.convert_layout(enc, gl.SliceLayout(0, tile))
        codes = gl.convert_layout(fp8_codes(x, enc[None, :]), tile_t)
        r_t = gl.arange(0, 128, layout=gl.SliceLayout(1, tile_t))
        c_t = col_t * 128 + gl.arange(0, 128, layout=gl.SliceLayout(0, tile_t))
        gl.store(qt_ptr + c_t.to(gl.int64)[None, :] * ldqt + (blk.to(gl.int64) * 128 + r_t)[:, None], codes)

        if ROWS:   # 1 x 128: one block a row, at x's own rows
            enc, scale = fp8_block_scales(gl.convert_layout(row_amax, vec), POW2)
            rows_v = src0 + gl.arange(0, 128, layout=vec)
            gl.store(q_scale_ptr + col_t.to(gl.int64) * T + rows_v, scale, mask=rows_v < src_end)
            enc = gl.convert_layout(enc, gl.SliceLayout(1, tile))
            mask = (rows < src_end)[:, None] & (cols < N)[None, :]
            gl.store(q_ptr + rows[:, None] * N + cols[None, :], fp8_codes(x, enc[:, None]), mask=mask)

    @gluon.jit
    def fp8_cols_kernel(x_ptr, ldx, N, rows_ptr, n_blocks, qt_ptr, qt_scale_ptr, ldqt, q_ptr, q_scale_ptr, T,
                        tile: gl.constexpr, tile_t: gl.constexpr, vec: gl.constexpr, ROWS: gl.constexpr,
                        POW2: gl.constexpr):
        """Program (j, y, z): block i = z * Y + y < n_blocks of the grouped layout (x's rows
        [rows_ptr[2 i], rows_ptr[2 i + 1]), int32, zeros after them), columns [128 j, +128).

        qt (N, ldqt) uint8 gets the block's 128 x 1 codes transposed at columns [128 i, +128),
        qt_scale (ldqt / 128, N) float32 their scales at row i. ROWS: q (T, N) uint8 gets the
        1 x 128 codes of x's rows in the block, q_scale (N / 128, T) their scales (transposed,
        as the GEMMs read them). x (T, N) bf16/fp16/fp32 with unit column stride and row stride
        ldx; N a multiple of 128 (the grid covers it exactly)."""
        col_t = gl.program_id(0)
        blk = gl.program_id(2) * gl.num_programs(1) + gl.program_id(1)
        if blk < n_blocks:   # the grid may hold a few more programs than blocks
            src0 = gl.load(rows_ptr + 2 * blk).to(gl.int64)
            src_end = gl.load(rows_ptr + 2 * blk + 1).to(gl.int64)
            rows = src0 + gl.arange(0, 128, layout=gl.SliceLayout(1, tile))
            cols = col_t * 128 + gl.arange(0, 128, layout=gl.SliceLayout(0, tile))
            mask = (rows < src_end)[:, None] & (cols < N)[None, :]
            x = gl.load(x_ptr + rows[:, None] * ldx + cols[None, :], mask=mask, other=0.0).to(gl.float32)
            _quantize_tile(x, src0, src_end, blk, col_t, N, qt_ptr, qt_scale_ptr, ldqt, q_ptr, q_scale_ptr, T,
                           tile, tile_t, vec, ROWS, POW2)

    @gluon.jit
    def fp8_cols_tma_kernel(x_desc, N, rows_ptr, n_blocks, qt_ptr, qt_scale_ptr, ldqt, q_ptr, q_scale_ptr, T,
                            tile: gl.constexpr, tile_t: gl.constexpr, vec: gl.constexpr, ROWS: gl.constexpr,
                            POW2: gl.constexpr, STAGES: gl.constexpr):
        """fp8_cols_kernel's work, persistent: program p takes items p, p + P, ... (item k: block
        k // (N / 128), column tile k % (N / 128)), each 128 x 128 tile of x loaded by TMA
        (x_desc: x with 128 x 128 boxes, unswizzled) into a ring of STAGES slots STAGES - 1
        items ahead, so the loads of the next tiles run under this one's arithmetic and stores.
        A tile's rows past its block's (another expert's, or past T: TMA's zeros) are zeroed
        in registers."""
        n_ct = N // 128
        n_items = n_blocks * n_ct
        pid = gl.program_id(0)
        P = gl.num_programs(0)
        ring = gl.allocate_shared_memory(x_desc.dtype, [STAGES, 128, 128], x_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(ready.index(s), count=1)
        for s in gl.static_range(STAGES - 1):
            item = pid + s * P
            if item < n_items:
                src0 = gl.load(rows_ptr + 2 * (item // n_ct))
                mbarrier.expect(ready.index(s), x_desc.block_type.nbytes)
                tma_load(x_desc, [src0, (item % n_ct) * 128], ready.index(s), ring.index(s))
        n_mine = (n_items - pid + P - 1) // P
        for i in range(n_mine):
            nxt = pid + (i + STAGES - 1) * P
            if nxt < n_items:   # the slot the last iteration read, every thread past it
                slot = (i + STAGES - 1) % STAGES
                src0 = gl.load(rows_ptr + 2 * (nxt // n_ct))
                fence_async_shared()
                mbarrier.expect(ready.index(slot), x_desc.block_type.nbytes)
                tma_load(x_desc, [src0, (nxt % n_ct) * 128], ready.index(slot), ring.index(slot))
            item = pid + i * P
            blk = item // n_ct
            col_t = item % n_ct
            src0 = gl.load(rows_ptr + 2 * blk).to(gl.int64)
            src_end = gl.load(rows_ptr + 2 * blk + 1).to(gl.int64)
            mbarrier.wait(ready.index(i % STAGES), (i // STAGES) & 1)
            x = ring.index(i % STAGES).load(tile).to(gl.float32)
            thread_barrier()   # every thread has read the slot before the next iteration refills it
            rows = src0 + gl.arange(0, 128, layout=gl.SliceLayout(1, tile))
            x = gl.where((rows < src_end)[:, None], x, 0.0)
            _quantize_tile(x, src0, src_end, blk, col_t, N, qt_ptr, qt_scale_ptr, ldqt, q_ptr, q_scale_ptr, T,
                           tile, tile_t, vec, ROWS, POW2)
        for s in gl.static_range(STAGES):
            mbarrier.invalidate(ready.index(s))


def tile_layouts(spt_r: int, spt_c: int, tpw_r: int, warps_r: int, warps_c: int):
    """(tile, tile_t, vec) of fp8_cols_kernel: a 128 x 128 tile, each thread an spt_r x spt_c patch,
    a warp tpw_r x (32 / tpw_r) patches (lanes along the columns first), warps_r x warps_c warps;
    ``tile`` row-major in registers (a BlockedLayout), ``tile_t`` the same elements in the same
    threads, registers column-major (a DistributedLinearLayout); ``vec`` a 128-vector
    spread over the threads, where each block's scales are computed once."""
    tpw_c = 32 // tpw_r
    assert spt_r * tpw_r * warps_r == 128 and spt_c * tpw_c * warps_c == 128, "the layout must tile 128 x 128"
    tile = gl.BlockedLayout([spt_r, spt_c], [tpw_r, tpw_c], [warps_r, warps_c], [1, 0])

    def powers(n: int, step: int, dim: int) -> list[list[int]]:
        out = []
        while n > 1:
            out.append([step, 0] if dim == 0 else [0, step])
            step, n = step * 2, n // 2
        return out
    rows_reg, cols_reg = powers(spt_r, 1, 0), powers(spt_c, 1, 1)
    lanes = powers(tpw_c, spt_c, 1) + powers(tpw_r, spt_r, 0)
    warps = powers(warps_c, spt_c * tpw_c, 1) + powers(warps_r, spt_r * tpw_r, 0)
    tile_t = gl.DistributedLinearLayout(rows_reg + cols_reg, lanes, warps, [], [128, 128])
    vec = gl.BlockedLayout([1], [32], [warps_r * warps_c], [0])
    return tile, tile_t, vec
