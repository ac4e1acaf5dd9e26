"""DyT with float64 (the reference path: .double(), gradcheck), under torch.func (grad, vmap,
jacrev: a new-style autograd.Function), and double backward through the kernels' path."""

import pytest
import torch
from torch import nn

import tilefuse
from tilefuse import launches
from tilefuse.nn import DyT, convert_layernorm_to_dyt
from tilefuse.ops.dyt.reference import dyt_reference

C = 6


def _params(dtype=torch.float32, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    alpha = (torch.rand(1, generator=g) + 0.5).to(dtype)
    weight = torch.randn(C, generator=g).to(dtype)
    b = torch.randn(C, generator=g).to(dtype) if bias else None
    return alpha, weight, b


@pytest.mark.parametrize("level", [0, 2], ids=["level0", "level2"])
@pytest.mark.parametrize("channels_last", [True, False], ids=["clast", "cfirst"])
def test_float64_runs_the_reference_and_gradchecks(level, channels_last, one_intra_op_thread):
    alpha, weight, bias = (p.requires_grad_(True) for p in _params(torch.float64))
    shape = (3, C) if channels_last else (2, C, 3)
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    with tilefuse.level(level), launches.counting() as launched:
        y = tilefuse.dyt(x, alpha, weight, bias, channels_last=channels_last)
        assert y.dtype == torch.float64
        torch.testing.assert_close(y, dyt_reference(x, alpha, weight, bias, channels_last=channels_last,
                                                    compute_dtype=torch.float64), rtol=0, atol=0)
        assert torch.autograd.gradcheck(
            lambda *t: tilefuse.dyt(*t, channels_last=channels_last), (x, alpha, weight, bias))
        assert torch.autograd.gradgradcheck(
            lambda *t: tilefuse.dyt(*t, channels_last=channels_last), (x, alpha, weight, bias))
    assert sum(launched.values()) == 0    # float64 never reaches a kernel


@pytest.mark.parametrize("level", [0, 2], ids=["level0", "level2"])
def test_the_custom_ops_run_float64_in_float64(level, one_intra_op_thread):
    """torch.ops.tilefuse.dyt / dyt_backward (what a compiled graph runs, callable directly)
    with float64 tensors: the float64 reference formulas, bitwise, no kernel, and gradcheck
    and gradgradcheck pass (double backward runs the backward formulas in float64 too)."""
    from tilefuse.ops.dyt.reference import dyt_backward_reference
    alpha, weight, bias = (p.requires_grad_(True) for p in _params(torch.float64, seed=4))
    x = torch.randn(3, C, dtype=torch.float64, requires_grad=True)
    dy = torch.randn(3, C, dtype=torch.float64)
    with tilefuse.level(level), launches.counting() as launched:
        y = torch.ops.tilefuse.dyt(x, alpha, weight, bias, True)
        grads = torch.ops.tilefuse.dyt_backward(dy, x, alpha, weight, bias, True)
        assert torch.autograd.gradcheck(lambda *t: torch.ops.tilefuse.dyt(*t, True), (x, alpha, weight, bias))
        assert torch.autograd.gradgradcheck(lambda *t: torch.ops.tilefuse.dyt(*t, True), (x, alpha, weight, bias))
    assert sum(launched.values()) == 0
    assert torch.equal(y, dyt_reference(x, alpha, weight, bias, compute_dtype=torch.float64))
    for got, want in zip(grads, dyt_backward_reference(dy, x, alpha, weight, bias, compute_dtype=torch.float64)):
        assert torch.equal(got, want.reshape(got.shape))


def test_mixed_float64_parameters_and_double_module():
    """A float64 parameter with a float32 x: the float64 reference, y in x's dtype."""
    alpha, weight, bias = _params(torch.float64)
    x = torch.randn(4, C)
    y = tilefuse.dyt(x, alpha, weight, bias)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, dyt_reference(x, alpha, weight, bias, compute_dtype=torch.float64))
    m = DyT(C).double()
    x64 = torch.randn(2, 3, C, dtype=torch.float64, requires_grad=True)
    m(x64).sum().backward()
    assert m.weight.grad.dtype == torch.float64 and x64.grad.dtype == torch.float64
    assert DyT(C, dtype=torch.float64).weight.dtype == torch.float64
    model = convert_layernorm_to_dyt(nn.Sequential(nn.LayerNorm(C).double()))
    assert model[0].weight.dtype == torch.float64
    assert torch.autograd.gradcheck(model, (x64,))


