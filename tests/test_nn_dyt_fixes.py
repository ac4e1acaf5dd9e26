"""tilefuse.nn DyT: convert_layernorm_to_dyt on shared LayerNorms, and the constructor's
argument checks (TypeError / ValueError naming the argument)."""

import math

import pytest
import torch
from torch import nn

from tilefuse.nn import DyT, convert_layernorm_to_dyt


def test_shared_layernorm_becomes_one_shared_dyt():
    """nn.Sequential(ln, Linear, ln): named_children() yields ln once; both slots must become
    the same DyT (one set of parameters, as the LayerNorm had)."""
    ln = nn.LayerNorm(8)
    model = convert_layernorm_to_dyt(nn.Sequential(ln, nn.Linear(8, 8), ln))
    assert [type(m) for m in model] == [DyT, nn.Linear, DyT]
    assert model[0] is model[2]
    assert sum(1 for _ in model.parameters()) == 3 + 2      # DyT's alpha/weight/bias once, Linear's two
    model(torch.randn(3, 8)).sum().backward()               # runs, the shared parameters get one grad
    assert model[0].weight.grad is not None


def test_layernorm_shared_across_parents_and_shared_submodules():
    """One LayerNorm in two different parents, and a parent registered twice: one DyT
    everywhere, the shared parent converted once."""
    ln = nn.LayerNorm(8, bias=False)
    a = nn.Sequential(nn.Linear(8, 8), ln)
    b = nn.ModuleDict({"norm": ln, "proj": nn.Linear(8, 8)})
    inner = nn.Sequential(nn.LayerNorm(8))
    model = nn.ModuleList([a, b, inner, inner])
    model.extra = ln
    convert_layernorm_to_dyt(model, alpha_init=0.25)
    dyt = a[1]
    assert isinstance(dyt, DyT) and dyt.bias is None and dyt.alpha.item() == 0.25
    assert b["norm"] is dyt and model.extra is dyt
    assert model[2] is model[3] and isinstance(inner[0], DyT)
    assert not any(isinstance(m, nn.LayerNorm) for m in model.modules())
    # every registration reached: the module tree holds exactly two DyTs (the shared one, inner's)
    assert len({id(m) for m in model.modules() if isinstance(m, DyT)}) == 2


def test_top_level_layernorm_and_unchanged_results():
    ln = nn.LayerNorm(6)
    assert isinstance(convert_layernorm_to_dyt(ln), DyT)
    plain = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    with pytest.warns(UserWarning, match="converted no module"):
        assert convert_layernorm_to_dyt(plain) is plain and isinstance(plain[0], nn.Linear)


BAD_CONSTRUCTOR = [
    (lambda: DyT(True), TypeError, "num_features"),          # bool is an int subclass
    (lambda: DyT(8.0), TypeError, "num_features"),
    (lambda: DyT("8"), TypeError, "num_features"),
    (lambda: DyT(0), ValueError, "num_features"),
    (lambda: DyT(8, alpha_init=True), TypeError, "alpha_init"),
    (lambda: DyT(8, alpha_init="0.5"), TypeError, "alpha_init"),
    (lambda: DyT(8, alpha_init=None), TypeError, "alpha_init"),
    (lambda: DyT(8, alpha_init=math.nan), ValueError, "alpha_init"),
    (lambda: DyT(8, alpha_init=math.inf), ValueError, "alpha_init"),
    (lambda: DyT(8, bias=1), TypeError, "bias"),
    (lambda: DyT(8, bias=None), TypeError, "bias"),
    (lambda: DyT(8, channels_last=0), TypeError, "channels_last"),
    (lambda: DyT(8, channels_last="yes"), TypeError, "channels_last"),
    (lambda: DyT(8, dtype=torch.int32), TypeError, "dtype"),
    (lambda: DyT(8, dtype=torch.complex64), TypeError, "dtype"),   # float64 runs the reference: accepted
    (lambda: DyT(8, dtype="float32"), TypeError, "dtype"),
    (lambda: DyT(8)("abc"), TypeError, "dyt: x must be a torch.Tensor"),
    (lambda: DyT(8)(None), TypeError, "dyt: x must be a torch.Tensor"),
    (lambda: convert_layernorm_to_dyt("model"), TypeError, "module"),
    (lambda: convert_layernorm_to_dyt(nn.LayerNorm(4), alpha_init="0.5"), TypeError, "alpha_init"),
    (lambda: convert_layernorm_to_dyt(nn.Sequential(nn.Linear(4, 4)), alpha_init=True), TypeError, "alpha_init"),
    (lambda: convert_layernorm_to_dyt(nn.Sequential(nn.LayerNorm(4, dtype=torch.complex64))), TypeError, "complex64"),
]


