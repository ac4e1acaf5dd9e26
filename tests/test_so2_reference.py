"""so2_mixing_stack reference (CPU, float64): the explicit relay backward against autograd,
finite differences, the gate layout, double backward, empty edge sets, no input mutation."""

import itertools
import math

import pytest
import torch

from tilefuse.ops.so2_mixing_stack.reference import (so2_stack_backward_reference, so2_stack_forward_saving,
                                                     so2_stack_reference)


pytestmark = pytest.mark.usefixtures("one_intra_op_thread")


F64 = torch.float64
EPS = torch.finfo(F64).eps

# The spec's (lmax, F, Cf) grid up to Cf 64 (the two largest points are GPU sizes) and its
# partial-tile edge counts that are cheap in float64.
GRID = [(1, 1, 32), (2, 2, 32), (3, 2, 32), (3, 1, 64)]
EDGES = [0, 1, 37]


def make_inputs(lmax, n_focus, cf, n_edges, n_layers=3, seed=0):
    """Unit-scale inputs: weights N(0, 1/fan_in) keep every activation O(1); alpha in [0.2, 1.2)."""
    gen = torch.Generator().manual_seed(seed)
    m0, m1, lg, row = (lmax + 1) * cf, 2 * lmax * cf, lmax * cf, (3 * lmax + 1) * cf

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=gen, dtype=F64) * scale

    u0 = randn(n_focus, n_edges, row)
    alpha = torch.rand(n_edges, n_focus, generator=gen, dtype=F64) + 0.2
    w0 = randn(n_layers, n_focus, m0, m0, scale=m0 ** -0.5)
    w1 = randn(n_layers, n_focus, m1, m1, scale=m1 ** -0.5)
    gw = randn(n_layers - 1, n_focus, cf, lg, scale=cf ** -0.5)
    grad_out = randn(n_edges, n_focus, row)
    return u0, alpha, w0, w1, gw, grad_out


def autograd_grads(inputs, grad_out, lmax, cf, apply_alpha, create_graph=False):
    """(x_local, [grad_u0, grad_alpha, dw0, dw1, dgw]) by autograd through the reference;
    an input the output does not depend on (alpha without apply_alpha) gets zeros."""
    leaves = [t.detach().requires_grad_(True) for t in inputs]   # shares storage: mutation shows
    x = so2_stack_reference(*leaves, lmax=lmax, focus_dim=cf, apply_alpha=apply_alpha)
    grads = torch.autograd.grad(x, leaves, grad_out, allow_unused=True, create_graph=create_graph)
    return x, [torch.zeros_like(t) if g is None else g for g, t in zip(grads, leaves)], leaves


def relay_grads(inputs, grad_out, lmax, cf, apply_alpha, weight_grads):
    x, z_all, u_final = so2_stack_forward_saving(*inputs, lmax=lmax, focus_dim=cf, apply_alpha=apply_alpha)
    g_u0, g_alpha, dws = so2_stack_backward_reference(grad_out, x, z_all, u_final, *inputs[1:], lmax=lmax,
                                                      focus_dim=cf, apply_alpha=apply_alpha,
                                                      weight_grads=weight_grads)
    return x, [g_u0, g_alpha] + (list(dws) if dws is not None else [])


# Tolerance of relay vs autograd: both evaluate the same sums in different association orders.
# Per layer a gradient entry passes one dot over K <= max(M0, M1) terms (the transposed-weight
# GEMM) and <= 10 pointwise roundings; a weight gradient adds one dot over the E edges. The
# worst-case bound of a K-term dot is K eps relative to the sum of |terms|, so each side is off
# by <= k eps * sum|terms| with k = NL (max(M0, M1) + 10) + E, and the two differ by <= 2 k eps.
# sum|terms| is measured by the largest entry of the reference gradient: for unit-scale random
# data it exceeds that by ~sqrt(K) at most, which the worst-case K (vs the typical sqrt(K))
# growth of the bound absorbs.
def relay_tolerance(lmax, cf, n_edges, n_layers, reference):
    k = n_layers * (2 * lmax * cf + 10) + n_edges
    bound = 2 * k * EPS
    return {"rtol": bound, "atol": bound * float(reference.abs().max()) if reference.numel() else 0.0}


