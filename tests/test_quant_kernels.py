"""Quantizer kernels (interpreter on CPU, compiled on a GPU) bitwise against
tilefuse.quant.reference: the bit-level conversion helpers on every tie and on random bit
patterns; each quantizer on data with zeros, subnormals, ties, zero amax, non-finite blocks,
odd row counts and scale columns that need the swizzle padding; every output poisoned before
the launch; determinism.
"""

import itertools

import pytest
import torch
import triton
import triton.language as tl

from tilefuse import launches
from tilefuse.quant import launch, reference, swizzle_scales
from tilefuse.quant.kernels import (e2m1_codes, e2m1_codes_stochastic, e4m3_bits, e4m3_value,
                                    e8m0_bits, e8m0_reciprocal, rht16)

from quant_helpers import (blocks_with_amax, e2m1_tie_points, e4m3_tie_points, mixed, same_bits)
from sm90_helpers import PTXAS, nvidia_compiler_available, run_compile_script

U32 = 2 ** 32


@pytest.fixture(autouse=True)
def _poison():
    launch.POISON_OUTPUTS = True
    yield
    launch.POISON_OUTPUTS = False


# ---------------------------------------------------------------------------------------------
# Conversion helpers, elementwise


@triton.jit
def _helper_kernel(x_ptr, bits_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    bits = tl.load(bits_ptr + offs, mask=mask, other=0).to(tl.uint32, bitcast=True)
    if OP == 0:
        y = e4m3_bits(x)
    elif OP == 1:
        y = e4m3_value(bits).to(tl.uint32, bitcast=True)
    elif OP == 2:
        y = e8m0_bits(x)
    elif OP == 3:
        y = e8m0_reciprocal(bits).to(tl.uint32, bitcast=True)
    elif OP == 4:
        y = e2m1_codes(x, x)
    else:
        y = e2m1_codes_stochastic(x, x, bits)
    tl.store(out_ptr + offs, y.to(tl.int32, bitcast=True), mask=mask)


def _run_helper(op, x, bits=None):
    x = x.float().contiguous().to(_device())
    bits = torch.zeros(x.shape, dtype=torch.int32) if bits is None else bits.view(torch.int32)
    out = torch.empty(x.shape, dtype=torch.int32, device=x.device)
    block = 1024
    _helper_kernel[(triton.cdiv(x.numel(), block),)](x, bits.contiguous().to(x.device), out,
                                                     x.numel(), OP=op, BLOCK=block)
    return out.cpu()


def _device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def _random_f32(n, seed, max_abs=None):
    g = torch.Generator().manual_seed(seed)
    v = torch.randint(0, U32, (n,), generator=g, dtype=torch.int64).to(torch.int32).view(torch.float32)
    if max_abs is not None:
        v = torch.where(v.abs() <= max_abs, v, v.abs().remainder(max_abs) * torch.sign(v))
    return v


def test_e4m3_bits_matches_torch_cast():
    # every tie with its neighbours, subnormals, fp32 subnormals, signed zeros, random bit
    # patterns within +-448 (torch's cast is the reference there; NaN made canonical)
    v = torch.cat([e4m3_tie_points(), torch.tensor([0.0, -0.0, 1e-40, -1e-45, 2 ** -10, 2 ** -11,
                                                    3 * 2 ** -11, float("nan")]),
                   _random_f32(1 << 16, seed=1, max_abs=448.0)])
    assert torch.equal(_run_helper(0, v), reference.to_e4m3(v).view(torch.uint8).int())


def test_e4m3_bits_saturates_above_448():
    v = torch.tensor([448.0, 449.0, 464.0, 464.00003, 479.99997, 480.0, 1e30, float("inf"),
                      -500.0, -float("inf")])
    assert _run_helper(0, v).tolist() == [0x7E] * 8 + [0xFE, 0xFE]


def test_e4m3_value_decodes_every_code():
    codes = torch.arange(256, dtype=torch.int32)
    got = _run_helper(1, torch.zeros(256), codes).view(torch.float32)
    want = codes.to(torch.uint8).view(torch.float8_e4m3fn).float()
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(got), nan) and torch.equal(got[~nan], want[~nan])


def test_e8m0_bits_matches_reference():
    q = torch.cat([torch.tensor([0.0, 2.0 ** -149, 2.0 ** -127, 2.0 ** -127 * 1.0000001, 2.0 ** -126,
                                 1.0, 1.0000001, 2.0 ** 127, 3e38, float("inf"), float("nan")]),
                   _random_f32(1 << 14, seed=2).abs()])
    assert torch.equal(_run_helper(2, q), reference.e8m0_from_scale(q).int())


def test_e8m0_reciprocal_matches_reference():
    e = torch.arange(256, dtype=torch.int32)
    got = _run_helper(3, torch.zeros(256), e).view(torch.float32)
    assert same_bits(got, reference.e8m0_reciprocal(e))


def test_e2m1_codes_match_reference():
    v = torch.cat([e2m1_tie_points(), torch.tensor([0.0, -0.0, 1e-40, float("nan"), -float("nan")]),
                   _random_f32(1 << 14, seed=3, max_abs=6.0)])
    assert torch.equal(_run_helper(4, v), reference.e2m1_codes(v, v).int())


