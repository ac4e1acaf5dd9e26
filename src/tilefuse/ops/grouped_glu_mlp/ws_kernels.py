"""fp8_block's store-epilogue grouped GEMM (fc2, fc1 dgrad), fc1 + GLU and the fc2 dgrad + dGLU
warp-specialised in Gluon, one program an SM (GemmConfig.ws). Only ``@gluon.jit`` code, its
layout checks and its launch (``available``: ops/gluon_hopper.py).

Why: kernels.grouped_gemm_kernel waits for each 128-wide K chunk's wgmma before it rescales
the chunk into the float32 accumulator. At 64x128 on 4 warps (two programs an SM) it ran fc2
and the fc1 dgrad at 785-885 TFLOP/s; at 128x128 on 8 warps, where a chunk's operands cost
half the L2 traffic per FLOP, one program an SM has nothing to hide its waits and rescales
behind, and (triton 3.6) the CTA barriers Triton puts around each TMA hold its two warp
groups together (results/2026-12-02-h200-t run 2). Here one producer warp issues every TMA
(a chunk of A, 128 rows x 128, and of B, 128 columns x 128, under one mbarrier, STAGES chunks
ahead) and two consumer warp groups each own 64 rows of the 128x128 tile, handing each ring
slot back through an mbarrier both arrive on, with no CTA barrier between them. Persistent:
program p takes tiles p, p + P, ... in grouped_gemm_kernel's order (row tile major; the
expert cursor of kernels.advance_expert, read from the device-side counts: no host sync).
Each consumer takes its K chunks two at a time (``_chunk_pairs``): both chunks' wgmma issued,
the first rescaled into the accumulator while the tensor cores run the second.

The arithmetic per output is grouped_gemm_kernel's, operation for operation (kernels.
fp8_scaled_dot: acc + dot(a8, b8) * (a_scale * b_scale), each chunk's dot from zero, chunks in
K order, then + p * bias and the rounding to c's dtype), so the outputs are bitwise its
(tests/test_grouped_mlp_ws.py). On the H200 it ran fc2 and the fc1 dgrad 1.07-1.19x faster
than the best Triton tile (64x128 on 4 warps through TMA) at the spec's three shapes, once its
epilogue stored through a coalescing layout (results/2026-12-03-h200-z run 7; before that
0.90-1.01x at the finer-grained shapes 2-3, run 3), and the fp8 sweep takes it at all three
keys (the whole op 1.034x / 1.058x / 1.048x the heuristic, run 8); the tuner decides per key.
Chunk pairs then ran the two roles 1.06-1.18x faster than one chunk at a time (wgmma, wait,
rescale) on the table's 3-slot ring and 1.11-1.32x on 5 slots, 618-1080 TFLOP/s (results/
2026-12-04-h200-ai run 1), so the ring is MAX_STAGES deep whatever the config's num_stages
(which its Triton launches keep): with pairs, 5 slots ran 1.10-1.14x faster than 3 in all six
role-shape timings, where one chunk at a time gained 2-7% from them.

fc1 + GLU (``launch(glu=...)``, where ``glu_applies``: an interleave of 8 to 64, so a
128-column z tile holds whole (gate, up) groups): the tile plus the fc1 bias is rounded into a
shared-memory buffer of the consumer warp group, leaves from there, and ws_rows' GLU epilogue
reads the gate and up columns from it: grouped_gemm_kernel's EPI_GLU operation for operation,
bitwise, 1.40-1.42x its launch at glu_config's tile (results/2026-12-04-h200-ai run 2). In
the halves layout (z = [gate | up], a tile's 64 gate columns F apart from their 64 up columns,
in two 128x128 scale blocks) the producer loads B's tile as two 64-row halves, and each
consumer keeps a gate and an up accumulator of 64 columns (two wgmma a chunk: the Triton GLU's
two dots), each rescaled by its own block's scale (``_glu_halves_tile``).

The fc2 dgrad + dGLU (``launch(dglu=...)``, where ``dglu_applies``: the same interleaves):
the float32 dh tile goes through a consumer's shared buffer to grouped_gemm_kernel's EPI_DGLU
epilogue (``_dglu_epilogue``): dz and dz's fp8 row-wise copy bitwise that launch's, the dprob
partials to rounding (summed in another order); 1.14-1.20x that launch at the spec's shapes,
its epilogue's memory traffic not hidden behind tensor-core work (results/2026-12-07-h200-bf
runs 4-5). In the halves layout too, but without dz's fp8 copy, whose 1x128 blocks then
span a whole tile's gate or up columns (dglu_applies). With the consumers out of phase instead
(each warp group whole 64-row tiles of its own, so one's epilogue runs under the other's K
walk) the launch was bitwise and 0.93-0.995x this one, likely because one warp group's K walk
keeps the tensor cores at about half the rate of two (results/2026-12-07-h200-bf runs 26-27).

Not in Triton's interpreter (Gluon does not run there) nor off Hopper: ``launch`` returns
False and launch.py takes grouped_gemm_kernel, with the same bits (the dGLU's dprobs to
rounding). A producer-warp kernel with two or more programs an SM gave wrong results under
triton 3.6 (results/2026-12-03-h200-y runs 7-8); this one runs one (its 12 warps at 168
registers take an SM's whole register file).
"""

from __future__ import annotations

import torch

from ...device import num_sms
from ...utils import cdiv
from ..gluon_hopper import (TensorDescriptor, available, gl, gluon, mbarrier, tma_load,  # noqa: F401 - the API
                            warpgroup_mma, warpgroup_mma_wait)                      # of this module too
from .ws_rows import halves, whole_groups   # ws_rows' GLU layout rules, at this kernel's 128-column tile


# The tile: 128 rows (64 a consumer warp group) x 128 columns, K chunks of 128 (the scaling
# block). Registers: 168 a thread at launch for the 12 warps (4 + 4 consumers, 1 producer in a
# warp group of its own), reallocated to 232 for the consumers and 40 for the producer; sm_90
# compile (triton 3.6 and 3.8): no stack.
BLOCK = 128
MAXNREG = 168
CONSUMER_REGS = 232
PRODUCER_REGS = 40
MAX_STAGES = 5   # 5 x 32 KB of ring, the most an SM holds beside the barriers
# A ``ws`` config's fc1 + GLU through this kernel too, where ``glu_applies`` (else the Triton
# GLU launch of glu_config); benchmarks set it False to time that launch.
TAKES_GLU = True
# The same for its fc2 dgrad + dGLU (``dglu_applies``; else the Triton launch of dglu_config).
TAKES_DGLU = True
# The dGLU's ring: its float32 dh buffers (2 x 32 KB) fit beside MAX_STAGES slots (224.3 KB of
# an SM's 227 in the sm_90 compile, tests/test_grouped_mlp_ws.py); benchmarks set it lower.
DGLU_STAGES = MAX_STAGES