@pytest.mark.parametrize("apply_alpha", [True, False], ids=["alpha", "noalpha"])
@pytest.mark.parametrize("n_edges", EDGES, ids=lambda e: f"E{e}")
@pytest.mark.parametrize("lmax,n_focus,cf", GRID, ids=lambda v: str(v))
def test_relay_backward_equals_autograd(lmax, n_focus, cf, n_edges, apply_alpha):
    n_layers = 3
    *inputs, grad_out = make_inputs(lmax, n_focus, cf, n_edges, n_layers, seed=lmax * 100 + cf + n_edges)
    x_auto, auto, _ = autograd_grads(inputs, grad_out, lmax, cf, apply_alpha)
    x_relay, relay = relay_grads(inputs, grad_out, lmax, cf, apply_alpha, weight_grads=True)
    _, relay_force = relay_grads(inputs, grad_out, lmax, cf, apply_alpha, weight_grads=False)
    # The saving forward is the same arithmetic as the differentiable one, and the force
    # backward (no weight gradients) the same arithmetic as the training one.
    assert torch.equal(x_relay, x_auto.detach())
    assert len(relay_force) == 2
    assert torch.equal(relay_force[0], relay[0]) and torch.equal(relay_force[1], relay[1])
    names = ["grad_u0", "grad_alpha", "dw0_all", "dw1_all", "dgw_all"]
    for name, got, want in zip(names, relay, auto):
        assert got.shape == want.shape, name
        torch.testing.assert_close(got, want, **relay_tolerance(lmax, cf, n_edges, n_layers, want), msg=name)
    if not apply_alpha:
        assert torch.count_nonzero(relay[1]) == 0


def test_forward_saving_records_the_stack():
    lmax, cf, n_layers = 2, 4, 3
    *inputs, _ = make_inputs(lmax, 2, cf, 7, n_layers, seed=3)
    u0, alpha, w0, w1, gw = inputs
    x, z_all, u_final = so2_stack_forward_saving(*inputs, lmax=lmax, focus_dim=cf)
    m0 = (lmax + 1) * cf
    assert z_all.shape == (n_layers - 1,) + tuple(u0.shape)
    # z of the first layer is the plain layer GEMM of u0; x is u_final through the final layer.
    assert torch.equal(z_all[0], torch.cat([u0[..., :m0] @ w0[0], u0[..., m0:] @ w1[0]], -1))
    y = u_final + torch.cat([u_final[..., :m0] @ w0[-1], u_final[..., m0:] @ w1[-1]], -1)
    assert torch.equal(x, (y * alpha.t().unsqueeze(-1)).transpose(0, 1))


# ---------------------------------------------------------------------------------------------
# Finite differences. Central difference D(h) = (L(p+h) - L(p-h)) / 2h of a scalar L:
#   D(h) - L' = h^2 L'''/6 + O(h^4)  (truncation)  +  <= delta/h  (rounding),
# delta bounding the error of one evaluation of L (derived per loss below). The truncation is
# measured, not guessed: D(2h) - D(h) = h^2 L'''/2 + O(h^4), so h^2 |L'''|/6 ~ |D(2h) - D(h)|/3;
# we allow twice that for the O(h^4) rest. That estimate itself carries rounding
# <= (2/3)(delta/h + delta/2h) = delta/h, so the rounding allowance is 2 delta/h in all.
# h = 1e-4 keeps both terms (measured: truncation <= 2e-7, rounding bound ~6e-6) far below the
# O(1e-2..1) errors a wrong gradient formula makes.
FD_STEP = 1e-4


def central_difference(loss, tensor, index, step):
    old = tensor[index].item()
    tensor[index] = old + step
    up = loss()
    tensor[index] = old - step
    down = loss()
    tensor[index] = old
    return (up - down) / (2 * step)


def check_fd(loss, tensor, indices, analytic, delta, name):
    for index in indices:
        d1 = central_difference(loss, tensor, index, FD_STEP)
        d2 = central_difference(loss, tensor, index, 2 * FD_STEP)
        tol = 2 * abs(d2 - d1) / 3 + 2 * delta / FD_STEP
        want = float(analytic[index])
        err = abs(d1 - want)
        assert err <= tol, f"{name}{list(index)}: analytic {want:.12g} FD {d1:.12g} err {err:.3g} tol {tol:.3g}"


def abs_forward(u0, alpha, w0, w1, gw, lmax, cf):
    """Per output entry, a bound on the sum of |terms| that make it: the stack run on |inputs|
    with every gate replaced by its bound 1 (|s sigmoid(s)| <= |s|, |z sigma| <= |z|)."""
    m0 = (lmax + 1) * cf
    u = u0.abs()
    for layer in range(gw.shape[0] + 1):
        z = torch.cat([u[..., :m0] @ w0[layer].abs(), u[..., m0:] @ w1[layer].abs()], -1)
        u = u + z
    return (u * alpha.abs().t().unsqueeze(-1)).transpose(0, 1)


