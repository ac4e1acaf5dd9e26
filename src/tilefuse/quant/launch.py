"""Quantizer launchers: plain functions from tensors to tensors. Allocate, pick tiles, launch.

x is (rows, K), any strides (the kernels read them); outputs are contiguous. Arguments are
assumed validated (api.py). Nothing here reads a device value on the host.

Tiles are fixed per kernel, not tuned per shape: a tile holds whole scaling blocks, BLOCK_K is
a power of two no wider than K needs, and the programs of one launch are independent (no
atomics), so results do not depend on the tile. The fp8 tiles were chosen on the H200 (below);
the others keep 16 elements per thread, where an sm_90 compile (tests/test_quant_kernels.py)
shows no stack; 64 per thread (32x256 tiles) hit the 255-register cap, and mxfp8 spilled.

A swizzled scale buffer is zero-filled first (its padding entries must be 0), then the kernel
writes every real entry.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .. import launches
from ..utils import cdiv, next_power_of_2
from . import swizzle as _swizzle
from .formats import MXFP8_BLOCK, NVFP4_BLOCK

# No kernel here has a multiply feeding an add whose contraction into an FMA could change a
# result, but bitwise parity with reference.py should not rest on that reading: keep the
# compiler from contracting.
_COMPILE = {"enable_fp_fusion": False}

# Tests set this to fill every output (and the amax partials) with 0xA5 bytes before the
# launch, so an entry a kernel leaves unwritten shows up against the reference instead of
# passing on whatever the allocator left there.
POISON_OUTPUTS = False


def _new(*shape, dtype, device) -> torch.Tensor:
    t = torch.empty(*shape, dtype=dtype, device=device)
    if POISON_OUTPUTS:
        t.view(torch.uint8).fill_(0xA5)
    return t


# (BLOCK_M, widest BLOCK_K, num_warps) per kernel. fp8_block's tiles, as a share of a bf16
# copy's bandwidth against the alternatives:
# - 1x128: 32x128 on 4 warps, 90-96% on the H200 (64x128 on 4 or 8 warps, 32x256 and 16x512
#   within 1%, 128x128 on 8: 91-92%; results/2026-11-30-h200-f runs 2 and 4), 97-99% on the H100 with
#   every tile within 2% (results/2026-12-05-h200-ao runs 1-2, quant_bandwidth.py --tiles).
# - 128x1 written transposed: 128x64 on 4 warps, 75% on the H200 (128x32 on 4: 65%, 128x128 on
#   8: 60%, 256x64 on 8: 52%; -f), 74-83% on the H100, within a point of the best (-ao).
# - 128x128, the weight pair (with_transposed, bytewise codes): 4 warps, 95-98% on the H100
#   against 71-73% on 8, 69-70% on 16, 72-76% for 256x128 or 128x256 on 8 (-ao); 160 registers
#   a thread, no spill on sm_90. On the H200 only an earlier kernel was timed (86-87% on 8
#   warps, -f); this tile is unmeasured there. A 128x128 copy without the pair was last timed
#   with earlier kernels (79-81% on 8 warps; 2026-11-29-h200-d run 2, 2026-11-30-h200-e run 4).
FP8_1x128_TILE = (32, 128, 4)
FP8_128x128_TILE = (128, 128, 4)
FP8_128x1_TILE = (128, 64, 4)
# fp8_block_rows_cols: the smallest tile holding whole 1x128 and 128x1 blocks, on 8 warps. Not
# timed alone: its sm_90 compile (triton 3.8, tests/test_quant_kernels.py) takes 174 registers a
# thread on 8 warps (one block an SM), 93 on 16, 255 on 4, none spilled.
FP8_ROWS_COLS_TILE = (128, 128, 8)
MXFP8_TILE = (16, 128, 4)
NVFP4_TILE = (16, 128, 4)
AMAX_TILE = (32, 256, 4)
# fp8_block's tile per block shape, with or without the second (transposed) copy.
FP8_TILES = {(1, 128): FP8_1x128_TILE, (128, 128): FP8_128x128_TILE, (128, 1): FP8_128x1_TILE}
# CUDA's limit on a grid's y and z sizes (fp8_block splits its row tiles over both).
MAX_GRID_YZ = 65535


def rows_cols_grid(row_tiles: int, col_tiles: int) -> tuple[int, int, int]:
    """The grid of the mxfp8, nvfp4 and amax kernels: row tiles on axis 0 (up to 2**31 - 1),
    column tiles folded over axes 1 and 2, which CUDA caps at MAX_GRID_YZ each (a single axis
    of column tiles would pass it beyond 8,388,480 columns); kernels.tile_origin reads it."""
    grid_y = min(col_tiles, MAX_GRID_YZ)
    return row_tiles, grid_y, cdiv(col_tiles, grid_y)


def _block_k(n_cols: int, widest: int, group: int) -> int:
    return max(group, min(widest, next_power_of_2(n_cols)))


def _fp8_layout(n_batch, rows, cols, block, transpose, scales_transposed, device):
    """Empty (data, scales, data strides (r, c), scale strides (r, c)) of one fp8 output layout
    (fp8_block), batch-leading."""
    br, bc = block
    s_rows, s_cols = cdiv(rows, br), cols // bc
    data = _new(n_batch, *((cols, rows) if transpose else (rows, cols)), dtype=torch.float8_e4m3fn, device=device)
    scales = _new(n_batch, *((s_cols, s_rows) if scales_transposed else (s_rows, s_cols)), dtype=torch.float32,
                  device=device)
    return data, scales, (1, rows) if transpose else (cols, 1), (1, s_rows) if scales_transposed else (s_cols, 1)


class _Fp8Copy(NamedTuple):
    """One output of an fp8_block_kernel launch: its block shape and layout flags (fp8_block's)."""
    block: tuple[int, int]
    transpose: bool
    scales_transposed: bool
    pad_rows: bool


def grouped_rows(rows: int, n_groups: int, block: int) -> int:
    """Rows of the grouped layout (kernels.group_rows) of ``rows`` rows in ``n_groups`` groups,
    each padded to a multiple of ``block``: the most any counts summing to ``rows`` need
    (sum of ceil(c / block) <= ceil(rows / block) + n_groups - 1), known without the counts."""
    return block * max(cdiv(rows, block) + n_groups - 1, 0) if rows > 0 else 0


def fp8_block(x: torch.Tensor, block: tuple[int, int], pow2_scales: bool, *, transpose: bool = False,
              scales_transposed: bool = False, pad_rows: bool = False, with_transposed: bool = False,
              counts: torch.Tensor | None = None):
    """-> (data float8_e4m3fn, scales float32): x (rows, K) quantized in ``block``s, (1, 128),
    (128, 128) or (128, 1) (blocks along the rows: the column-wise copies of grouped_glu_mlp).

    Default layout (the public one): data (rows, K), scales (cdiv(rows, br), K / bc), both
    row-major. ``transpose``: data is written as the (K, rows) transpose (what quantizing x^T
    along the other axis gives, read without a transposing copy of x). ``scales_transposed``:
    scales are written as the (K / bc, cdiv(rows, br)) transpose (the GEMMs read one K block's
    row scales as a contiguous vector). ``pad_rows``: rows are padded with zeros to a multiple
    of br in the outputs (a zero changes no block amax).

    x may also be a batch (B, R, K) of matrices, any strides, R a multiple of 128 (not with
    ``pad_rows``): each matrix quantized alone, outputs (B, ., .) in the chosen layout.

    ``with_transposed``: returns ((data, scales), (data^T, scales^T)), the second pair the
    layout with ``transpose`` and ``scales_transposed`` flipped, written by the same launch
    (one read of x for grouped_glu_mlp's forward and dgrad weight copies).

    ``counts`` (block (128, 1), 2-D x, instead of ``pad_rows``): x's rows are groups of
    counts[g] consecutive rows (an int32 / int64 tensor on x's device, summing to rows; never
    read on the host), each padded with zeros to a multiple of 128 and laid end to end, so
    each group's blocks start at its own first row: grouped_rows(rows, len(counts), 128)
    output rows, those past the last group's zeros (grouped_glu_mlp's column-wise copies,
    one expert's tokens per block). Counts that are negative, too large or do not sum to rows
    (grouped_glu_mlp asserts on the device that its counts do not) never move an access out
    of bounds: each is clamped to [0, rows], and rows no block covers are not stored. A small
    launch before the quantizer's makes the layout's block table (_group_table)."""
    if counts is not None:
        counts = _check_grouped(x, counts, block, pad_rows or with_transposed)
    first = _Fp8Copy(block, transpose, scales_transposed, pad_rows)
    second = _Fp8Copy(block, not transpose, not scales_transposed, pad_rows) if with_transposed else None
    return _fp8_launch(x, pow2_scales, first, second, FP8_TILES[block], counts)


def _check_grouped(x: torch.Tensor, counts, block: tuple[int, int], other_layout: bool) -> torch.Tensor:
    """counts as the kernel reads them (contiguous), or ValueError / TypeError naming what is
    wrong: the grouped layout is a 128 x 1 copy of a 2-D x, its counts a 1-D integer tensor on
    x's device with at least one entry where x has rows."""
    if block != (128, 1) or x.dim() != 2 or other_layout:
        raise ValueError("fp8_block: counts (the grouped layout) take a 2-D x in 128 x 1 blocks, without pad_rows or "
                         f"with_transposed; got x of shape {tuple(x.shape)}, block {block}")
    if not isinstance(counts, torch.Tensor) or counts.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"fp8_block: counts must be an int32 or int64 tensor, got "
                        f"{counts.dtype if isinstance(counts, torch.Tensor) else type(counts).__name__}")
    if counts.dim() != 1 or counts.device != x.device or (x.shape[0] > 0 and counts.shape[0] == 0):
        raise ValueError(f"fp8_block: counts must be 1-D on x's device ({x.device}), with an entry where x has rows; "
                         f"got shape {tuple(counts.shape)} on {counts.device}")
    return counts.contiguous()


