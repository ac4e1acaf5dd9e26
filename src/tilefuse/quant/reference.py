"""Plain-PyTorch renderings of the quantization formulas: the semantics the Triton kernels
(kernels.py) reproduce bit for bit, and the path that runs where kernels do not.

Everything is float32 (inputs are upcast exactly), every division is IEEE division, and every
cast to float8_e4m3fn follows a clamp to +-448, so torch's cast (round to nearest even) only
rounds; it never has to saturate (torch versions differ there).

Non-finite inputs: propagated, never checked (a check would need a host sync). A scaling block
that holds a NaN or +-inf is *poisoned*: its block amax is NaN, so its scale is NaN
(fp8_block: float32 NaN; mxfp8: E8M0 0xFF; nvfp4: E4M3 0x7F) and dequantize() gives NaN for
every element of the block. Every NaN this module writes is canonical: float8_e4m3fn 0x7F
(never 0xFF), float32 0x7FC00000; E2M1 has no NaN, so a poisoned nvfp4 block's codes are
+-0 (the sign of the value being quantized, + where that value is itself NaN). With ``amax=None`` nvfp4 computes the
per-tensor amax with the same rule, so one non-finite element poisons the whole tensor.

fp8_block (specs: "fp8_block"; Transformer Engine's Float8BlockScaling rule):
    a = amax(|x|) over the block
    enc = 1 if a == 0 else min(448 / a, fp32max)            (a tiny: 448/a overflows)
    pow2_scales: enc = 2^floor(log2(enc)) (the exponent bits of enc)
    scale = 1 / enc;   data = e4m3(clamp(x * enc, -448, 448))
mxfp8 (Transformer Engine's round-up rule):
    q = a / 448 over 32 elements; e = the biased exponent of q, plus one when q's mantissa is
    non-zero (for subnormal q: plus one when q > 2^-127; never past 0xFE); e = 0xFF for NaN
    data = e4m3(x * 2^(127 - e))   (== x / 2^(e - 127): a power of two in range, so exact)
nvfp4 (the spec's recipe; all fp32):
    S_enc = 1 if amax == 0 else min(2688 / amax, fp32max);  S_dec = 1 / S_enc
    s_blk = e4m3(clamp(amax_blk * (S_enc * f32(1/6)), -448, 448))
    enc = min(1 / (f32(s_blk) * S_dec), fp32max);  v = clamp(x * enc, -6, 6)
    q = E2M1 round-half-even of v, or stochastic rounding (below)
    The min(.., fp32max) on S_enc is Transformer Engine's; the spec is silent when 2688/amax
    overflows (amax < 7.9e-36), where without it an all-zero block gets 0 * inf = NaN.
"""

from __future__ import annotations

import torch

from ..utils import cdiv
from .formats import (E2M1_MAX, E2M1_VALUES, E4M3_MAX, FP32_MAX, MXFP8_BLOCK, NVFP4_BLOCK,
                      NVFP4_GLOBAL, ONE_SIXTH_F32, RHT_SIGNS)

F32_NAN_BITS = 0x7FC00000
E4M3_NAN_BITS = 0x7F
E8M0_NAN = 0xFF


# ---------------------------------------------------------------------------------------------
# Element conversions


def to_e4m3(v: torch.Tensor) -> torch.Tensor:
    """float32 ``v`` (already clamped to +-448, or NaN) -> float8_e4m3fn, round to nearest
    even; NaN -> 0x7F."""
    out = v.to(torch.float8_e4m3fn).view(torch.uint8)
    out = torch.where(torch.isnan(v), torch.full_like(out, E4M3_NAN_BITS), out)
    return out.view(torch.float8_e4m3fn)


def e4m3_to_f32(data: torch.Tensor) -> torch.Tensor:
    """float8_e4m3fn -> float32 (exact; 0x7F/0xFF -> NaN)."""
    return data.to(torch.float32)


def canonical_nan(v: torch.Tensor) -> torch.Tensor:
    """float32 with every NaN replaced by 0x7FC00000 (NaN signs and payloads differ between
    CPUs and GPUs; stored NaNs must not)."""
    return torch.where(torch.isnan(v), torch.full_like(v, float("nan")), v)


def e8m0_from_scale(q: torch.Tensor) -> torch.Tensor:
    """float32 q >= 0 -> biased E8M0 exponent (uint8): Transformer Engine's float_to_e8m0
    (round the exponent up when the mantissa is non-zero, saturating at 0xFE; NaN -> 0xFF)."""
    bits = q.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    exp = (bits >> 23) & 0xFF
    man = bits & 0x7FFFFF
    up = (man > 0) & (exp != 0xFE) & ~((exp == 0) & (man <= 0x400000))
    e = exp + up.to(torch.int64)
    e = torch.where(torch.isinf(q), torch.full_like(e, 0xFE), e)
    e = torch.where(torch.isnan(q), torch.full_like(e, E8M0_NAN), e)
    return e.to(torch.uint8)


