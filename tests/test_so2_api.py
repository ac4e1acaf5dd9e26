"""so2_mixing_stack public surface: argument checks, the SO2MixingStack module."""

import math

import pytest
import torch

import tilefuse
from tilefuse.nn import SO2MixingStack
from tilefuse.ops.so2_mixing_stack.reference import so2_stack_reference
from tilefuse.ops.so2_mixing_stack.validate import validate


pytestmark = pytest.mark.usefixtures("one_intra_op_thread")


def dims(lmax, cf):
    return (lmax + 1) * cf, 2 * lmax * cf, lmax * cf, (3 * lmax + 1) * cf


def make_args(lmax=2, n_focus=2, cf=4, n_edges=5, n_layers=3, dtype=torch.float32, device="cpu"):
    m0, m1, lg, row = dims(lmax, cf)
    kw = {"dtype": dtype, "device": device}
    return [torch.randn(n_focus, n_edges, row, **kw), torch.rand(n_edges, n_focus, **kw) + 0.2,
            torch.randn(n_layers, n_focus, m0, m0, **kw) / math.sqrt(m0),
            torch.randn(n_layers, n_focus, m1, m1, **kw) / math.sqrt(m1),
            torch.randn(n_layers - 1, n_focus, cf, lg, **kw) / math.sqrt(cf)]


# ---------------------------------------------------------------------------------------------
# Argument checks (lmax 2, Cf 4: M0 12, M1 16, LG 8, ROW 28; F 2, E 5, NL 3).
def _bad_cases(device):
    u0, alpha, w0, w1, gw = make_args(device=device)
    ok = {"lmax": 2, "focus_dim": 4, "apply_alpha": True}

    def case(exc, msg, u0=u0, alpha=alpha, w0=w0, w1=w1, gw=gw, **kwargs):
        return pytest.param((u0, alpha, w0, w1, gw), {**ok, **kwargs}, exc, msg, id=msg[:40])

    meta = torch.empty_like(w1, device="meta")
    return [
        # kinds and dtypes
        case(TypeError, "u0 must be a torch.Tensor", u0=u0.tolist()),
        case(TypeError, "u0 must be float32, bfloat16, float16 or float64", u0=u0.long()),
        case(TypeError, "alpha must be a torch.Tensor", alpha=None),
        case(TypeError, "alpha is torch.float64 but u0 is torch.float32", alpha=alpha.double()),
        case(TypeError, "w0_all is torch.bfloat16 but u0 is torch.float32", w0=w0.bfloat16()),
        case(TypeError, "w1_all must be float32", w1=w1.to(torch.complex64)),
        case(TypeError, "gw_all must be float32", gw=gw.int()),
        case(TypeError, "u0 must be float32", u0=u0.bool()),
        # devices
        case(ValueError, "w1_all is on meta", w1=meta),
        # ints and bools
        case(TypeError, "lmax must be an int", lmax=2.0),
        case(TypeError, "lmax must be an int", lmax=True),
        case(ValueError, "lmax must be >= 1", lmax=0),
        case(TypeError, "focus_dim must be an int", focus_dim="4"),
        case(ValueError, "focus_dim must be >= 1", focus_dim=-4),
        case(TypeError, "apply_alpha must be a bool", apply_alpha=1),
        case(TypeError, "apply_alpha must be a bool", apply_alpha=None),
        # u0's shape
        case(ValueError, "u0 must be 3-D", u0=u0[0]),
        case(ValueError, "u0 must be 3-D", u0=u0.unsqueeze(0)),
        case(ValueError, r"u0's last dimension must be ROW = \(3 lmax \+ 1\) focus_dim = 28", u0=u0[..., :-1]),
        case(ValueError, r"u0's last dimension must be ROW .* = 28 .* got shape \(2, 5, 20\)", u0=u0[..., :20]),
        case(ValueError, r"u0's last dimension must be ROW .* = 35", focus_dim=5),
        case(ValueError, r"u0's last dimension must be ROW .* = 40", lmax=3),
        case(ValueError, "u0 must have at least one focus stream", u0=u0[:0]),
        # alpha's shape, with and without apply_alpha
        case(ValueError, r"alpha must have shape \(E, F\) = \(5, 2\), got \(2, 5\)", alpha=alpha.t()),
        case(ValueError, r"alpha must have shape \(E, F\) = \(5, 2\), got \(5,\)", alpha=alpha[:, 0]),
        case(ValueError, r"alpha must have shape \(E, F\)", alpha=alpha[:4], apply_alpha=False),
        # weights
        case(ValueError, "w0_all must be 4-D", w0=w0[0]),
        case(ValueError, "w0_all must hold NL >= 2 layers", w0=w0[:1], w1=w1[:1], gw=gw[:0]),
        case(ValueError, r"w0_all must have shape \(NL, F, M0, M0\) = \(3, 2, 12, 12\)", w0=w0[:, :1]),
        case(ValueError, r"w0_all must have shape .* = \(3, 2, 12, 12\)", w0=w0[..., :11]),
        case(ValueError, r"w1_all must have shape \(NL, F, M1, M1\) = \(3, 2, 16, 16\)", w1=w1[:2]),
        case(ValueError, r"w1_all must have shape .* = \(3, 2, 16, 16\)", w1=w1[:, :, :12, :12]),
        case(ValueError, r"w1_all must have shape", w1=w1[0]),
        case(ValueError, r"gw_all must have shape \(NL-1, F, focus_dim, lmax\*focus_dim\) = \(2, 2, 4, 8\)",
             gw=gw[:1]),
        case(ValueError, r"gw_all must have shape .* = \(2, 2, 4, 8\)", gw=gw.transpose(-1, -2)),
        case(ValueError, r"gw_all must have shape .* = \(2, 2, 4, 8\)", gw=torch.cat([gw, gw[:1]])),
    ]