def test_e2m1_stochastic_codes_match_reference():
    v = torch.cat([e2m1_tie_points(), _random_f32(1 << 14, seed=4, max_abs=6.0)])
    g = torch.Generator().manual_seed(9)
    bits = torch.randint(0, U32, v.shape, generator=g, dtype=torch.int64).to(torch.uint32)
    bits[:8] = torch.tensor([0, 1, 2 ** 31, U32 - 1, 0, 0, U32 - 1, 12345]).to(torch.uint32)
    assert torch.equal(_run_helper(5, v, bits), reference.e2m1_codes_stochastic(v, v, bits).int())


@triton.jit
def _rht_kernel(x_ptr, out_ptr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_K + tl.arange(0, BLOCK_K)[None, :]
    tl.store(out_ptr + offs, rht16(tl.load(x_ptr + offs), BLOCK_M, BLOCK_K))


def test_rht16_matches_reference():
    x = mixed(8, 64, 16, seed=5, log2_range=20)
    out = torch.empty_like(x, device=_device())
    _rht_kernel[(1,)](x.to(_device()), out, BLOCK_M=8, BLOCK_K=64)
    assert same_bits(out.cpu(), reference.hadamard16(x))


# ---------------------------------------------------------------------------------------------
# Quantizers


def _to_dev(t):
    return None if t is None else t.to(_device())


FP8_CASES = [  # rows, K, block, pow2, dtype
    (130, 256, (1, 128), False, torch.float32),
    (1, 384, (1, 128), True, torch.float32),
    (130, 256, (128, 128), False, torch.float32),
    (257, 128, (128, 128), True, torch.bfloat16),
    (33, 512, (1, 128), False, torch.float16),
]


@pytest.mark.parametrize("rows,cols,block,pow2,dtype", FP8_CASES,
                         ids=[f"R{c[0]}-K{c[1]}-{c[2][0]}x{c[2][1]}-{'pow2' if c[3] else 'f32'}-"
                              f"{str(c[4])[6:]}" for c in FP8_CASES])
def test_fp8_block_kernel(rows, cols, block, pow2, dtype):
    x = mixed(rows, cols, 128, seed=rows + cols, dtype=dtype, nonfinite=rows > 1)
    with launches.counting() as n:
        data, scales = launch.fp8_block(_to_dev(x), block, pow2)
    assert n["quant_fp8_block"] == 1
    rdata, rscales = reference.quantize_fp8_block(x, block, pow2)
    assert same_bits(data.cpu(), rdata) and same_bits(scales.cpu(), rscales)


@pytest.mark.parametrize("max_grid", [None, 5], ids=["grid-y", "grid-yz"])
@pytest.mark.parametrize("block", [(1, 128), (128, 128)], ids=["1x128", "128x128"])
def test_fp8_block_kernel_on_a_batch_of_transposed_matrices(block, max_grid, monkeypatch):
    """A (B, R, K) batch read through transposed strides (grouped_glu_mlp's dgrad weights)
    quantizes exactly as the contiguous (B * R, K) matrix of its rows. With the grid's y size
    capped at 5 (CUDA's is 65535), the row tiles are split over y and z and the last z slice
    holds tiles past the last matrix, which must write nothing (outputs poisoned)."""
    if max_grid:
        monkeypatch.setattr(launch, "MAX_GRID_YZ", max_grid)
    w = mixed(3 * 256, 128, 128, seed=11, dtype=torch.bfloat16, nonfinite=True).reshape(3, 256, 128)
    x = w.transpose(1, 2)        # (3, 128, 256), rows of 256 with stride 128
    data, scales = launch.fp8_block(_to_dev(x), block, False)
    rdata, rscales = reference.quantize_fp8_block(x.reshape(3 * 128, 256), block, False)
    assert data.shape == (3, 128, 256) and scales.shape == (3, 128 // block[0], 2)
    assert same_bits(data.cpu().reshape(rdata.shape), rdata) and same_bits(scales.cpu().reshape(rscales.shape), rscales)


LAYOUT_CASES = [((1, 128), 130, 256), ((128, 128), 256, 128), ((128, 1), 130, 256), ((128, 1), 256, 64),
                ((128, 1), 1, 128)]


@pytest.mark.parametrize("max_grid", [None, 3], ids=["grid-y", "grid-yz"])
@pytest.mark.parametrize("pad", [False, True], ids=["exact", "pad"])
@pytest.mark.parametrize("block,rows,cols", LAYOUT_CASES,
                         ids=[f"{c[0][0]}x{c[0][1]}-R{c[1]}-K{c[2]}" for c in LAYOUT_CASES])
def test_fp8_block_kernel_output_layouts(block, rows, cols, pad, max_grid, monkeypatch):
    """Transposed data, transposed scales and zero padding of the rows (the GEMM operand
    layouts of grouped_glu_mlp) hold exactly the codes and scales of the reference on the
    zero-padded x: blocks of 128 x 1 as the reference's 1 x 128 blocks of x^T. Outputs are
    poisoned first, so an entry left unwritten (padding included) fails. Several row and column
    tiles at K 256; with the grid's y size capped at 3, row tiles split over y and z (at 130
    rows of 1x128 blocks: 5 tiles in a 3 x 2 grid, one past the end)."""
    if max_grid:
        monkeypatch.setattr(launch, "MAX_GRID_YZ", max_grid)
    br, bc = block
    x = mixed(rows, cols, min(cols, 128), seed=rows * 7 + cols, dtype=torch.bfloat16, nonfinite=rows > 1)
    padded = -(-rows // br) * br if pad else rows
    xp = torch.cat((x, x.new_zeros(padded - rows, cols)))
    if block == (128, 1):   # the reference takes whole blocks along K: pad, then trim
        full = -(-rows // br) * br
        xt = torch.cat((x, x.new_zeros(full - rows, cols))).t().contiguous()
        rdata_t, rscales_t = reference.quantize_fp8_block(xt, (1, 128), False)
        rdata, rscales = rdata_t.t()[:padded], rscales_t.t()
    else:
        rdata, rscales = reference.quantize_fp8_block(xp, block, False)
    for transpose, scales_t in itertools.product((False, True), (False, True)):
        data, scales = launch.fp8_block(_to_dev(x), block, False, transpose=transpose, scales_transposed=scales_t,
                                        pad_rows=pad)
        data, scales = data.cpu(), scales.cpu()
        assert data.shape == ((cols, padded) if transpose else (padded, cols))
        assert same_bits(data.t() if transpose else data, rdata)
        assert same_bits(scales.t() if scales_t else scales, rscales)


def test_fp8_block_kernel_batch_written_transposed():
    """A (B, R, C) batch quantized in 128x128 blocks and written transposed, (B, C, R) data
    and (B, C/128, R/128) scales, equals the reference on each transposed matrix (the dgrad
    weight copy of grouped_glu_mlp, from a coalesced read of W)."""
    w = mixed(3 * 256, 128, 128, seed=5, dtype=torch.bfloat16, nonfinite=True).reshape(3, 256, 128)
    data, scales = launch.fp8_block(_to_dev(w), (128, 128), False, transpose=True, scales_transposed=True)
    rdata, rscales = reference.quantize_fp8_block(w.transpose(1, 2).reshape(3 * 128, 256), (128, 128), False)
    assert data.shape == (3, 128, 256) and scales.shape == (3, 1, 2)
    assert same_bits(data.cpu().reshape(3 * 128, 256), rdata)
    assert same_bits(scales.cpu().reshape(3, 2), rscales)


@pytest.mark.parametrize("batched", [False, True], ids=["matrix", "batch"])
def test_fp8_block_kernel_writes_a_second_transposed_copy(batched):
    """with_transposed: one launch writes the default layout and the transposed data and
    scales, each bitwise the layout a separate launch writes (grouped_glu_mlp's forward and
    dgrad weight copies)."""
    x = mixed(3 * 256, 128, 128, seed=6, dtype=torch.bfloat16, nonfinite=True)
    x = _to_dev(x.reshape(3, 256, 128) if batched else x)
    (data, scales), (data_t, scales_t) = launch.fp8_block(x, (128, 128), False, with_transposed=True)
    want = launch.fp8_block(x, (128, 128), False)
    want_t = launch.fp8_block(x, (128, 128), False, transpose=True, scales_transposed=True)
    assert same_bits(data, want[0]) and same_bits(scales, want[1])
    assert same_bits(data_t, want_t[0]) and same_bits(scales_t, want_t[1])


ROWS_COLS_CASES = [  # T, N, dtype
    (130, 256, torch.bfloat16),    # a partial second token tile, two column tiles
    (256, 128, torch.bfloat16),    # whole token tiles
    (1, 128, torch.float32),       # one token (fp32 subnormals in the data)
    (300, 384, torch.float16),
    (0, 256, torch.bfloat16),      # no tokens: empty copies, no launch
]


@pytest.mark.parametrize("max_grid", [None, 1], ids=["grid-y", "grid-yz"])
@pytest.mark.parametrize("pow2", [False, True], ids=["f32", "pow2"])
@pytest.mark.parametrize("rows,cols,dtype", ROWS_COLS_CASES,
                         ids=[f"T{c[0]}-N{c[1]}-{str(c[2])[6:]}" for c in ROWS_COLS_CASES])
def test_fp8_block_rows_cols_is_the_two_launches_bitwise(rows, cols, dtype, pow2, max_grid, monkeypatch):
    """fp8_block_rows_cols: one launch writes x's 1x128 copy (scales transposed) and its 128x1
    copy (T zero-padded to a multiple of 128, written transposed), each bitwise what its own
    launch writes, every output poisoned first (an entry left unwritten, padding included,
    fails): partial token tiles, one token, T == 0, a NaN of each sign and +-inf in the data.
    With the grid's y size capped at 1 the token tiles run along z."""
    if max_grid:
        monkeypatch.setattr(launch, "MAX_GRID_YZ", max_grid)
    if rows:
        x = mixed(rows, cols, 128, seed=rows + 3 * cols, dtype=dtype, nonfinite=True)
    else:
        x = torch.empty((0, cols), dtype=dtype)
    x = _to_dev(x)
    with launches.counting() as n:
        (data, scales), (data_t, scales_t) = launch.fp8_block_rows_cols(x, pow2)
    assert n["quant_fp8_block"] == (1 if rows else 0)
    want = launch.fp8_block(x, (1, 128), pow2, scales_transposed=True)
    want_t = launch.fp8_block(x, (128, 1), pow2, transpose=True, pad_rows=True)
    padded = -(-rows // 128) * 128
    assert data.shape == (rows, cols) and data_t.shape == (cols, padded)
    assert scales.shape == (cols // 128, rows) and scales_t.shape == (padded // 128, cols)
    assert same_bits(data, want[0]) and same_bits(scales, want[1])
    assert same_bits(data_t, want_t[0]) and same_bits(scales_t, want_t[1])


def test_fp8_block_rows_cols_reads_any_strides():
    """A strided x (a column slice, and x^T's transpose view) gives the copies of its
    contiguous copy."""
    wide = mixed(200, 512, 128, seed=14, dtype=torch.bfloat16, nonfinite=True)
    for x in (_to_dev(wide)[:, 128:384], _to_dev(wide[:, :256].t().contiguous()).t()):
        got = launch.fp8_block_rows_cols(x, False)
        want = launch.fp8_block_rows_cols(x.contiguous(), False)
        for g, w in zip(got, want):
            assert same_bits(g[0], w[0]) and same_bits(g[1], w[1])


GROUPED_CASES = {   # counts (their sum is T)
    "T300": [0, 130, 1, 0, 169],      # empty groups, a group of one row, partial last blocks
    "T256": [128, 128],               # whole blocks: the layout is x's own rows
    "T1": [1],
    "T129": [0, 0, 129],              # empty groups first
    "T400": [100, 100, 100, 100],     # every group in one partial block; 3 zero blocks at the end
}


def _grouped_reference(x, counts, pow2):
    """The grouped layout's 128 x 1 copy from the reference: each group's rows padded with zeros
    to a multiple of 128 on the host, end to end, then zero rows up to grouped_rows; quantized
    as 1 x 128 blocks of the transpose. (data (N, Tp), scales (Tp / 128, N))."""
    n_padded = launch.grouped_rows(x.shape[0], len(counts), 128)
    padded = x.new_zeros((n_padded, x.shape[1]))
    at = start = 0
    for c in counts:
        padded[at:at + c] = x[start:start + c]
        start += c
        at += -(-c // 128) * 128
    data, scales = reference.quantize_fp8_block(padded.t().contiguous(), (1, 128), pow2)
    return data, scales.t()


@pytest.mark.parametrize("max_grid", [None, 2], ids=["grid-y", "grid-yz"])
@pytest.mark.parametrize("pow2", [False, True], ids=["f32", "pow2"])
@pytest.mark.parametrize("counts", GROUPED_CASES.values(), ids=GROUPED_CASES.keys())
def test_fp8_block_grouped_column_copy(counts, pow2, max_grid, monkeypatch):
    """fp8_block(x, (128, 1), transpose=True, counts=...): each group's rows in blocks of their
    own, from the group's first row (grouped_glu_mlp's column-wise copies, one expert per
    block), bitwise the reference on the host-built padded layout, every output poisoned
    first (the padding and the zero blocks past the last group's included); alone, and as the
    second copy of fp8_block_rows_cols, whose 1 x 128 copy stays x's own rows, bitwise its
    launch without counts. int32 and int64 counts; a NaN of each sign and +-inf in the data."""
    if max_grid:
        monkeypatch.setattr(launch, "MAX_GRID_YZ", max_grid)
    T = sum(counts)
    x = mixed(T, 256, 128, seed=T, dtype=torch.bfloat16, nonfinite=T > 1)
    rdata, rscales = _grouped_reference(x, counts, pow2)
    assert rdata.shape == (256, 128 * (-(-T // 128) + len(counts) - 1))
    for dtype in (torch.int32, torch.int64):
        c = _to_dev(torch.tensor(counts, dtype=dtype))
        with launches.counting() as n:
            data, scales = launch.fp8_block(_to_dev(x), (128, 1), pow2, transpose=True, counts=c)
            (rows, rows_scales), (data_t, scales_t) = launch.fp8_block_rows_cols(_to_dev(x), pow2, c)
        assert n["quant_fp8_block"] == 2 and n["quant_group_table"] == 2
        for d, sc in ((data, scales), (data_t, scales_t)):
            assert d.shape == rdata.shape and sc.shape == rscales.shape
            assert same_bits(d.cpu(), rdata) and same_bits(sc.cpu(), rscales)
        want = launch.fp8_block_rows_cols(_to_dev(x), pow2)[0]
        assert same_bits(rows, want[0]) and same_bits(rows_scales, want[1])


def _group_table_oracle(counts, rows, n_blocks):
    """Each block's (first row, end row) of the grouped layout, in Python integers: counts
    clamped to [0, rows], rows clipped to [0, rows], blocks past the last group's (0, 0)."""
    table, start = [], 0
    for c in counts:
        c = min(max(c, 0), rows)
        for k in range(-(-c // 128)):
            first = min(start + 128 * k, rows)
            table.append((first, min(first + min(c - 128 * k, 128), rows)))
        start += c
    return (table + [(0, 0)] * n_blocks)[:n_blocks]


TABLE_CASES = {   # (counts, rows): the grouped cases, and counts that do not sum to rows
    **{k: (c, sum(c)) for k, c in GROUPED_CASES.items()},
    "sum-over": ([150, 150], 200), "negative": ([-40, 200], 200), "one-too-many": ([500], 200),
    "int32-max": ([100, 2 ** 31 - 1], 200), "huge": ([2 ** 62, -2 ** 62, 7], 200),
}


@pytest.mark.parametrize("counts,rows", TABLE_CASES.values(), ids=TABLE_CASES.keys())
def test_group_table_gives_each_block_its_rows(counts, rows):
    """The block table fp8_block's grouped launches read (launch._group_table, one program a
    block): every entry the Python oracle's, for counts that sum to the rows and for counts
    that do not (too many rows, negative, near and past 2^31), int32 and int64 where they
    fit; the table poisoned first (the module's fixture), so an entry left unwritten shows."""
    n_blocks = launch.grouped_rows(rows, len(counts), 128) // 128
    want = torch.tensor(_group_table_oracle(counts, rows, n_blocks), dtype=torch.int32).reshape(n_blocks, 2)
    for dtype in (torch.int32, torch.int64):
        if dtype == torch.int32 and not all(-2 ** 31 <= c < 2 ** 31 for c in counts):
            continue
        c = _to_dev(torch.tensor(counts, dtype=dtype))
        with launches.counting() as n:
            got = launch._group_table(c, rows, n_blocks)
        assert n["quant_group_table"] == 1 and got.dtype == torch.int32 and got.shape == (n_blocks, 2)
        assert torch.equal(got.cpu(), want), (counts, dtype)


def test_fp8_block_grouped_copy_of_no_rows_and_bad_arguments():
    """T == 0 gives empty copies without a launch; counts take only the 128 x 1 copy of a
    matrix, and name what they got otherwise."""
    c = _to_dev(torch.zeros(3, dtype=torch.int32))
    with launches.counting() as n:
        data, scales = launch.fp8_block(_to_dev(torch.zeros(0, 128)), (128, 1), False, transpose=True, counts=c)
    assert data.shape == (128, 0) and scales.shape == (0, 128) and n["quant_fp8_block"] == 0
    x = _to_dev(torch.zeros(256, 128))
    for kw in ({"block": (1, 128)}, {"block": (128, 1), "pad_rows": True}, {"block": (128, 1), "with_transposed": True}):
        with pytest.raises(ValueError, match="counts .the grouped layout. take a 2-D x in 128 x 1 blocks"):
            launch.fp8_block(x, pow2_scales=False, counts=c, **kw)
    for bad, err in ((c.float(), TypeError), ([128, 128], TypeError), (c[:0], ValueError), (c[None], ValueError)):
        with pytest.raises(err, match="fp8_block: counts must be"):
            launch.fp8_block(x, (128, 1), False, transpose=True, counts=bad)
        with pytest.raises(err, match="fp8_block: counts must be"):
            launch.fp8_block_rows_cols(x, False, bad)
    # a strided view of counts is read as its values
    wide = _to_dev(torch.tensor([100, -7, 156, -7], dtype=torch.int32))
    dense = _to_dev(torch.tensor([100, 156], dtype=torch.int32))
    x = _to_dev(mixed(256, 128, 128, seed=2, dtype=torch.bfloat16, nonfinite=False))
    for a, b in zip(launch.fp8_block(x, (128, 1), False, transpose=True, counts=wide[::2]),
                    launch.fp8_block(x, (128, 1), False, transpose=True, counts=dense)):
        assert same_bits(a, b)


def test_fp8_block_grouped_copy_stays_in_bounds_for_bad_counts():
    """Counts that do not sum to T (the op asserts on the device) or hold a negative entry
    never move a read or a write out of bounds: rows are clipped to x's, a negative count
    counts as 0 (the outputs are then whatever the clipped layout gives, checked for shape
    and for the in-range groups' blocks)."""
    x = mixed(200, 128, 128, seed=9, dtype=torch.bfloat16, nonfinite=False)
    for counts, dtype in (([150, 150], torch.int32), ([-40, 200], torch.int32), ([500], torch.int32),
                          ([0, -1, 100, 100], torch.int32), ([100, 2 ** 31 - 1], torch.int32),
                          ([100, 2 ** 32 + 100], torch.int64), ([2 ** 62, -2 ** 62, 7], torch.int64)):
        c = _to_dev(torch.tensor(counts, dtype=dtype))
        data, scales = launch.fp8_block(_to_dev(x), (128, 1), False, transpose=True, counts=c)
        assert data.shape == (128, launch.grouped_rows(200, len(counts), 128))
        assert bool(torch.isfinite(scales).all())
        (rows, _), (data_t, _) = launch.fp8_block_rows_cols(_to_dev(x), False, c)
        assert same_bits(data_t, data) and rows.shape == x.shape
    data, _ = launch.fp8_block(_to_dev(x), (128, 1), False, transpose=True,
                               counts=_to_dev(torch.tensor([-40, 200], dtype=torch.int32)))
    want, _ = _grouped_reference(x, [0, 200], False)
    assert same_bits(data.cpu()[:, :want.shape[1]], want)


@pytest.mark.parametrize("shape", [(130, 96), (4, 2, 128), (128,)], ids=["N96", "3-D", "1-D"])
def test_fp8_block_rows_cols_rejects_bad_shapes(shape):
    with pytest.raises(ValueError, match=r"fp8_block_rows_cols: x must be 2-D \(T, N\) with N a multiple of 128"):
        launch.fp8_block_rows_cols(_to_dev(torch.zeros(shape)), False)


def test_fp8_block_kernel_ties():
    x = blocks_with_amax(e4m3_tie_points() * 2.0 ** -7, 128, 448 * 2.0 ** -7)
    for pow2 in (False, True):
        data, scales = launch.fp8_block(_to_dev(x), (1, 128), pow2)
        rdata, rscales = reference.quantize_fp8_block(x, (1, 128), pow2)
        assert same_bits(data.cpu(), rdata) and same_bits(scales.cpu(), rscales)


MX_CASES = [(130, 96, False), (130, 96, True), (1, 32, True), (64, 256, True), (7, 160, False)]


@pytest.mark.parametrize("rows,cols,swizzle", MX_CASES,
                         ids=[f"R{c[0]}-K{c[1]}-{'swz' if c[2] else 'compact'}" for c in MX_CASES])
def test_mxfp8_kernel(rows, cols, swizzle):
    x = mixed(rows, cols, 32, seed=rows * cols, nonfinite=rows > 1, log2_range=100)
    data, scales = launch.mxfp8(_to_dev(x), swizzle)
    rdata, rscales = reference.quantize_mxfp8(x)
    assert same_bits(data.cpu(), rdata)
    assert same_bits(scales.cpu(), swizzle_scales(rscales) if swizzle else rscales)


def test_mxfp8_kernel_ties():
    x = blocks_with_amax(e4m3_tie_points() * 2.0 ** 40, 32, 448 * 2.0 ** 40)
    data, scales = launch.mxfp8(_to_dev(x), False)
    rdata, rscales = reference.quantize_mxfp8(x)
    assert same_bits(data.cpu(), rdata) and same_bits(scales.cpu(), rscales)


NV_CASES = [  # rows, K, amax, block_2d, rht, stochastic, swizzle, dtype
    (130, 48, None, False, False, False, False, torch.float32),
    (130, 48, None, False, False, False, True, torch.float32),
    (37, 64, 5.0, True, False, False, False, torch.float32),
    (37, 64, None, True, False, False, True, torch.bfloat16),
    (33, 128, None, False, True, False, False, torch.float32),
    (20, 96, 3.0, False, False, True, True, torch.float32),
    (18, 32, None, True, True, True, True, torch.float16),
    (1, 16, None, False, False, False, True, torch.float32),
]


@pytest.mark.parametrize("rows,cols,amax,block_2d,rht,stochastic,swizzle,dtype", NV_CASES,
                         ids=[f"R{c[0]}-K{c[1]}-amax{c[2]}-{'2d' if c[3] else '1d'}"
                              f"{'-rht' if c[4] else ''}{'-sr' if c[5] else ''}"
                              f"{'-swz' if c[6] else ''}-{str(c[7])[6:]}" for c in NV_CASES])
def test_nvfp4_kernel(rows, cols, amax, block_2d, rht, stochastic, swizzle, dtype):
    x = mixed(rows, cols, 16, seed=rows + 7 * cols, dtype=dtype, log2_range=8)
    amax_t = None if amax is None else torch.tensor(amax)
    bits = None
    if stochastic:
        g = torch.Generator().manual_seed(rows)
        bits = torch.randint(0, U32, (rows, cols), generator=g, dtype=torch.int64).to(torch.uint32)
    with launches.counting() as n:
        data, scales, got_amax = launch.nvfp4(_to_dev(x), _to_dev(amax_t), block_2d, rht,
                                              _to_dev(bits), swizzle)
    assert n["quant_nvfp4"] == 1 and n["quant_amax"] == (amax is None)
    rdata, rscales, ramax = reference.quantize_nvfp4(x, amax_t, block_2d, rht, bits)
    if swizzle:
        rscales = swizzle_scales(reference.nvfp4_scales_per_row(rscales, rows, block_2d))
    assert same_bits(got_amax.cpu(), ramax)
    assert same_bits(data.cpu(), rdata) and same_bits(scales.cpu(), rscales)


@pytest.mark.parametrize("block_2d,rht", [(False, False), (True, False), (False, True)])
def test_nvfp4_kernel_nonfinite(block_2d, rht):
    x = mixed(40, 64, 16, seed=3, nonfinite=True, log2_range=8)
    x[7, 20] = -float("nan")          # sign bit set: codes of NaN values are +0 all the same
    for amax in (None, torch.tensor(7.0)):
        data, scales, got_amax = launch.nvfp4(_to_dev(x), _to_dev(amax), block_2d, rht, None, False)
        rdata, rscales, ramax = reference.quantize_nvfp4(x, amax, block_2d, rht)
        assert same_bits(got_amax.cpu(), ramax)
        assert same_bits(data.cpu(), rdata) and same_bits(scales.cpu(), rscales)


def test_nvfp4_kernel_ties_and_zero_amax():
    x = blocks_with_amax(e2m1_tie_points() * 2.0 ** 3, 16, 6 * 2.0 ** 3)
    amax = torch.tensor(2688.0 * 2 ** -2)
    data, scales, _ = launch.nvfp4(_to_dev(x), _to_dev(amax), False, False, None, False)
    rdata, rscales, _ = reference.quantize_nvfp4(x, amax)
    assert same_bits(data.cpu(), rdata) and same_bits(scales.cpu(), rscales)
    z = torch.zeros(5, 32)
    data, scales, amax = launch.nvfp4(_to_dev(z), None, False, False, None, True)
    assert amax.item() == 0 and (data == 0).all() and (scales.view(torch.uint8) == 0).all()


def test_strided_input():
    x = mixed(128, 96, 32, seed=21, log2_range=10)
    xt = x.t()                                   # (96, 128), strides (1, 96)
    data, scales = launch.mxfp8(_to_dev(xt), False)
    rdata, rscales = reference.quantize_mxfp8(xt.contiguous())
    assert same_bits(data.cpu(), rdata) and same_bits(scales.cpu(), rscales)
    data, scales, _ = launch.nvfp4(_to_dev(xt), None, True, True, None, False)
    rdata, rscales, _ = reference.quantize_nvfp4(xt.contiguous(), None, True, True)
    assert same_bits(data.cpu(), rdata) and same_bits(scales.cpu(), rscales)


def test_batch_amax_is_each_matrix_amax():
    """launch.batch_amax: one amax per matrix, bitwise the reference's; a matrix holding a NaN
    or an inf gets NaN, an all-zero one 0; a matrix larger than one tile (several partials
    per matrix, the last partial), and a batch that is not contiguous."""
    n = launch.BATCH_AMAX_BLOCK + 8 * 40   # 1.04 tiles per matrix
    x = mixed(5 * 8, n // 8, 8, seed=11, log2_range=12).reshape(5, 8, n // 8)
    x[1] = 0.0
    x[2, 3, 7] = float("nan")
    x[3, 0, n // 8 - 1] = -float("inf")
    x[4, 7, n // 8 - 1] = -1e30          # the largest magnitude in the last partial tile
    want = torch.stack([reference.tensor_amax(m) for m in x])
    for batch in (x, x.transpose(1, 2)):
        with launches.counting() as launched:
            got = launch.batch_amax(_to_dev(batch))
        assert launched["quant_amax"] == 1
        assert same_bits(got.cpu(), want)
    assert launch.batch_amax(_to_dev(torch.zeros(3, 0, 16))).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("block_2d", [True, False], ids=["2d", "1d"])
@pytest.mark.parametrize("transposed", [False, True], ids=["rows", "transposed-view"])
def test_nvfp4_kernel_on_a_batch_with_one_amax_per_matrix(block_2d, transposed):
    """One launch over a (B, R, K) batch (grouped_glu_mlp's nvfp4 weights; R = 48 pads each
    matrix's swizzled scales to 128 rows) equals B separate swizzled calls, data stacked and
    scales concatenated; also read through a transposed view."""
    w = mixed(3 * 48, 64, 16, seed=12, log2_range=12).reshape(3, 48, 64)
    x = _to_dev(w.transpose(1, 2).contiguous().transpose(1, 2) if transposed else w)
    amax = x.abs().amax(dim=(1, 2)).float()
    data, scales, _ = launch.nvfp4(x, amax, block_2d, False, None, True)
    parts = [launch.nvfp4(x[b], amax[b], block_2d, False, None, True) for b in range(3)]
    assert data.shape == (3, 48, 32)
    assert same_bits(data, torch.stack([p[0] for p in parts]))
    assert same_bits(scales, torch.cat([p[1] for p in parts]))


def test_column_tiles_folded_over_grid_y_and_z(monkeypatch):
    """With the grid's y size capped at 3 (CUDA's cap is 65535, which one axis of column tiles
    passed beyond 8,388,480 columns), mxfp8, nvfp4 (its amax pass, 2-D blocks and RHT) and the
    per-matrix amax fold their column tiles over y and z, the last z slice holding programs
    past the last tile: the same bits as the reference; every column tile written."""
    monkeypatch.setattr(launch, "MAX_GRID_YZ", 3)
    assert launch.rows_cols_grid(2, 7) == (2, 3, 3) and launch.rows_cols_grid(2, 3) == (2, 3, 1)
    x = mixed(40, 7 * 128, 32, seed=13, log2_range=40)          # 7 column tiles of 128
    data, scales = launch.mxfp8(_to_dev(x), False)
    rdata, rscales = reference.quantize_mxfp8(x)
    assert same_bits(data.cpu(), rdata) and same_bits(scales.cpu(), rscales)
    x[5, 7 * 128 - 1] = 1e30                                       # the amax in the last tile
    data, scales, amax = launch.nvfp4(_to_dev(x), None, True, True, None, False)
    rdata, rscales, ramax = reference.quantize_nvfp4(x, None, True, True)
    assert same_bits(data.cpu(), rdata) and same_bits(scales.cpu(), rscales) and same_bits(amax.cpu(), ramax)
    n = 5 * launch.BATCH_AMAX_BLOCK                               # 5 partials a matrix
    batch = mixed(2 * 8, n // 8, 8, seed=14, log2_range=12).reshape(2, 8, n // 8)
    batch[1, 7, n // 8 - 1] = -1e30
    want = torch.stack([reference.tensor_amax(m) for m in batch])
    assert same_bits(launch.batch_amax(_to_dev(batch)).cpu(), want)


def test_deterministic():
    x = _to_dev(mixed(70, 128, 16, seed=8, log2_range=12))
    runs = [launch.nvfp4(x, None, False, True, None, True) for _ in range(2)]
    assert all(same_bits(a, b) for a, b in zip(*runs))
    runs = [launch.fp8_block(x, (1, 128), False) for _ in range(2)]
    assert all(same_bits(a, b) for a, b in zip(*runs))


# ---------------------------------------------------------------------------------------------
# Compiled for sm_90 (no GPU needed)

_SM90_COMPILE = r'''
import itertools, json, re
from sm90_helpers import compile_sm90
from tilefuse.quant import kernels as K, launch as L

X = {"x_ptr": "*bf16", "n_rows": "i32", "n_cols": "i32", "x_stride_r": "i32", "x_stride_c": "i32"}
out = {}

def build(name, fn, sig, constexprs, warps, divisible=()):
    sig = {k: v for k, v in sig.items() if k not in constexprs}
    c, usage = compile_sm90(fn, sig, constexprs, num_warps=warps, divisible=divisible, **L._COMPILE)
    ptx = c.asm["ptx"]
    out[name] = {**usage, "fma": len(re.findall(r"\bfma\.", ptx)),
                 "approx_div": len(re.findall(r"div\.(approx|full)", ptx))}

fp8 = {**X, "data_ptr": "*u8", "scale_ptr": "*fp32", "batch_rows": "i32", "x_stride_b": "i32", "out_rows": "i32",
       "data2_ptr": "*u8", "scale2_ptr": "*fp32", "out2_rows": "i32",
       **{f"{a}_stride_{b}": "i32" for a in "ds" for b in "brc"},
       **{f"{a}2_stride_{b}": "i32" for a in "ds" for b in "rc"}, "rows_ptr": "*i32", "n_blocks": "i32"}
# As a launch specialises a contiguous x (its column stride 1), 16-byte aligned buffers and
# 16-divisible sizes: the data and scales in the row-major layout, the second copy transposed.
unit = {"x_stride_c": 1, "d_stride_c": 1, "s_stride_c": 1, "d2_stride_r": 1, "s2_stride_r": 1}
aligned = ["x_ptr", "data_ptr", "scale_ptr", "data2_ptr", "scale2_ptr", "n_cols", "x_stride_r", "x_stride_b",
           "batch_rows", "out_rows", "d_stride_b", "d_stride_r", "d2_stride_c"]
for (br, bc), pow2, second in itertools.product(((1, 128), (128, 128), (128, 1)), (False, True), (False, True)):
    bm, bk, w = L.FP8_TILES[(br, bc)]
    build(f"fp8-{br}x{bc}-pow2{pow2}-second{second}", K.fp8_block_kernel, fp8,
          {"BLOCK_ROWS": br, "BLOCK_COLS": bc, "POW2": pow2, "SECOND": second, "SECOND_ROWS": br,
           "SECOND_COLS": bc, "BATCHED": second, "BLOCK_M": bm, "BLOCK_K": bk, "GROUPED": False, **unit}, w,
          aligned)
# fp8_block_rows_cols: 1x128 blocks row-major with transposed scales, 128x1 blocks written
# transposed with row-major scales.
bm, bk, w = L.FP8_ROWS_COLS_TILE
for pow2, grouped in itertools.product((False, True), (False, True)):
    build(f"fp8-rows-cols-pow2{pow2}-grouped{grouped}", K.fp8_block_kernel, fp8,
          {"BLOCK_ROWS": 1, "BLOCK_COLS": 128, "POW2": pow2, "SECOND": True, "SECOND_ROWS": 128, "SECOND_COLS": 1,
           "BATCHED": False, "BLOCK_M": bm, "BLOCK_K": bk, "GROUPED": grouped, "x_stride_c": 1, "d_stride_c": 1,
           "s_stride_r": 1, "d2_stride_r": 1, "s2_stride_c": 1}, w,
          ["x_ptr", "data_ptr", "scale_ptr", "data2_ptr", "scale2_ptr", "n_cols", "x_stride_r", "d_stride_r",
           "d2_stride_c", "s2_stride_r"])
# grouped_glu_mlp's column-wise copy alone (dz's), grouped by expert
bm, bk, w = L.FP8_128x1_TILE
build("fp8-128x1-grouped", K.fp8_block_kernel, fp8,
      {"BLOCK_ROWS": 128, "BLOCK_COLS": 1, "POW2": False, "SECOND": False, "SECOND_ROWS": 128, "SECOND_COLS": 1,
       "BATCHED": False, "BLOCK_M": bm, "BLOCK_K": bk, "GROUPED": True, "x_stride_c": 1, "d_stride_r": 1,
       "s_stride_c": 1}, w, ["x_ptr", "data_ptr", "scale_ptr", "n_cols", "x_stride_r", "d_stride_c", "s_stride_r"])
# the grouped layout's block table those copies read (one program a block, one warp)
build("group-table", K.group_table_kernel, {"counts_ptr": "*i32", "n_groups": "i32", "n_rows": "i32",
      "table_ptr": "*i32"}, {"BLOCK": 128, "CHUNK": 128}, 1)
bm, bk, w = L.MXFP8_TILE
build("mxfp8-swz", K.mxfp8_kernel, {**X, "data_ptr": "*u8", "scale_ptr": "*u8", "padded_cols": "i32"},
      {"SWIZZLE": True, "BLOCK_M": bm, "BLOCK_K": bk}, w)
bm, bk, w = L.AMAX_TILE
build("amax-rht", K.amax_partial_kernel, {**X, "partial_ptr": "*fp32"},
      {"RHT": True, "BLOCK_M": bm, "BLOCK_K": bk}, w)
build("amax-final", K.amax_finalize_kernel, {"partial_ptr": "*fp32", "amax_ptr": "*fp32",
      "n_partials": "i32"}, {"BLOCK": 1024}, 4)
nv = {**X, "amax_ptr": "*fp32", "rand_ptr": "*i32", "data_ptr": "*u8", "scale_ptr": "*u8",
      "rand_stride_r": "i32", "rand_stride_c": "i32", "padded_cols": "i32", "batch_rows": "i32", "x_stride_b": "i32",
      "batch_scale_rows": "i32"}
bm, bk, w = L.NVFP4_TILE
for br, rht, sr, swz in ((1, False, False, False), (1, False, True, True), (16, True, True, True),
                         (16, False, False, False)):
    build(f"nvfp4-{br}-rht{rht}-sr{sr}-swz{swz}", K.nvfp4_kernel, nv,
          {"BLOCK_ROWS": br, "RHT": rht, "STOCHASTIC": sr, "SWIZZLE": swz, "BLOCK_M": bm, "BLOCK_K": bk}, w)
print(json.dumps(out))
'''


@pytest.mark.skipif(not nvidia_compiler_available(), reason="Triton's NVIDIA backend (ptxas) is not installed")
@pytest.mark.parametrize("ptxas", PTXAS)
def test_kernels_compile_for_sm90(ptxas):
    """Every kernel builds for sm_90 (the interpreter does not catch compile-only errors, e.g. a
    NaN constexpr global), with no register spills (stack 0), no FMA contraction and no
    approximate division."""
    report = run_compile_script(_SM90_COMPILE, timeout=600, ptxas=ptxas)
    for name, r in report.items():
        assert r["stack"] == 0 and r["fma"] == 0 and r["approx_div"] == 0, (name, r)