def e8m0_reciprocal(e: torch.Tensor) -> torch.Tensor:
    """Biased E8M0 exponent e -> float32 2^(127 - e) (exact for e <= 254; NaN for 0xFF)."""
    e = e.to(torch.int64)
    bits = torch.where(e <= 253, (254 - e) << 23, torch.full_like(e, 0x00400000))
    bits = torch.where(e == E8M0_NAN, torch.full_like(e, F32_NAN_BITS), bits)
    return bits.to(torch.int32).view(torch.float32)


def e8m0_value(e: torch.Tensor) -> torch.Tensor:
    """Biased E8M0 exponent e -> float32 2^(e - 127) (2^-127 is subnormal; 0xFF -> NaN)."""
    e = e.to(torch.int64)
    bits = torch.where(e >= 1, e << 23, torch.full_like(e, 0x00400000))
    bits = torch.where(e == E8M0_NAN, torch.full_like(e, F32_NAN_BITS), bits)
    return bits.to(torch.int32).view(torch.float32)


def e2m1_codes(v: torch.Tensor, sign_of: torch.Tensor) -> torch.Tensor:
    """E2M1 codes (int64, 0..15) of ``v`` (clamped to +-6) with ties to even; the sign bit comes
    from ``sign_of`` (the value being quantized; 0 where that is NaN), NaN v -> magnitude 0."""
    a = v.abs()
    mag = ((a > 0.25).long() + (a >= 0.75).long() + (a > 1.25).long() + (a >= 1.75).long()
           + (a > 2.5).long() + (a >= 3.5).long() + (a > 5.0).long())
    return mag | (_sign_bit(sign_of) << 3)


def e2m1_codes_stochastic(v: torch.Tensor, sign_of: torch.Tensor,
                          bits: torch.Tensor) -> torch.Tensor:
    """Stochastic E2M1 codes of ``v`` (clamped to +-6): |v| lies between grid neighbours
    lo <= |v| < hi (spacing 0.5 below 2, 1 below 4, 2 above); t = (|v| - lo) / (hi - lo) in
    [0, 1) is exact in fp32. Round up to hi iff ``bits < floor(t * 2^32)`` (bits: the uint32
    random word of the element), so P(up) = floor(t * 2^32) / 2^32. NaN -> magnitude 0."""
    a = v.abs()
    lo_code = ((a >= 0.5).long() + (a >= 1.0).long() + (a >= 1.5).long() + (a >= 2.0).long()
               + (a >= 3.0).long() + (a >= 4.0).long() + (a >= 6.0).long())
    grid = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=v.device)
    lo = grid[lo_code]
    inv_step = torch.where(a < 2.0, 2.0, torch.where(a < 4.0, 1.0, 0.5))
    t = (a - lo) * inv_step
    frac = torch.where(torch.isnan(t), torch.zeros_like(t), t * 4294967296.0).to(torch.int64)
    up = (bits.view(torch.int32).to(torch.int64) & 0xFFFFFFFF) < frac
    return (lo_code + up.long()) | (_sign_bit(sign_of) << 3)


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    """E2M1 codes (any integer dtype) -> float32 values."""
    codes = codes.long()
    grid = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=codes.device)
    mag = grid[codes & 7]
    return torch.where((codes & 8) != 0, -mag, mag)


def pack_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """(rows, K) codes -> (rows, K/2) uint8, element 2i in the low nibble."""
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8)


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """(rows, K/2) uint8 -> (rows, K) int64 codes."""
    p = packed.long()
    return torch.stack((p & 0xF, p >> 4), dim=-1).reshape(p.shape[0], 2 * p.shape[1])


def _sign_bit(t: torch.Tensor) -> torch.Tensor:
    """1 where t's sign bit is set, except for NaN (0): a NaN's sign bit after arithmetic
    differs between CPUs and GPUs."""
    return ((t.view(torch.int32) < 0) & ~torch.isnan(t)).long()


# ---------------------------------------------------------------------------------------------
# Blocks


