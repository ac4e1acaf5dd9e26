"""so2_mixing_stack's composition route for the backward: the relay's own pointwise kernels (the
head, sigma and pointwise kernels of kernels.py) with every layer GEMM on cuBLAS batched GEMMs
(``torch.baddbmm``, batch over the F focus streams), instead of tilefuse's so2_gemm_kernel.

It is what a skilled user writes around the relay's pointwise work without tilefuse's GEMMs:
one of the backward routes the tuning family times against the relay (tune.py; the choice
``So2Config(compose=True)``), so that a key keeps the relay only where the relay is faster.

Per gated layer, as the relay: sigma and (gz, gq) by the relay's kernels, then

    g_cur[..., :M0] += gz[..., :M0] @ W0^T      g_cur[..., :M0].baddbmm_(...)
    g_cur[..., M0:] += gz[..., M0:] @ W1^T      g_cur[..., M0:].baddbmm_(...)

(g_cur, the backward's own buffer, becomes the next layer's g), where the operands are column
slices of (F, E, ROW) tensors, read and written in place by cuBLAS through their row stride
(no copies), and W^T the contiguous copies launch.backward makes. The final layer's GEMM,
g_cur = g + g @ W^T, reads g as its product's operand, so it goes into a new buffer
(``torch.baddbmm(out=)``, which copies g there first).

Precision: the GEMMs run in IEEE float32 whatever ``torch.backends.cuda.matmul.allow_tf32``,
``torch.set_float32_matmul_precision`` or an autocast region say outside (``ieee_matmul`` sets
IEEE and turns autocast off around them, then restores the caller's settings), so the route is
an exact path like the relay; its sums are ordered by cuBLAS, not by the relay's K walk, so it
equals the relay within the op's fp32 tolerance, not bitwise (tune.compose_mismatches).
"""

from __future__ import annotations

import torch

from ... import launches
from ...utils import ieee_matmul
from .reference import So2Dims


def gemm_t(a, w0t, w1t, res, out, d: So2Dims) -> None:
    """out = res + [a_m0 @ w0t | a_m1 @ w1t] (both column segments) with cuBLAS, in place into
    ``out``'s column slices (launch._gemm_t for the composition route). With ``out is res`` (a
    gated layer's g_cur, read by nothing after its GEMM) the products accumulate onto res:
    ``baddbmm(res, ..., out=out)`` into another tensor first copies res into out, a read and a
    write of the whole surface a segment (8 copies, 2.5 ms of a 75 ms step at (65536, 6, 96):
    results/2026-12-06-h200-aw run 4); the GEMM is the same, beta = 1 onto the same values."""
    with ieee_matmul(a.device.type):
        for start, stop, wt in ((0, d.m0, w0t), (d.m0, d.row, w1t)):
            if out is res:
                out[..., start:stop].baddbmm_(a[..., start:stop], wt)
            else:
                torch.baddbmm(res[..., start:stop], a[..., start:stop], wt, out=out[..., start:stop])
    launches.record("so2_bwd_compose_gemm")