@pytest.mark.parametrize("call,exc,match", BAD_CONSTRUCTOR, ids=[str(i) for i in range(len(BAD_CONSTRUCTOR))])
def test_bad_arguments_name_the_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_good_arguments_still_accepted():
    import numpy as np
    m = DyT(4, alpha_init=1, bias=False, channels_last=False, dtype=torch.bfloat16)
    assert m.alpha.dtype == torch.bfloat16 and m.alpha.item() == 1.0 and m.bias is None and not m.channels_last
    assert DyT(4, alpha_init=np.float32(0.25)).alpha.item() == 0.25


def test_parametrized_weight_is_used():
    """A parameter under torch.nn.utils.parametrize is a property, not in _parameters: the
    forward must use its computed value (here 2 * weight), and its gradient must reach the
    original."""
    from torch.nn.utils import parametrize

    class Double(nn.Module):
        def forward(self, w):
            return 2 * w

    m = DyT(16)
    with torch.no_grad():
        m.weight.uniform_(0.5, 1.5)
        m.bias.uniform_(-0.5, 0.5)
    parametrize.register_parametrization(m, "weight", Double())
    x = torch.randn(5, 16)
    y = m(x)
    want = 2 * m.parametrizations.weight.original * torch.tanh(m.alpha * x) + m.bias
    torch.testing.assert_close(y, want)
    y.sum().backward()
    assert m.parametrizations.weight.original.grad is not None


# --- what the converter leaves, and its all-or-nothing change -----------------------------------

class _LayerNormAct2d(nn.LayerNorm):
    """timm's LayerNormAct2d in miniature: a channels-first LayerNorm, then an activation."""

    def __init__(self, c):
        super().__init__(c)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2))


class _ScaledLayerNorm(nn.LayerNorm):
    def forward(self, x):
        return 2 * super().forward(x)


class _GatedRMSNorm(nn.Module):
    """A gated RMSNorm (norm, then a gate MLP) recognised by its name."""

    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.gate = nn.Linear(c, c)

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6) * self.gate(x).sigmoid()


class _UnweightedRMSNorm(nn.Module):
    def forward(self, x):
        return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6)


_GatedRMSNorm.__name__ = "GatedRMSNorm"
_UnweightedRMSNorm.__name__ = "UnweightedRMSNorm"


def test_norms_with_more_computation_are_left_and_named():
    """A norm holding submodules (LayerNormAct2d, a gated RMSNorm), an nn.LayerNorm subclass
    with its own forward and an RMSNorm without a weight are left in place, each named in a
    warning; plain norms beside them are converted."""
    model = nn.ModuleDict({"act": _LayerNormAct2d(4), "scaled": _ScaledLayerNorm(4), "gated": _GatedRMSNorm(4),
                           "unweighted": _UnweightedRMSNorm(), "plain": nn.LayerNorm(4), "rms": nn.RMSNorm(4)})
    with pytest.warns(UserWarning) as caught:
        convert_layernorm_to_dyt(model, rmsnorm=True)
    message = " ".join(str(w.message) for w in caught)
    for name, why in (("act", "holds submodules"), ("scaled", "overrides LayerNorm.forward"),
                      ("gated", "holds submodules"), ("unweighted", "width unknown")):
        assert f"{name} (" in message and why in message, (name, message)
    assert type(model["act"]) is _LayerNormAct2d and type(model["scaled"]) is _ScaledLayerNorm
    assert type(model["gated"]) is _GatedRMSNorm and type(model["unweighted"]) is _UnweightedRMSNorm
    assert isinstance(model["plain"], DyT) and isinstance(model["rms"], DyT) and model["rms"].bias is None