# FD shape: small enough to difference every u0 and alpha entry (F 2, E 5, lmax 2, Cf 3).
FD_DIMS = dict(lmax=2, n_focus=2, cf=3, n_edges=5, n_layers=3)


def sampled_indices(shape, count, gen):
    return [tuple(int(torch.randint(0, s, (1,), generator=gen)) for s in shape) for _ in range(count)]


@pytest.mark.parametrize("apply_alpha", [True, False], ids=["alpha", "noalpha"])
def test_gradients_match_finite_differences(apply_alpha):
    lmax, cf, n_layers = FD_DIMS["lmax"], FD_DIMS["cf"], FD_DIMS["n_layers"]
    *inputs, grad_out = make_inputs(lmax, FD_DIMS["n_focus"], cf, FD_DIMS["n_edges"], n_layers, seed=11)
    inputs = [t.clone() for t in inputs]
    _, grads = relay_grads(inputs, grad_out, lmax, cf, apply_alpha, weight_grads=True)

    def loss():
        x = so2_stack_reference(*inputs, lmax=lmax, focus_dim=cf, apply_alpha=apply_alpha)
        return float((x * grad_out).sum())

    # Rounding of one evaluation of L = sum(grad_out * x): each x entry is off by <= k_x eps
    # times its sum of |terms| (abs_forward), k_x = NL (max(M0, M1) + 10) as for the relay;
    # the final sum of N products adds <= N eps sum|grad_out x|.
    n_out = grad_out.numel()
    k_x = n_layers * (2 * lmax * cf + 10) + n_out
    delta = k_x * EPS * float((grad_out.abs() * abs_forward(*inputs, lmax, cf)).sum())

    gen = torch.Generator().manual_seed(5)
    names = ["u0", "alpha", "w0_all", "w1_all", "gw_all"]
    for name, tensor, grad in zip(names, inputs, grads):
        if name in ("u0", "alpha"):
            indices = list(itertools.product(*[range(s) for s in tensor.shape]))
        else:
            # Every layer of every weight, plus random entries.
            indices = [(layer,) + sampled_indices(tensor.shape[1:], 1, gen)[0] for layer in range(tensor.shape[0])]
            indices += sampled_indices(tensor.shape, 12, gen)
        check_fd(loss, tensor, indices, grad, delta, name)