def fp8_block_rows_cols(x: torch.Tensor, pow2_scales: bool, counts: torch.Tensor | None = None):
    """-> ((data (T, N), scales (N / 128, T)), (data_t (N, Tp), scales_t (Tp / 128, N))),
    data float8_e4m3fn, scales float32: x (T, N), N a multiple of 128, any strides, quantized
    both ways from one read, in one launch of 128 x 128 tiles. The first pair is x in 1 x 128
    blocks with its scales transposed (``fp8_block(x, (1, 128), pow2_scales,
    scales_transposed=True)``), the second x in 128 x 1 blocks, T zero-padded to Tp (a
    multiple of 128), written transposed (``fp8_block(x, (128, 1), pow2_scales, transpose=True,
    pad_rows=True)``): bitwise those two launches' outputs, non-finite values and T == 0
    included. grouped_glu_mlp's row-wise and column-wise copies of an activation or gradient
    where its recipes.PAIR_ROWS_COLS is on (off by default: two launches measured faster).
    With ``counts`` the second pair is in the grouped layout (``fp8_block(x, (128, 1),
    pow2_scales, transpose=True, counts=counts)``, Tp = grouped_rows(T, len(counts), 128)),
    after a small launch that makes the layout's block table (_group_table)."""
    if x.dim() != 2 or x.shape[1] % 128:
        raise ValueError(f"fp8_block_rows_cols: x must be 2-D (T, N) with N a multiple of 128 (the 1 x 128 blocks), "
                         f"got shape {tuple(x.shape)}")
    if counts is not None:
        counts = _check_grouped(x, counts, (128, 1), False)
    return _fp8_launch(x, pow2_scales, _Fp8Copy((1, 128), False, True, False), _Fp8Copy((128, 1), True, False, True),
                       FP8_ROWS_COLS_TILE, counts)


