"""tilefuse.quant.reference (plain PyTorch, no kernels) against independent renderings of the
formats: nearest-even tables, the E8M0 "smallest power of two >= q" rule, the Hadamard matrix
in float64, the swizzle byte-offset formula element by element; the non-finite policy;
dequantization within each format's error bound.

Error bounds (per element, v the scaled value, s the applied scale):
- E4M3, round to nearest: |q - v| <= 2^-4 |v| for normal results (3 mantissa bits), <= 2^-10
  below 2^-6 (half the 2^-9 subnormal step). fp8_block's scale 1/enc and product x*enc each
  add one fp32 rounding (2^-24 relative) and the clamp at 448 removes at most that much.
- E2M1: |q - v| <= max(0.25, |v| / 4) (half the grid step, which is <= |v| / 2 above 0.5);
  block scales keep |v| <= 6 / (1 - 2^-4) < 8, so the clamp at 6 stays within |v| / 4 too.
"""

import numpy as np
import pytest
import torch

from tilefuse.quant import reference, swizzle_scales, unswizzle_scales
from tilefuse.quant.formats import FP32_MAX, RHT_SIGNS
from tilefuse.quant.swizzle import padded_shape, swizzled_offset

from quant_helpers import (blocks_with_amax, e2m1_expected, e2m1_tie_points, e4m3_expected,
                           e4m3_tie_points, e8m0_expected, mixed, same_bits)

U32 = 2 ** 32


# ---------------------------------------------------------------------------------------------
# Element conversions


def test_to_e4m3_is_nearest_even_at_every_tie():
    v = e4m3_tie_points()
    assert torch.equal(reference.to_e4m3(v).view(torch.uint8), e4m3_expected(v))


def test_to_e4m3_subnormals_and_nan():
    v = torch.tensor([2 ** -9, 1.5 * 2 ** -9, 2.5 * 2 ** -9, 2 ** -10, 2 ** -10 * 1.0001, 1e-40,
                      -1e-40, 0.0, -0.0, float("nan"), -float("nan")])
    got = reference.to_e4m3(v).view(torch.uint8).tolist()
    assert got == [0x01, 0x02, 0x02, 0x00, 0x01, 0x00, 0x80, 0x00, 0x80, 0x7F, 0x7F]


def test_e8m0_is_the_smallest_power_of_two_not_below_q():
    qs = [0.0, 2.0 ** -149, 2.0 ** -128, 2.0 ** -127, 2.0 ** -127 * (1 + 2 ** -22), 2.0 ** -126,
          2.0 ** -126 * 1.5, 1.0, float(np.nextafter(np.float32(1), np.float32(2))),
          float(np.nextafter(np.float32(1), np.float32(0))), 3.0, 448.0 / 448, 2.0 ** 127,
          2.0 ** 127 * 1.5, FP32_MAX]
    q = torch.tensor(qs, dtype=torch.float32)
    got = reference.e8m0_from_scale(q).tolist()
    assert got == [e8m0_expected(float(v)) for v in q.tolist()]
    special = reference.e8m0_from_scale(torch.tensor([float("nan"), float("inf")])).tolist()
    assert special == [0xFF, 0xFE]


def test_e8m0_random_against_rule():
    g = torch.Generator().manual_seed(3)
    q = torch.exp2(torch.rand(4000, generator=g) * 270 - 150).float()
    got = reference.e8m0_from_scale(q).tolist()
    assert got == [e8m0_expected(float(v)) for v in q.tolist()]


def test_e8m0_reciprocal_and_value_are_exact_powers_of_two():
    e = torch.arange(0, 255)
    assert torch.equal(reference.e8m0_value(e).double(), torch.exp2(e.double() - 127))
    assert torch.equal(reference.e8m0_reciprocal(e).double(), torch.exp2(127 - e.double()))
    assert torch.isnan(reference.e8m0_value(torch.tensor([255]))).all()


def test_e2m1_is_nearest_even_at_every_tie():
    v = e2m1_tie_points()
    assert torch.equal(reference.e2m1_codes(v, v), e2m1_expected(v))


def test_e2m1_spec_thresholds():
    v = torch.tensor([0.25, 0.2500001, 0.7499999, 0.75, 1.25, 1.2500001, 1.7499999, 1.75, 2.5,
                      2.5000002, 3.4999998, 3.5, 5.0, 5.0000005, 6.0])
    mags = [reference.E2M1_VALUES[c] for c in reference.e2m1_codes(v, v).tolist()]
    assert mags == [0, .5, .5, 1, 1, 1.5, 1.5, 2, 2, 3, 3, 4, 4, 6, 6]


