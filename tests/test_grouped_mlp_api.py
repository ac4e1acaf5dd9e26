"""grouped_glu_mlp public surface: argument checks (every bad input names its argument), the
GroupedGLUMLP module (parameters, initialisation, state dict, forward wiring)."""

import math
import sys
import types

import pytest
import torch

import tilefuse
from tilefuse.nn import GroupedGLUMLP
from tilefuse.ops.grouped_glu_mlp.reference import grouped_glu_mlp_reference
from tilefuse.ops.grouped_glu_mlp.validate import validate

API_MODULE = "tilefuse.ops.grouped_glu_mlp.api"


pytestmark = pytest.mark.usefixtures("one_intra_op_thread")


# E 3, T 6, H 8, F 4 (2F 8), glu_interleave 2.
E, T, H, F = 3, 6, 8, 4


def make_args(dtype=torch.float32, n_tokens=T, bias=True, device="cpu"):
    kw = {"dtype": dtype, "device": device}
    counts = [n_tokens // 2, 0, n_tokens - n_tokens // 2]
    return {
        "x": torch.randn(n_tokens, H, **kw),
        "tokens_per_expert": torch.tensor(counts, device=device),
        "probs": torch.rand(n_tokens, dtype=torch.float32, device=device),
        "fc1_weight": torch.randn(E, 2 * F, H, **kw),
        "fc2_weight": torch.randn(E, H, F, **kw),
        "fc1_bias": torch.randn(E, 2 * F, **kw) if bias else None,
        "fc2_bias": torch.randn(E, H, **kw) if bias else None,
    }


OK = {"activation": "swiglu", "glu_interleave": 2, "recipe": None}


def run_validate(args, **kwargs):
    kw = {**OK, **kwargs}
    return validate(args["x"], args["tokens_per_expert"], args["probs"], args["fc1_weight"], args["fc2_weight"],
                    fc1_bias=args["fc1_bias"], fc2_bias=args["fc2_bias"], **kw)


# ---------------------------------------------------------------------------------------------
# Argument checks
def _bad_cases():
    a = make_args()
    x, counts, probs, w1, w2, b1, b2 = (a[k] for k in ("x", "tokens_per_expert", "probs", "fc1_weight", "fc2_weight",
                                                       "fc1_bias", "fc2_bias"))
    meta = torch.empty_like(w2, device="meta")

    def case(exc, msg, **kwargs):
        tensors = {k: kwargs.pop(k) for k in list(kwargs) if k in a}
        return pytest.param({**a, **tensors}, kwargs, exc, msg, id=msg[:48])

    return [
        # recipe, activation, glu_interleave (values, not tensors)
        case(ValueError, "recipe 'fp8_block' needs the hidden size H .* multiples of 128", recipe="fp8_block"),
        case(ValueError, "recipe 'mxfp8' needs the hidden size H .* multiples of 32", recipe="mxfp8"),
        case(ValueError, "recipe 'nvfp4' needs the hidden size H .* multiples of 16", recipe="nvfp4"),
        case(ValueError, "recipe must be None or one of .* got 'fp8'", recipe="fp8"),
        case(TypeError, "recipe must be None or a str", recipe=8),
        case(ValueError, r"activation must be one of \('swiglu', 'geglu'\), got 'gelu'", activation="gelu"),
        case(ValueError, "activation must be one of", activation="SwiGLU"),
        case(TypeError, "activation must be a str", activation=None),
        case(TypeError, "glu_interleave must be None or an int", glu_interleave=2.0),
        case(TypeError, "glu_interleave must be None or an int", glu_interleave=True),
        case(ValueError, "glu_interleave must be a positive int, got 0", glu_interleave=0),
        case(ValueError, "glu_interleave must be a positive int, got -2", glu_interleave=-2),
        case(ValueError, r"glu_interleave=3 must divide the FFN width F = fc2_weight.shape\[2\] = 4", glu_interleave=3),
        case(ValueError, "glu_interleave=32 must divide", glu_interleave=32),
        # x
        case(TypeError, "x must be a torch.Tensor", x=x.tolist()),
        case(TypeError, "x must be float32, bfloat16 or float16, got torch.float64", x=x.double()),
        case(TypeError, "x must be float32, bfloat16 or float16, got torch.int64", x=x.long()),
        case(ValueError, r"x must be 2-D \(T, H\), got shape \(8,\)", x=x[0]),
        case(ValueError, r"x must be 2-D \(T, H\)", x=x[None]),
        case(ValueError, r"x must have H = x.shape\[1\] >= 1", x=x[:, :0]),
        case(ValueError, r"x has T = 2147483648 rows; at most 2147483647", x=x[:1].expand(2 ** 31, 8)),
        # fc1_weight: kind, dtype, device, shape
        case(TypeError, "fc1_weight must be a torch.Tensor", fc1_weight=None),
        case(TypeError, "fc1_weight is torch.bfloat16 but x is torch.float32", fc1_weight=w1.bfloat16()),
        case(TypeError, "fc1_weight must be float32", fc1_weight=w1.int()),
        case(ValueError, "fc1_weight is on meta but x is on cpu", fc1_weight=torch.empty_like(w1, device="meta")),
        case(ValueError, r"fc1_weight must be 3-D \(E, 2F, H\)", fc1_weight=w1[0]),
        case(ValueError, "fc1_weight must hold E >= 1 experts", fc1_weight=w1[:0]),
        case(ValueError, r"fc1_weight.shape\[1\] must be 2F with F >= 1", fc1_weight=w1[:, :7]),
        case(ValueError, r"fc1_weight.shape\[1\] must be 2F with F >= 1", fc1_weight=w1[:, :0]),
        case(ValueError, r"fc1_weight must have shape \(E, 2F, H\) with H = x.shape\[1\] = 8", fc1_weight=w1[..., :7]),
        case(ValueError, r"fc1_weight must have shape \(E, 2F, H\) with H .* got shape \(3, 8, 9\)",
             fc1_weight=torch.cat([w1, w1[..., :1]], -1)),
        # fc2_weight
        case(TypeError, "fc2_weight must be a torch.Tensor", fc2_weight=w2.numpy()),
        case(TypeError, "fc2_weight is torch.float16 but x is torch.float32", fc2_weight=w2.half()),
        case(ValueError, "fc2_weight is on meta", fc2_weight=meta),
        case(ValueError, r"fc2_weight must have shape \(E, H, F\) = \(3, 8, 4\), got \(3, 4, 8\)",
             fc2_weight=w2.transpose(1, 2)),
        case(ValueError, r"fc2_weight must have shape \(E, H, F\) = \(3, 8, 4\), got \(2, 8, 4\)", fc2_weight=w2[:2]),
        case(ValueError, r"fc2_weight must have shape \(E, H, F\) = \(3, 8, 4\), got \(8, 4\)", fc2_weight=w2[0]),
        # tokens_per_expert
        case(TypeError, "tokens_per_expert must be a torch.Tensor", tokens_per_expert=[3, 0, 3]),
        case(TypeError, "tokens_per_expert must be int32 or int64, got torch.float32", tokens_per_expert=counts.float()),
        case(TypeError, "tokens_per_expert must be int32 or int64, got torch.int16", tokens_per_expert=counts.short()),
        case(TypeError, "tokens_per_expert must be int32 or int64, got torch.bool", tokens_per_expert=counts.bool()),
        case(ValueError, "tokens_per_expert is on meta but x is on cpu",
             tokens_per_expert=torch.empty_like(counts, device="meta")),
        case(ValueError, r"tokens_per_expert must have shape \(E,\) with E = fc1_weight.shape\[0\] = \(3,\), got \(2,\)",
             tokens_per_expert=counts[:2]),
        case(ValueError, r"tokens_per_expert must have shape \(E,\) .* got \(1, 3\)", tokens_per_expert=counts[None]),
        case(ValueError, r"tokens_per_expert must have shape \(E,\) .* got \(\)", tokens_per_expert=counts.sum()),
        # probs
        case(TypeError, "probs must be a torch.Tensor", probs=0.5),
        case(TypeError, "probs must be float32, bfloat16 or float16, got torch.float64", probs=probs.double()),
        case(TypeError, r"probs must be float32 or x's dtype \(torch.float32\), got torch.bfloat16",
             probs=probs.bfloat16()),
        case(ValueError, "probs is on meta", probs=torch.empty_like(probs, device="meta")),
        case(ValueError, r"probs must have shape \(T,\) with T = x.shape\[0\] = \(6,\), got \(5,\)", probs=probs[:5]),
        case(ValueError, r"probs must have shape \(T,\) .* got \(6, 1\)", probs=probs[:, None]),
        # biases
        case(TypeError, "fc1_bias must be None or a float32, bfloat16 or float16 tensor", fc1_bias=b1.double()),
        case(TypeError, "fc1_bias must be a torch.Tensor", fc1_bias=1.0),
        case(TypeError, "fc1_bias is torch.bfloat16 but x is torch.float32", fc1_bias=b1.bfloat16()),
        case(ValueError, "fc1_bias is on meta", fc1_bias=torch.empty_like(b1, device="meta")),
        case(ValueError, r"fc1_bias must have shape \(E, 2F\) = \(3, 8\), got \(3, 4\)", fc1_bias=b1[:, :4]),
        case(ValueError, r"fc1_bias must have shape \(E, 2F\) = \(3, 8\), got \(8,\)", fc1_bias=b1[0]),
        case(TypeError, "fc2_bias is torch.float16 but x is torch.float32", fc2_bias=b2.half()),
        case(ValueError, r"fc2_bias must have shape \(E, H\) = \(3, 8\), got \(3, 4\)", fc2_bias=b1[:, :4]),
        case(ValueError, r"fc2_bias must have shape \(E, H\) = \(3, 8\), got \(2, 8\)", fc2_bias=b2[:2]),
    ]


@pytest.mark.parametrize("args,kwargs,exc,msg", _bad_cases())
def test_bad_inputs_name_the_argument(args, kwargs, exc, msg):
    with pytest.raises(exc, match="grouped_glu_mlp: " + msg):
        run_validate(args, **kwargs)


@pytest.mark.parametrize("args,kwargs,exc,msg", _bad_cases()[::4])
def test_public_function_checks_before_it_dispatches(args, kwargs, exc, msg):
    from tilefuse.ops.grouped_glu_mlp.api import grouped_glu_mlp
    kw = {**OK, **kwargs}
    for level in (0, 2):
        with tilefuse.level(level), pytest.raises(exc, match=msg):
            grouped_glu_mlp(args["x"], args["tokens_per_expert"], args["probs"], args["fc1_weight"],
                            args["fc2_weight"], fc1_bias=args["fc1_bias"], fc2_bias=args["fc2_bias"], **kw)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("n_tokens", [0, 1, 6])
def test_good_inputs_pass(dtype, n_tokens):
    args = make_args(dtype=dtype, n_tokens=n_tokens)
    for interleave in (None, 1, 2, 4):
        for activation in ("swiglu", "geglu"):
            assert run_validate(args, glu_interleave=interleave, activation=activation) is None
    # probs in x's dtype, int32 counts, no biases, one bias, a single expert.
    assert run_validate({**args, "probs": args["probs"].to(dtype)}) is None
    assert run_validate({**args, "tokens_per_expert": args["tokens_per_expert"].int()}) is None
    assert run_validate({**args, "fc1_bias": None, "fc2_bias": None}) is None
    assert run_validate({**args, "fc2_bias": None}) is None
    single = {**args, "tokens_per_expert": torch.tensor([n_tokens]), "fc1_weight": args["fc1_weight"][:1],
              "fc2_weight": args["fc2_weight"][:1], "fc1_bias": args["fc1_bias"][:1], "fc2_bias": args["fc2_bias"][:1]}
    assert run_validate(single) is None


def test_validate_reads_no_values():
    """Counts that do not sum to T pass validate: checking them would read the device. The
    paths check them where they can (test_grouped_mlp_reference.py::test_unfused_checks_counts)."""
    args = make_args()
    assert run_validate({**args, "tokens_per_expert": torch.tensor([100, -3, 0])}) is None


# ---------------------------------------------------------------------------------------------
# The module
def test_module_parameters_and_repr():
    m = GroupedGLUMLP(4, 16, 12, glu_interleave=4, bias=True)
    shapes = {name: tuple(p.shape) for name, p in m.named_parameters()}
    assert shapes == {"fc1_weight": (4, 24, 16), "fc2_weight": (4, 16, 12), "fc1_bias": (4, 24), "fc2_bias": (4, 16)}
    assert "glu_interleave=4" in repr(m) and "bias=True" in repr(m) and "activation='swiglu'" in repr(m)
    m = GroupedGLUMLP(2, 8, 64)
    assert m.fc1_bias is None and m.fc2_bias is None
    assert [name for name, _ in m.named_parameters()] == ["fc1_weight", "fc2_weight"]
    assert (m.activation, m.glu_interleave, m.recipe) == ("swiglu", 32, None)
    m = GroupedGLUMLP(2, 8, 4, activation="geglu", glu_interleave=None, dtype=torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 for p in m.parameters()) and m.glu_interleave is None
    m = GroupedGLUMLP(2, 8, 4, glu_interleave=None, device="meta")
    assert all(p.device.type == "meta" for p in m.parameters())


@pytest.mark.parametrize("kwargs,exc,msg", [
    ({"num_experts": 0}, ValueError, "num_experts must be a positive int"),
    ({"hidden_size": 8.0}, TypeError, "hidden_size must be a positive int, got float"),
    ({"ffn_hidden_size": True}, TypeError, "ffn_hidden_size must be a positive int, got bool"),
    ({"glu_interleave": 32, "ffn_hidden_size": 48}, ValueError,
     r"glu_interleave=32 must divide the FFN width F = ffn_hidden_size = 48"),
    ({"activation": "relu"}, ValueError, "activation must be one of"),
    ({"bias": 1}, TypeError, "bias must be a bool"),
    ({"recipe": "nvfp4"}, ValueError,
     r"recipe 'nvfp4' needs the hidden size H \(hidden_size\) and the FFN width F \(ffn_hidden_size\) .* multiples of 16"),
    ({"dtype": torch.int64}, TypeError, "GroupedGLUMLP: dtype must be None or one of"),
    ({"dtype": torch.float64}, TypeError, "GroupedGLUMLP: dtype must be None or one of"),
    ({"recipe": "bf16"}, ValueError, "recipe must be None"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_module_rejects_bad_configuration(kwargs, exc, msg):
    args = {"num_experts": 2, "hidden_size": 8, "ffn_hidden_size": 64, **kwargs}
    positional = [args.pop(k) for k in ("num_experts", "hidden_size", "ffn_hidden_size")]
    with pytest.raises(exc, match=msg):
        GroupedGLUMLP(*positional, **args)


def test_module_refuses_a_float64_default_dtype():
    """dtype None takes torch's default dtype for the parameters: float64 there was built, and
    every forward then raised on the parameters' dtype, not naming the cause."""
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with pytest.raises(TypeError, match="dtype None takes torch's default dtype, torch.float64"):
            GroupedGLUMLP(2, 8, 64)
        assert GroupedGLUMLP(2, 8, 64, dtype=torch.float32).fc1_weight.dtype == torch.float32
    finally:
        torch.set_default_dtype(saved)


def test_module_initialisation_is_linear_like():
    """Each expert like a fresh nn.Linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = H for FC1
    and F for FC2, biases too. Statistics over N draws: the sample std of U(-b, b) is b/sqrt(3)
    with relative standard error sqrt(0.8/N)/2 (the variance's is sqrt(0.8/N): kurtosis 9/5),
    the mean 0 with standard error b/sqrt(3N); both are checked to 6 standard errors."""
    torch.manual_seed(0)
    n_experts, hidden, ffn = 4, 64, 96
    m = GroupedGLUMLP(n_experts, hidden, ffn, glu_interleave=32, bias=True)
    for p, fan_in in ((m.fc1_weight, hidden), (m.fc2_weight, ffn), (m.fc1_bias, hidden), (m.fc2_bias, ffn)):
        bound, n = 1 / math.sqrt(fan_in), p.numel()
        p = p.detach()
        assert float(p.abs().max()) <= bound
        assert abs(float(p.std()) / (bound / math.sqrt(3)) - 1) <= 6 * math.sqrt(0.8 / n) / 2
        assert abs(float(p.mean())) <= 6 * bound / math.sqrt(3 * n)
    # nn.Linear's kaiming_uniform_(a=sqrt(5)) bound is the same 1/sqrt(fan_in); experts are
    # independent draws.
    gain = torch.nn.init.calculate_gain("leaky_relu", math.sqrt(5))
    assert gain * math.sqrt(3 / hidden) == pytest.approx(1 / math.sqrt(hidden), rel=1e-12)
    assert not torch.equal(m.fc1_weight[0], m.fc1_weight[1])
    # reset_parameters redraws from the global generator.
    torch.manual_seed(1)
    m.reset_parameters()
    first = m.fc2_weight.detach().clone()
    torch.manual_seed(1)
    m.reset_parameters()
    assert torch.equal(first, m.fc2_weight)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_module_state_dict_round_trip(bias):
    src = GroupedGLUMLP(3, 8, 4, glu_interleave=2, bias=bias)
    state = src.state_dict()
    expected = {"fc1_weight", "fc2_weight", "glu_layout"} | ({"fc1_bias", "fc2_bias"} if bias else set())
    assert set(state) == expected and int(state["glu_layout"]) == 2   # the GLU layout's record
    dst = GroupedGLUMLP(3, 8, 4, glu_interleave=2, bias=bias)
    dst.load_state_dict(state)
    for name, p in src.named_parameters():
        assert torch.equal(p, getattr(dst, name))
    with pytest.raises(RuntimeError, match="size mismatch"):
        GroupedGLUMLP(3, 8, 6, glu_interleave=2, bias=bias).load_state_dict(state)


@pytest.fixture
def recording_api(monkeypatch):
    """Replace the functional API by one that records its arguments and runs the float64
    reference: the module's wiring is tested without the kernels' path."""
    calls = []

    def grouped_glu_mlp(x, tokens_per_expert, probs, fc1_weight, fc2_weight, **kwargs):
        calls.append(((x, tokens_per_expert, probs, fc1_weight, fc2_weight), kwargs))
        kw = {k: v for k, v in kwargs.items() if k != "recipe"}
        return grouped_glu_mlp_reference(x, tokens_per_expert, probs, fc1_weight, fc2_weight, compute_dtype=torch.float64,
                                         **kw)

    stub = types.ModuleType(API_MODULE)
    stub.grouped_glu_mlp = grouped_glu_mlp
    monkeypatch.setitem(sys.modules, API_MODULE, stub)
    return calls


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_module_forward_passes_its_configuration(recording_api, bias):
    m = GroupedGLUMLP(3, 8, 4, activation="geglu", glu_interleave=2, bias=bias)
    args = make_args(bias=False)
    y = m(args["x"], args["tokens_per_expert"], args["probs"])
    (tensors, kwargs), = recording_api
    assert tensors[0] is args["x"] and tensors[1] is args["tokens_per_expert"] and tensors[2] is args["probs"]
    assert tensors[3] is m.fc1_weight and tensors[4] is m.fc2_weight
    assert kwargs == {"activation": "geglu", "glu_interleave": 2, "fc1_bias": m.fc1_bias, "fc2_bias": m.fc2_bias,
                      "recipe": None}
    assert y.shape == (T, 8) and y.dtype == torch.float32
    y.sum().backward()
    assert all(p.grad is not None for p in m.parameters())


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("interleave", [2, None], ids=lambda s: f"s{s}")
def test_module_level0_forward_and_gradients_match_reference(bias, interleave):
    """Level 0 runs the unfused composition. fp32 vs the float64 reference: H- and F-term fp32
    dots, <= (H + 2F + max(m_e) + 16) eps32 of the largest entry (as in the reference tests)."""
    torch.manual_seed(0)
    m = GroupedGLUMLP(3, 8, 4, activation="swiglu", glu_interleave=interleave, bias=bias)
    args = make_args(bias=False)
    x = args["x"].requires_grad_(True)
    probs = args["probs"].requires_grad_(True)
    with tilefuse.level(0):
        y = m(x, args["tokens_per_expert"], probs)
    leaves64 = [t.detach().double().requires_grad_(True) for t in (x, probs, *m.parameters())]
    biases = (leaves64[4], leaves64[5]) if bias else (None, None)
    y64 = grouped_glu_mlp_reference(leaves64[0], args["tokens_per_expert"], leaves64[1], leaves64[2], leaves64[3],
                                    glu_interleave=interleave, fc1_bias=biases[0], fc2_bias=biases[1],
                                    compute_dtype=torch.float64)
    k = (8 + 2 * 4 + 3 + 16) * torch.finfo(torch.float32).eps

    def close(got, ref):
        torch.testing.assert_close(got.double(), ref, rtol=k, atol=k * float(ref.abs().max()))

    close(y, y64.detach())
    dy = torch.randn_like(y)
    y.backward(dy)
    grads64 = torch.autograd.grad(y64, leaves64, dy.double())
    for got, ref in zip([x.grad, probs.grad] + [p.grad for p in m.parameters()], grads64):
        close(got, ref)


def test_module_bf16_forward_runs_in_bf16():
    m = GroupedGLUMLP(3, 8, 8, glu_interleave=None, dtype=torch.bfloat16)
    args = make_args(dtype=torch.bfloat16, bias=False)
    with tilefuse.level(0):
        y = m(args["x"], args["tokens_per_expert"], args["probs"])
    assert y.dtype == torch.bfloat16 and y.shape == (T, 8)


def _f64_grads(i, dy, interleave):
    leaves = [i[k].detach().double().requires_grad_(True) for k in ("x", "probs", "w1", "w2")]
    y = grouped_glu_mlp_reference(leaves[0], i["counts"], leaves[1], *leaves[2:], glu_interleave=interleave,
                                  compute_dtype=torch.float64)
    return torch.autograd.grad(y, leaves, dy.double())


@pytest.mark.parametrize("level", [0, 2])
def test_torch_func_transforms_and_batched_gradients_run_the_reference(level):
    """torch.func.grad and vmap, forward-mode AD, and the older vmap's batched gradients
    (is_grads_batched) hand the op tensors that own no memory: the per-expert reference runs
    (in the backward for batched gradients), and the results are float64's within fp32
    rounding, at level 0 (the unfused composition) as on the kernels' route."""
    from torch.autograd import forward_ad
    from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
    i = random_inputs([3, 0, 5], 32, 32, torch.float32, bias=False, device="cpu",
                      generator=torch.Generator().manual_seed(2))
    rest = (i["counts"], i["probs"], i["w1"], i["w2"])
    want = _f64_grads(i, i["dy"], 32)

    def rel(a, b):
        return float((a.double() - b).norm() / b.norm())
    with tilefuse.level(level):
        got = torch.func.grad(lambda x: (tilefuse.grouped_glu_mlp(x, *rest) * i["dy"]).sum())(i["x"])
        assert rel(got, want[0]) <= 1e-5
        batched = torch.func.vmap(lambda x: tilefuse.grouped_glu_mlp(x, *rest))(torch.stack([i["x"], 2 * i["x"]]))
        assert torch.allclose(batched[1], tilefuse.grouped_glu_mlp(2 * i["x"], *rest), rtol=1e-5, atol=1e-5)
        tangent = torch.randn_like(i["x"])
        with forward_ad.dual_level():
            y = tilefuse.grouped_glu_mlp(forward_ad.make_dual(i["x"], tangent), *rest)
            jvp = forward_ad.unpack_dual(y).tangent
        _, want_jvp = torch.func.jvp(lambda x: grouped_glu_mlp_reference(
            x, i["counts"], i["probs"].double(), i["w1"].double(), i["w2"].double(), compute_dtype=torch.float64),
            (i["x"].double(),), (tangent.double(),))
        assert rel(jvp, want_jvp) <= 1e-5
        leaves = [i[k].detach().requires_grad_(True) for k in ("x", "probs", "w1", "w2")]
        y = tilefuse.grouped_glu_mlp(leaves[0], i["counts"], *leaves[1:])
        dys = torch.stack([i["dy"], -2 * i["dy"]])
        got = torch.autograd.grad(y, leaves, dys, is_grads_batched=True)
        for g, w in zip(got, want):
            assert rel(g[0], w) <= 1e-5 and rel(g[1], -2 * w) <= 1e-5
    with pytest.raises(NotImplementedError, match="recipe 'nvfp4' under torch.func"):
        torch.func.grad(lambda x: tilefuse.grouped_glu_mlp(x, *rest, recipe="nvfp4").sum())(i["x"])
    # a vmapped routing (one set of counts per batch entry) is refused by name, under grad too
    counts2 = torch.stack([i["counts"], i["counts"].flip(0)])
    with pytest.raises(NotImplementedError, match="tokens_per_expert batched by torch.vmap"):
        torch.func.vmap(lambda c: tilefuse.grouped_glu_mlp(i["x"], c, *rest[1:]))(counts2)
    with pytest.raises(NotImplementedError, match="tokens_per_expert batched by torch.vmap"):
        torch.func.vmap(torch.func.grad(lambda x, c: tilefuse.grouped_glu_mlp(x, c, *rest[1:]).sum()),
                        in_dims=(None, 0))(i["x"], counts2)


@pytest.mark.parametrize("level,width,interleave", [(1, 16, 8), (0, 6, 3)], ids=["compose", "unfused-op"])
def test_compiled_torch_func_and_forward_ad_run_the_reference(level, width, interleave):
    """Inside torch.compile(fullgraph=True), torch.func's jvp, grad and vmap and forward-mode
    AD differentiate the reference's function (api._traced_reference: the per-expert loop reads
    the counts on the host, which Dynamo cannot trace), as eager calls do: the custom ops (the
    compose route's at level 1, the opaque unfused op at level 0 with H 6) have backward rules
    only, through which jvp's tangent would be all zeros, forward-mode AD's None and grad a
    TorchRuntimeError.
    Results are float64's within fp32 rounding, the jvp's under a bfloat16 autocast region too
    (its GEMMs run outside it); counts that do not sum to T raise on the device check; a plain
    compiled call still runs the custom ops."""
    from torch._dynamo.testing import CompileCounterWithBackend
    from torch.autograd import forward_ad
    from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
    i = random_inputs([3, 0, 5], width, width, torch.float32, bias=True, device="cpu",
                      generator=torch.Generator().manual_seed(6))
    names = ("x", "probs", "w1", "w2", "b1", "b2")
    args = tuple(i[k] for k in names)
    tangents = tuple(torch.randn_like(t) for t in args)

    def op(x, probs, w1, w2, b1, b2, counts=i["counts"]):
        return tilefuse.grouped_glu_mlp(x, counts, probs, w1, w2, glu_interleave=interleave, fc1_bias=b1,
                                        fc2_bias=b2)

    def op64(*a):
        return grouped_glu_mlp_reference(a[0], i["counts"], *a[1:4], glu_interleave=interleave, fc1_bias=a[4],
                                         fc2_bias=a[5], compute_dtype=torch.float64)

    def compiled(fn, fullgraph=True):
        counter = CompileCounterWithBackend("aot_eager")
        return torch.compile(fn, backend=counter, fullgraph=fullgraph), counter

    def tilefuse_ops(counter):
        return sum(str(node.target).startswith("tilefuse.") for g in counter.graphs for node in g.graph.nodes)

    def forward_mode(*a):
        with forward_ad.dual_level():
            return forward_ad.unpack_dual(op(*map(forward_ad.make_dual, a, tangents))).tangent

    def close(got, want):
        assert float((got.double() - want).norm() / want.norm()) <= 1e-5
    args64 = tuple(t.double() for t in args)
    _, want_jvp = torch.func.jvp(op64, args64, tuple(t.double() for t in tangents))
    want_grads = torch.func.grad(lambda *a: (op64(*a) * i["dy"].double()).sum(), argnums=tuple(range(6)))(*args64)
    torch._dynamo.reset()
    with tilefuse.level(level):
        jvp, counter = compiled(lambda *a: torch.func.jvp(op, a, tangents)[1])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got = jvp(*args)
        assert got.dtype == torch.float32 and tilefuse_ops(counter) == 0
        close(got, want_jvp)
        close(compiled(forward_mode, fullgraph=False)[0](*args), want_jvp)
        grads = compiled(torch.func.grad(lambda *a: (op(*a) * i["dy"]).sum(), argnums=tuple(range(6))))[0](*args)
        for got, want in zip(grads, want_grads):
            close(got, want)
        batched = compiled(torch.func.vmap(lambda x: op(x, *args[1:])))[0](torch.stack([args[0], 2 * args[0]]))
        close(batched[1], op64(2 * args64[0], *args64[1:]))
        bad = i["counts"] + torch.tensor([1, 0, 0], dtype=i["counts"].dtype)
        with pytest.raises(RuntimeError, match="tokens_per_expert must be non-negative and sum to T"):
            compiled(lambda x: torch.func.vmap(lambda x: op(x, *args[1:], counts=bad))(x))[0](args[0][None])
        plain, counter = compiled(op)
        close(plain(*args), op64(*args64))
        assert tilefuse_ops(counter) >= 1


# (level, a winner registered for T's bucket 16): where the route can depend on T (a tuned
# winner for the key at some bucket), each bucket traces its own graph; elsewhere one graph
# serves every T, as for plain PyTorch code.
TOKEN_ROUTES = [
    pytest.param(1, False, id="level1"),
    pytest.param(2, False, id="level2-no-entry"),
    pytest.param(2, True, id="level2-winner-at-T16"),
]


@pytest.mark.parametrize("dynamic", ["automatic", "mark_dynamic", "dynamic=True"])
@pytest.mark.parametrize("level,winner", TOKEN_ROUTES)
def test_compiled_calls_with_a_dynamic_token_count(dynamic, level, winner, device):
    """torch.compile(fullgraph=True) with the token count T dynamic (torch's automatic dynamic
    shapes after a second T, mark_dynamic on x's rows, or dynamic=True, where H, F and E are
    SymInts too): the model sizes reach the route lookup as plain ints (api._static_size), and
    T's power-of-two bucket (api._token_bucket, a guard on it) only where the tuning table
    holds a winner for the key at some bucket (op.route_reads_tokens): then a T of a traced
    bucket runs that graph, one of another bucket traces again, and the bucket with the winner
    runs it (the fused custom op, not the compose route's). Elsewhere one graph takes every T
    (before, every level traced once per bucket, and a ninth bucket failed fullgraph on
    Dynamo's recompile limit). Every call gives the eager call's bits (before the bucket, a
    dynamic T failed tracing: assume_constant_result cannot take a SymInt). On the suite's
    device: kernels run on a GPU, or on the CPU in the interpreter."""
    from torch._dynamo.testing import CompileCounterWithBackend
    from tilefuse.nn import GroupedGLUMLP
    from tilefuse.ops.grouped_glu_mlp.configs import heuristic
    torch.manual_seed(0)
    m = GroupedGLUMLP(2, 16, 32, device=device)
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(m, fullgraph=True, backend=counter, dynamic=True if dynamic == "dynamic=True" else None)
    entry = {"H16-F32-E2-x4-T16-swiglu-s32": heuristic("fwd", 4)} if winner else {}
    with tilefuse.tuning.registered("grouped_glu_mlp", entry), tilefuse.level(level):
        for T in (6, 10, 12, 40):
            x, probs = torch.randn(T, 16, device=device), torch.rand(T, device=device)
            counts = torch.tensor([T // 2, T - T // 2], device=device)
            if dynamic == "mark_dynamic":
                torch._dynamo.mark_dynamic(x, 0)
                torch._dynamo.mark_dynamic(probs, 0)
            assert torch.equal(compiled(x, counts, probs), m(x, counts, probs)), T
    ops = [{str(node.target) for node in g.graph.nodes if str(node.target).startswith("tilefuse.")}
           for g in counter.graphs]
    if winner:
        # buckets 8, 16 (10 and 12) and 64; automatic: T 6 static first, then 16 and 64 dynamic
        assert counter.frame_count == 3
        assert ["tilefuse.grouped_mlp_fwd.default" in o for o in ops] == [False, True, False]
    else:
        # automatic: T 6 static first, then one dynamic graph for 10, 12 and 40
        assert counter.frame_count == (2 if dynamic == "automatic" else 1)
        assert all(o == {"tilefuse.grouped_mlp_compose_fwd.default"} for o in ops), ops


def test_compiled_token_counts_over_more_buckets_than_the_recompile_limit(device):
    """Token counts over 11 power-of-two buckets (more than Dynamo's recompile_limit, 8)
    through one fullgraph compile at level 1, where the route cannot depend on T: one graph,
    the eager call's bits at every T (before, the ninth bucket's retrace failed fullgraph)."""
    from torch._dynamo.testing import CompileCounterWithBackend
    from tilefuse.nn import GroupedGLUMLP
    torch.manual_seed(0)
    m = GroupedGLUMLP(2, 16, 32, device=device)
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(m, fullgraph=True, backend=counter, dynamic=True)
    with tilefuse.level(1):
        for T in (3, 5, 9, 17, 33, 65, 129, 257, 513, 1025, 2049):   # none equal to E (duck sizing)
            x, probs = torch.randn(T, 16, device=device), torch.rand(T, device=device)
            counts = torch.tensor([T // 2, T - T // 2], device=device)
            assert torch.equal(compiled(x, counts, probs), m(x, counts, probs)), T
    assert counter.frame_count == 1


@pytest.mark.parametrize("level", [0, 1])
def test_export_with_a_dynamic_token_count_runs_at_other_counts(level):
    """torch.export of GroupedGLUMLP with T a Dim over many power-of-two buckets, where the
    route cannot depend on T: it exports (before, the bucket's guard failed the export at
    every level) and the program gives the eager module's bits at other token counts."""
    from torch.export import Dim, export
    from tilefuse.nn import GroupedGLUMLP
    torch.manual_seed(0)
    m = GroupedGLUMLP(2, 16, 32, glu_interleave=8)
    T = Dim("T", min=1, max=4096)
    with tilefuse.level(level):
        program = export(m, (torch.randn(10, 16), torch.tensor([4, 6]), torch.rand(10)),
                         dynamic_shapes={"x": {0: T}, "tokens_per_expert": None, "probs": {0: T}})
        for n in (3, 37, 300):
            x, probs, counts = torch.randn(n, 16), torch.rand(n), torch.tensor([n // 3, n - n // 3])
            assert torch.equal(program.module()(x, counts, probs), m(x, counts, probs)), n


# (level, H = F, glu_interleave, torch.func): every path of a float32 call on the CPU.
AUTOCAST_PATHS = [
    pytest.param(0, 6, 3, False, id="level0-per-expert-loop"),     # rows off 16 bytes: matmul per expert
    pytest.param(0, 16, 8, False, id="level0-grouped_mm"),
    pytest.param(1, 6, 3, False, id="level1-fused"),               # the fused kernels (interpreter)
    pytest.param(1, 16, 8, False, id="level1-compose"),
    pytest.param(0, 6, 3, True, id="torch.func-reference"),        # torch.func.vjp: the per-expert reference
]


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("level,width,interleave,functorch", AUTOCAST_PATHS)
def test_autocast_leaves_every_path_in_x_dtype_at_fp32_precision(level, width, interleave, functorch, bias):
    """A bfloat16 autocast region around a float32 call, the backward outside it (as torch's
    autocast documents): y and every gradient in float32, within fp32 rounding of the float64
    reference on every path. The bound is the reference tests' (H + 2F + max(m_e) + 16) eps32
    of the largest entry; a GEMM autocast ran in bfloat16 is off by about eps_bf16 = 2^-7
    relative, 2^16 eps32."""
    from test_grouped_mlp_reference import fp32_tolerance

    from tilefuse.ops.grouped_glu_mlp.reference import random_inputs, uses_grouped_mm
    counts = [3, 0, 5]
    i = random_inputs(counts, width, width, torch.float32, bias=bias, device="cpu",
                      generator=torch.Generator().manual_seed(4))
    assert uses_grouped_mm(i["x"], width) == (width == 16)
    names = ("x", "probs", "w1", "w2") + (("b1", "b2") if bias else ())
    leaves = [i[k].clone().requires_grad_(True) for k in names]

    def op(x, probs, w1, w2, b1=None, b2=None):
        return tilefuse.grouped_glu_mlp(x, i["counts"], probs, w1, w2, glu_interleave=interleave, fc1_bias=b1,
                                        fc2_bias=b2)
    with tilefuse.level(level):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y, vjp = torch.func.vjp(op, *leaves) if functorch else (op(*leaves), None)
        grads = vjp(i["dy"]) if functorch else torch.autograd.grad(y, leaves, i["dy"])
    leaves64 = [t.detach().double().requires_grad_(True) for t in leaves]
    biases = leaves64[4:] if bias else (None, None)
    y64 = grouped_glu_mlp_reference(leaves64[0], i["counts"], *leaves64[1:4], glu_interleave=interleave,
                                    fc1_bias=biases[0], fc2_bias=biases[1], compute_dtype=torch.float64)
    want = (y64.detach(), *torch.autograd.grad(y64, leaves64, i["dy"].double()))
    for name, got, ref in zip(("y",) + names, (y, *grads), want):
        assert got.dtype == torch.float32, f"{name}: {got.dtype}"
        torch.testing.assert_close(got.double(), ref, **fp32_tolerance(counts, width, width, ref),
                                   msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("width,interleave", [(6, 3), (16, 8)], ids=["H6", "H16"])
def test_autocast_eager_and_compiled_level0_agree(width, interleave):
    """Under a bfloat16 autocast region, level 0's eager call (the per-expert loop for H 6,
    torch._grouped_mm for H 16) and its torch.compile(fullgraph=True) graph (the opaque
    unfused op for float32) give the same float32 y."""
    from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
    i = random_inputs([3, 0, 5], width, width, torch.float32, bias=False, device="cpu",
                      generator=torch.Generator().manual_seed(5))

    def f(x, probs, w1, w2):
        return tilefuse.grouped_glu_mlp(x, i["counts"], probs, w1, w2, glu_interleave=interleave)
    args = (i["x"], i["probs"], i["w1"], i["w2"])
    torch._dynamo.reset()
    with tilefuse.level(0), torch.autocast("cpu", dtype=torch.bfloat16):
        eager = f(*args)
        compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(*args)
    assert eager.dtype == compiled.dtype == torch.float32
    torch.testing.assert_close(eager, compiled, rtol=0, atol=0)


@pytest.mark.parametrize("level", [0, 2])
def test_a_zero_tensor_gradient_gives_zero_gradients(level):
    """torch.sgn's backward hands the op a ZeroTensor gradient (zeros owning no memory): every
    gradient is zero, on the unfused composition (level 0) as on the kernels' route."""
    from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
    i = random_inputs([3, 0, 5], 32, 32, torch.float32, bias=True, device="cpu",
                      generator=torch.Generator().manual_seed(3))
    leaves = [i[k].detach().requires_grad_(True) for k in ("x", "probs", "w1", "w2", "b1", "b2")]
    with tilefuse.level(level):
        y = tilefuse.grouped_glu_mlp(leaves[0], i["counts"], *leaves[1:4], fc1_bias=leaves[4], fc2_bias=leaves[5])
        grads = torch.autograd.grad(torch.sgn(y).sum(), leaves)
    assert all(g is not None and not g.any() for g in grads)