def test_a_conversion_that_fails_changes_nothing():
    """A norm DyT cannot stand for (over two dimensions), or an alpha_init function's bad
    value, raises before any norm is replaced."""
    model = nn.Sequential(nn.LayerNorm(8), nn.LayerNorm((2, 4)))
    with pytest.raises(ValueError, match="normalizes over"):
        convert_layernorm_to_dyt(model)
    assert [type(m) for m in model] == [nn.LayerNorm, nn.LayerNorm]
    model = nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 8), nn.LayerNorm(8))
    with pytest.raises(ValueError, match="alpha_init"):
        convert_layernorm_to_dyt(model, alpha_init=lambda name: 0.5 if name == "0" else math.nan)
    assert [type(m) for m in model] == [nn.LayerNorm, nn.Linear, nn.LayerNorm]


@pytest.mark.parametrize("alpha_init,dtype", [(1e5, torch.float16), (1e39, torch.bfloat16), (1e308, None),
                                              (10**400, torch.float64)])
def test_an_alpha_init_the_parameters_dtype_cannot_hold_is_refused(alpha_init, dtype):
    """A finite alpha_init that the parameters' dtype rounds to inf (it would make every output
    NaN; before, float16's 1e5 became an inf alpha, float32's 1e308 failed inside fill_ and an
    int past float's range raised OverflowError) raises ValueError naming alpha_init, in DyT's
    constructor and in the converter, which then changes nothing."""
    with pytest.raises(ValueError, match="alpha_init"):
        DyT(8, alpha_init=alpha_init, dtype=dtype)
    model = nn.Sequential(nn.LayerNorm(8, dtype=dtype), nn.LayerNorm(8, dtype=dtype))
    with pytest.raises(ValueError, match="alpha_init"):
        convert_layernorm_to_dyt(model, alpha_init=lambda name: 0.5 if name == "0" else alpha_init)
    assert [type(m) for m in model] == [nn.LayerNorm, nn.LayerNorm]
    assert DyT(8, alpha_init=6e4, dtype=torch.float16).alpha.isfinite().all()   # the largest such float16 holds
    with torch.device("meta"):   # deferred init: the check reads no meta value
        assert DyT(8).alpha.is_meta and isinstance(convert_layernorm_to_dyt(nn.LayerNorm(8)), DyT)
        with pytest.raises(ValueError, match="alpha_init"):
            DyT(8, alpha_init=1e5, dtype=torch.float16)


def test_a_norm_without_weight_takes_its_ancestors_device_and_dtype():
    """LayerNorm(elementwise_affine=False) has no weight: its DyT takes the device and dtype of
    the nearest floating tensor an ancestor holds, not torch's defaults."""
    block = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8, elementwise_affine=False)).to(torch.bfloat16)
    block.register_buffer("scale", torch.ones(1, dtype=torch.float16))   # the block's own tensor
    model = nn.Sequential(block).to("meta")
    convert_layernorm_to_dyt(model)
    dyt = block[1]
    assert isinstance(dyt, DyT) and dyt.weight.device.type == "meta" and dyt.weight.dtype == torch.float16
    lone = convert_layernorm_to_dyt(nn.Sequential(nn.LayerNorm(8, elementwise_affine=False)))[0]
    assert lone.weight.dtype == torch.float32 and lone.weight.device.type == "cpu"   # no ancestor tensor


