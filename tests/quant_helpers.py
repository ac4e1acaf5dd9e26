"""Shared helpers for the quantizer tests: inputs that reach every case of the formulas, and
independent renderings of the roundings (nearest-value tables in float64) to check
tilefuse.quant.reference against."""

import math

import numpy as np
import torch

from tilefuse.quant.formats import E2M1_VALUES

F32_SUBNORMALS = (1e-40, -3e-42, 1.4e-45, -1e-39)
# Exactly representable in bfloat16 (its subnormals: multiples of 2**-133 below 2**-126)
BF16_SUBNORMALS = (2.0 ** -133, -(2.0 ** -127), 5 * 2.0 ** -133, -(127 * 2.0 ** -133))


def e4m3_positive_values() -> torch.Tensor:
    """The 127 finite non-negative float8_e4m3fn values, codes 0x00..0x7E, as float64."""
    return torch.arange(0x7F, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).double()


def nearest_even(v: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """Codes (indices into the ascending non-negative ``grid``) of |v| rounded to the nearest
    grid value, ties to the even code, saturating at the last one. float64 in, int64 out."""
    a = v.double().abs().clamp(max=float(grid[-1]))
    hi = torch.searchsorted(grid, a).clamp(max=len(grid) - 1)
    lo = (hi - 1).clamp(min=0)
    d_lo, d_hi = a - grid[lo], grid[hi] - a
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    return torch.where(pick_hi, hi, lo)


def e4m3_expected(v: torch.Tensor) -> torch.Tensor:
    """uint8 float8_e4m3fn bits of float32 ``v`` (|v| <= 448 or NaN): nearest even, NaN 0x7F."""
    code = nearest_even(v, e4m3_positive_values())
    bits = code | (torch.signbit(v).long() << 7)
    return torch.where(torch.isnan(v), 0x7F, bits).to(torch.uint8)


def e2m1_expected(v: torch.Tensor) -> torch.Tensor:
    """E2M1 codes of float32 ``v`` (|v| <= 6): nearest even, sign bit from v."""
    code = nearest_even(v, torch.tensor(E2M1_VALUES, dtype=torch.float64))
    return code | (torch.signbit(v).long() << 3)


def e8m0_expected(q: float) -> int:
    """The smallest biased exponent e in [0, 254] with 2^(e - 127) >= q (q >= 0 finite)."""
    if q == 0:
        return 0
    m, e = math.frexp(q)           # q = m * 2^e, 0.5 <= m < 1
    need = e - 1 if m == 0.5 else e   # smallest k with 2^k >= q
    return min(254, max(0, need + 127))


def f32_neighbours(values) -> torch.Tensor:
    """Each float32 value and its two float32 neighbours."""
    v = np.asarray(values, dtype=np.float32)
    up = np.nextafter(v, np.float32(np.inf))
    down = np.nextafter(v, np.float32(-np.inf))
    return torch.from_numpy(np.concatenate([v, up, down]))


def e4m3_tie_points() -> torch.Tensor:
    """Every float8_e4m3fn value and every midpoint between neighbours in [0, 448], each with
    its float32 neighbours, both signs (float32)."""
    grid = e4m3_positive_values()
    mids = (grid[1:] + grid[:-1]) / 2
    base = f32_neighbours(torch.cat([grid, mids]).numpy())
    base = base[base.abs() <= 448]
    return torch.cat([base, -base])


def e2m1_tie_points() -> torch.Tensor:
    """Every E2M1 value and midpoint in [0, 6] with float32 neighbours, both signs."""
    grid = np.array(E2M1_VALUES)
    base = f32_neighbours(np.concatenate([grid, (grid[1:] + grid[:-1]) / 2]))
    base = base[base.abs() <= 6]
    return torch.cat([base, -base])


def blocks_with_amax(values: torch.Tensor, block: int, amax: float) -> torch.Tensor:
    """Rows of ``block`` elements: element 0 is ``amax`` (so the block's amax is known exactly),
    the rest are ``values`` in order (padded with zeros). float32 (rows, block)."""
    per_row = block - 1
    n_rows = -(-len(values) // per_row)
    body = torch.zeros(n_rows * per_row, dtype=torch.float32)
    body[:len(values)] = values
    body = body.view(n_rows, per_row)
    return torch.cat([torch.full((n_rows, 1), amax), body], dim=1)


def mixed(rows: int, cols: int, block_cols: int, seed: int, dtype=torch.float32,
          nonfinite: bool = False, log2_range: int = 40) -> torch.Tensor:
    """Random (rows, cols) data reaching every case: per-(row, block) magnitudes 2^U(-r, r),
    zero elements, an all-zero block, subnormal elements (float32 and bfloat16), and with ``nonfinite`` a NaN
    next to a NaN whose sign bit is set, a +inf and a -inf in three different blocks."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.float16:
        log2_range = min(log2_range, 10)
    x = torch.randn(rows, cols, generator=g)
    mag = torch.randint(-log2_range, log2_range + 1, (rows, cols // block_cols), generator=g).float()
    x = x * torch.exp2(mag).repeat_interleave(block_cols, dim=1)
    x[torch.rand(rows, cols, generator=g) < 0.05] = 0.0
    x[0, :block_cols] = 0.0
    if cols >= block_cols + 4 and dtype == torch.float32:
        x[min(1, rows - 1), block_cols:block_cols + 4] = torch.tensor(F32_SUBNORMALS)
    elif cols >= block_cols + 4 and dtype == torch.bfloat16:   # bfloat16 has float32's exponent range
        x[min(1, rows - 1), block_cols:block_cols + 4] = torch.tensor(BF16_SUBNORMALS)
    if nonfinite:
        x[rows // 2, 0] = float("nan")
        x[rows // 2, min(1, cols - 1)] = -float("nan")
        x[rows - 1, cols - 1] = float("inf")
        x[0, cols - 1 - block_cols] = -float("inf")
    return x.to(dtype)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality of two tensors of the same dtype (NaNs included)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return torch.equal(a.contiguous().view(view), b.contiguous().view(view))