def test_func_grad_matches_autograd(device):
    """torch.func.grad over the kernels' path: the forward launches the kernel (on the GPU, or
    in the interpreter on the CPU)."""
    alpha, weight, bias = (p.to(device) for p in _params())
    x = torch.randn(5, C, device=device)

    def loss(x_, a_, w_, b_):
        return (tilefuse.dyt(x_, a_, w_, b_) ** 2).sum()
    with launches.counting() as launched:
        got = torch.func.grad(loss, argnums=(0, 1, 2, 3))(x, alpha, weight, bias)
    assert launched["dyt_fwd"] >= 1
    leaves = [t.clone().requires_grad_(True) for t in (x, alpha, weight, bias)]
    want = torch.autograd.grad(loss(*leaves), leaves)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batched", ["x", "params"])
def test_vmap_and_jacrev(batched):
    alpha, weight, bias = _params()
    B = 3
    if batched == "x":
        xs = torch.randn(B, 4, C)
        got = torch.vmap(lambda x_: tilefuse.dyt(x_, alpha, weight, bias))(xs)
        want = torch.stack([dyt_reference(x_, alpha, weight, bias) for x_ in xs])
    else:   # per-member parameters (model ensembling): every argument batched
        x = torch.randn(4, C)
        alphas, weights, biases = torch.rand(B, 1) + 0.5, torch.randn(B, C), torch.randn(B, C)
        got = torch.vmap(lambda a_, w_, b_: tilefuse.dyt(x, a_, w_, b_))(alphas, weights, biases)
        want = torch.stack([dyt_reference(x, a_, w_, b_) for a_, w_, b_ in zip(alphas, weights, biases)])
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    # jacrev: vmap over the backward
    x = torch.randn(2, C)
    jac = torch.func.jacrev(lambda x_: tilefuse.dyt(x_, alpha, weight, bias))(x)
    want_jac = torch.autograd.functional.jacobian(lambda x_: dyt_reference(x_, alpha, weight, bias), x)
    torch.testing.assert_close(jac, want_jac, rtol=1e-5, atol=1e-6)


def test_double_backward_through_the_kernels_path(device):
    """create_graph=True through DyTFunction (the forward launches the kernel): second
    derivatives equal the reference's."""
    alpha, weight, bias = (p.to(device).requires_grad_(True) for p in _params())
    x = torch.randn(5, C, device=device, requires_grad=True)
    with launches.counting() as launched:
        y = tilefuse.dyt(x, alpha, weight, bias)
    assert launched["dyt_fwd"] == 1
    dx, = torch.autograd.grad(y.square().sum(), x, create_graph=True)
    second = torch.autograd.grad(dx.sum(), (x, alpha, weight, bias))
    leaves = [t.detach().double().requires_grad_(True) for t in (x, alpha, weight, bias)]
    y64 = dyt_reference(*leaves, compute_dtype=torch.float64)
    dx64, = torch.autograd.grad(y64.square().sum(), leaves[0], create_graph=True)
    want = torch.autograd.grad(dx64.sum(), leaves)
    for g, w in zip(second, want):
        torch.testing.assert_close(g.double(), w, rtol=1e-5, atol=1e-5)