class _AdaLayerNorm(nn.Module):
    """A diffusers-style adaLN block: a weightless LayerNorm beside the Linear that modulates
    it; the block itself holds no tensor."""

    def __init__(self, d):
        super().__init__()
        self.linear, self.norm = nn.Linear(d, 2 * d), nn.LayerNorm(d, elementwise_affine=False)

    def forward(self, x, c):
        shift, scale = self.linear(c).chunk(2, -1)
        return self.norm(x) * (1 + scale) + shift


def test_a_norm_without_weight_takes_its_siblings_device_and_dtype():
    """Where no ancestor holds a tensor itself (the root and the block hold only submodules),
    the weightless norm's DyT lives where the module around it does: on the device and in the
    dtype of a tensor in its parent's subtree (the sibling Linear's), nearer than an
    ancestor's farther subtree; a model on "meta" (standing in for "cuda") then runs forward
    (a DyT on torch's default device would fail it: "alpha is on cpu but x is on meta")."""
    class Model(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.proj = nn.Linear(d, d).to(torch.float16)      # first in the root's subtree
            self.blocks = nn.ModuleList([_AdaLayerNorm(d).to(torch.bfloat16)])

        def forward(self, x, c):
            return self.proj(self.blocks[0](x, c).to(torch.float16))

    model = Model(8).to("meta")
    convert_layernorm_to_dyt(model)
    dyt = model.blocks[0].norm
    assert isinstance(dyt, DyT) and dyt.weight.device.type == "meta" and dyt.weight.dtype == torch.bfloat16
    x = torch.randn(2, 8, device="meta", dtype=torch.bfloat16)
    assert model(x, x).device.type == "meta"
    # a block whose own subtree holds no floating tensor takes the nearest ancestor's subtree's
    empty = nn.Sequential(nn.LayerNorm(8, elementwise_affine=False))
    root = nn.Sequential(nn.Embedding(4, 8).to(torch.float16), empty).to("meta")
    convert_layernorm_to_dyt(root)
    assert empty[0].weight.device.type == "meta" and empty[0].weight.dtype == torch.float16


class _ConvNeXtLayerNorm(nn.Module):
    """The ConvNeXt reference LayerNorm (channels_last or channels_first data_format)."""

    def __init__(self, c, data_format):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(c)), nn.Parameter(torch.zeros(c))
        self.normalized_shape, self.data_format, self.eps = (c,), data_format, 1e-6


def test_convnext_layernorm_converts_in_both_data_formats():
    model = nn.Sequential(_ConvNeXtLayerNorm(8, "channels_first"), _ConvNeXtLayerNorm(8, "channels_last"))
    convert_layernorm_to_dyt(model)
    assert [type(m) for m in model] == [DyT, DyT]
    assert model[0].channels_last is False and model[1].channels_last is True


class _HFConvNextLayerNorm(nn.LayerNorm):
    """Hugging Face's ConvNextLayerNorm form: an nn.LayerNorm subclass whose forward takes
    either data_format (LayerNorm's on channels_last, a dim-1 norm on channels_first)."""

    def __init__(self, c, data_format):
        super().__init__(c, eps=1e-6)
        self.data_format = data_format

    def forward(self, x):
        if self.data_format == "channels_last":
            return super().forward(x)
        return super().forward(x.movedim(1, -1)).movedim(-1, 1)


