"""DyT public surface: modules, converters, state dicts, torch.compile, opcheck, bad input."""

import numpy
import pytest
import torch
from torch import nn

import tilefuse
from tilefuse import launches
from tilefuse.nn import DyT, convert_layernorm_to_dyt
from tilefuse.ops.dyt.op import backward_impl, dyt_op
from tilefuse.ops.dyt.reference import dyt_reference

from dyt_helpers import make_inputs


def test_module_defaults_and_names(device):
    m = DyT(24, alpha_init=0.2, device=device)
    assert [n for n, _ in m.named_parameters()] == ["alpha", "weight", "bias"]
    assert m.alpha.item() == pytest.approx(0.2) and torch.equal(m.weight, torch.ones(24, device=device))
    assert DyT(8, bias=False).bias is None
    x = torch.randn(3, 5, 24, device=device)
    torch.testing.assert_close(m(x), dyt_reference(x, m.alpha, m.weight, m.bias), rtol=1e-6, atol=1e-6)


def test_state_dict_with_liger_names_loads(device):
    src = {"alpha": torch.tensor([0.7]), "gamma": torch.randn(16), "beta": torch.randn(16)}
    m = DyT(16).to(device)
    m.load_state_dict(src)
    assert torch.equal(m.weight.cpu(), src["gamma"]) and torch.equal(m.bias.cpu(), src["beta"])
    # Nested under a prefix, and the official names still load.
    outer = nn.Sequential(DyT(16))
    outer.load_state_dict({"0." + k: v for k, v in src.items()})
    assert torch.equal(outer[0].weight, src["gamma"])
    m.load_state_dict(DyT(16, alpha_init=0.1).state_dict())
    assert m.alpha.item() == pytest.approx(0.1)
    # A Liger "beta" given to a module without a bias is reported under the name passed.
    no_bias = DyT(16, bias=False)
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "beta"'):
        no_bias.load_state_dict(src)
    assert no_bias.load_state_dict(src, strict=False).unexpected_keys == ["beta"]


class _Block(nn.Module):
    """A pre-norm transformer block with a channels-first LayerNorm2d-style stem."""

    class LayerNorm2d(nn.LayerNorm):
        def forward(self, x):
            return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    def __init__(self, dim=32):
        super().__init__()
        self.stem_norm = self.LayerNorm2d(dim)
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)
        self.norm2 = nn.LayerNorm(dim, bias=False)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, img):
        x = self.stem_norm(img).flatten(2).transpose(1, 2)
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


def test_convert_layernorm_to_dyt_on_transformer_block(device):
    block = _Block().to(device)
    out = convert_layernorm_to_dyt(block, alpha_init=0.3)
    assert out is block
    assert isinstance(block.norm1, DyT) and block.norm1.channels_last and block.norm1.bias is not None
    assert isinstance(block.norm2, DyT) and block.norm2.bias is None
    assert isinstance(block.stem_norm, DyT) and not block.stem_norm.channels_last
    assert not any(isinstance(m, nn.LayerNorm) for m in block.modules())
    img = torch.randn(2, 32, 3, 5, device=device, requires_grad=True)
    with launches.counting() as launched:
        block(img).square().mean().backward()
    assert launched["dyt_fwd"] == 3 and launched["dyt_bwd"] == 3
    assert img.grad is not None and torch.isfinite(img.grad).all()
    assert isinstance(convert_layernorm_to_dyt(nn.LayerNorm(8)), DyT)
    # nn.LayerNorm keeps a numpy integer width as given (DyT refused it: TypeError on num_features)
    converted = convert_layernorm_to_dyt(nn.LayerNorm(numpy.int64(8)))
    assert isinstance(converted, DyT) and converted.weight.shape == (8,)
    with pytest.raises(ValueError, match="normalizes over"):
        convert_layernorm_to_dyt(nn.Sequential(nn.LayerNorm([4, 8])))


@pytest.mark.parametrize("channels_last", [True, False], ids=["clast", "cfirst"])
def test_torch_compile_fullgraph(channels_last, device):
    shape = (6, 40) if channels_last else (2, 8, 3, 5)
    m = DyT(shape[-1] if channels_last else shape[1], channels_last=channels_last).to(device)
    x = torch.randn(shape, device=device, requires_grad=True)

    def f(inp):
        return torch.relu(m(inp) * 2.0).sum()

    compiled = torch.compile(f, fullgraph=True, backend="inductor" if device == "cuda" else "aot_eager")
    loss = compiled(x)
    loss.backward()
    grad = x.grad.clone()
    x.grad = None
    f(x).backward()
    torch.testing.assert_close(grad, x.grad, rtol=0, atol=0)