def test_e2m1_pack_low_nibble_first_and_round_trip():
    codes = torch.arange(16).repeat(3, 1)
    packed = reference.pack_e2m1(codes)
    assert packed[0, 0].item() == 0x10 and packed[0, 7].item() == 0xFE
    assert torch.equal(reference.unpack_e2m1(packed), codes)


def test_stochastic_rounding_rule():
    v = torch.tensor([0.1, 0.5, 0.7, 2.2, 4.5, 5.9, 6.0, 0.0, -1.2, -3.9])
    lo = torch.tensor([0, 1, 1, 4, 6, 6, 7, 0, 2, 5])        # codes of the grid point below
    on_grid = torch.tensor([False, True, False, False, False, False, True, True, False, False])
    zeros = torch.zeros(v.shape, dtype=torch.int64).to(torch.uint32)
    ones = torch.full(v.shape, U32 - 1, dtype=torch.int64).to(torch.uint32)
    sign = (v < 0).long() << 3
    assert torch.equal(reference.e2m1_codes_stochastic(v, v, zeros), (lo + (~on_grid).long()) | sign)
    assert torch.equal(reference.e2m1_codes_stochastic(v, v, ones), lo | sign)
    # At the threshold: t = 0.25 exactly -> floor(t 2^32) = 2^30; bits 2^30 - 1 rounds up, 2^30 not.
    v = torch.tensor([1.125, 1.125])
    bits = torch.tensor([2 ** 30 - 1, 2 ** 30]).to(torch.uint32)
    assert reference.e2m1_codes_stochastic(v, v, bits).tolist() == [3, 2]


def test_stochastic_rounding_is_unbiased():
    g = torch.Generator().manual_seed(5)
    v = torch.tensor([0.1, 0.6, 1.3, 2.75, 4.5, -5.2]).repeat(20000, 1)
    bits = torch.randint(0, U32, v.shape, generator=g, dtype=torch.int64).to(torch.uint32)
    q = reference.e2m1_decode(reference.e2m1_codes_stochastic(v, v, bits))
    # each draw errs by at most the grid step (<= 2): the mean of 20000 is within 5 sigma
    assert torch.allclose(q.mean(dim=0), v[0], atol=5 * 1.0 / 20000 ** 0.5)


# ---------------------------------------------------------------------------------------------
# Hadamard


def _sylvester(n: int) -> torch.Tensor:
    i = torch.arange(n)
    popcount = torch.zeros(n, n, dtype=torch.long)
    both = i[:, None] & i[None, :]
    for bit in range(4):
        popcount += (both >> bit) & 1
    return (1 - 2 * (popcount % 2)).double()


def test_hadamard16_is_te_rht_matrix():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(7, 64, generator=g)
    rht = torch.diag(torch.tensor(RHT_SIGNS, dtype=torch.float64)) @ _sylvester(16) / 4
    want = (x.double().view(7, 4, 16) @ rht).view(7, 64)
    got = reference.hadamard16(x)
    # fp32 butterflies: 4 roundings of sums of <= 16 terms, each <= 2^-24 relative
    assert torch.allclose(got.double(), want, rtol=0, atol=1e-6 * float(x.abs().max()) * 4)
    back = reference.hadamard16(got, inverse=True)
    assert torch.allclose(back, x, atol=1e-6 * float(x.abs().max()) * 8)


# ---------------------------------------------------------------------------------------------
# Swizzle


@pytest.mark.parametrize("rows,cols", [(1, 1), (127, 3), (128, 4), (129, 5), (300, 8), (0, 3), (5, 0)])
def test_swizzle_offsets_element_by_element(rows, cols):
    s = torch.randint(1, 256, (rows, cols), dtype=torch.int32).to(torch.uint8)
    flat = swizzle_scales(s)
    big_r, big_c = padded_shape(rows, cols)
    assert flat.shape == (big_r * big_c,) and flat.dtype == torch.uint8
    written = torch.zeros(flat.shape, dtype=torch.bool)
    for r in range(rows):
        for c in range(cols):
            off = swizzled_offset(r, c, big_c)
            assert flat[off] == s[r, c]
            written[off] = True
    assert (flat[~written] == 0).all()          # padding is zero
    assert torch.equal(unswizzle_scales(flat, rows, cols), s)


