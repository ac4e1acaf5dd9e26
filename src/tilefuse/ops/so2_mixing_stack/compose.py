"""so2_mixing_stack's composition route: the relay's own pointwise kernels (the head, sigma and
pointwise kernels of kernels.py; the forward's gate kernel) with every layer GEMM on cuBLAS
batched GEMMs (``torch.bmm`` / ``torch.baddbmm``, batch over the F focus streams), instead of
tilefuse's so2_gemm_kernel, whose epilogues (the gate, the final alpha and edge-major store)
become one torch element-wise op each. Backward first; the forward's below (``gated_layer``,
``final``).

It is what a skilled user writes around the relay's pointwise work without tilefuse's GEMMs:
one of the routes the tuning family times against the relay, at backward keys and float32
forward keys (tune.py; the choice ``So2Config(compose=True)``), so that a key keeps the relay
only where the relay is faster.

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
    gated layer's g_cur, read by nothing after its GEMM) the products accumulate onto res in
    place; ``baddbmm(res, ..., out=out)`` into another tensor first copies res into out, a read
    and a write of the whole surface a segment (about 0.3 ms each at (65536, 6, 96) on the
    H100: results/2026-12-06-h200-aw run 4). The GEMM is the same either way, beta = 1 onto the
    same values."""
    with ieee_matmul(a.device.type):
        for start, stop, wt in ((0, d.m0, w0t), (d.m0, d.row, w1t)):
            if out is res:
                out[..., start:stop].baddbmm_(a[..., start:stop], wt)
            else:
                torch.baddbmm(res[..., start:stop], a[..., start:stop], wt, out=out[..., start:stop])
    launches.record("so2_bwd_compose_gemm")


# The forward (float32 keys: tune.So2Family.candidates). Where the FMA-bound layer GEMMs are
# faster on cuBLAS than in so2_gemm_kernel (at lmax 6: 29.0 against 33.5 ms for a step's six,
# results/2026-12-06-h200-aw run 4) that outweighs the epilogues' extra passes: the gate reads
# z back (one surface a gated layer) and the final layer's alpha is a pass of its own.

def gated_layer(u, w0, w1, z, u_next, sigma, d: So2Dims) -> None:
    """One gated layer after the gate kernel (which wrote z[..., :Cf], u_next[..., :Cf] and
    sigma (F, E, LG) float32): z[..., Cf:] = u @ W on the columns the gate kernel left (the m = 0
    block's past Cf, the |m| = 1 block), then u_next[..., Cf:] = u + z * sigma[(n - Cf) % LG]:
    the columns past Cf are three stripes of LG, each gated by sigma's LG columns. w0, w1 this
    layer's (F, M, M); everything in float32 (IEEE GEMMs: ``ieee_matmul``)."""
    cf, lg = d.focus_dim, d.lg
    with ieee_matmul(u.device.type):
        torch.bmm(u[..., :d.m0], w0[..., cf:], out=z[..., cf:d.m0])
        torch.bmm(u[..., d.m0:], w1, out=z[..., d.m0:])
        stripes = (*u.shape[:2], 3, lg)
        torch.addcmul(u[..., cf:].view(stripes), z[..., cf:].view(stripes), sigma.unsqueeze(2),
                      out=u_next[..., cf:].view(stripes))
    launches.record("so2_fwd_compose_gemm")


def final(u, w0, w1, alpha, x_local, d: So2Dims, apply_alpha: bool) -> None:
    """The final layer: x_local (E, F, ROW) edge-major = (u + [u_m0 @ W0 | u_m1 @ W1]) * alpha
    (alpha (E, F) where ``apply_alpha``). cuBLAS writes each segment straight into x_local read
    as (F, E, ROW) (batch stride ROW, row stride F * ROW), alpha then scales it in place."""
    xt = x_local.transpose(0, 1)
    with ieee_matmul(u.device.type):
        for start, stop, w in ((0, d.m0, w0), (d.m0, d.row, w1)):
            torch.baddbmm(u[..., start:stop], u[..., start:stop], w, out=xt[..., start:stop])
        if apply_alpha:
            x_local.mul_(alpha.unsqueeze(-1))
    launches.record("so2_fwd_compose_gemm")