@pytest.mark.parametrize("channels_last", [True, False], ids=["clast", "cfirst"])
def test_compiled_torch_func_and_forward_ad_differentiate_the_reference(channels_last, device):
    """Inside torch.compile(fullgraph=True), torch.func's jvp, grad, jacrev and vmap and
    forward-mode AD differentiate the float32 reference: the custom op has a backward rule
    only, through which jvp's tangent would be all zeros, forward-mode AD's None and grad a
    TorchRuntimeError.
    Eagerly jvp runs the autograd.Function's jvp rule (test_dyt_functorch); a plain compiled
    call still runs the custom op."""
    from torch._dynamo.testing import CompileCounterWithBackend
    from torch.autograd import forward_ad
    shape = (5, 8) if channels_last else (2, 8, 3)
    x, a, w, b, dy = make_inputs(shape, torch.float32, torch.float32, True, channels_last, device, seed=3)
    tangent = torch.randn_like(x)

    def f(inp):
        return tilefuse.dyt(inp, a, w, b, channels_last=channels_last)

    def f64(inp):
        return dyt_reference(inp, a.double(), w.double(), b.double(), channels_last=channels_last,
                             compute_dtype=torch.float64)

    def compiled(fn, fullgraph=True):
        counter = CompileCounterWithBackend("aot_eager")
        return torch.compile(fn, backend=counter, fullgraph=fullgraph), counter

    def forward_mode(inp):
        with forward_ad.dual_level():
            return forward_ad.unpack_dual(f(forward_ad.make_dual(inp, tangent))).tangent

    def close(got, want):
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)
    torch._dynamo.reset()
    _, want_jvp = torch.func.jvp(f64, (x.double(),), (tangent.double(),))
    jvp, counter = compiled(lambda inp: torch.func.jvp(f, (inp,), (tangent,))[1])
    close(jvp(x), want_jvp)
    assert not any(node.target is torch.ops.tilefuse.dyt.default for g in counter.graphs for node in g.graph.nodes)
    close(compiled(forward_mode, fullgraph=False)[0](x), want_jvp)
    close(torch.func.jvp(f, (x,), (tangent,))[1], want_jvp)      # eagerly: DyTFunction.jvp
    close(compiled(torch.func.grad(lambda inp: (f(inp) * dy).sum()))[0](x),
          torch.func.grad(lambda inp: (f64(inp) * dy.double()).sum())(x.double()))
    close(compiled(torch.func.jacrev(f))[0](x), torch.func.jacrev(f64)(x.double()))
    close(compiled(torch.func.vmap(f))[0](torch.stack([x, 2 * x]))[1], f64(2 * x.double()))
    plain, counter = compiled(f)
    close(plain(x), f64(x.double()))
    assert sum(node.target is torch.ops.tilefuse.dyt.default for g in counter.graphs for node in g.graph.nodes) == 1


def test_opcheck(device):
    x, a, w, b, dy = make_inputs((9, 24), torch.float32, torch.float32, True, True, device, seed=1)
    torch.library.opcheck(dyt_op, (x, a, w, b, True))
    torch.library.opcheck(dyt_op, (x, a, w, None, True))
    xf = torch.randn(2, 4, 3, 5, device=device, requires_grad=True)
    torch.library.opcheck(dyt_op, (xf, a, w[:4].detach().requires_grad_(), None, False))


def test_bad_inputs_name_the_argument(device):
    x = torch.randn(4, 8, device=device)
    a, w, b = torch.ones(1, device=device), torch.ones(8, device=device), torch.zeros(8, device=device)
    cases = [
        ((x.long(), a, w, b), {}, TypeError, "x must be float32"),
        ((x, a.int(), w, b), {}, TypeError, "alpha must be float32"),
        ((x, torch.ones(2, device=device), w, b), {}, ValueError, "alpha must have one element"),
        ((x, torch.ones(1, 1, 1, device=device), w, b), {}, ValueError,
         "alpha must have one element and no more dimensions than x \\(2\\)"),
        ((x, a, torch.ones(7, device=device), b), {}, ValueError, r"weight must have shape \(8,\)"),
        ((x, a, w, torch.zeros(9, device=device)), {}, ValueError, r"bias must have shape \(8,\)"),
        ((x, a, w.reshape(2, 4), b), {}, ValueError, "weight must have shape"),
        ((x, a, w[:4], b[:4]), {"channels_last": False}, ValueError, r"weight must have shape \(8,\) to match x's channel"),
        ((x[0], a, w[:1], None), {"channels_last": False}, ValueError, "channels-first x must be"),
        ((x.numpy() if device == "cpu" else x.cpu(), a, w, b), {}, (TypeError, ValueError), "x"),
        ((x, a, w, b), {"channels_last": 1}, TypeError, "channels_last must be a bool"),
    ]
    for args, kwargs, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            tilefuse.dyt(*args, **kwargs)
    meta = torch.ones(8, device="meta")
    with pytest.raises(ValueError, match="weight is on meta"):
        tilefuse.dyt(x, a, meta, b)


