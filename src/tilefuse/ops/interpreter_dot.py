"""A fixed-order ``tl.dot`` for Triton's CPU interpreter (the CPU test path).

Triton's interpreter computes ``tl.dot(a, b, acc)`` as ``numpy.matmul(a, b) + acc``. numpy hands
float products to its BLAS, whose summation order depends on the BLAS build, the CPU's kernels
(OpenBLAS picks Haswell, SkylakeX, Zen, ... at run time) and the block of rows it is given: on an
AVX2 CPU a 64-row product is not bitwise equal to the same rows computed 16 at a time. Kernels
that tile the same GEMM differently (the so2 relay and fused backward, or two tile configs of the
tuner) then differ in the last bit on some CPUs and not on others, so a bitwise test in the
interpreter would test the BLAS, not the kernels.

This is a workaround of the interpreter, installed only when kernels run under it
(``TRITON_INTERPRET=1``): float dots accumulate over K in index order, starting from ``acc``, as
the compiled FMA dot does (``acc = fma(a[:, k], b[k, :], acc)`` for k = 0, 1, ...). Each step
forms the exact product in float64 (a float32 x float32 product has at most 48 significant bits)
and rounds ``acc + product`` to acc's dtype: an FMA's single rounding except where the float64 sum
itself was rounded onto a tie. So an output element depends only on its row of ``a``, its column
of ``b`` and ``acc``, never on the tile around it, the tiling of K (when the kernel chains ``acc``
through the dots), the CPU or the BLAS. Elementwise numpy arithmetic is IEEE-exact on every x86
CPU, which is what makes this portable. Integer dots are exact in any order and keep Triton's own
implementation.

It replaces the dot for every kernel the process interprets, not only tilefuse's: the results
are the same products, summed in a documented order. The compiled (GPU) path is untouched; the GPU
tests prove the GPU's bitwise contracts.

The same install also corrects the interpreter's bfloat16 -> float32 cast (``x.to(tl.float32)``
of a bfloat16 tensor), which decodes the 254 subnormal bfloat16 values wrongly (2**-133 to
2**-126 in magnitude: e.g. 8.27e-40 becomes 1.47e-39, 3.67e-40 becomes 0) in Triton 3.6-3.8's
``_convert_float``. The compiled cast is exact (float32 has bfloat16's exponent range), so the
quantizers' bitwise parity with their references held on the GPU but not in the interpreter for
such inputs. The replacement widens the stored bits (``bits << 16``), which is that exact cast.
The other direction, float32 -> bfloat16 (``x.to(tl.bfloat16)``, a store to a bfloat16
pointer), truncates there where the compiled cast rounds to nearest even, and gets bfloat16's
subnormal results wrong besides (1e-39 becomes 4.4e-39, -2**-128 becomes -0): the replacement
rounds the bits (``bfloat16_bits``).
"""

from __future__ import annotations

import numpy as np

_PATCHED_ATTR = "_tilefuse_fixed_order_dot"


def _float_operand(handle, interp):
    """The operand as a float64 array: float8 via Triton's own conversion (as its dot does),
    bfloat16 from its stored bits (the interpreter keeps bfloat16 as uint16)."""
    import triton.language as tl

    data = handle.data
    dtype = handle.dtype.scalar if hasattr(handle.dtype, "scalar") else handle.dtype
    if dtype.primitive_bitwidth == 8 and dtype.is_floating():
        data = interp._convert_float(data, dtype, tl.float16, None).view(np.float16)
    elif dtype == tl.bfloat16:
        data = (data.astype(np.uint32) << 16).view(np.float32)
    return data.astype(np.float64)


def fixed_order_dot(a: np.ndarray, b: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """``acc + a @ b`` over the last two axes, accumulated over K in index order with one rounding
    to acc's dtype per step. a (..., M, K) and b (..., K, N) are float64 (exact), acc (..., M, N)."""
    out = acc.copy()
    step = np.empty(out.shape, dtype=np.float64)
    for k in range(a.shape[-1]):
        np.multiply(a[..., :, k:k + 1], b[..., k:k + 1, :], out=step)
        step += out
        out[...] = step          # rounds to acc's dtype
    return out


def bfloat16_bits(x: np.ndarray) -> np.ndarray:
    """float32 x rounded to bfloat16 as the compiled cast does (to nearest, ties to even;
    subnormals kept, overflow to infinity), as the uint16 bits the interpreter keeps bfloat16
    in. A NaN stays a NaN of its sign (quieted; the GPU's payload may differ)."""
    bits = x.view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
    quiet_nan = (bits >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(np.isnan(x), quiet_nan, rounded).astype(np.uint16)


def _install_cast(interp, builder) -> bool:
    """Replace ``InterpreterBuilder.cast_impl`` by one whose bfloat16 -> float32 cast widens the
    bits and whose float32 -> bfloat16 cast rounds to nearest even (module docstring); every
    other cast is the original's."""
    import triton.language as tl

    original = getattr(builder, "cast_impl", None)
    if original is None:
        return False
    if getattr(original, _PATCHED_ATTR, False):
        return True

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.bfloat16 and dst_type.scalar == tl.float32:
            bits = np.asarray(src.data).view(np.uint16)
            return interp.TensorHandle((bits.astype(np.uint32) << 16).view(np.float32), dst_type.scalar)
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return interp.TensorHandle(bfloat16_bits(np.asarray(src.data, dtype=np.float32)), dst_type.scalar)
        return original(self, src, dst_type)

    setattr(cast_impl, _PATCHED_ATTR, True)
    builder.cast_impl = cast_impl
    return True


def install() -> bool:
    """Replace the interpreter's float ``tl.dot`` by :func:`fixed_order_dot` and its casts between
    bfloat16 and float32 by the compiled ones (idempotent). Returns False where this Triton's interpreter
    has no ``InterpreterBuilder.create_dot`` or ``cast_impl`` to replace
    (tests/test_interpreter_dot.py fails there, so a Triton upgrade cannot drop it silently)."""
    from triton.runtime import interpreter as interp

    builder = getattr(interp, "InterpreterBuilder", None)
    if not _install_cast(interp, builder):
        return False
    original = getattr(builder, "create_dot", None)
    if original is None:
        return False
    if getattr(original, _PATCHED_ATTR, False):
        return True

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if not np.issubdtype(d.data.dtype, np.floating):
            return original(self, a, b, d, input_precision, max_num_imprecise_acc)
        result = fixed_order_dot(_float_operand(a, interp), _float_operand(b, interp), d.data)
        return interp.TensorHandle(result, d.dtype.scalar)

    setattr(create_dot, _PATCHED_ATTR, True)
    create_dot.__doc__ = __doc__
    builder.create_dot = create_dot
    return True


def installed() -> bool:
    from triton.runtime import interpreter as interp

    builder = getattr(interp, "InterpreterBuilder", None)
    return all(getattr(getattr(builder, name, None), _PATCHED_ATTR, False) for name in ("create_dot", "cast_impl"))
