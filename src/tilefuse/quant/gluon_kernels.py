"""Gluon forms of the quantizers' arithmetic (Hopper), for Gluon kernels that quantize in
their epilogues (grouped_glu_mlp's warp-specialised dGLU writes dz's fp8_block row-wise copy):
operation for operation kernels.py's Triton functions, so the codes and scales are bitwise the
quantizer launches'.

A Gluon column-wise quantizer (fp8_block's grouped 128 x 1 copy and the row-wise copy from one
read, without shared memory for the data, in a tile form and a persistent form with a TMA ring)
was built here and measured bitwise but no faster in the op's step: the tile form 0.90-0.91x
the Triton launches where GPU-bound, the ring's pair 1.15-1.21x the two Triton launches at
shape 1 and 1.00-1.03x at shapes 2-3, the fp8_block step with it 0.99-1.00x (benchmarks/
results/2026-12-07-h200-bf runs 33-35, H100). It left the package; it is readable at dccb6ea.
"""

from __future__ import annotations

from ..ops.gluon_hopper import gl, gluon

if gluon is not None:
    from .formats import E4M3_MAX as _E4M3_MAX_PY
    from .formats import FP32_MAX as _FP32_MAX_PY
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