def test_backward_op_checks_dy(device):
    """torch.ops.tilefuse.dyt_backward called directly: a dy of another shape, dtype, kind or
    device is refused by name (the kernels read x's element count from dy); autograd never
    hands it one."""
    x, a, w, b, dy = make_inputs((4, 8), torch.float32, torch.float32, True, True, device, seed=2)
    op = torch.ops.tilefuse.dyt_backward
    for bad, exc, msg in [(dy[0], ValueError, r"dy must have x's shape \(4, 8\), got \(8,\)"),
                          (dy[:2], ValueError, "dy must have x's shape"),
                          (dy.long(), TypeError, "dy must be float32")]:
        with pytest.raises(exc, match=msg):
            op(bad, x, a, w, b, True)
    # (a meta dy makes the dispatcher run the op's fake; its implementation checks the device)
    with pytest.raises(ValueError, match="dy is on meta"):
        backward_impl(dy.to("meta"), x, a, w, b, True)
    with pytest.raises(TypeError, match="dy must be a torch.Tensor"):
        backward_impl(dy.tolist(), x, a, w, b, True)
    got = op(dy, x, a, w, b, True)
    assert got[0].shape == x.shape and all(torch.isfinite(g).all() for g in got)


def test_policy_levels_and_env(monkeypatch):
    assert tilefuse.get_level() == 2
    with tilefuse.level(0):
        assert tilefuse.get_level() == 0
        with tilefuse.level(3):
            assert tilefuse.get_level() == 3
        assert tilefuse.get_level() == 0
    monkeypatch.setenv("TILEFUSE_LEVEL", "1")
    assert tilefuse.get_level() == 1
    tilefuse.set_level(3)
    assert tilefuse.get_level() == 3
    tilefuse.set_level(None)
    monkeypatch.setenv("TILEFUSE_LEVEL", "7")
    with pytest.raises(ValueError, match="TILEFUSE_LEVEL"):
        tilefuse.get_level()
    with pytest.raises(ValueError, match="level must be one of"):
        tilefuse.set_level(5)


def test_reference_runs_without_interpreter_on_cpu(monkeypatch):
    """CPU tensors without TRITON_INTERPRET take the reference path (no kernel launches)."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    x, a, w, b, dy = make_inputs((5, 12), torch.float32, torch.bfloat16, True, True, "cpu")
    with launches.counting() as launched:
        y = tilefuse.dyt(x, a, w, b)
        y.backward(dy)
    assert sum(launched.values()) == 0
    assert w.grad.dtype == torch.bfloat16 and y.dtype == torch.float32


@pytest.mark.parametrize("shape", [(4, 0), (0,)], ids=["2d", "1d"])
@pytest.mark.parametrize("level", [0, 2])
def test_zero_channels_differentiate_to_empty_gradients(level, shape, device):
    """x (4, 0) or (0,) with (0,) parameters (validate accepts it) gives empty y and gradients,
    also through a create_graph backward, whose reference formulas reduced with
    reshape(-1, 0) (ambiguous without elements: a RuntimeError)."""
    x = torch.randn(*shape, device=device, requires_grad=True)
    a = torch.tensor([0.5], device=device, requires_grad=True)
    w = torch.ones(0, device=device, requires_grad=True)
    b = torch.zeros(0, device=device, requires_grad=True)
    with tilefuse.level(level):
        y = tilefuse.dyt(x, a, w, b)
        grads = torch.autograd.grad(y.sum(), (x, a, w, b), create_graph=True, allow_unused=True)
    assert y.shape == shape
    assert grads[0].shape == shape and grads[2].shape == (0,) and grads[3].shape == (0,)
    assert grads[1] is None or float(grads[1].detach().abs().sum()) == 0.0


def test_alpha_of_as_many_dimensions_as_x_is_taken(device):
    """alpha (1, 1) with a 2-D x broadcasts to x's shape and is accepted; only
    more dimensions than x (which would broadcast y past x's shape) are refused."""
    x, w, b = torch.randn(6, 8, device=device), torch.randn(8, device=device), torch.randn(8, device=device)
    for level in (0, 2):
        with tilefuse.level(level):
            want = tilefuse.dyt(x, torch.full((1,), 0.5, device=device), w, b)
            got = tilefuse.dyt(x, torch.full((1, 1), 0.5, device=device), w, b)
        assert got.shape == x.shape and torch.equal(got, want)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_converted_dyt_keeps_the_layernorms_train_or_eval_state(training):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8)).train(training)
    tilefuse.nn.convert_layernorm_to_dyt(model)
    assert isinstance(model[1], tilefuse.nn.DyT) and model[1].training is training