def test_swizzle_float8_round_trip():
    s = torch.randn(200, 6).to(torch.float8_e4m3fn)
    assert same_bits(unswizzle_scales(swizzle_scales(s), 200, 6), s)


def test_unswizzle_checks_size():
    with pytest.raises(ValueError, match="flat"):
        unswizzle_scales(torch.zeros(100, dtype=torch.uint8), 3, 3)
    with pytest.raises(TypeError, match="rows"):
        unswizzle_scales(torch.zeros(512, dtype=torch.uint8), 3.0, 3)


# ---------------------------------------------------------------------------------------------
# Quantizers: ties, zeros, poisoning, bounds


@pytest.mark.parametrize("k", [-20, 0, 17])
@pytest.mark.parametrize("pow2", [False, True])
def test_fp8_block_ties(k, pow2):
    # amax = 448 * 2^k: enc = 2^-k exactly (both scale modes), so v = x * 2^-k exactly
    ties = e4m3_tie_points()
    x = blocks_with_amax(ties * 2.0 ** k, 128, 448 * 2.0 ** k)
    data, scales = reference.quantize_fp8_block(x, (1, 128), pow2)
    assert torch.equal(scales, torch.full_like(scales, 2.0 ** k))
    assert torch.equal(data.view(torch.uint8), e4m3_expected(x * 2.0 ** -k))


@pytest.mark.parametrize("k", [-30, 0, 25])
def test_mxfp8_ties(k):
    ties = e4m3_tie_points()
    x = blocks_with_amax(ties * 2.0 ** k, 32, 448 * 2.0 ** k)
    data, scales = reference.quantize_mxfp8(x)
    assert (scales == 127 + k).all()
    assert torch.equal(data.view(torch.uint8), e4m3_expected(x * 2.0 ** -k))


@pytest.mark.parametrize("j,m", [(0, 0), (10, 3), (-12, -15)])
def test_nvfp4_ties(j, m):
    # amax = 2688 * 2^j: S_enc = 2^-j; block amax 6 * 2^m: s_blk = 2^(m - j) exactly (6 times
    # fp32(1/6) rounds to 1), enc = 2^-m, so v = x * 2^-m exactly
    ties = e2m1_tie_points()
    x = blocks_with_amax(ties * 2.0 ** m, 16, 6 * 2.0 ** m)
    data, scales, amax = reference.quantize_nvfp4(x, torch.tensor(2688 * 2.0 ** j))
    assert torch.equal(scales.float(), torch.full(scales.shape, 2.0 ** (m - j)))
    assert torch.equal(reference.unpack_e2m1(data), e2m1_expected(x * 2.0 ** -m))


def test_zero_input_and_zero_amax():
    x = torch.zeros(3, 128)
    data, scales = reference.quantize_fp8_block(x)
    assert (data.float() == 0).all() and (scales == 1).all()
    data, scales = reference.quantize_mxfp8(x)
    assert (data.float() == 0).all() and (scales == 0).all()
    data, scales, amax = reference.quantize_nvfp4(x)
    assert amax.item() == 0 and (data == 0).all() and (scales.float() == 0).all()
    assert (reference.dequantize_nvfp4(data, scales, amax, False, False) == 0).all()


def test_tiny_global_amax_keeps_zero_blocks_finite():
    # 2688 / 1e-37 overflows: S_enc saturates at fp32max (Transformer Engine's rule), so the
    # all-zero block gets scale 0 rather than 0 * inf = NaN
    x = torch.zeros(1, 32)
    x[0, 0] = 1e-37
    data, scales, amax = reference.quantize_nvfp4(x)
    assert not torch.isnan(scales.float()).any()
    assert scales.float()[0, 1] == 0