def block_amax(x: torch.Tensor, block_rows: int, block_cols: int) -> torch.Tensor:
    """(cdiv(rows, block_rows), K / block_cols) float32 amax(|x|) per block; a block holding a
    NaN or +-inf gets NaN (poisoned). Rows past the end of a partial last block count as 0."""
    rows, cols = x.shape
    a = x.to(torch.float32).abs()
    a = torch.where(a <= FP32_MAX, a, torch.full_like(a, float("inf")))   # NaN and inf -> inf
    padded_rows = cdiv(rows, block_rows) * block_rows
    if padded_rows != rows:
        a = torch.cat((a, a.new_zeros(padded_rows - rows, cols)))
    a = a.view(padded_rows // block_rows, block_rows, cols // block_cols, block_cols).amax(dim=(1, 3))
    return torch.where(torch.isinf(a), torch.full_like(a, float("nan")), a)


def tensor_amax(x: torch.Tensor) -> torch.Tensor:
    """float32 scalar amax(|x|), NaN if x holds a NaN or +-inf, 0 for an empty x."""
    if x.numel() == 0:
        return torch.zeros((), dtype=torch.float32, device=x.device)
    return block_amax(x.reshape(1, -1), 1, x.numel()).reshape(())


def expand_blocks(s: torch.Tensor, block_rows: int, block_cols: int, rows: int) -> torch.Tensor:
    """(row blocks, col blocks) -> (rows, col blocks * block_cols), each block's value repeated."""
    return s.repeat_interleave(block_rows, dim=0)[:rows].repeat_interleave(block_cols, dim=1)


def ieee_div(num, den) -> torch.Tensor:
    """num / den correctly rounded, elementwise. Not ``num / den`` itself: a Python-number
    numerator makes torch compute den.reciprocal() * num (two roundings), and on CUDA a scalar
    denominator is applied as a multiplication by its reciprocal."""
    like = num if isinstance(num, torch.Tensor) else den
    # A Python number becomes a tensor by a fill on the device, not a host-to-device copy:
    # the recipes call this inside CUDA-graph capture, which refuses pageable copies.
    num = num.to(torch.float32) if isinstance(num, torch.Tensor) else torch.full_like(like, num, dtype=torch.float32)
    den = den.to(torch.float32) if isinstance(den, torch.Tensor) else torch.full_like(like, den, dtype=torch.float32)
    num, den = torch.broadcast_tensors(num, den)
    return torch.div(num.contiguous(), den.contiguous())


def _minimum_fp32max(v: torch.Tensor) -> torch.Tensor:
    return torch.minimum(v, torch.full_like(v, FP32_MAX))   # NaN propagates


# ---------------------------------------------------------------------------------------------
# Random Hadamard transform


def hadamard16(x: torch.Tensor, *, inverse: bool = False) -> torch.Tensor:
    """The 16-point random Hadamard transform along the last dim, in blocks of 16 (float32).

    Forward: y = (1/4) H16 diag(s) x per block, H16 the Sylvester Hadamard matrix
    (H[i, j] = (-1)^popcount(i & j)) and s = formats.RHT_SIGNS (Transformer Engine's
    x @ (diag(s) H16 / 4)). Evaluation order, which the kernel repeats: signs, then radix-2
    butterflies (a, b) -> (a + b, a - b) on element pairs at distance 1, 2, 4, 8, then * 0.25.
    Inverse: x = diag(s) (1/4) H16 y (H16 / 4 is its own inverse).
    """
    rows, cols = x.shape
    signs = torch.tensor(RHT_SIGNS, dtype=torch.float32, device=x.device)
    y = x.to(torch.float32).reshape(rows, cols // 16, 16)
    if not inverse:
        y = y * signs
    for h in (1, 2, 4, 8):
        pairs = y.reshape(rows, cols // 16, 16 // (2 * h), 2, h)
        a, b = pairs[..., 0, :], pairs[..., 1, :]
        y = torch.stack((a + b, a - b), dim=-2).reshape(rows, cols // 16, 16)
    y = y * 0.25
    if inverse:
        y = y * signs
    return y.reshape(rows, cols)


# ---------------------------------------------------------------------------------------------
# Quantizers: compact scales


def quantize_fp8_block(x: torch.Tensor, block: tuple[int, int] = (1, 128),
                       pow2_scales: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (data (rows, K) float8_e4m3fn, scales (cdiv(rows, br), K / bc) float32)."""
    br, bc = block
    rows = x.shape[0]
    x32 = x.to(torch.float32)
    amax = block_amax(x32, br, bc)
    enc = torch.where(amax == 0, torch.ones_like(amax), _minimum_fp32max(ieee_div(E4M3_MAX, amax)))
    if pow2_scales:
        pow2 = (enc.view(torch.int32) & 0x7F800000).view(torch.float32)
        enc = torch.where(torch.isnan(enc), enc, pow2)
    scales = canonical_nan(ieee_div(1.0, enc))
    v = torch.clamp(x32 * expand_blocks(enc, br, bc, rows), -E4M3_MAX, E4M3_MAX)
    return to_e4m3(v), scales


def quantize_mxfp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (data (rows, K) float8_e4m3fn, scales (rows, K / 32) uint8 biased E8M0)."""
    rows = x.shape[0]
    x32 = x.to(torch.float32)
    e = e8m0_from_scale(ieee_div(block_amax(x32, 1, MXFP8_BLOCK), E4M3_MAX))
    v = x32 * expand_blocks(e8m0_reciprocal(e), 1, MXFP8_BLOCK, rows)
    return to_e4m3(v), e


def nvfp4_global_scales(amax: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(S_enc, S_dec) float32 scalars from the per-tensor amax."""
    amax = amax.to(torch.float32)
    s_enc = torch.where(amax == 0, torch.ones_like(amax), _minimum_fp32max(ieee_div(NVFP4_GLOBAL, amax)))
    return s_enc, ieee_div(1.0, s_enc)


def quantize_nvfp4(x: torch.Tensor, amax: torch.Tensor | None = None, block_2d: bool = False,
                   rht: bool = False, stochastic_bits: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """-> (data (rows, K/2) uint8 packed E2M1, scales (rows or cdiv(rows, 16), K/16)
    float8_e4m3fn, amax float32 scalar). With ``rht`` the transformed x is what is quantized
    (and what ``amax``, if given, must describe)."""
    rows = x.shape[0]
    y = hadamard16(x) if rht else x.to(torch.float32)
    amax = tensor_amax(y) if amax is None else amax.to(torch.float32).reshape(())
    s_enc, s_dec = nvfp4_global_scales(amax)
    br = NVFP4_BLOCK if block_2d else 1
    blk = block_amax(y, br, NVFP4_BLOCK)
    s_blk = to_e4m3(torch.clamp(blk * (s_enc * ONE_SIXTH_F32), -E4M3_MAX, E4M3_MAX))
    enc = _minimum_fp32max(ieee_div(1.0, e4m3_to_f32(s_blk) * s_dec))
    v = torch.clamp(y * expand_blocks(enc, br, NVFP4_BLOCK, rows), -E2M1_MAX, E2M1_MAX)
    if stochastic_bits is None:
        codes = e2m1_codes(v, y)
    else:
        codes = e2m1_codes_stochastic(v, y, stochastic_bits)
    return pack_e2m1(codes), s_blk, amax


def nvfp4_scales_per_row(scales: torch.Tensor, rows: int, block_2d: bool) -> torch.Tensor:
    """The (rows, K / 16) scale matrix a 1x16-scaled GEMM reads: 2-D block scales repeated on
    each of their 16 rows."""
    if not block_2d:
        return scales
    return scales.view(torch.uint8).repeat_interleave(NVFP4_BLOCK, dim=0)[:rows].view(scales.dtype)


# ---------------------------------------------------------------------------------------------
# Dequantization (float32)


def _check_scales(fn: str, scales, rows: int, cols: int, block_rows: int, block_cols: int) -> None:
    """ValueError unless ``scales`` is the (cdiv(rows, block_rows), cols / block_cols) matrix of
    (rows, cols) data: expand_blocks would broadcast a single scale row over every row block,
    or drop extra ones, and dequantize to wrong values without a word."""
    want = (-(-rows // block_rows), cols // block_cols)
    if cols % block_cols or tuple(scales.shape) != want:
        raise ValueError(f"{fn}: scales must have shape {want} for data of {rows} x {cols} elements in "
                         f"{block_rows} x {block_cols} blocks, got {tuple(scales.shape)}")


def dequantize_fp8_block(data, scales, block) -> torch.Tensor:
    br, bc = block
    _check_scales("dequantize_fp8_block", scales, data.shape[0], data.shape[1], br, bc)
    return data.to(torch.float32) * expand_blocks(scales, br, bc, data.shape[0])


def dequantize_mxfp8(data, scales) -> torch.Tensor:
    _check_scales("dequantize_mxfp8", scales, data.shape[0], data.shape[1], 1, MXFP8_BLOCK)
    return data.to(torch.float32) * expand_blocks(e8m0_value(scales), 1, MXFP8_BLOCK, data.shape[0])


def dequantize_nvfp4(data, scales, amax, block_2d: bool, rht: bool, undo_rht: bool = True):
    """q * f32(s_blk) * S_dec, evaluated in that order; with ``rht`` and ``undo_rht`` the
    inverse transform follows, giving an approximation of the original x."""
    rows = data.shape[0]
    br = NVFP4_BLOCK if block_2d else 1
    _check_scales("dequantize_nvfp4", scales, rows, 2 * data.shape[1], br, NVFP4_BLOCK)
    _, s_dec = nvfp4_global_scales(amax)
    s = expand_blocks(e4m3_to_f32(scales), br, NVFP4_BLOCK, rows)
    y = e2m1_decode(unpack_e2m1(data)) * s * s_dec
    return hadamard16(y, inverse=True) if (rht and undo_rht) else y