def _fp8_launch(x: torch.Tensor, pow2_scales: bool, first: _Fp8Copy, second: _Fp8Copy | None, tile,
                counts: torch.Tensor | None = None):
    """The fp8_block_kernel launch of x (rows, K) or a batch (B, R, K) into the layout ``first``
    and, unless ``second`` is None, into ``second`` from the same read: (data, scales), or
    ((data, scales), (data2, scales2)). A batch's copies share one block shape and no padding.
    ``tile``: (BLOCK_M, widest BLOCK_K, num_warps), holding whole blocks of both shapes.
    ``counts``: the copy in 128 x 1 blocks is in the grouped layout (fp8_block's ``counts``)."""
    br, bc = first.block
    br2, bc2 = second.block if second is not None else first.block
    block_m, widest, warps = tile
    assert block_m % br == 0 and block_m % br2 == 0, "the tile must hold whole blocks"
    if x.dim() == 3:
        assert not first.pad_rows and (second is None or (second.block == first.block and not second.pad_rows)), \
            "a batch's copies share one block shape, without pad_rows"
        n_batch, batch_rows, cols = x.shape
        assert batch_rows % block_m == 0 and batch_rows % br == 0, "batch rows must be a multiple of the tile"
        rows, stride_b, stride_r, stride_c = n_batch * batch_rows, x.stride(0), x.stride(1), x.stride(2)
        out_rows = out2_rows = batch_rows
    else:
        rows, cols = x.shape
        n_batch, stride_b, stride_r, stride_c = 1, 0, x.stride(0), x.stride(1)

        def copy_rows(copy: _Fp8Copy) -> int:
            if counts is not None and copy.block[0] > 1:
                return grouped_rows(rows, counts.shape[0], copy.block[0])
            return cdiv(rows, copy.block[0]) * copy.block[0] if copy.pad_rows else rows
        out_rows = copy_rows(first)
        out2_rows = out_rows if second is None else copy_rows(second)
        batch_rows = max(out_rows, out2_rows, 1)
    if counts is not None:
        assert block_m == 128 and x.dim() == 2, "the grouped layout takes one matrix in 128-row tiles"
    one = _fp8_layout(n_batch, out_rows, cols, first.block, first.transpose, first.scales_transposed, x.device)
    two = one if second is None else _fp8_layout(n_batch, out2_rows, cols, second.block, second.transpose,
                                                 second.scales_transposed, x.device)
    outs = [one[:2]] if second is None else [one[:2], two[:2]]
    if x.dim() == 2:
        outs = [(d[0], s[0]) for d, s in outs]
    result = outs[0] if second is None else tuple(outs)
    if x.numel() == 0:
        return result
    block_k = _block_k(cols, widest, max(bc, bc2))
    from ..ops.triton_common import specializing_launcher
    from .kernels import fp8_block_kernel
    # Grouped: one program a block of the grouped layout, its rows from the table.
    row_tiles = cdiv(n_batch * max(out_rows, out2_rows), block_m)
    table = _group_table(counts, rows, row_tiles) if counts is not None else x
    grid_y = min(row_tiles, MAX_GRID_YZ)
    # Through a SpecializingLauncher (the JIT once per argument specialization; grouped_glu_mlp's
    # fp8_block training step makes nine or ten of these launches); constexprs in the kernel's
    # order.
    specializing_launcher(fp8_block_kernel, num_warps=warps, **_COMPILE)(
        (cdiv(cols, block_k), grid_y, cdiv(row_tiles, grid_y)),
        (x, one[0].view(torch.uint8), one[1], rows, cols, stride_r, stride_c, batch_rows, stride_b,
         n_batch * out_rows, out_rows * cols, *one[2], cdiv(out_rows, br) * (cols // bc), *one[3],
         two[0].view(torch.uint8), two[1], n_batch * out2_rows, *two[2], *two[3],
         table, 0 if counts is None else row_tiles),
        (br, bc, pow2_scales, second is not None, br2, bc2, x.dim() == 3, block_m, block_k, counts is not None))
    launches.record("quant_fp8_block")
    return result


def _group_table(counts: torch.Tensor, rows: int, n_blocks: int) -> torch.Tensor:
    """(n_blocks, 2) int32 on counts' device: block b's (first row, end row) of x's ``rows``
    rows in the grouped layout of ``counts`` (kernels.group_rows; checked counts), for
    fp8_block_kernel's GROUPED programs to read instead of each scanning the counts. One
    launch of one-warp programs, one a block; no host sync."""
    from ..ops.triton_common import specializing_launcher
    from .kernels import group_table_kernel
    table = _new(n_blocks, 2, dtype=torch.int32, device=counts.device)
    specializing_launcher(group_table_kernel, num_warps=1)(
        (n_blocks,), (counts, counts.shape[0], rows, table), (128, 128))
    launches.record("quant_group_table")
    return table


def _scale_buffer(rows: int, cols: int, swizzle: bool, dtype, device):
    """The compact (rows, cols) scale matrix, or the zeroed flat swizzled buffer for it, and
    the padded column count the kernel's offset formula needs."""
    if not swizzle:
        return _new(rows, cols, dtype=dtype, device=device), cols
    big_r, big_c = _swizzle.padded_shape(rows, cols)
    return torch.zeros(big_r * big_c, dtype=dtype, device=device), big_c


def mxfp8(x: torch.Tensor, swizzle: bool):
    """-> (data (rows, K) float8_e4m3fn, scales uint8: (rows, K / 32) or flat swizzled)."""
    rows, cols = x.shape
    data = _new(rows, cols, dtype=torch.float8_e4m3fn, device=x.device)
    scales, padded_cols = _scale_buffer(rows, cols // MXFP8_BLOCK, swizzle, torch.uint8, x.device)
    if data.numel() == 0:
        return data, scales
    block_m, widest, warps = MXFP8_TILE
    block_k = _block_k(cols, widest, MXFP8_BLOCK)
    from .kernels import mxfp8_kernel
    mxfp8_kernel[rows_cols_grid(cdiv(rows, block_m), cdiv(cols, block_k))](
        x, data.view(torch.uint8), scales, rows, cols, x.stride(0), x.stride(1), padded_cols,
        SWIZZLE=swizzle, BLOCK_M=block_m, BLOCK_K=block_k, num_warps=warps, **_COMPILE,
    )
    launches.record("quant_mxfp8")
    return data, scales


def tensor_amax(x: torch.Tensor, rht: bool) -> torch.Tensor:
    """float32 scalar amax(|x|) (of the Hadamard-transformed x with ``rht``); NaN if any
    element is NaN or +-inf; 0 for an empty x. Two launches: per-tile partials, then their max."""
    rows, cols = x.shape
    amax = torch.zeros((), dtype=torch.float32, device=x.device)
    if x.numel() == 0:
        return amax
    block_m, widest, warps = AMAX_TILE
    block_k = _block_k(cols, widest, NVFP4_BLOCK)
    grid = rows_cols_grid(cdiv(rows, block_m), cdiv(cols, block_k))
    partials = _new(math.prod(grid), dtype=torch.float32, device=x.device)
    from .kernels import amax_finalize_kernel, amax_partial_kernel
    amax_partial_kernel[grid](x, partials, rows, cols, x.stride(0), x.stride(1),
                              RHT=rht, BLOCK_M=block_m, BLOCK_K=block_k, num_warps=warps, **_COMPILE)
    amax_finalize_kernel[(1,)](partials, amax, partials.numel(), BLOCK=1024, num_warps=4)
    launches.record("quant_amax")
    return amax


# batch_amax reads each matrix as one flat row: tiles of 1 x BATCH_AMAX_BLOCK elements.
BATCH_AMAX_BLOCK = 8192


def batch_amax(x: torch.Tensor) -> torch.Tensor:
    """(B,) float32 amax(|x[b]|) of a (B, R, C) batch, NaN for a matrix holding a NaN or
    +-inf, 0 for an empty one (tensor_amax per matrix, without RHT). Two launches."""
    n_batch = x.shape[0]
    flat = x.reshape(n_batch, -1)   # a copy only for a batch that is not contiguous per matrix
    amax = torch.zeros(n_batch, dtype=torch.float32, device=x.device)
    if flat.numel() == 0:
        return amax
    grid = rows_cols_grid(n_batch, cdiv(flat.shape[1], BATCH_AMAX_BLOCK))
    partials = _new(math.prod(grid), dtype=torch.float32, device=x.device)
    from .kernels import amax_finalize_kernel, amax_partial_kernel
    amax_partial_kernel[grid](flat, partials, n_batch, flat.shape[1], flat.stride(0), flat.stride(1),
                              RHT=False, BLOCK_M=1, BLOCK_K=BATCH_AMAX_BLOCK, num_warps=8, **_COMPILE)
    amax_finalize_kernel[(n_batch,)](partials, amax, grid[1] * grid[2], BLOCK=1024, num_warps=4)
    launches.record("quant_amax")
    return amax


def nvfp4(x: torch.Tensor, amax: torch.Tensor | None, block_2d: bool, rht: bool,
          stochastic_bits: torch.Tensor | None, swizzle: bool):
    """-> (data (rows, K/2) uint8, scales float8_e4m3fn (compact or flat swizzled), amax).

    ``amax``: None (computed, a float32 scalar) or a float32 scalar tensor on x's device.

    x may also be a batch (B, R, K) of matrices, any strides, R a multiple of 16, with ``amax``
    the (B,) float32 per-matrix amax and ``swizzle`` (no stochastic bits): one launch, data
    (B, R, K/2), and the flat swizzled scales of the B matrices one after another, each
    padded to its own 128-row multiple (what B separate calls concatenated give)."""
    batched = x.dim() == 3
    if batched:
        assert amax is not None and amax.shape == (x.shape[0],) and swizzle and stochastic_bits is None, \
            "a batch takes one amax per matrix, swizzled scales and no stochastic bits"
        n_batch, batch_rows, cols = x.shape
        amax = amax.contiguous()
        rows, stride_b = n_batch * batch_rows, x.stride(0)
        stride_r, stride_c = x.stride(1), x.stride(2)
        batch_scale_rows, padded_cols = _swizzle.padded_shape(batch_rows, cols // NVFP4_BLOCK)
        scales = torch.zeros(n_batch * batch_scale_rows * padded_cols, dtype=torch.float8_e4m3fn, device=x.device)
    else:
        rows, cols = x.shape
        n_batch, batch_rows, stride_b, batch_scale_rows = 1, max(rows, 1), 0, 0
        stride_r, stride_c = x.stride(0), x.stride(1)
        if amax is None:
            amax = tensor_amax(x, rht)
        scale_rows = cdiv(rows, NVFP4_BLOCK) if (block_2d and not swizzle) else rows
        scales, padded_cols = _scale_buffer(scale_rows, cols // NVFP4_BLOCK, swizzle, torch.float8_e4m3fn, x.device)
    data = _new(rows, cols // 2, dtype=torch.uint8, device=x.device)
    if batched:
        data = data.view(n_batch, batch_rows, cols // 2)
    if x.numel() == 0:
        return data, scales, amax
    block_m, widest, warps = NVFP4_TILE
    assert batch_rows % block_m == 0 or not batched, "batch rows must be a multiple of the tile"
    block_k = _block_k(cols, widest, NVFP4_BLOCK)
    rand = data if stochastic_bits is None else stochastic_bits.view(torch.int32)
    rand_strides = (0, 0) if stochastic_bits is None else rand.stride()
    from .kernels import nvfp4_kernel
    nvfp4_kernel[rows_cols_grid(cdiv(rows, block_m), cdiv(cols, block_k))](
        x, amax, rand, data, scales.view(torch.uint8), rows, cols, stride_r, stride_c,
        rand_strides[0], rand_strides[1], padded_cols, batch_rows, stride_b, batch_scale_rows,
        BLOCK_ROWS=NVFP4_BLOCK if block_2d else 1, RHT=rht, STOCHASTIC=stochastic_bits is not None, SWIZZLE=swizzle,
        BLOCK_M=block_m, BLOCK_K=block_k, num_warps=warps, **_COMPILE,
    )
    launches.record("quant_nvfp4")
    return data, scales, amax