@pytest.mark.parametrize("fmt", ["fp8_1x128", "fp8_128x128", "mxfp8", "nvfp4", "nvfp4_2d"])
def test_nonfinite_poisons_its_block(fmt):
    x = torch.randn(32, 256)
    x[3, 5] = float("nan")
    x[20, 200] = float("inf")
    x[31, 100] = -float("inf")
    bad_elems = [(3, 5), (20, 200), (31, 100)]
    if fmt.startswith("fp8"):
        block = (128, 128) if fmt == "fp8_128x128" else (1, 128)
        data, scales = reference.quantize_fp8_block(x, block)
        deq = reference.dequantize_fp8_block(data, scales, block)
        br, bc = block
        nan_scale = torch.isnan(scales)
        f32 = scales.view(torch.int32)[nan_scale]
        assert (f32 == 0x7FC00000).all()
        assert (data.view(torch.uint8)[torch.isnan(data.float())] == 0x7F).all()
    elif fmt == "mxfp8":
        data, scales = reference.quantize_mxfp8(x)
        deq = reference.dequantize_mxfp8(data, scales)
        br, bc = 1, 32
        nan_scale = scales == 0xFF
    else:
        block_2d = fmt == "nvfp4_2d"
        amax = torch.tensor(10.0)          # given, finite: only the poisoned blocks turn NaN
        data, scales, _ = reference.quantize_nvfp4(x, amax, block_2d)
        deq = reference.dequantize_nvfp4(data, scales, amax, block_2d, False)
        br, bc = (16 if block_2d else 1), 16
        nan_scale = torch.isnan(scales.float())
        assert (scales.view(torch.uint8)[nan_scale] == 0x7F).all()
    want = torch.zeros_like(nan_scale)
    for r, c in bad_elems:
        want[r // br, c // bc] = True
    assert torch.equal(nan_scale, want)
    nan_elems = reference.expand_blocks(want, br, bc, x.shape[0])
    assert torch.equal(torch.isnan(deq), nan_elems)


def test_nvfp4_computed_amax_is_nan_with_a_nonfinite_element():
    x = torch.randn(4, 32)
    x[1, 1] = float("inf")
    data, scales, amax = reference.quantize_nvfp4(x)
    assert amax.view(torch.int32).item() == 0x7FC00000
    assert torch.isnan(reference.dequantize_nvfp4(data, scales, amax, False, False)).all()


def _fp8_bound(x, scale_per_elem):
    return x.abs() * (2 ** -4) * (1 + 2 ** -20) + scale_per_elem * 2 ** -10 * (1 + 2 ** -20)


@pytest.mark.parametrize("block", [(1, 128), (128, 128)])
@pytest.mark.parametrize("pow2", [False, True])
def test_fp8_block_dequantize_bound(block, pow2):
    x = mixed(130, 256, 128, seed=11, log2_range=30)
    data, scales = reference.quantize_fp8_block(x, block, pow2)
    deq = reference.dequantize_fp8_block(data, scales, block)
    s = reference.expand_blocks(scales, *block, x.shape[0])
    assert ((deq - x).abs() <= _fp8_bound(x, s)).all()


def test_mxfp8_dequantize_bound():
    x = mixed(67, 320, 32, seed=12, log2_range=60)
    data, scales = reference.quantize_mxfp8(x)
    deq = reference.dequantize_mxfp8(data, scales)
    s = reference.expand_blocks(reference.e8m0_value(scales), 1, 32, x.shape[0])
    assert ((deq - x).abs() <= _fp8_bound(x, s)).all()


def _nvfp4_bound(x, scales, amax, block_2d):
    _, s_dec = reference.nvfp4_global_scales(amax)
    s = reference.expand_blocks(scales.float(), 16 if block_2d else 1, 16, x.shape[0]) * s_dec
    return torch.maximum(0.25 * s, x.abs() / 4) * (1 + 2 ** -20)


@pytest.mark.parametrize("block_2d", [False, True])
def test_nvfp4_dequantize_bound(block_2d):
    # magnitudes within 2^+-6 of each other keep every block scale a normal e4m3 number
    x = mixed(50, 192, 16, seed=13, log2_range=6)
    data, scales, amax = reference.quantize_nvfp4(x, block_2d=block_2d)
    deq = reference.dequantize_nvfp4(data, scales, amax, block_2d, False)
    assert ((deq - x).abs() <= _nvfp4_bound(x, scales, amax, block_2d)).all()


def test_nvfp4_rht_dequantize_bound():
    # the transform is orthogonal per 16-group: the error's 2-norm there is that of the
    # transformed values' errors
    x = mixed(40, 128, 16, seed=14, log2_range=4)
    data, scales, amax = reference.quantize_nvfp4(x, rht=True)
    y = reference.hadamard16(x)
    deq_y = reference.dequantize_nvfp4(data, scales, amax, False, True, undo_rht=False)
    bound_y = _nvfp4_bound(y, scales, amax, False)
    assert ((deq_y - y).abs() <= bound_y).all()
    deq = reference.dequantize_nvfp4(data, scales, amax, False, True)
    err = (deq - x).view(40, 8, 16).norm(dim=-1)
    assert (err <= bound_y.view(40, 8, 16).norm(dim=-1) * (1 + 1e-5) + 1e-30).all()