def test_an_nn_layernorm_subclass_of_the_convnext_form_converts_in_both_data_formats():
    """Its forward override is the two-format norm's: both instances become DyT, with no
    warning."""
    import warnings
    model = nn.Sequential(_HFConvNextLayerNorm(8, "channels_first"), _HFConvNextLayerNorm(8, "channels_last"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        convert_layernorm_to_dyt(model)
    assert [type(m) for m in model] == [DyT, DyT]
    assert model[0].channels_last is False and model[1].channels_last is True


@pytest.mark.parametrize("channels_last,piece_shapes", [
    (False, [(4, 4, 3), (4, 4, 5)]), (False, [(4, 2, 3), (4, 2, 5)]), (True, [(3, 4), (5, 4)])],
    ids=["cfirst-H-eq-C", "cfirst-H-ne-C", "clast"])
def test_nested_tensor_pieces_match_per_sample_dyt(channels_last, piece_shapes):
    """A nested tensor's pieces lack the batch dim: channels-first pieces are (C, *spatial), so
    each must be scaled along its dim 0, as the same sample in a batch of one is. Distinct
    weights and biases per channel show a piece normalized along another dim (with H == C the
    shapes alone cannot)."""
    torch.manual_seed(0)
    m = DyT(4, channels_last=channels_last)
    with torch.no_grad():
        m.weight.copy_(torch.arange(1., 5.))
        m.bias.copy_(torch.arange(4.) * 10)
    pieces = [torch.randn(s) for s in piece_shapes]
    got = m(torch.nested.nested_tensor(pieces)).unbind()
    for g, p in zip(got, pieces, strict=True):
        assert torch.equal(g, m(p.unsqueeze(0)).squeeze(0))


@pytest.mark.parametrize("kind", ["jagged", "jagged 4-d"])
def test_a_jagged_tensor_keeps_its_ragged_size(kind):
    """A jagged nested tensor (B, j, ..., C) comes back with x's offsets, so the residual
    x + norm(x) works, as with nn.LayerNorm (rebuilt from its pieces it had a new ragged size
    and the sum raised), each piece equal to the module on it alone, and gradients reach x and
    the parameters."""
    torch.manual_seed(1)
    m = DyT(4)
    with torch.no_grad():
        m.weight.copy_(torch.arange(1., 5.))
        m.bias.copy_(torch.arange(4.) * 10)
    shapes = [(3, 4), (5, 4)] if kind == "jagged" else [(3, 2, 4), (5, 2, 4)]
    x = torch.nested.nested_tensor([torch.randn(s) for s in shapes], layout=torch.jagged).requires_grad_(True)
    y = m(x)
    out = x + y
    assert out.shape == x.shape
    for g, p in zip(y.unbind(), x.detach().unbind(), strict=True):
        assert torch.equal(g, m(p.unsqueeze(0)).squeeze(0))
    sum(t.sum() for t in out.unbind()).backward()
    assert x.grad is not None and m.alpha.grad is not None and torch.isfinite(m.alpha.grad).all()


def test_a_jagged_tensor_with_holes_reads_only_its_pieces():
    """A jagged view with holes (lengths: elements between pieces that belong to none) runs
    piece by piece: NaN and inf in the holes reach neither the outputs nor the parameters'
    gradients (on the packed values they made alpha's and weight's gradients NaN), which equal
    the gradients of the pieces run alone."""
    torch.manual_seed(2)
    m = DyT(4)
    base = torch.randn(2, 7, 4)
    base[0, 3:] = float("nan")                # after piece 0 (rows 0-2)
    base[1, 0] = float("inf")                 # before piece 1 (rows 1-5)
    base[1, 6] = float("nan")
    x = torch.nested.narrow(base, 1, torch.tensor([0, 1]), torch.tensor([3, 5]), layout=torch.jagged)
    assert x.lengths() is not None
    ys = m(x).unbind()
    sum(t.sum() for t in ys).backward()
    got = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    pieces = [base[0, :3], base[1, 1:6]]
    want_y = [m(p.unsqueeze(0)).squeeze(0) for p in pieces]
    sum(t.sum() for t in want_y).backward()
    for g, w in zip(ys, want_y, strict=True):
        assert torch.equal(g, w)
    for g, p in zip(got, m.parameters(), strict=True):
        assert torch.isfinite(g).all() and torch.equal(g, p.grad)
