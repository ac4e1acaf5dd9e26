"""The interpreter's tl.dot is fixed-order (ops/interpreter_dot.py): an output element is the
same whatever the tile around it, the tiling of K, the CPU or numpy's BLAS. The bitwise tests of
the CPU suite (so2 relay == fused, the tuner's tile sweeps) rely on it."""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from tilefuse import policy
from tilefuse.ops import interpreter_dot, triton_common  # noqa: F401  (importing installs it)

pytestmark = pytest.mark.skipif(not policy.interpreter_enabled(), reason="checks Triton's CPU interpreter")


@triton.jit
def _tiled_matmul(a_ptr, b_ptr, c_ptr, M, N, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in tl.static_range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rows[:, None] * K + ks[None, :], mask=rows[:, None] < M, other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + cols[None, :], mask=cols[None, :] < N, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


def _run(a, b, block_m, block_n, block_k):
    M, K = a.shape
    N = b.shape[1]
    c = torch.full((M, N), float("nan"))
    _tiled_matmul[(triton.cdiv(M, block_m), triton.cdiv(N, block_n))](a, b, c, M, N, K, block_m, block_n, block_k)
    return c


def test_installed_under_the_interpreter():
    assert interpreter_dot.installed()


def test_dot_is_independent_of_the_tiling_of_rows_columns_and_k():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 64, generator=g)
    b = torch.randn(64, 48, generator=g)
    ref = _run(a, b, 64, 16, 64)
    assert not ref.isnan().any()
    # Taller / shorter row tiles, other column tiles, K in chunks with acc chained through the
    # dots: numpy's matmul + acc gives different last bits for the K chunks on every CPU, and
    # for the row tiles on some (AVX2 OpenBLAS kernels).
    for bm, bn, bk in [(16, 16, 64), (32, 32, 64), (64, 16, 16), (16, 32, 32), (32, 16, 16)]:
        assert torch.equal(_run(a, b, bm, bn, bk), ref), (bm, bn, bk)
    exact = (a.double() @ b.double()).float()
    torch.testing.assert_close(ref, exact, rtol=0, atol=64 * 2**-23 * (a.abs() @ b.abs()).max().item())


def test_fixed_order_dot_is_sequential_fma_from_the_accumulator():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 5, 7)).astype(np.float32)
    b = rng.standard_normal((2, 7, 3)).astype(np.float32)
    acc = rng.standard_normal((2, 5, 3)).astype(np.float32)
    got = interpreter_dot.fixed_order_dot(a.astype(np.float64), b.astype(np.float64), acc)
    assert got.dtype == np.float32
    want = acc.copy()
    for k in range(7):     # one rounding per step, from the exact product: an FMA chain
        want = (want.astype(np.float64) + a[:, :, k, None].astype(np.float64) * b[:, None, k, :]).astype(np.float32)
    assert np.array_equal(got, want)
    assert np.array_equal(acc, acc.copy())    # acc is not written


@triton.jit
def _bf16_dot(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    a = tl.load(a_ptr + i[:, None] * N + i[None, :])
    b = tl.load(b_ptr + i[:, None] * N + i[None, :])
    acc = tl.dot(a, b, tl.zeros((N, N), dtype=tl.float32))
    tl.store(c_ptr + i[:, None] * N + i[None, :], acc)


def test_bfloat16_and_float16_operands_are_decoded():
    g = torch.Generator().manual_seed(2)
    for dtype in (torch.bfloat16, torch.float16):
        a = torch.randn(16, 16, generator=g).to(dtype)
        b = torch.randn(16, 16, generator=g).to(dtype)
        c = torch.full((16, 16), float("nan"))
        _bf16_dot[(1,)](a, b, c, 16)
        exact = a.double() @ b.double()
        torch.testing.assert_close(c.double(), exact, rtol=0, atol=16 * 2**-23 * (a.double().abs() @ b.double().abs()).max().item())


@triton.jit
def _widen(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n).to(tl.float32), mask=offs < n)


def test_bfloat16_to_float32_cast_is_exact_for_every_bit_pattern():
    """All 65,536 bfloat16 values cast to float32 in a kernel equal torch's exact cast, bit for
    bit, the 254 subnormal ones included (ops/interpreter_dot.py's cast; the quantizers'
    bitwise parity with their references rests on it in the interpreter)."""
    bits = torch.arange(-2 ** 15, 2 ** 15, dtype=torch.int32).to(torch.int16)
    x = bits.view(torch.bfloat16)
    y = torch.full((x.numel(),), float("nan"))
    _widen[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), 1024)
    assert torch.equal(y.view(torch.int32), x.float().view(torch.int32))


@triton.jit
def _narrow(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x.to(tl.bfloat16), mask=offs < n)   # an explicit cast
    tl.store(z_ptr + offs, x, mask=offs < n)                   # the store's own


def test_float32_to_bfloat16_cast_rounds_to_nearest_even():
    """float32 -> bfloat16 in a kernel, by ``.to`` and by a store, equals torch's cast (round to
    nearest, ties to even) bit for bit: every float32 of bfloat16's subnormal range and its
    neighbours (the interpreter's own cast gave 1e-39 as 4.4e-39 and -2**-128 as -0), exact
    ties either way, values that round up into the next binade or to infinity, and random bit
    patterns; NaN stays NaN (its payload is not compared: the GPU's canonical NaN differs)."""
    tiny = torch.arange(0, 2 ** 24, 97, dtype=torch.int64).to(torch.int32)   # up to 2**-126 and past
    ties = (torch.arange(0, 2 ** 16, 7, dtype=torch.int32) << 16) | 0x8000
    edges = torch.tensor([0x3F80_7FFF, 0x3F80_8000, 0x3F81_8000, 0x3FFF_FFFF, 0x7F7F_7FFF, 0x7F7F_8000,
                          0x7F7F_FFFF, 0x7F80_0000, 0x0000_8000, 0x0001_8000, 0x007F_FFFF], dtype=torch.int64)
    rand = torch.randint(-2 ** 31, 2 ** 31, (4096,), generator=torch.Generator().manual_seed(0), dtype=torch.int64)
    bits = torch.cat([tiny, ties, edges.to(torch.int32), rand.to(torch.int32)])
    bits = torch.cat([bits, bits | torch.tensor(-2 ** 31, dtype=torch.int32)])   # and their negatives
    x = bits.view(torch.float32)
    finite = ~torch.isnan(x)
    want = x.to(torch.bfloat16)
    for_cast, for_store = (torch.zeros(x.numel(), dtype=torch.bfloat16) for _ in range(2))
    _narrow[(triton.cdiv(x.numel(), 1024),)](x, for_cast, for_store, x.numel(), 1024)
    for got in (for_cast, for_store):
        assert torch.equal(got[finite].view(torch.int16), want[finite].view(torch.int16))
        assert torch.isnan(got[~finite]).all()
    assert (~finite).any()


def test_no_kernel_uses_the_unpatched_scaled_dot():
    """interpreter_dot fixes tl.dot's order, not tl.dot_scaled's (the interpreter still computes
    that with numpy's BLAS, whose order depends on the CPU): a kernel that starts using it
    must patch it first, or the CPU suite's bitwise checks of it would pass on one CPU only."""
    from pathlib import Path
    import tilefuse
    users = [p.name for p in Path(tilefuse.__file__).parent.rglob("*.py") if "dot_scaled" in p.read_text()]
    assert users == [], users
