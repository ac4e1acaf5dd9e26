"""Plain-PyTorch so2_mixing_stack: the semantics (docs/specs/so2_mixing_stack.md).

Used by tests and benchmarks, as the level-0 path, and as the differentiable path for double
backward (force-loss training). Activations are focus-major (F, E, ROW); the output is
edge-major (E, F, ROW).

Column layout of a row (Cf = focus_dim, L = lmax):
    [0, M0)    m = 0 block, sub-tiles l = 0..L (sub-tile 0: the invariant scalars s)
    [M0, ROW)  |m| = 1 block: the m = -1 stripe (L sub-tiles), then the m = +1 stripe
Gate group g (0..L-1) gates sub-tile 1+g of the m = 0 block and sub-tile g of each stripe.
"""

from __future__ import annotations

import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class So2Dims:
    lmax: int
    focus_dim: int

    @property
    def row(self) -> int:
        return (3 * self.lmax + 1) * self.focus_dim

    @property
    def m0(self) -> int:
        return (self.lmax + 1) * self.focus_dim

    @property
    def m1(self) -> int:
        return 2 * self.lmax * self.focus_dim

    @property
    def lg(self) -> int:
        return self.lmax * self.focus_dim


def gate_act(z: torch.Tensor, gw: torch.Tensor, d: So2Dims):
    """act(z) of one gated layer and its gate sigma = sigmoid(s @ gw) (F, E, LG)."""
    cf, m0 = d.focus_dim, d.m0
    s = z[..., :cf]
    sigma = torch.sigmoid(s @ gw)
    act = torch.cat([s * torch.sigmoid(s), z[..., cf:m0] * sigma, z[..., m0:] * torch.cat([sigma, sigma], -1)], -1)
    return act, sigma


def layer_gemm(u: torch.Tensor, w0: torch.Tensor, w1: torch.Tensor, d: So2Dims) -> torch.Tensor:
    """z = [u_m0 @ w0 | u_m1 @ w1] for (F, E, ROW) u and per-focus (F, K, N) weights."""
    return torch.cat([u[..., :d.m0] @ w0, u[..., d.m0:] @ w1], -1)


def layer_gemm_t(g: torch.Tensor, w0: torch.Tensor, w1: torch.Tensor, d: So2Dims) -> torch.Tensor:
    """[g_m0 @ w0^T | g_m1 @ w1^T]: the backward of layer_gemm with respect to u."""
    return torch.cat([g[..., :d.m0] @ w0.transpose(-1, -2), g[..., d.m0:] @ w1.transpose(-1, -2)], -1)


def _stack_forward(u0, alpha, w0_all, w1_all, gw_all, lmax, focus_dim, apply_alpha, save_z):
    """(x_local (E, F, ROW), the gated layers' z (a list, empty without ``save_z``), u_final)."""
    d = So2Dims(lmax, focus_dim)
    u, zs = u0, []
    for layer in range(gw_all.shape[0]):
        z = layer_gemm(u, w0_all[layer], w1_all[layer], d)
        if save_z:
            zs.append(z)
        u = u + gate_act(z, gw_all[layer], d)[0]
    y = u + layer_gemm(u, w0_all[-1], w1_all[-1], d)
    if apply_alpha:
        y = y * alpha.transpose(0, 1).unsqueeze(-1)
    return y.transpose(0, 1), zs, u


def so2_stack_reference(u0, alpha, w0_all, w1_all, gw_all, *, lmax, focus_dim, apply_alpha=True):
    """Differentiable forward (autograd gives every gradient, to any order).

    u0 (F, E, ROW); alpha (E, F); w0_all (NL, F, M0, M0); w1_all (NL, F, M1, M1);
    gw_all (NL-1, F, Cf, LG). Returns x_local (E, F, ROW).
    """
    return _stack_forward(u0, alpha, w0_all, w1_all, gw_all, lmax, focus_dim, apply_alpha, False)[0]