# ---------------------------------------------------------------------------------------------
# Layout: gate column c of sigma (group g = c // Cf) is read by exactly three columns of a row,
# m=0 column Cf + c and |m|=1 column n (from M0) with ((n // Cf) % L) Cf + n % Cf == c. With
# the final layer's weights zero and no alpha, x_local = u0 + act of the only gated layer, so a
# change of gw[0][..., c] shows up in exactly those columns (bitwise zero elsewhere: no other
# column's arithmetic reads gw[..., c]).
@pytest.mark.parametrize("lmax", [1, 2, 3])
def test_gate_layout_by_perturbation(lmax):
    cf, n_focus, n_edges = 4, 2, 6
    *inputs, _ = make_inputs(lmax, n_focus, cf, n_edges, n_layers=2, seed=lmax)
    u0, alpha, w0, w1, gw = inputs
    w0[-1].zero_()
    w1[-1].zero_()
    m0, m1, lg, row = (lmax + 1) * cf, 2 * lmax * cf, lmax * cf, (3 * lmax + 1) * cf

    def run(gate):
        return so2_stack_reference(u0, alpha, w0, w1, gate, lmax=lmax, focus_dim=cf, apply_alpha=False)

    base = run(gw)
    # The invariant scalars are ungated: sub-tile 0 is s + s sigmoid(s).
    s = (u0[..., :m0] @ w0[0])[..., :cf]
    torch.testing.assert_close(base[..., :cf], (u0[..., :cf] + s * torch.sigmoid(s)).transpose(0, 1),
                               rtol=0, atol=0)

    def changed_columns(column_set):
        gate = gw.clone()
        gate[..., column_set] += 0.5
        diff = (run(gate) - base).abs().amax(dim=(0, 1))
        return set(torch.nonzero(diff).flatten().tolist()), diff

    for c in range(lg):
        expected = {cf + c} | {m0 + n for n in range(m1) if ((n // cf) % lmax) * cf + n % cf == c}
        got, _ = changed_columns([c])
        assert got == expected, f"gate column {c}"
    for g in range(lmax):
        # Gate group g gates sub-tile 1 + g (m = 0) and sub-tiles L + 1 + g, 2L + 1 + g (stripes),
        # every entry of them (a nonzero change in every edge and focus stream).
        group = list(range(g * cf, (g + 1) * cf))
        got, _ = changed_columns(group)
        expected = {t * cf + j for t in (1 + g, lmax + 1 + g, 2 * lmax + 1 + g) for j in range(cf)}
        assert got == expected, f"gate group {g}"
        gate = gw.clone()
        gate[..., group] += 0.5
        per_entry = (run(gate) - base)[..., sorted(expected)]
        assert torch.count_nonzero(per_entry) == per_entry.numel()
        assert max(expected) < row


# ---------------------------------------------------------------------------------------------
# Double backward (force-loss training): Phi = sum(grad_u0^2) with grad_u0 = dL/du0 built with
# create_graph; dPhi/dtheta by autograd against central differences of Phi, each Phi evaluated
# by a first-order backward.
@pytest.mark.parametrize("apply_alpha", [True, False], ids=["alpha", "noalpha"])
def test_double_backward_matches_finite_differences(apply_alpha):
    lmax, cf, n_layers = FD_DIMS["lmax"], FD_DIMS["cf"], FD_DIMS["n_layers"]
    *inputs, grad_out = make_inputs(lmax, FD_DIMS["n_focus"], cf, FD_DIMS["n_edges"], n_layers, seed=21)
    inputs = [t.clone() for t in inputs]
    _, first, leaves = autograd_grads(inputs, grad_out, lmax, cf, apply_alpha, create_graph=True)
    phi = first[0].square().sum()
    second = torch.autograd.grad(phi, leaves, allow_unused=True)
    second = [torch.zeros_like(t) if g is None else g for g, t in zip(second, leaves)]
    for g in second:
        assert torch.isfinite(g).all()

    def force(tensors):
        return autograd_grads(tensors, grad_out, lmax, cf, apply_alpha)[1][0]

    def loss():
        return float(force(inputs).square().sum())

    # Rounding of one Phi: each grad_u0 entry is off by <= k_g eps times its sum of |terms|,
    # bounded (as for relay_tolerance) by sqrt(K) max|grad_u0| with k_g = NL (max(M0, M1) + 10);
    # squaring doubles the relative error, and the sum of N squares adds N eps Phi.
    grad_u0 = force(inputs)
    m1 = 2 * lmax * cf
    k_g = n_layers * (m1 + 10)
    term = math.sqrt(m1) * float(grad_u0.abs().max())
    delta = EPS * (2 * k_g * term * float(grad_u0.abs().sum()) + grad_u0.numel() * float(grad_u0.square().sum()))

    gen = torch.Generator().manual_seed(9)
    names = ["u0", "alpha", "w0_all", "w1_all", "gw_all"]
    for name, tensor, grad in zip(names, inputs, second):
        if name == "alpha" and not apply_alpha:
            assert torch.count_nonzero(grad) == 0
            continue
        indices = [(layer,) + sampled_indices(tensor.shape[1:], 1, gen)[0] for layer in range(tensor.shape[0])]
        indices += sampled_indices(tensor.shape, 6, gen)
        check_fd(loss, tensor, indices, grad, delta, name)


# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("apply_alpha", [True, False], ids=["alpha", "noalpha"])
def test_empty_edge_set(apply_alpha):
    lmax, n_focus, cf = 2, 2, 8
    *inputs, grad_out = make_inputs(lmax, n_focus, cf, 0, seed=1)
    x, auto, _ = autograd_grads(inputs, grad_out, lmax, cf, apply_alpha)
    assert x.shape == (0, n_focus, (3 * lmax + 1) * cf)
    x_relay, relay = relay_grads(inputs, grad_out, lmax, cf, apply_alpha, weight_grads=True)
    assert x_relay.shape == x.shape
    for got, want, t in zip(relay, auto, inputs):
        assert got.shape == want.shape == t.shape
        assert torch.count_nonzero(got) == 0 and torch.count_nonzero(want) == 0


def test_inputs_never_mutated():
    lmax, cf = 3, 4
    *inputs, grad_out = make_inputs(lmax, 2, cf, 9, seed=4)
    before = [t.clone() for t in inputs + [grad_out]]
    for apply_alpha in (True, False):
        x, first, leaves = autograd_grads(inputs, grad_out, lmax, cf, apply_alpha, create_graph=True)
        torch.autograd.grad(first[0].square().sum(), leaves[2:])
        for weight_grads in (True, False):
            relay_grads(inputs, grad_out, lmax, cf, apply_alpha, weight_grads=weight_grads)
    for t, b in zip(inputs + [grad_out], before):
        assert torch.equal(t, b)
