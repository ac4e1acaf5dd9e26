"""@triton.jit helpers shared by the op families' kernels.

Under Triton's interpreter (the CPU test path) some conversions differ from the GPU's; the
helpers here give CPU tests the GPU's results. Each difference is a named workaround:
- the interpreter converts float32 -> bfloat16 by truncation where the GPU rounds to nearest
  even, so to_output rounds explicitly under the interpreter;
- the interpreter computes tl.dot on bfloat16 operands wrongly (it reinterprets their bits),
  so dot_f32acc upcasts them to float32 there (bf16 x bf16 products are exact in float32);
- the interpreter's float tl.dot sums in an order that depends on numpy's BLAS and the CPU, so
  importing this module under the interpreter installs interpreter_dot's fixed-order dot.
Compiled kernels take the plain paths.
"""

import triton
import triton.language as tl

from ..policy import interpreter_enabled
from . import interpreter_dot

INTERPRETER = tl.constexpr(interpreter_enabled())
if INTERPRETER:
    interpreter_dot.install()


@triton.jit
def sigmoid_f32(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def to_output(y, ptr):
    """Convert float32 ``y`` to ``ptr``'s element type, rounding to nearest even."""
    dtype = ptr.dtype.element_ty
    if INTERPRETER and dtype == tl.bfloat16:
        bits = y.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        y = tl.where(y != y, y, bits.to(tl.float32, bitcast=True))
    return y.to(dtype)


@triton.jit
def dot_f32acc(a, b, acc, IEEE: tl.constexpr):
    """acc + a @ b with float32 accumulation; IEEE: no TF32 for float32 operands."""
    if INTERPRETER:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    if IEEE:
        return tl.dot(a, b, acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc)