@pytest.mark.parametrize("args,kwargs,exc,msg", _bad_cases("cpu"))
def test_bad_inputs_name_the_argument(args, kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        validate(*args, **kwargs)
    # The public function checks before it dispatches, at every level.
    for level in (0, 2):
        with tilefuse.level(level), pytest.raises(exc, match=msg):
            tilefuse.so2_mixing_stack(*args, **kwargs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64],
                         ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("n_edges", [0, 1, 5])
def test_good_inputs_pass(dtype, n_edges):
    args = make_args(n_edges=n_edges, dtype=dtype)
    for apply_alpha in (True, False):
        assert validate(*args, lmax=2, focus_dim=4, apply_alpha=apply_alpha) is None
    # NL = 2 (one gated layer) is the smallest stack; F = 1 the smallest focus count.
    assert validate(*make_args(n_focus=1, n_layers=2, dtype=dtype), lmax=2, focus_dim=4, apply_alpha=True) is None


@pytest.mark.parametrize("apply_alpha", [True, False], ids=["alpha", "noalpha"])
def test_empty_edge_set_through_the_api(apply_alpha):
    args = [t.requires_grad_(True) for t in make_args(n_edges=0)]
    with tilefuse.level(0):
        x = tilefuse.so2_mixing_stack(*args, lmax=2, focus_dim=4, apply_alpha=apply_alpha)
    assert x.shape == (0, 2, 28)
    x.sum().backward()
    for t in args[2:]:
        assert t.grad is not None and torch.count_nonzero(t.grad) == 0
    assert args[0].grad is not None and args[0].grad.shape == args[0].shape


# ---------------------------------------------------------------------------------------------
# The module.
def test_module_parameters_and_repr():
    m = SO2MixingStack(3, 8, 2, 4, dtype=torch.float64)
    m0, m1, lg, row = dims(3, 8)
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == [
        ("w0_all", (4, 2, m0, m0)), ("w1_all", (4, 2, m1, m1)), ("gw_all", (3, 2, 8, lg))]
    assert all(p.dtype == torch.float64 for p in m.parameters())
    assert m.row == row
    assert repr(m) == "SO2MixingStack(lmax=3, focus_dim=8, n_focus=2, n_layers=4, apply_alpha=True)"
    assert "apply_alpha=False" in repr(SO2MixingStack(1, 4, 1, 2, apply_alpha=False))
    assert SO2MixingStack(1, 4, 1, 2, device="meta").w0_all.device.type == "meta"


@pytest.mark.parametrize("level", [0, 2])
def test_meta_tensors_give_meta_results_and_gradients(level):
    """A model built on the meta device (memory estimators, deferred init) runs its forward and
    backward: meta results and gradients of the real call's shapes, at every level (autocast
    takes no meta device, so the IEEE block must not ask it to turn off)."""
    real = make_args(dtype=torch.float32)
    meta = [t.to("meta").requires_grad_(True) for t in real]
    with tilefuse.level(level):
        y = tilefuse.so2_mixing_stack(*meta, lmax=2, focus_dim=4)
        grads = torch.autograd.grad(y, meta, torch.ones_like(y))
    want = tilefuse.so2_mixing_stack(*real, lmax=2, focus_dim=4)
    assert y.device.type == "meta" and (y.shape, y.dtype) == (want.shape, want.dtype)
    for g, t in zip(grads, real):
        assert g.device.type == "meta" and (g.shape, g.dtype) == (t.shape, t.dtype)


@pytest.mark.parametrize("kwargs,exc,msg", [
    ({"lmax": 0}, ValueError, "lmax must be an int >= 1"),
    ({"focus_dim": 2.0}, TypeError, "focus_dim must be an int >= 1, got float"),
    ({"n_focus": True}, TypeError, "n_focus must be an int >= 1, got bool"),
    ({"n_focus": 0}, ValueError, "n_focus must be an int >= 1"),
    ({"n_layers": 1}, ValueError, "n_layers must be an int >= 2"),
    ({"apply_alpha": "yes"}, TypeError, "apply_alpha must be a bool"),
    ({"dtype": torch.int64}, TypeError, "SO2MixingStack: dtype must be None or one of"),
    ({"dtype": "float32"}, TypeError, "SO2MixingStack: dtype must be None or one of"),
])
def test_module_bad_construction(kwargs, exc, msg):
    args = {"lmax": 2, "focus_dim": 4, "n_focus": 2, "n_layers": 3, **kwargs}
    apply_alpha = args.pop("apply_alpha", True)
    with pytest.raises(exc, match=msg):
        SO2MixingStack(**args, apply_alpha=apply_alpha)


@pytest.mark.parametrize("apply_alpha", [True, False])
def test_module_names_u0_for_a_focus_count_not_its_own(apply_alpha):
    """A u0 of another F than the module's n_focus is u0's error (before, the op, which takes F
    from u0, named the module's own w0_all or a well-shaped alpha)."""
    m = SO2MixingStack(2, 3, 2, 3, apply_alpha=apply_alpha)
    u0 = torch.randn(3, 5, m.row)
    alpha = torch.rand(5, 2) + 0.1 if apply_alpha else None
    with pytest.raises(ValueError, match=r"SO2MixingStack: u0 must have shape \(F, E, ROW\) with F = n_focus = 2, "
                                         r"got \(3, 5, 21\)"):
        m(u0, alpha)
    assert m(u0[:2], alpha).shape == (5, 2, m.row)   # x_local (E, F, ROW)


def test_module_init_scale_and_w1_pattern():
    torch.manual_seed(0)
    lmax, cf = 3, 32
    m0, m1, lg, _ = dims(lmax, cf)
    m = SO2MixingStack(lmax, cf, 2, 3, dtype=torch.float64)
    w1 = m.w1_all.detach()
    # The complex-multiplication pattern [[A, B], [-B, A]] over the (m=-1, m=+1) stripes.
    assert torch.equal(w1[..., :lg, :lg], w1[..., lg:, lg:])
    assert torch.equal(w1[..., :lg, lg:], -w1[..., lg:, :lg])
    # N(0, 1/fan_in): the sample std of N draws has relative standard deviation 1/sqrt(2N);
    # 6 of those is a false-alarm rate below 1e-8 (N >= 6144 here: gw_all, 2*2*32*96).
    for p, fan_in, n in ((m.w0_all, m0, m.w0_all.numel()), (w1[..., :lg, :], m1, w1[..., :lg, :].numel()),
                         (m.gw_all, cf, m.gw_all.numel())):
        rel = float(p.detach().std()) * math.sqrt(fan_in) - 1.0
        assert abs(rel) < 6 / math.sqrt(2 * n), (fan_in, rel)


def test_fresh_module_is_so2_equivariant():
    """Rotating every (m=-1, m=+1) column pair of the input by phi rotates the output's pairs
    by phi and leaves the m=0 block unchanged (the gates read only the invariant scalars)."""
    torch.manual_seed(1)
    lmax, cf, n_focus, n_edges = 2, 4, 2, 6
    m0, m1, lg, row = dims(lmax, cf)
    m = SO2MixingStack(lmax, cf, n_focus, 3, dtype=torch.float64)
    u0 = torch.randn(n_focus, n_edges, row, dtype=torch.float64)
    alpha = torch.rand(n_edges, n_focus, dtype=torch.float64) + 0.2

    def rotate(x, phi):   # the stripes are the last ROW - M0 columns, either layout (F, E, ROW) / (E, F, ROW)
        c, s = math.cos(phi), math.sin(phi)
        p, q = x[..., m0:m0 + lg], x[..., m0 + lg:]
        return torch.cat([x[..., :m0], c * p - s * q, s * p + c * q], -1)

    with tilefuse.level(0):
        y = m(u0, alpha)
        y_rot = m(rotate(u0, 0.7), alpha)
    # float64, all entries O(1): rotation and the stack each round at ~1e-16 per op over a few
    # hundred ops on the longest path; 1e-12 absolute is > 10x that and far below any
    # equivariance break (O(1) changes for a generic w1).
    torch.testing.assert_close(y_rot, rotate(y, 0.7), rtol=0, atol=1e-12)
    assert (y_rot - y).abs().max() > 0.1    # the rotation did move the output


def test_module_forward_equals_reference_at_level_0():
    m = SO2MixingStack(2, 4, 2, 3)
    u0, alpha = make_args()[:2]
    with tilefuse.level(0):
        x = m(u0, alpha)
    want = so2_stack_reference(u0, alpha, m.w0_all, m.w1_all, m.gw_all, lmax=2, focus_dim=4, apply_alpha=True)
    assert torch.equal(x, want)   # level 0 runs the reference itself: same arithmetic, bitwise
    assert x.is_contiguous() and not want.is_contiguous()   # made contiguous, as the kernels' output is


def test_module_without_alpha():
    m = SO2MixingStack(2, 4, 2, 3, apply_alpha=False)
    u0, alpha = make_args()[:2]
    with tilefuse.level(0):
        x = m(u0)
        assert torch.equal(x, m(u0, alpha))    # alpha is not applied
    want = so2_stack_reference(u0, alpha, m.w0_all, m.w1_all, m.gw_all, lmax=2, focus_dim=4, apply_alpha=False)
    assert torch.equal(x, want)
    with pytest.raises(ValueError, match="alpha .* is required when apply_alpha=True"):
        SO2MixingStack(2, 4, 2, 3)(u0)
    with pytest.raises(ValueError, match="u0's last dimension"):
        m(u0[..., :-1])


def test_module_state_dict_round_trip():
    src = SO2MixingStack(2, 4, 2, 3)
    sd = src.state_dict()
    assert list(sd) == ["w0_all", "w1_all", "gw_all"]
    dst = SO2MixingStack(2, 4, 2, 3)
    assert not torch.equal(dst.w0_all, src.w0_all)
    dst.load_state_dict(sd)
    for name in sd:
        assert torch.equal(getattr(dst, name), sd[name])
    u0, alpha = make_args()[:2]
    with tilefuse.level(0):
        assert torch.equal(dst(u0, alpha), src(u0, alpha))
    with pytest.raises(RuntimeError, match="size mismatch"):
        SO2MixingStack(3, 4, 2, 3).load_state_dict(sd)


@pytest.mark.parametrize("level", [0, 2])
def test_gradients_reach_every_parameter(level):
    """At level 0 (reference) and at the default level (the custom op; Triton's interpreter on
    CPU): every parameter, u0 and alpha get finite gradients that are not all zero."""
    torch.manual_seed(2)
    m = SO2MixingStack(1, 4, 2, 3)
    u0, alpha = (t.requires_grad_(True) for t in make_args(lmax=1, cf=4, n_edges=5)[:2])
    with tilefuse.level(level):
        m(u0, alpha).square().sum().backward()
    for name, t in [("u0", u0), ("alpha", alpha)] + list(m.named_parameters()):
        assert t.grad is not None and t.grad.shape == t.shape, name
        assert torch.isfinite(t.grad).all() and torch.count_nonzero(t.grad) > 0, name


def test_public_exports():
    assert "so2_mixing_stack" in tilefuse.__all__ and tilefuse.so2_mixing_stack is not None
    assert tilefuse.nn.SO2MixingStack is SO2MixingStack


@pytest.mark.parametrize("level", [1, 2, 3])
def test_float64_runs_the_float64_reference_at_every_level(level):
    """float64 inputs never reach the kernels (which compute in float32, and in TF32 for a
    non-float32 dtype): the eager call and the custom ops run the reference in float64, whose
    output (made contiguous, as the kernels' is) and gradients are bitwise the reference's, and
    gradcheck passes."""
    from tilefuse import launches
    from tilefuse.ops.so2_mixing_stack.op import so2_stack_bwd_op, so2_stack_fwd_op
    torch.manual_seed(3)
    args = [t.requires_grad_(True) for t in make_args(lmax=1, cf=2, n_edges=3, dtype=torch.float64)]
    kw = {"lmax": 1, "focus_dim": 2}
    with tilefuse.level(level), launches.counting() as launched:
        out = tilefuse.so2_mixing_stack(*args, **kw)
        grads = torch.autograd.grad(out.square().sum(), args)
        saved = so2_stack_fwd_op(*args, 1, 2, True)
        x_local = saved[0]
        so2_stack_bwd_op(torch.ones_like(x_local), *saved, *args[1:], 1, 2, True, True)
        assert torch.autograd.gradcheck(lambda *a: tilefuse.so2_mixing_stack(*a, **kw), args)
    assert sum(launched.values()) == 0, dict(launched)
    want = so2_stack_reference(*args, **kw).contiguous()   # the API's output is contiguous on every path
    assert out.is_contiguous() and out.dtype == torch.float64 and torch.equal(out, want)
    for got, ref in zip(grads, torch.autograd.grad(want.square().sum(), args)):
        assert torch.equal(got, ref)
    assert torch.equal(x_local, want.contiguous())


def _rel64(got, want):
    got, want = got.detach().double(), want.detach()
    return float((got - want).norm() / want.norm())


def _f64_grads(args, kw):
    ins = [t.detach().double().requires_grad_(True) for t in args]
    return torch.autograd.grad(so2_stack_reference(*ins, **kw).square().sum(), ins)


def test_u0_may_come_by_keyword():
    """Every argument by keyword, u0 included (the device decorator takes the first argument
    under its name): the positional call's result."""
    torch.manual_seed(4)
    u0, alpha, w0, w1, gw = make_args(lmax=1, cf=4, n_edges=5)
    want = tilefuse.so2_mixing_stack(u0, alpha, w0, w1, gw, lmax=1, focus_dim=4)
    got = tilefuse.so2_mixing_stack(u0=u0, alpha=alpha, w0_all=w0, w1_all=w1, gw_all=gw, lmax=1, focus_dim=4)
    assert torch.equal(got, want)


def test_torch_func_transforms_and_forward_ad_run_the_reference():
    """torch.func.grad, vmap and jvp, and forward-mode AD (the kernels' autograd.Function
    implements none of them): the reference runs, and the results are float64's within fp32
    rounding, as at level 0."""
    from torch.autograd import forward_ad
    torch.manual_seed(5)
    args = make_args(lmax=1, cf=4, n_edges=5)
    kw = {"lmax": 1, "focus_dim": 4}
    u0, rest = args[0], args[1:]

    def loss(u):
        return tilefuse.so2_mixing_stack(u, *rest, **kw).square().sum()
    assert _rel64(torch.func.grad(loss)(u0), _f64_grads(args, kw)[0]) <= 1e-5
    batched = torch.func.vmap(lambda u: tilefuse.so2_mixing_stack(u, *rest, **kw))(torch.stack([u0, 2 * u0]))
    assert torch.allclose(batched[1], tilefuse.so2_mixing_stack(2 * u0, *rest, **kw), rtol=1e-5, atol=1e-6)
    tangent = torch.randn_like(u0)
    _, jvp = torch.func.jvp(lambda u: tilefuse.so2_mixing_stack(u, *rest, **kw), (u0,), (tangent,))
    ins = [t.double() for t in args]
    _, want = torch.func.jvp(lambda u: so2_stack_reference(u, *ins[1:], **kw), (ins[0],), (tangent.double(),))
    assert _rel64(jvp, want) <= 1e-5
    with forward_ad.dual_level():
        y = tilefuse.so2_mixing_stack(forward_ad.make_dual(u0, tangent), *rest, **kw)
        assert _rel64(forward_ad.unpack_dual(y).tangent, want) <= 1e-5


def test_the_older_vmaps_batched_gradients_run_the_reference():
    """autograd.grad's is_grads_batched and jacobian(vectorize=True) hand the kernels' backward
    the older vmap's batched tensors, which the kernels cannot read: the backward then
    differentiates the reference, and the results (u0's and every weight's gradient) are
    float64's within fp32 rounding."""
    torch.manual_seed(6)
    args = make_args(lmax=1, cf=4, n_focus=1, n_edges=2)
    kw = {"lmax": 1, "focus_dim": 4}
    ins64 = [t.double() for t in args]
    got = torch.autograd.functional.jacobian(lambda u: tilefuse.so2_mixing_stack(u, *args[1:], **kw),
                                             args[0], vectorize=True)
    want = torch.autograd.functional.jacobian(lambda u: so2_stack_reference(u, *ins64[1:], **kw), ins64[0])
    assert _rel64(got, want) <= 1e-5
    leaves = [t.clone().requires_grad_(True) for t in args]
    y = tilefuse.so2_mixing_stack(*leaves, **kw)
    grad_outs = torch.randn((3,) + y.shape)
    got = torch.autograd.grad(y, leaves, grad_outs, is_grads_batched=True)
    leaves64 = [t.requires_grad_(True) for t in ins64]
    y64 = so2_stack_reference(*leaves64, **kw)
    for i in range(3):
        want = torch.autograd.grad(y64, leaves64, grad_outs[i].double(), retain_graph=True)
        for a, b in zip(got, want):
            assert _rel64(a[i], b) <= 1e-5


def _custom_op_calls(counter):
    """How many calls of the custom forward op the graphs ``counter`` compiled hold."""
    return sum(node.target is torch.ops.tilefuse.so2_stack_fwd.default
               for graph in counter.graphs for node in graph.graph.nodes)


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_compiled_torch_func_and_forward_ad_run_the_reference(backend):
    """Inside torch.compile(fullgraph=True), torch.func's jvp, grad, jacrev and vmap and
    forward-mode AD differentiate the reference, as eager calls do, with autocast off: the
    custom op has a backward rule only, through which a jvp's tangent would be all zeros,
    forward-mode AD's None and grad a TorchRuntimeError. The results are float64's within
    fp32 rounding, the tangents also under a bfloat16 autocast region (bfloat16 GEMMs would
    be ~1e-3 off; grad's backward, autograd's of the reference's ops, runs in the region
    around it, as eagerly), and a plain compiled call still runs the custom op. Inductor
    (~15 s to build on a CPU: marked slow) takes jvp only."""
    from torch._dynamo.testing import CompileCounterWithBackend
    from torch.autograd import forward_ad
    torch.manual_seed(8)
    args = make_args(lmax=1, cf=4, n_focus=1, n_edges=3)
    kw = {"lmax": 1, "focus_dim": 4}
    u0, rest = args[0], args[1:]
    ins64 = [t.double() for t in args]
    tangent = torch.randn_like(u0)
    _, want_jvp = torch.func.jvp(lambda u: so2_stack_reference(u, *ins64[1:], **kw), (ins64[0],), (tangent.double(),))

    def f(u):
        return tilefuse.so2_mixing_stack(u, *rest, **kw)

    def compiled(fn, fullgraph=True):
        counter = CompileCounterWithBackend(backend)
        return torch.compile(fn, backend=counter, fullgraph=fullgraph), counter

    def forward_mode(u):
        with forward_ad.dual_level():
            return forward_ad.unpack_dual(f(forward_ad.make_dual(u, tangent))).tangent
    torch._dynamo.reset()
    jvp, counter = compiled(lambda u: torch.func.jvp(f, (u,), (tangent,))[1])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = jvp(u0)
    assert got.dtype == torch.float32 and _rel64(got, want_jvp) <= 1e-5
    assert _custom_op_calls(counter) == 0
    if backend == "inductor":
        return
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert _rel64(compiled(forward_mode, fullgraph=False)[0](u0), want_jvp) <= 1e-5
    grad = compiled(torch.func.grad(lambda u: f(u).square().sum()))[0](u0)
    assert _rel64(grad, _f64_grads(args, kw)[0]) <= 1e-5
    jac = compiled(torch.func.jacrev(f))[0](u0)
    want_jac = torch.func.jacrev(lambda u: so2_stack_reference(u, *ins64[1:], **kw))(ins64[0])
    assert _rel64(jac, want_jac) <= 1e-5
    batched = compiled(torch.func.vmap(f))[0](torch.stack([u0, 2 * u0]))
    assert _rel64(batched[1], so2_stack_reference(2 * ins64[0], *ins64[1:], **kw)) <= 1e-5
    plain, counter = compiled(lambda *a: tilefuse.so2_mixing_stack(*a, **kw))
    leaves = [t.clone().requires_grad_(True) for t in args]
    plain(*leaves).square().sum().backward()
    assert _custom_op_calls(counter) == 1
    assert _rel64(leaves[0].grad, _f64_grads(args, kw)[0]) <= 1e-5


@pytest.mark.parametrize("where", ["autocast", "fp32_precision tf32"])
def test_the_backward_keeps_ieee_fp32_under_the_callers_settings(where):
    """The backward's torch GEMMs (the weight gradients, the gate's s @ gw) run in IEEE float32
    whatever the caller set around the call (utils.ieee_matmul): an autocast region over forward
    and backward (it would run them in bfloat16), or the per-backend ``fp32_precision`` setting
    (with it set, torch refuses reads of the legacy one), whose value comes back afterwards."""
    import contextlib
    torch.manual_seed(6)
    args = [t.requires_grad_(True) for t in make_args(lmax=2, n_focus=1, cf=8, n_edges=6)]
    kw = {"lmax": 2, "focus_dim": 8}
    new_api = hasattr(torch.backends.cuda.matmul, "fp32_precision")
    if where != "autocast" and not new_api:
        pytest.skip("this torch has no per-backend fp32_precision")
    saved = torch.backends.cuda.matmul.fp32_precision if new_api else None
    try:
        if where == "autocast":
            ctx = torch.autocast("cpu", dtype=torch.bfloat16)
        else:
            torch.backends.cuda.matmul.fp32_precision = "tf32"
            ctx = contextlib.nullcontext()
        with ctx:
            grads = torch.autograd.grad(tilefuse.so2_mixing_stack(*args, **kw).square().sum(), args)
        if where != "autocast":
            assert torch.backends.cuda.matmul.fp32_precision == "tf32"
    finally:
        if new_api:
            torch.backends.cuda.matmul.fp32_precision = saved
    for got, want in zip(grads, _f64_grads(args, kw)):
        assert _rel64(got, want) <= 1e-5


def test_the_reference_paths_are_exact_under_an_autocast_region():
    """The reference runs in IEEE float32 with autocast off (utils.ieee_matmul) wherever it
    runs, as the kernels (level 2) compute: under a bfloat16 autocast region the outputs of
    level 0 and torch.func, level 0's gradients and the first-order gradients of a create_graph
    backward, both taken inside the region, and the custom ops' reference branches (level 0)
    are float64's within fp32 rounding (in bfloat16 they would be ~1e-3 off). torch.func's
    gradients are autograd's of the reference's ops, taken here outside the region, as PyTorch
    advises running a backward."""
    from tilefuse.ops.so2_mixing_stack.op import so2_stack_bwd_op, so2_stack_fwd_op
    torch.manual_seed(7)
    args = make_args(lmax=2, n_focus=1, cf=8, n_edges=6)
    kw = {"lmax": 2, "focus_dim": 8}
    grad_out = torch.randn(6, 1, dims(2, 8)[3])
    ins64 = [t.double().requires_grad_(True) for t in args]
    out64 = so2_stack_reference(*ins64, **kw)
    grads64 = torch.autograd.grad(out64, ins64, grad_out.double())
    leaves = {level: [t.clone().requires_grad_(True) for t in args] for level in (0, 2)}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        outs = {}
        for level, ls in leaves.items():
            with tilefuse.level(level):
                outs[level] = tilefuse.so2_mixing_stack(*ls, **kw)
        out_func, vjp_fn = torch.func.vjp(lambda *a: tilefuse.so2_mixing_stack(*a, **kw), *args)
        create_graph = torch.autograd.grad(outs[2], leaves[2], grad_out, create_graph=True)
        level0 = torch.autograd.grad(outs[0], leaves[0], grad_out)
        with tilefuse.level(0):
            saved = so2_stack_fwd_op(*args, 2, 8, True)
            op_grads = so2_stack_bwd_op(grad_out, *saved, *args[1:], 2, 8, True, True)
    for got in (outs[0], outs[2], out_func, saved[0]):
        assert _rel64(got, out64) <= 1e-5
    for grads in (create_graph, level0, vjp_fn(grad_out), op_grads):
        for got, want in zip(grads, grads64):
            assert _rel64(got, want) <= 1e-5



@pytest.mark.parametrize("level", [0, 2])
def test_alpha_alone_needing_a_gradient_without_apply_alpha_gets_zeros_in_every_backward(level):
    """apply_alpha=False leaves alpha unused: a first-order, a create_graph and a batched
    backward each give it zeros (the two re-run the reference, whose output then has no graph)."""
    u0, alpha, w0, w1, gw = make_args(lmax=1, cf=4)
    alpha.requires_grad_()
    kw = {"lmax": 1, "focus_dim": 4, "apply_alpha": False}
    with tilefuse.level(level):
        out = tilefuse.so2_mixing_stack(u0, alpha, w0, w1, gw, **kw)
        first, = torch.autograd.grad(out.sum(), alpha)
        out = tilefuse.so2_mixing_stack(u0, alpha, w0, w1, gw, **kw)
        second, = torch.autograd.grad(out.sum(), alpha, create_graph=True)
        out = tilefuse.so2_mixing_stack(u0, alpha, w0, w1, gw, **kw)
        batched, = torch.autograd.grad(out, alpha, torch.ones(3, *out.shape), is_grads_batched=True)
    assert torch.equal(first, torch.zeros_like(alpha)) and torch.equal(second, torch.zeros_like(alpha))
    assert torch.equal(batched, torch.zeros(3, *alpha.shape))