def _f64(p):
    return None if p is None else p.detach().double()


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("channels_last", [True, False], ids=["clast", "cfirst"])
@pytest.mark.parametrize("tangent_on", ["x", "alpha", "weight", "bias", "all"])
def test_forward_mode_ad_through_the_kernels(tangent_on, channels_last, bias, device, one_intra_op_thread):
    """Eager forward-mode AD at level 2: torch.func.jvp and dual tensors give the tangent of
    the float64 reference, along each input alone and all together, while the forward runs
    the kernels (DyTFunction.jvp: before, NotImplementedError from torch naming neither dyt
    nor tilefuse). The primal is the kernels' output."""
    from torch.autograd import forward_ad
    if tangent_on == "bias" and not bias:
        pytest.skip("no bias to carry a tangent")
    alpha, weight, b = (None if p is None else p.to(device) for p in _params(bias=bias, seed=5))
    shape = (4, C) if channels_last else (2, C, 3)
    g = torch.Generator().manual_seed(6)
    x = torch.randn(shape, generator=g).to(device)
    prim = {"x": x, "alpha": alpha, "weight": weight, "bias": b}
    names = [n for n in prim if prim[n] is not None]
    on = names if tangent_on == "all" else [tangent_on]
    tang = {n: torch.randn(prim[n].shape, generator=g).to(device) for n in on}

    def f(**kw):
        return tilefuse.dyt(kw["x"], kw["alpha"], kw["weight"], kw.get("bias"), channels_last=channels_last)

    def f64(*values):
        kw = {**{n: _f64(prim[n]) for n in names}, **dict(zip(on, values))}
        return dyt_reference(kw["x"], kw["alpha"], kw["weight"], kw.get("bias"), channels_last=channels_last,
                             compute_dtype=torch.float64)
    _, want = torch.func.jvp(f64, tuple(_f64(prim[n]) for n in on), tuple(_f64(tang[n]) for n in on))
    with tilefuse.level(2), launches.counting() as launched:
        y, got = torch.func.jvp(lambda *v: f(**{**prim, **dict(zip(on, v))}), tuple(prim[n] for n in on),
                                tuple(tang[n] for n in on))
        with forward_ad.dual_level():
            duals = {n: forward_ad.make_dual(prim[n], tang[n]) if n in tang else prim[n] for n in names}
            dual_y = forward_ad.unpack_dual(f(**duals))
    assert sum(launched.values()) == 2          # one forward kernel launch per call
    for tangent in (got, dual_y.tangent):
        assert tangent.shape == x.shape and tangent.dtype == x.dtype
        torch.testing.assert_close(tangent.double(), want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(y.double(), f64(*(_f64(prim[n]) for n in on)), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(dual_y.primal, y, rtol=0, atol=0)


@pytest.mark.parametrize("channels_last", [True, False], ids=["clast", "cfirst"])
def test_hessian_and_forward_over_reverse_through_the_kernels(channels_last, device, one_intra_op_thread):
    """Second derivatives that take a jvp of the backward: torch.func.hessian and dual
    tensors through a .grad (forward-over-reverse, with the grad mode off in the backward,
    where the kernels would drop the tangents: the backward formulas run instead), against
    the float64 reference."""
    from torch.autograd import forward_ad
    alpha, weight, b = (p.to(device) for p in _params(seed=7))
    shape = (3, C) if channels_last else (2, C, 2)
    g = torch.Generator().manual_seed(8)
    x, tx = torch.randn(shape, generator=g).to(device), torch.randn(shape, generator=g).to(device)

    def loss(fn, a, w, bb):
        return lambda inp: (fn(inp, a, w, bb) ** 2).sum()
    kernels = loss(lambda *t: tilefuse.dyt(*t, channels_last=channels_last), alpha, weight, b)
    ref = loss(lambda *t: dyt_reference(*t, channels_last=channels_last, compute_dtype=torch.float64),
               _f64(alpha), _f64(weight), _f64(b))
    with tilefuse.level(2), launches.counting() as launched:
        hessian = torch.func.hessian(kernels)(x)
        with forward_ad.dual_level():
            inp = forward_ad.make_dual(x.clone().requires_grad_(), tx)
            (grad,) = torch.autograd.grad(kernels(inp), inp)
            grad_tangent = forward_ad.unpack_dual(grad).tangent
    assert sum(launched.values()) >= 2           # the forwards ran the kernels
    torch.testing.assert_close(hessian.double(), torch.func.hessian(ref)(x.double()), rtol=1e-5, atol=1e-5)
    _, want = torch.func.jvp(torch.func.grad(ref), (x.double(),), (tx.double(),))
    torch.testing.assert_close(grad_tangent.double(), want, rtol=1e-5, atol=1e-5)