def _rows_ok(t: torch.Tensor) -> bool:
    """A (rows, K) float8 operand the descriptors read as laid out."""
    return (t.dim() == 2 and t.stride(1) == 1 and t.stride(0) % 16 == 0 and t.data_ptr() % 16 == 0
            and t.shape[1] % BLOCK == 0)


def applies(a, w, c, stages: int) -> bool:
    """Whether ``launch`` runs: a recipes.QuantRows (T, K) and a QuantWeight (E, N, K) of
    fp8_block, K-contiguous with 16-byte aligned rows, K and N multiples of 128, c (T, N) with
    unit column stride, a ring of 2..MAX_STAGES slots, on a device where the kernel runs."""
    data = w.data
    return (available(c.device) and 2 <= stages <= MAX_STAGES and _rows_ok(a.data) and data.dim() == 3
            and data.is_contiguous() and data.data_ptr() % 16 == 0 and data.shape[2] % BLOCK == 0
            and data.shape[1] % BLOCK == 0 and c.stride(1) == 1 and a.data.shape[1] == data.shape[2])


if gluon is not None:
    import triton.language as tl

    from ...quant import formats
    from ...quant.kernels import fp8_codes
    from .kernels import SWIGLU, glu_act, glu_act_grad
    from .ws_rows import _glu_epilogue   # fc1's GLU from the rounded z tile in shared memory

    E4M3_MAX = gl.constexpr(formats.E4M3_MAX)
    FP32_MAX = gl.constexpr(formats.FP32_MAX)

    @gluon.jit
    def _advance(row_tile, counts_ptr, E, expert, tiles_before, rows_before, m, BLOCK_M: gl.constexpr):
        """kernels.advance_expert: the cursor (expert, row tiles and rows before it, its row
        count) moved forward to ``row_tile``; expert == E past the last tile."""
        while (expert < E) & (row_tile >= tiles_before + gl.cdiv(m, BLOCK_M)):
            tiles_before += gl.cdiv(m, BLOCK_M)
            rows_before += m
            expert += 1
            m = gl.load(counts_ptr + gl.minimum(expert, E - 1)).to(gl.int32)
        return expert, tiles_before, rows_before, m

    @gluon.jit
    def _fp8_block_scales(amax):
        """quant.kernels.fp8_block_scales(amax, False) (enc, scale) operation for operation, on a
        Gluon tensor: that function makes its constants with tl.full, which needs a layout here."""
        enc = tl.math.div_rn(gl.zeros_like(amax) + E4M3_MAX, amax)
        enc = gl.where(enc != enc, enc, gl.minimum(enc, FP32_MAX))
        enc = gl.where(amax == 0.0, 1.0, enc)
        scale = tl.math.div_rn(gl.zeros_like(enc) + 1.0, enc)
        return enc, gl.where(scale != scale, _canonical_nan(scale), scale)

    @gluon.jit
    def _canonical_nan(like):
        """The float32 NaN 0x7FC00000 (quant.kernels.nan_where's) in ``like``'s layout."""
        return (gl.zeros_like(like).to(gl.uint32, bitcast=True) | 0x7FC00000).to(gl.float32, bitcast=True)

    @gluon.jit
    def _dglu_epilogue(dh_s, row0, end, col0, T, F, dz_ptr, lddz, z_ptr, ldz, probs_ptr, part_ptr, n_part_cols, q_ptr,
                       q_scale_ptr, HALF: gl.constexpr, BLOCK_N: gl.constexpr, ACT: gl.constexpr,
                       INTERLEAVE: gl.constexpr, QUANT_DZ: gl.constexpr):
        """grouped_gemm_kernel's EPI_DGLU epilogue (kernels.dglu_store, dglu_quantize_dz) for a
        consumer's HALF rows of a tile: dh, BLOCK_N activation columns from col0 in float32 in
        dh_s, read CHUNK columns at a time (CHUNK within one gate / up group, so each chunk's
        gate and up columns are two runs of z). dz = act'(z) * (dh * p) at the gate and up
        columns, rounded to dz's dtype; rows at or past ``end`` masked (F % 128 == 0: every
        column is F's). Per 64-wide half (one 1x128 block of dz: interleave dividing 64):
        the dprob partial sum dh * act(z) of each row into part column col0 / 64 + half,
        summed chunk by chunk (the Triton launch sums the half at once, so the partials, and
        dprobs, agree to rounding; every other output bitwise); with QUANT_DZ, dz's fp8_block
        row-wise copy: the block amax from the rounded dz as its chunks are stored, then the
        codes from that rounded dz, kept in registers (dglu_quantize_dz reads the stored dz
        back), and the block scale. INTERLEAVE 0, the halves layout: gate column j of dz at j,
        up at F + j (a 1x128 block of dz then spans both halves of the tile, so the launch takes
        no QUANT_DZ there: dglu_applies).

        z is loaded before any of its chunks is computed, and the fp8 codes come from registers,
        not from dz read back: a load placed after a dz store waits for memory (the compiler may
        not move it above a store that could alias it), so loads interleaved with stores chunk by
        chunk cost a round trip a chunk, with no wgmma in flight (results/2026-12-07-h200-bf run
        23: batched, the launch ran 1.06-1.12x the chunk-by-chunk form). SwiGLU in an interleaved
        layout loads the whole tile's z first (WHOLE: one round trip a tile; on an H100 the
        launch ran 1.040x / 1.061x / 1.074x the half-at-a-time form at the spec's three shapes,
        the same bits, results/2026-12-07-h200-bf run 29); the halves layout loads a half at a
        time (two; its whole-tile form was bitwise and 0.97-1.005x that on an H100, run 32) and
        GeGLU 32 columns at a time (four: its activation's registers)."""
        gl.static_assert(not (QUANT_DZ and INTERLEAVE == 0), "dz's copy in the halves layout is the quantizer's")
        CHUNK: gl.constexpr = 16 if (INTERLEAVE > 16 or INTERLEAVE == 0) else INTERLEAVE
        # Two threads a row's CHUNK columns, 16 rows a warp: the warp group's 64 rows once. (8
        # columns a thread would cover 128 rows at interleave 8, each element twice; triton
        # 3.6's sm_90 build of that kept an 8-byte stack, results/2026-12-07-h200-bf run 4.)
        VEC: gl.constexpr = CHUNK // 2
        # z loaded BATCH columns at a time: a whole half (a round trip a half); GeGLU 32, for its
        # activation's registers (a half at once kept an 8-byte stack at interleave 64 under
        # triton 3.6 where no argument is 16-divisible). WHOLE: SwiGLU's interleaved layouts
        # load the tile's two halves at once before either is computed (no stack under triton
        # 3.6 or 3.8).
        BATCH: gl.constexpr = 64 if ACT == SWIGLU else 32
        WHOLE: gl.constexpr = ACT == SWIGLU and INTERLEAVE != 0
        lay: gl.constexpr = gl.BlockedLayout([1, VEC], [16, 2], [4, 1], [1, 0])
        row_l: gl.constexpr = gl.SliceLayout(1, lay)
        rows = row0 + gl.arange(0, HALF, layout=row_l)
        rmask = rows < end
        rows64 = rows.to(gl.int64)
        p = gl.load(probs_ptr + rows64, mask=rmask, other=0.0).to(gl.float32)
        cols = gl.arange(0, CHUNK, layout=gl.SliceLayout(0, lay))
        mask = rmask[:, None] & (cols < CHUNK)[None, :]   # the row mask at the chunk's shape
        zga = ()   # WHOLE: every chunk's gate and up runs of the tile, half by half
        zua = ()
        if WHOLE:
            for h in gl.static_range(BLOCK_N // 64):
                for c in gl.static_range(0, 64, CHUNK):
                    zg, zu = _dglu_load_z(z_ptr, rows64, ldz, mask, col0, h, c, cols, F, INTERLEAVE)
                    zga = zga + (zg,)
                    zua = zua + (zu,)
        for half in gl.static_range(BLOCK_N // 64):
            partial = gl.zeros([HALF], gl.float32, row_l)
            amax = gl.zeros([HALF], gl.uint32, row_l)
            dgs = ()   # the rounded dz, kept for its fp8 copy
            dus = ()
            for b in gl.static_range(0, 64, BATCH):
                # BATCH columns' z first, every chunk's gate and up run at once: one memory
                # round trip for the batch (WHOLE: loaded above)
                zgs = ()
                zus = ()
                for c in gl.static_range(b, b + BATCH, CHUNK):
                    if WHOLE:
                        zgs = zgs + (zga[half * (64 // CHUNK) + c // CHUNK],)
                        zus = zus + (zua[half * (64 // CHUNK) + c // CHUNK],)
                    else:
                        zg, zu = _dglu_load_z(z_ptr, rows64, ldz, mask, col0, half, c, cols, F, INTERLEAVE)
                        zgs = zgs + (zg,)
                        zus = zus + (zu,)
                for c in gl.static_range(b, b + BATCH, CHUNK):
                    dh = dh_s.slice(half * 64 + c, CHUNK, dim=1).load(lay)
                    gate, up_off = _dglu_cols(col0, half, c, cols, F, INTERLEAVE)
                    zg = zgs[(c - b) // CHUNK].to(gl.float32)
                    zu = zus[(c - b) // CHUNK].to(gl.float32)
                    partial += gl.sum(gl.where(mask, dh * glu_act(zg, zu, ACT), 0.0), axis=1)
                    dzg, dzu = glu_act_grad(zg, zu, dh * p[:, None], ACT)
                    dzg = dzg.to(dz_ptr.dtype.element_ty)
                    dzu = dzu.to(dz_ptr.dtype.element_ty)
                    dz_at = dz_ptr + rows64[:, None] * lddz + gate[None, :]
                    gl.store(dz_at, dzg, mask=mask)
                    gl.store(dz_at + up_off, dzu, mask=mask)
                    if QUANT_DZ:   # |dz| as bits (quant.kernels.block_amax: exact, any order)
                        dgs = dgs + (dzg,)
                        dus = dus + (dzu,)
                        bits_g = dzg.to(gl.float32).to(gl.uint32, bitcast=True) & 0x7FFFFFFF
                        bits_u = dzu.to(gl.float32).to(gl.uint32, bitcast=True) & 0x7FFFFFFF
                        amax = gl.maximum(amax, gl.maximum(gl.max(gl.where(mask, bits_g, 0), axis=1),
                                                           gl.max(gl.where(mask, bits_u, 0), axis=1)))
            gl.store(part_ptr + rows64 * n_part_cols + (col0 // 64 + half), partial, mask=rmask)
            if QUANT_DZ:
                # NaN for a block holding a NaN or +-inf (every NaN's bits lie above +inf's)
                am = amax.to(gl.float32, bitcast=True)
                am = gl.where(amax >= 0x7F800000, _canonical_nan(am), am)
                enc, scale = _fp8_block_scales(am)
                for c in gl.static_range(0, 64, CHUNK):
                    gate, up_off = _dglu_cols(col0, half, c, cols, F, INTERLEAVE)
                    q_at = q_ptr + rows64[:, None] * lddz + gate[None, :]
                    gl.store(q_at, fp8_codes(dgs[c // CHUNK].to(gl.float32), enc[:, None]), mask=mask)
                    gl.store(q_at + up_off, fp8_codes(dus[c // CHUNK].to(gl.float32), enc[:, None]), mask=mask)
                gl.store(q_scale_ptr + (col0 // 64 + half).to(gl.int64) * T + rows64, scale, mask=rmask)

    @gluon.jit
    def _dglu_cols(col0, half, c, cols, F, INTERLEAVE: gl.constexpr):
        """The dGLU epilogue's chunk at activation columns col0 + 64 half + c + cols: its z / dz
        gate columns (the group's gate run) and how far its up columns lie (INTERLEAVE further;
        in the halves layout the columns themselves, up F further)."""
        if INTERLEAVE == 0:
            gate = col0 + half * 64 + c + cols
            up_off = F
        else:
            gate = 2 * col0 + half * 128 + (c // INTERLEAVE) * 2 * INTERLEAVE + c % INTERLEAVE + cols
            up_off = INTERLEAVE
        return gate, up_off

    @gluon.jit
    def _dglu_load_z(z_ptr, rows64, ldz, mask, col0, half, c, cols, F, INTERLEAVE: gl.constexpr):
        """The chunk's z at its gate and its up columns (_dglu_cols), rows masked."""
        gate, up_off = _dglu_cols(col0, half, c, cols, F, INTERLEAVE)
        z_at = z_ptr + rows64[:, None] * ldz + gate[None, :]
        return gl.load(z_at, mask=mask, other=0.0), gl.load(z_at + up_off, mask=mask, other=0.0)

    # The partitions take the same arguments (Gluon's rule for worker partitions).
    @gluon.jit
    def _producer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr,
                  bias_ptr, z_s, h_ptr, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld,
                  bs_e, bs_k, bs_n, b_rows, bias_e, ldh, ldz, n_part_cols, F,
                  HAS_BIAS: gl.constexpr, GLU: gl.constexpr, INTERLEAVE: gl.constexpr, DGLU: gl.constexpr,
                  QUANT_DZ: gl.constexpr, BLOCK_M: gl.constexpr,
                  BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
        """One warp: every tile's K chunks (A's rows of the tile, B's rows of its columns)
        into the ring, each slot once both consumers have handed it back."""
        HALVES: gl.constexpr = GLU >= 0 and INTERLEAVE == 0   # fc1 + GLU in the halves layout
        n_col_tiles = gl.cdiv(N, BLOCK_N)
        expert = 0
        tiles_before = 0
        rows_before = 0
        m = gl.load(counts_ptr).to(gl.int32)
        it = 0
        for tile in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
            row_tile = tile // n_col_tiles
            expert, tiles_before, rows_before, m = _advance(row_tile, counts_ptr, E, expert, tiles_before,
                                                            rows_before, m, BLOCK_M)
            if expert < E:
                row_start = rows_before + (row_tile - tiles_before) * BLOCK_M
                # B's first row: the tile's columns; in the halves layout its BLOCK_N / 2 gate
                # rows of W1[e] (from its activation column col0 / 2), their up rows F further
                # (b_desc's tiles are [BLOCK_N / 2, BLOCK_K])
                b_row = expert * b_rows + (tile % n_col_tiles) * (BLOCK_N // 2 if HALVES else BLOCK_N)
                for kb in range(K // BLOCK_K):
                    slot = it % STAGES
                    mbarrier.wait(empty.index(slot), ((it // STAGES) & 1) ^ 1)   # the first pass finds it free
                    bar = ready.index(slot)
                    mbarrier.expect(bar, BLOCK_M * BLOCK_K + BLOCK_N * BLOCK_K)
                    tma_load(a_desc, [row_start, kb * BLOCK_K], bar, a_s.index(slot))
                    if HALVES:
                        HB: gl.constexpr = BLOCK_N // 2
                        tma_load(b_desc, [b_row, kb * BLOCK_K], bar, b_s.index(slot).slice(0, HB))
                        tma_load(b_desc, [b_row + F, kb * BLOCK_K], bar, b_s.index(slot).slice(HB, HB))
                    else:
                        tma_load(b_desc, [b_row, kb * BLOCK_K], bar, b_s.index(slot))
                    it += 1

    @gluon.jit
    def _issue(a_s, b_s, ready, a_scale_ptr, bs_base, rows64, rmask, part, it, kb, a_scale_ld, bs_k,
               WG: gl.constexpr, HALF: gl.constexpr, STAGES: gl.constexpr):
        """Chunk kb's wgmma from zero into ``part`` once its ring slot (ring position ``it``) is
        full, not waited for; and the chunk's scales (a_scale per row, b_scale)."""
        slot = it % STAGES
        mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
        part = warpgroup_mma(a_s.index(slot).slice(WG * HALF, HALF), b_s.index(slot).permute((1, 0)), part,
                             use_acc=False, is_async=True)
        a_scale = gl.load(a_scale_ptr + kb * a_scale_ld + rows64, mask=rmask, other=0.0)
        b_scale = gl.load(bs_base + kb * bs_k)
        return part, a_scale, b_scale

    @gluon.jit
    def _chunk_pairs(a_s, b_s, ready, empty, a_scale_ptr, bs_base, rows64, rmask, acc, part, part2, it, k_tiles,
                     a_scale_ld, bs_k, WG: gl.constexpr, HALF: gl.constexpr, STAGES: gl.constexpr):
        """A tile's K chunks two at a time, with two product register sets: both chunks' wgmma
        are issued (each from zero), then the first is waited for, its slot handed back and
        its product rescaled into acc while the tensor cores run the second; then the second.
        acc + part * (a_scale * b_scale), chunks in K order: the operations of one chunk at a
        time (wgmma, wait, rescale), which ran the roles 1.06-1.18x slower on a 3-slot ring
        and 1.11-1.32x on 5, with the same bits (results/2026-12-04-h200-ai run 1). No wgmma
        is in flight across the loop's back edge or a branch: issued in one iteration and
        waited for in the next, ptxas serialises every wgmma of the kernel (a register copy
        may define an accumulator of one in flight) and spills 160 bytes."""
        for j in range(k_tiles // 2):
            pa, sa, sb = _issue(a_s, b_s, ready, a_scale_ptr, bs_base, rows64, rmask, part, it, 2 * j, a_scale_ld,
                                bs_k, WG, HALF, STAGES)
            pb, sa2, sb2 = _issue(a_s, b_s, ready, a_scale_ptr, bs_base, rows64, rmask, part2, it + 1, 2 * j + 1,
                                  a_scale_ld, bs_k, WG, HALF, STAGES)
            part = warpgroup_mma_wait(num_outstanding=1, deps=[pa])
            mbarrier.arrive(empty.index(it % STAGES), count=1)
            acc = acc + part * (sa * sb)[:, None]
            part2 = warpgroup_mma_wait(num_outstanding=0, deps=[pb])
            mbarrier.arrive(empty.index((it + 1) % STAGES), count=1)
            acc = acc + part2 * (sa2 * sb2)[:, None]
            it += 2
        if k_tiles % 2 == 1:
            pa, sa, sb = _issue(a_s, b_s, ready, a_scale_ptr, bs_base, rows64, rmask, part, it, k_tiles - 1,
                                a_scale_ld, bs_k, WG, HALF, STAGES)
            part = warpgroup_mma_wait(num_outstanding=0, deps=[pa])
            mbarrier.arrive(empty.index(it % STAGES), count=1)
            acc = acc + part * (sa * sb)[:, None]
            it += 1
        return acc, part, part2, it

    @gluon.jit
    def _issue_halves(a_s, b_s, ready, a_scale_ptr, bs_gate, bs_up, rows64, rmask, pg, pu, it, kb, a_scale_ld, bs_k,
                      WG: gl.constexpr, HALF: gl.constexpr, HB: gl.constexpr, STAGES: gl.constexpr):
        """_issue in the halves layout: chunk kb's two wgmma from zero, the slot's gate rows into
        pg and its up rows into pu (each HB columns: the Triton GLU's gate and up dots), not
        waited for; the chunk's row scales and the gate and up rows' block scales."""
        slot = it % STAGES
        mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
        a = a_s.index(slot).slice(WG * HALF, HALF)
        b = b_s.index(slot)
        pg = warpgroup_mma(a, b.slice(0, HB).permute((1, 0)), pg, use_acc=False, is_async=True)
        pu = warpgroup_mma(a, b.slice(HB, HB).permute((1, 0)), pu, use_acc=False, is_async=True)
        a_scale = gl.load(a_scale_ptr + kb * a_scale_ld + rows64, mask=rmask, other=0.0)
        return pg, pu, a_scale, gl.load(bs_gate + kb * bs_k), gl.load(bs_up + kb * bs_k)

    @gluon.jit
    def _chunk_pairs_halves(a_s, b_s, ready, empty, a_scale_ptr, bs_gate, bs_up, rows64, rmask, acc_g, acc_u, pg, pu,
                            pg2, pu2, it, k_tiles, a_scale_ld, bs_k, WG: gl.constexpr, HALF: gl.constexpr,
                            HB: gl.constexpr, STAGES: gl.constexpr):
        """_chunk_pairs in the halves layout, where the tile's gate and up columns lie in two
        128x128 scale blocks: two accumulators of HB columns, each chunk two wgmma (gate, up),
        a pair's four issued before the first chunk's two are waited for (two left in flight)
        and rescaled; each accumulator gains part * (a_scale * its block's scale), chunks in K
        order, as the Triton GLU's two dots."""
        for j in range(k_tiles // 2):
            pg, pu, sa, sg, su = _issue_halves(a_s, b_s, ready, a_scale_ptr, bs_gate, bs_up, rows64, rmask, pg, pu, it,
                                               2 * j, a_scale_ld, bs_k, WG, HALF, HB, STAGES)
            pg2, pu2, sa2, sg2, su2 = _issue_halves(a_s, b_s, ready, a_scale_ptr, bs_gate, bs_up, rows64, rmask, pg2,
                                                    pu2, it + 1, 2 * j + 1, a_scale_ld, bs_k, WG, HALF, HB, STAGES)
            pg, pu = warpgroup_mma_wait(num_outstanding=2, deps=[pg, pu])
            mbarrier.arrive(empty.index(it % STAGES), count=1)
            acc_g = acc_g + pg * (sa * sg)[:, None]
            acc_u = acc_u + pu * (sa * su)[:, None]
            pg2, pu2 = warpgroup_mma_wait(num_outstanding=0, deps=[pg2, pu2])
            mbarrier.arrive(empty.index((it + 1) % STAGES), count=1)
            acc_g = acc_g + pg2 * (sa2 * sg2)[:, None]
            acc_u = acc_u + pu2 * (sa2 * su2)[:, None]
            it += 2
        if k_tiles % 2 == 1:
            pg, pu, sa, sg, su = _issue_halves(a_s, b_s, ready, a_scale_ptr, bs_gate, bs_up, rows64, rmask, pg, pu, it,
                                               k_tiles - 1, a_scale_ld, bs_k, WG, HALF, HB, STAGES)
            pg, pu = warpgroup_mma_wait(num_outstanding=0, deps=[pg, pu])
            mbarrier.arrive(empty.index(it % STAGES), count=1)
            acc_g = acc_g + pg * (sa * sg)[:, None]
            acc_u = acc_u + pu * (sa * su)[:, None]
            it += 1
        return acc_g, acc_u, pg, pu, pg2, pu2, it

    @gluon.jit
    def _glu_halves_tile(a_s, b_s, ready, empty, z_s, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr, bias_ptr, h_ptr,
                         pg, pu, pg2, pu2, it, row_start, row_end, col0, expert, T, k_tiles, ldc, a_scale_ld, bs_e,
                         bs_k, bs_n, bias_e, ldh, F, HAS_BIAS: gl.constexpr, GLU: gl.constexpr, WG: gl.constexpr,
                         HALF: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
        """fc1 + GLU for one tile in the halves layout (z = [gate | up]): the tile's BLOCK_N / 2
        activation columns from col0 / 2, their gate products and up products in two
        accumulators (_chunk_pairs_halves), each + its fc1 bias and rounded into the halves of
        this warp group's z buffer; z leaves from there to its gate and up columns (F apart),
        and the GLU (ws_rows._glu_epilogue, halves) reads them back. grouped_gemm_kernel's
        EPI_GLU operation for operation."""
        HB: gl.constexpr = BLOCK_N // 2
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HB, 32])
        store_l: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [4, 1], [1, 0])
        g0 = col0 // 2
        rows = row_start + WG * HALF + gl.arange(0, HALF, layout=gl.SliceLayout(1, mma))
        rmask = (rows < row_end) & (rows < T)
        scale_base = b_scale_ptr + expert.to(gl.int64) * bs_e
        bs_gate = scale_base + (g0 // 128) * bs_n
        bs_up = scale_base + ((F + g0) // 128) * bs_n
        acc_g = gl.zeros([HALF, HB], gl.float32, mma)
        acc_u = gl.zeros([HALF, HB], gl.float32, mma)
        acc_g, acc_u, pg, pu, pg2, pu2, it = _chunk_pairs_halves(a_s, b_s, ready, empty, a_scale_ptr, bs_gate, bs_up,
                                                                 rows.to(gl.int64), rmask, acc_g, acc_u, pg, pu, pg2,
                                                                 pu2, it, k_tiles, a_scale_ld, bs_k, WG, HALF, HB,
                                                                 STAGES)
        if HAS_BIAS:
            gate = g0 + gl.arange(0, HB, layout=gl.SliceLayout(0, mma))
            bias = bias_ptr + expert.to(gl.int64) * bias_e
            acc_g += gl.load(bias + gate).to(gl.float32)[None, :]
            acc_u += gl.load(bias + F + gate).to(gl.float32)[None, :]
        zs = z_s.index(WG)
        zs.slice(0, HB, dim=1).store(acc_g.to(c_ptr.dtype.element_ty))
        zs.slice(HB, HB, dim=1).store(acc_u.to(c_ptr.dtype.element_ty))
        out = zs.load(store_l)
        srows = row_start + WG * HALF + gl.arange(0, HALF, layout=gl.SliceLayout(1, store_l))
        local = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, store_l))
        scols = g0 + local % HB + (local // HB) * F   # the tile's gate columns, then their up columns
        smask = ((srows < row_end) & (srows < T))[:, None] & (local < BLOCK_N)[None, :]
        gl.store(c_ptr + srows.to(gl.int64)[:, None] * ldc + scols[None, :], out, mask=smask)
        _glu_epilogue(zs, row_start + WG * HALF, gl.minimum(row_end, T), col0, expert, h_ptr, probs_ptr, bias_ptr, ldh,
                      bias_e, F, HALF, BLOCK_N, GLU, 0, False)
        return pg, pu, pg2, pu2, it

    @gluon.jit
    def _consumer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr,
                  bias_ptr, z_s, h_ptr, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld,
                  bs_e, bs_k, bs_n, b_rows, bias_e, ldh, ldz, n_part_cols, F,
                  HAS_BIAS: gl.constexpr, GLU: gl.constexpr, INTERLEAVE: gl.constexpr, DGLU: gl.constexpr,
                  QUANT_DZ: gl.constexpr, WG: gl.constexpr,
                  BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
        """One warp group: rows [64 WG, 64 WG + 64) of every tile. The K chunks two at a time
        (_chunk_pairs), each chunk's product joining acc as acc + part * (a_scale * b_scale);
        then the store epilogue (+ p * bias), rows past the expert's masked. (With one chunk
        at a time: advancing the next tile's expert cursor under the first chunk's wgmma
        instead of at the tile's start was bitwise and 0.93-0.99x in all six role timings,
        results/2026-12-03-h200-z run 4; loading the chunk scales two chunks ahead, bitwise and
        0.90-0.95x, run 6. With chunk pairs: the next pair's scales loaded under this pair's
        wgmma, bitwise and 0.95-1.0x; the loads made loop-invariant, wrong outputs, bound what
        they cost at 1.4-5.4%, results/2026-12-07-h200-bf run 28.)"""
        HALF: gl.constexpr = BLOCK_M // 2
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                      instr_shape=[16, BLOCK_N, 32])
        row_l: gl.constexpr = gl.SliceLayout(1, mma)
        col_l: gl.constexpr = gl.SliceLayout(0, mma)
        store_l: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [4, 1], [1, 0])
        n_col_tiles = gl.cdiv(N, BLOCK_N)
        k_tiles = K // BLOCK_K
        expert = 0
        tiles_before = 0
        rows_before = 0
        m = gl.load(counts_ptr).to(gl.int32)
        it = 0
        HALVES: gl.constexpr = GLU >= 0 and INTERLEAVE == 0   # fc1 + GLU in the halves layout
        # The chunks' product registers, carried from tile to tile: a gate and an up pair of
        # BLOCK_N / 2 columns each in the halves layout (_glu_halves_tile), else part and part2.
        if HALVES:
            mma_h: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                            instr_shape=[16, BLOCK_N // 2, 32])
            pg = gl.zeros([HALF, BLOCK_N // 2], gl.float32, mma_h)
            pu = gl.zeros([HALF, BLOCK_N // 2], gl.float32, mma_h)
            pg2 = gl.zeros([HALF, BLOCK_N // 2], gl.float32, mma_h)
            pu2 = gl.zeros([HALF, BLOCK_N // 2], gl.float32, mma_h)
        else:
            part = gl.zeros([HALF, BLOCK_N], gl.float32, mma)
            part2 = gl.zeros([HALF, BLOCK_N], gl.float32, mma)
        for tile in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
            row_tile = tile // n_col_tiles
            col0 = (tile % n_col_tiles) * BLOCK_N
            expert, tiles_before, rows_before, m = _advance(row_tile, counts_ptr, E, expert, tiles_before,
                                                            rows_before, m, BLOCK_M)
            if expert < E:
                row_start = rows_before + (row_tile - tiles_before) * BLOCK_M
                if HALVES:
                    pg, pu, pg2, pu2, it = _glu_halves_tile(
                        a_s, b_s, ready, empty, z_s, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr, bias_ptr, h_ptr, pg,
                        pu, pg2, pu2, it, row_start, rows_before + m, col0, expert, T, k_tiles, ldc, a_scale_ld, bs_e,
                        bs_k, bs_n, bias_e, ldh, F, HAS_BIAS, GLU, WG, HALF, BLOCK_N, STAGES)
                else:
                    rows = row_start + WG * HALF + gl.arange(0, HALF, layout=row_l)
                    rmask = (rows < rows_before + m) & (rows < T)
                    rows64 = rows.to(gl.int64)
                    # B's 128x128 block scale: one per chunk for the tile's 128 columns.
                    bs_base = b_scale_ptr + expert.to(gl.int64) * bs_e + (col0 // 128) * bs_n
                    acc = gl.zeros([HALF, BLOCK_N], gl.float32, mma)
                    acc, part, part2, it = _chunk_pairs(a_s, b_s, ready, empty, a_scale_ptr, bs_base, rows64, rmask,
                                                        acc, part, part2, it, k_tiles, a_scale_ld, bs_k, WG, HALF,
                                                        STAGES)
                    cols = col0 + gl.arange(0, BLOCK_N, layout=col_l)
                    cmask = cols < N
                    srows = row_start + WG * HALF + gl.arange(0, HALF, layout=gl.SliceLayout(1, store_l))
                    scols = col0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, store_l))
                    smask = ((srows < rows_before + m) & (srows < T))[:, None] & (scols < N)[None, :]
                    if GLU >= 0:
                        if HAS_BIAS:
                            bias = gl.load(bias_ptr + expert.to(gl.int64) * bias_e + cols, mask=cmask,
                                           other=0.0).to(gl.float32)
                            acc += bias[None, :]
                        # z rounded into this warp group's buffer; z leaves from there in the store
                        # layout, and the GLU reads its gate and up columns from it.
                        zs = z_s.index(WG)
                        zs.store(acc.to(c_ptr.dtype.element_ty))
                        out = zs.load(store_l)
                        gl.store(c_ptr + srows.to(gl.int64)[:, None] * ldc + scols[None, :], out, mask=smask)
                        _glu_epilogue(zs, row_start + WG * HALF, gl.minimum(rows_before + m, T), col0, expert, h_ptr,
                                      probs_ptr, bias_ptr, ldh, bias_e, F, HALF, BLOCK_N, GLU, INTERLEAVE, False)
                    elif DGLU >= 0:
                        # dh (float32, not rounded) into this warp group's buffer, which the dGLU
                        # reads a few columns at a time.
                        dhs = z_s.index(WG)
                        dhs.store(acc)
                        _dglu_epilogue(dhs, row_start + WG * HALF, gl.minimum(rows_before + m, T), col0, T, F,
                                       c_ptr, ldc, z_ptr, ldz, probs_ptr, part_ptr, n_part_cols, q_ptr, q_scale_ptr,
                                       HALF, BLOCK_N, DGLU, INTERLEAVE, QUANT_DZ)
                    else:
                        if HAS_BIAS:
                            p = gl.load(probs_ptr + rows64, mask=rmask, other=0.0).to(gl.float32)
                            bias = gl.load(bias_ptr + expert.to(gl.int64) * bias_e + cols, mask=cmask,
                                           other=0.0).to(gl.float32)
                            acc += p[:, None] * bias[None, :]
                        # The rounded tile goes through a layout of 8 consecutive columns a thread:
                        # 16-byte stores of whole sectors. Stored from wgmma's layout (4-byte stores, a
                        # warp's store 16 bytes in each of 8 rows) fc2 and the fc1 dgrad ran 1.05-1.32x
                        # slower (results/2026-12-03-h200-z run 7).
                        out = gl.convert_layout(acc.to(c_ptr.dtype.element_ty), store_l)
                        gl.store(c_ptr + srows.to(gl.int64)[:, None] * ldc + scols[None, :], out, mask=smask)

    # One wrapper a consumer warp group: its index is a constexpr, and an integer literal in a
    # partition's argument tuple did not survive Gluon's flattening under triton 3.6.
    @gluon.jit
    def _consumer0(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr,
                   bias_ptr, z_s, h_ptr, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld,
                   bs_e, bs_k, bs_n, b_rows, bias_e, ldh, ldz, n_part_cols, F,
                   HAS_BIAS: gl.constexpr, GLU: gl.constexpr, INTERLEAVE: gl.constexpr, DGLU: gl.constexpr,
                   QUANT_DZ: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                   STAGES: gl.constexpr):
        _consumer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr,
                  bias_ptr, z_s, h_ptr, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld,
                  bs_e, bs_k, bs_n, b_rows, bias_e, ldh, ldz, n_part_cols, F, HAS_BIAS, GLU, INTERLEAVE, DGLU,
                  QUANT_DZ, 0, BLOCK_M, BLOCK_N, BLOCK_K, STAGES)

    @gluon.jit
    def _consumer1(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr,
                   bias_ptr, z_s, h_ptr, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld,
                   bs_e, bs_k, bs_n, b_rows, bias_e, ldh, ldz, n_part_cols, F,
                   HAS_BIAS: gl.constexpr, GLU: gl.constexpr, INTERLEAVE: gl.constexpr, DGLU: gl.constexpr,
                   QUANT_DZ: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                   STAGES: gl.constexpr):
        _consumer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr,
                  bias_ptr, z_s, h_ptr, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld,
                  bs_e, bs_k, bs_n, b_rows, bias_e, ldh, ldz, n_part_cols, F, HAS_BIAS, GLU, INTERLEAVE, DGLU,
                  QUANT_DZ, 1, BLOCK_M, BLOCK_N, BLOCK_K, STAGES)

    @gluon.jit
    def fp8_ws_gemm_kernel(a_desc, b_desc, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr, bias_ptr, h_ptr,
                           z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld, bs_e, bs_k, bs_n,
                           b_rows, bias_e, ldh, ldz, n_part_cols, F,
                           HAS_BIAS: gl.constexpr, GLU: gl.constexpr, INTERLEAVE: gl.constexpr, DGLU: gl.constexpr,
                           QUANT_DZ: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                           STAGES: gl.constexpr, Z_ROWS: gl.constexpr, Z_COLS: gl.constexpr,
                           Z_LAYOUT: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
        """C[rows of e] = A[rows of e] @ B_e, fp8_block (grouped_gemm_kernel's EPI_STORE with
        RECIPE_FP8_BLOCK): a_desc over A (T, K) float8, tiles [BLOCK_M, BLOCK_K]; b_desc over
        the weight (E * b_rows, K) float8 K-contiguous, tiles [BLOCK_N, BLOCK_K] ([BLOCK_N / 2,
        BLOCK_K] for fc1 + GLU in the halves layout: a tile's gate rows, then their up rows);
        a_scale_ptr (K / 128, T) float32, row stride a_scale_ld; b_scale_ptr the (E, N / 128,
        K / 128) block scales at strides bs_e, bs_n, bs_k; c (T, N) row stride ldc; with
        HAS_BIAS + probs[t] * bias[e, n] (bias row stride bias_e). n_tiles: (cdiv(T,
        BLOCK_M) + E) * cdiv(N, BLOCK_N), the row-tile bound known on the host.

        GLU >= 0 (an activation code of kernels.glu_act): fc1 with grouped_gemm_kernel's
        EPI_GLU instead: c is z (T, N = 2F) in the layout of INTERLEAVE (a power of two at most
        BLOCK_N / 2, so a tile holds whole gate / up groups, or 0: the halves layout, a tile's
        BLOCK_N / 2 gate columns and their up columns F further), with HAS_BIAS + bias[e, n] (no
        probs), rounded to z's dtype; then h (T, F, row stride ldh) = probs * act(gate, up)
        from the rounded z, through a Z_ROWS x Z_COLS buffer a consumer (Z_LAYOUT; a token
        one when neither GLU nor DGLU is >= 0).

        DGLU >= 0 (an activation code): the fc2 dgrad with grouped_gemm_kernel's EPI_DGLU
        instead (A = dy's row-wise copy, B = W2's dgrad copy, N = F activation columns,
        INTERLEAVE as for the GLU): dh stays float32; dz (c, T x 2F, row stride ldc) at the
        columns' gate and up positions from the saved z (z_ptr, row stride ldz) and probs; the
        dprob partials into part_ptr (T, n_part_cols), one column a 64-wide half of a tile;
        QUANT_DZ: dz's fp8_block row-wise copy into q_ptr (T, 2F) and q_scale_ptr (2F / 128,
        T). The float32 tile goes through the consumer's Z_ROWS x Z_COLS float32 buffer
        (_dglu_epilogue)."""
        a_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_M, BLOCK_K], a_desc.layout)
        b_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_N, BLOCK_K], b_desc.layout)
        if DGLU >= 0:   # the float32 dh tile
            z_s = gl.allocate_shared_memory(gl.float32, [2, Z_ROWS, Z_COLS], Z_LAYOUT)
        else:
            z_s = gl.allocate_shared_memory(c_ptr.dtype.element_ty, [2, Z_ROWS, Z_COLS], Z_LAYOUT)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(ready.index(s), count=1)
            mbarrier.init(empty.index(s), count=2)   # both consumer warp groups hand a slot back
        # (The argument tuples are written out: a tuple bound to a name first lost its
        # constexprs under triton 3.6.)
        gl.warp_specialize([
            (_consumer0, (a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                          probs_ptr, bias_ptr, z_s, h_ptr, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles,
                          ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, bias_e, ldh, ldz, n_part_cols, F, HAS_BIAS, GLU,
                          INTERLEAVE, DGLU, QUANT_DZ, BLOCK_M, BLOCK_N, BLOCK_K, STAGES)),
            (_consumer1, (a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                          probs_ptr, bias_ptr, z_s, h_ptr, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles,
                          ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, bias_e, ldh, ldz, n_part_cols, F, HAS_BIAS, GLU,
                          INTERLEAVE, DGLU, QUANT_DZ, BLOCK_M, BLOCK_N, BLOCK_K, STAGES)),
            (_producer, (a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                         probs_ptr, bias_ptr, z_s, h_ptr, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles,
                         ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, bias_e, ldh, ldz, n_part_cols, F, HAS_BIAS, GLU,
                         INTERLEAVE, DGLU, QUANT_DZ, BLOCK_M, BLOCK_N, BLOCK_K, STAGES)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


def glu_interleave_ok(interleave) -> bool:
    """Whether a 128-column z tile holds whole (gate, up) groups: an int interleave, a power of
    two from 8 to BLOCK / 2 (not the halves layout, 0 or None)."""
    return whole_groups(interleave, BLOCK)


def glu_layout_ok(interleave) -> bool:
    """Whether the ws kernel takes fc1 + GLU and the fc2 dgrad + dGLU in this layout: whole
    groups a tile (``glu_interleave_ok``) or the halves layout."""
    return glu_interleave_ok(interleave) or halves(interleave)


def glu_applies(a, w, c, h, probs, bias, act: int, interleave) -> bool:
    """Whether ``launch`` takes fc1 with its GLU (``glu=(h, act, interleave)``): ``applies``
    for z = c (T, 2F), gate and up columns interleaved by a power of two from 8 to BLOCK / 2 (a
    tile holds whole groups) or in the halves layout (a tile's BLOCK / 2 gate columns and their
    up columns, F a multiple of 64 as ``applies`` has it), h (T, F) of z's dtype with unit column
    stride, probs (T,) contiguous, bias None or (E, 2F) with unit column stride, an activation
    code of launch.ACTIVATIONS; z and h 16-bit (the rounded z tile's shared-memory buffer:
    float32 x, which fp8_block takes, leaves its fc1 to the Triton launch)."""
    T, N = c.shape
    return (applies(a, w, c, 2) and c.dtype in (torch.bfloat16, torch.float16) and glu_layout_ok(interleave)
            and act in (0, 1) and h.dim() == 2
            and tuple(h.shape) == (T, N // 2) and h.stride(1) == 1 and h.dtype == c.dtype
            and probs is not None and probs.dim() == 1 and probs.shape[0] == T and probs.is_contiguous()
            and (bias is None or (bias.dim() == 2 and bias.shape[1] == N and bias.stride(1) == 1)))


def dglu_applies(a, w, c, z, probs, part, dz_rows, act: int, interleave) -> bool:
    """Whether ``launch`` takes the fc2 dgrad with its dGLU (``dglu=(z, part, act, interleave,
    dz_rows)``): ``applies`` for dz = c (T, 2F) of a 16-bit dtype, contiguous, W2's dgrad copy
    w (E, F, H) (F a multiple of 128, as ``applies`` has it); the saved z (T, 2F) of dz's dtype with unit column
    stride, gate and up columns interleaved as ``glu_interleave_ok`` (each 64-wide half of a
    tile then holds whole groups, and its gate and up columns are one 1x128 block of dz) or in
    the halves layout, there with dz_rows None (a 1x128 block of dz then spans a whole tile's
    gate or up columns: launch.dglu_quantizes_dz leaves dz's copy to the quantizer);
    probs (T,) contiguous; part (T, 2 F / 128) float32 with unit column stride (the dprob
    partials of 64-wide halves, launch.backward's with a 64-column dGLU config); dz_rows None
    or an empty recipes.QuantRows of dz in quantize_rows' layout (data (T, 2F) contiguous,
    scales (2F / 128, T) contiguous); an activation code of launch.ACTIVATIONS."""
    T, N2 = c.shape
    F = w.data.shape[1]
    return (applies(a, w, c, 2) and c.dtype in (torch.bfloat16, torch.float16) and c.is_contiguous()
            and N2 == 2 * F and (glu_interleave_ok(interleave) or (halves(interleave) and dz_rows is None))
            and act in (0, 1)
            and z.dim() == 2 and tuple(z.shape) == (T, N2) and z.stride(1) == 1 and z.dtype == c.dtype
            and probs is not None and probs.dim() == 1 and probs.shape[0] == T and probs.is_contiguous()
            and part is not None and part.dtype == torch.float32 and tuple(part.shape) == (T, 2 * (F // BLOCK))
            and part.stride(1) == 1
            and (dz_rows is None or (dz_rows.data.dtype == torch.uint8 and tuple(dz_rows.data.shape) == (T, N2)
                                     and dz_rows.data.is_contiguous() and dz_rows.scales.dtype == torch.float32
                                     and tuple(dz_rows.scales.shape) == (N2 // 128, T)
                                     and dz_rows.scales.is_contiguous())))


_TOKEN_LAYOUT = None if gl is None else gl.SwizzledSharedLayout(1, 1, 1, [1, 0])


def launch(a, w, c, counts, *, N: int, stages: int = MAX_STAGES, probs=None, bias=None,
           programs: int | None = None, glu=None, dglu=None) -> bool:
    """c = a @ w_e^T per expert (+ probs * bias) through fp8_ws_gemm_kernel, or False where it
    does not apply (``applies``, ws_wgrad.counts_ok): launch.py then takes grouped_gemm_kernel.
    a: recipes.QuantRows (T, K); w: recipes.QuantWeight (E, N, K); c (T, N). ``programs``: the
    persistent program count (default one an SM; tests use fewer, so that programs take many
    tiles).

    ``glu=(h, act, interleave)``: fc1 with its GLU (grouped_gemm_kernel's EPI_GLU; c is z,
    N = 2F, bias the (E, 2F) fc1 bias added without probs), where ``glu_applies``.

    ``dglu=(z, part, act, interleave, dz_rows)``: the fc2 dgrad with its dGLU (grouped_gemm_
    kernel's EPI_DGLU; a is dy's row-wise copy, w W2's dgrad copy, N = F, c is dz (T, 2F), no
    bias; dz_rows None or the QuantRows of dz the epilogue fills), where ``dglu_applies``."""
    from .ws_wgrad import _layout, counts_ok
    if not (applies(a, w, c, stages) and counts_ok(counts, w.data.shape[0])):
        return False
    if glu is not None and dglu is not None:
        raise ValueError("ws_kernels.launch: glu and dglu are two launches' epilogues, not one's")
    h, act, interleave = glu if glu is not None else (None, -1, 0)
    if glu is not None and not glu_applies(a, w, c, h, probs, bias, act, interleave):
        return False
    paired = glu is not None and halves(interleave)   # B's tile as two loads of BLOCK / 2 rows
    z = part = dz_rows = None
    dglu_act = -1
    if dglu is not None:
        z, part, dglu_act, interleave, dz_rows = dglu
        if bias is not None or not dglu_applies(a, w, c, z, probs, part, dz_rows, dglu_act, interleave):
            return False
    interleave = interleave or 0   # the kernel's INTERLEAVE: 0 the halves layout
    T, E = c.shape[0], counts.shape[0]
    K = a.data.shape[1]
    if T == 0 or N == 0:
        return True
    layout = _layout((BLOCK, BLOCK), torch.float8_e4m3fn)
    a_desc = TensorDescriptor.from_tensor(a.data.view(torch.float8_e4m3fn), [BLOCK, BLOCK], layout)
    w8 = w.data.view(torch.float8_e4m3fn)
    b_block = [BLOCK // 2 if paired else BLOCK, BLOCK]
    b_desc = TensorDescriptor.from_tensor(w8.reshape(-1, K), b_block, _layout(tuple(b_block), torch.float8_e4m3fn))
    n_tiles = (cdiv(T, BLOCK) + E) * cdiv(N, BLOCK)
    sms = num_sms(c.device)
    bs = w.scales.stride()
    if glu is not None:   # a consumer's rounded z tile, read back by the GLU
        z_shape = (BLOCK // 2, BLOCK)
        z_layout = _layout(z_shape, c.dtype)
    elif dglu is not None:   # a consumer's float32 dh tile, read back by the dGLU
        z_shape = (BLOCK // 2, BLOCK)
        z_layout = _layout(z_shape, torch.float32)
        stages = min(stages, DGLU_STAGES)
    else:
        z_shape, z_layout = (8, 8), _TOKEN_LAYOUT
    from ..triton_common import specializing_launcher
    # Through a SpecializingLauncher (the JIT once per argument specialization, as ws_rows'
    # launches); constexprs in the kernel's order, HAS_BIAS ... PRODUCER_REGS.
    specializing_launcher(fp8_ws_gemm_kernel, num_warps=4, maxnreg=MAXNREG)(
        (max(1, min(n_tiles, programs or sms)),),
        (a_desc, b_desc, counts, c, a.scales, w.scales, probs if probs is not None else c,
         bias if bias is not None else c, h if h is not None else c, z if z is not None else c,
         part if part is not None else c, dz_rows.data if dz_rows is not None else c,
         dz_rows.scales if dz_rows is not None else c, T, N, K, E, n_tiles, c.stride(0), a.scale_ld,
         bs[0], bs[2], bs[1], w.data.shape[1], bias.stride(0) if bias is not None else 0,
         h.stride(0) if h is not None else 0, z.stride(0) if z is not None else 0,
         part.stride(0) if part is not None else 0, N if dglu is not None else N // 2),   # F: fc1's activation columns
        (bias is not None, act, interleave, dglu_act, dz_rows is not None, BLOCK, BLOCK, BLOCK, stages, z_shape[0],
         z_shape[1], z_layout, CONSUMER_REGS, PRODUCER_REGS))
    return True
