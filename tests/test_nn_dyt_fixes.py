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