def so2_stack_forward_saving(u0, alpha, w0_all, w1_all, gw_all, *, lmax, focus_dim, apply_alpha=True):
    """Forward that also returns what the relay backward needs: (x_local, z_all (NG, F, E, ROW),
    u_final (F, E, ROW))."""
    x_local, zs, u = _stack_forward(u0, alpha, w0_all, w1_all, gw_all, lmax, focus_dim, apply_alpha, True)
    z_all = torch.stack(zs) if zs else u0.new_empty((0,) + tuple(u0.shape))
    return x_local, z_all, u


def pointwise_backward(g: torch.Tensor, z: torch.Tensor, gw: torch.Tensor, d: So2Dims):
    """The relay's pointwise step of one gated layer: (gz (F, E, ROW), gq (F, E, LG)).

    gz_s = g_s * s0 * (1 + s (1 - s0)) + gq @ gw^T with s0 = sigmoid(s); gz = g * sigma on the
    gated columns; gsigma sums g * z over each group's three sub-tiles; gq = gsigma sigma (1 - sigma).
    """
    cf, m0, lg = d.focus_dim, d.m0, d.lg
    s = z[..., :cf]
    s0 = torch.sigmoid(s)
    sigma = torch.sigmoid(s @ gw)
    gsigma = g[..., cf:m0] * z[..., cf:m0] + g[..., m0:m0 + lg] * z[..., m0:m0 + lg] \
        + g[..., m0 + lg:] * z[..., m0 + lg:]
    gq = gsigma * sigma * (1 - sigma)
    gz_s = g[..., :cf] * s0 * (1 + s * (1 - s0)) + gq @ gw.transpose(-1, -2)
    gz = torch.cat([gz_s, g[..., cf:m0] * sigma, g[..., m0:] * torch.cat([sigma, sigma], -1)], -1)
    return gz, gq


def so2_stack_backward_reference(grad_out, x_local, z_all, u_final, alpha, w0_all, w1_all, gw_all, *,
                                 lmax, focus_dim, apply_alpha=True, weight_grads=False):
    """The explicit relay-order backward of the spec.

    Returns (grad_u0 (F, E, ROW), grad_alpha (E, F), weights) where weights is None or
    (dw0_all, dw1_all, dgw_all) with inputs recovered backwards as u_l = u_{l+1} - act(z_l).
    grad_alpha is zero without apply_alpha.
    """
    d = So2Dims(lmax, focus_dim)
    if apply_alpha:
        grad_alpha = (grad_out * x_local).sum(-1) / alpha
        g = (grad_out * alpha.unsqueeze(-1)).transpose(0, 1)
    else:
        grad_alpha = torch.zeros(alpha.shape, dtype=alpha.dtype, device=alpha.device)
        g = grad_out.transpose(0, 1)
    dws = None
    if weight_grads:
        ng = gw_all.shape[0]
        dw0, dw1, dgw = (torch.zeros(w.shape, dtype=w.dtype, device=w.device) for w in (w0_all, w1_all, gw_all))
        dw0[ng] = u_final[..., :d.m0].transpose(-1, -2) @ g[..., :d.m0]
        dw1[ng] = u_final[..., d.m0:].transpose(-1, -2) @ g[..., d.m0:]
        dws = (dw0, dw1, dgw)
    g_cur = g + layer_gemm_t(g, w0_all[-1], w1_all[-1], d)
    u_next = u_final
    for layer in range(gw_all.shape[0] - 1, -1, -1):
        z = z_all[layer]
        gz, gq = pointwise_backward(g_cur, z, gw_all[layer], d)
        if weight_grads:
            u_l = u_next - gate_act(z, gw_all[layer], d)[0]
            dws[0][layer] = u_l[..., :d.m0].transpose(-1, -2) @ gz[..., :d.m0]
            dws[1][layer] = u_l[..., d.m0:].transpose(-1, -2) @ gz[..., d.m0:]
            dws[2][layer] = z[..., :d.focus_dim].transpose(-1, -2) @ gq
            u_next = u_l
        g_cur = g_cur + layer_gemm_t(gz, w0_all[layer], w1_all[layer], d)
    return g_cur, grad_alpha, dws
