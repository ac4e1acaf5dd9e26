"""convert_layernorm_to_dyt on torch's own Transformer modules (train and eval, with and
without no_grad: the inference fast path must not engage), and what it reports when a model
holds no LayerNorm (the RMSNorm-style recipe, the count it logs)."""

import logging
import warnings

import pytest
import torch
from torch import nn

from tilefuse.nn import DyT, convert_layernorm_to_dyt
from tilefuse.ops.dyt.reference import dyt_reference

D, HEADS = 32, 4


def _randomize_dyt(model, seed=0):
    """Non-trivial DyT parameters (fresh ones are alpha 0.5, weight 1, bias 0), so that a
    LayerNorm computed instead of DyT cannot pass by accident."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, DyT):
                m.alpha.copy_(torch.rand(1, generator=g) + 0.5)
                m.weight.copy_(torch.randn(m.weight.shape, generator=g))
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g))


def _dyt(m, x):
    return dyt_reference(x, m.alpha, m.weight, m.bias)


def _layer_by_hand(layer, x, key_padding_mask=None):
    """TransformerEncoderLayer's slow path, with DyT's math for its norms (dropout is 0)."""
    def sa(h):
        return layer.self_attn(h, h, h, key_padding_mask=key_padding_mask, need_weights=False)[0]

    def ff(h):
        return layer.linear2(layer.activation(layer.linear1(h)))
    if layer.norm_first:
        x = x + sa(_dyt(layer.norm1, x))
        return x + ff(_dyt(layer.norm2, x))
    x = _dyt(layer.norm1, x + sa(x))
    return _dyt(layer.norm2, x + ff(x))


def _encoder_by_hand(encoder, x, key_padding_mask=None):
    with torch.no_grad():
        for layer in encoder.layers:
            x = _layer_by_hand(layer, x, key_padding_mask)
        return _dyt(encoder.norm, x)


def _modes():
    """(training, no_grad) in every combination."""
    return [(True, False), (True, True), (False, False), (False, True)]


def _run(model, training, no_grad, *args, **kwargs):
    model.train(training)
    if no_grad:
        with torch.no_grad():
            return model(*args, **kwargs)
    return model(*args, **kwargs)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("training,no_grad", _modes(), ids=["train", "train-nograd", "eval", "eval-nograd"])
def test_converted_encoder_layer_gives_dyt_result(training, no_grad, norm_first):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D, HEADS, dim_feedforward=64, dropout=0.0, batch_first=True,
                                       norm_first=norm_first)
    convert_layernorm_to_dyt(layer)
    assert isinstance(layer.norm1, DyT) and isinstance(layer.norm2, DyT)
    _randomize_dyt(layer)
    x = torch.randn(2, 5, D)
    with torch.no_grad():
        expected = _layer_by_hand(layer, x)
    y = _run(layer, training, no_grad, x)
    torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)
    if not no_grad:
        y.square().mean().backward()
        assert layer.norm1.weight.grad is not None and layer.norm2.alpha.grad is not None


@pytest.mark.parametrize("convert_first", [True, False], ids=["layer-converted-first", "encoder-converted"])
@pytest.mark.parametrize("training,no_grad", _modes(), ids=["train", "train-nograd", "eval", "eval-nograd"])
def test_converted_encoder_gives_dyt_result(training, no_grad, convert_first):
    """nn.TransformerEncoder has a fast path of its own (nested tensors, taken in eval with a
    key padding mask) that calls its layers on nested tensors: it must not engage either,
    whether the layer was converted before the encoder was built or the encoder afterwards."""
    torch.manual_seed(1)
    layer = nn.TransformerEncoderLayer(D, HEADS, dim_feedforward=64, dropout=0.0, batch_first=True)
    if convert_first:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")    # torch: "enable_nested_tensor is True, but ..."
            encoder = nn.TransformerEncoder(convert_layernorm_to_dyt(layer), num_layers=2,
                                            norm=nn.LayerNorm(D), enable_nested_tensor=True)
        convert_layernorm_to_dyt(encoder)   # the final norm
    else:
        encoder = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(D), enable_nested_tensor=True)
        convert_layernorm_to_dyt(encoder)
    assert not any(isinstance(m, nn.LayerNorm) for m in encoder.modules())
    _randomize_dyt(encoder)
    x = torch.randn(3, 6, D)
    mask = torch.zeros(3, 6, dtype=torch.bool)
    mask[0, 4:] = True     # left-aligned padding: what the nested-tensor path takes
    mask[2, 2:] = True
    for kwargs in ({}, {"src_key_padding_mask": mask}):
        expected = _encoder_by_hand(encoder, x, kwargs.get("src_key_padding_mask"))
        y = _run(encoder, training, no_grad, x, **kwargs)
        torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)


def test_full_transformer_converts_and_runs_in_eval():
    torch.manual_seed(2)
    model = nn.Transformer(D, HEADS, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=64, dropout=0.0,
                           batch_first=True)
    convert_layernorm_to_dyt(model)
    _randomize_dyt(model)
    src, tgt = torch.randn(2, 5, D), torch.randn(2, 4, D)
    train_out = _run(model, True, False, src, tgt).detach()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eval_out = _run(model, False, True, src, tgt)
    torch.testing.assert_close(eval_out, train_out, rtol=1e-5, atol=1e-5)


def test_dyt_has_no_eps_and_says_why():
    """A hand-swapped norm (not through the converter) gets an AttributeError that says what
    to do, not Python's bare one."""
    m = DyT(8)
    assert not hasattr(m, "eps")
    with pytest.raises(AttributeError, match="convert_layernorm_to_dyt"):
        m.eps


# --- what the converter reports ----------------------------------------------------------------

class LlamaRMSNorm(nn.Module):
    """Hugging Face's RMSNorm shape: weight (C,), no bias, named ...RMSNorm."""

    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.variance_epsilon = eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)


class _LlamaBlock(nn.Module):
    def __init__(self, n=16):
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(n)
        self.proj = nn.Linear(n, n)
        self.post_attention_layernorm = nn.RMSNorm(n)

    def forward(self, x):
        return self.post_attention_layernorm(self.proj(self.input_layernorm(x)))


def test_model_without_layernorm_warns_and_names_rmsnorm():
    model = nn.Sequential(_LlamaBlock(), _LlamaBlock())
    with pytest.warns(UserWarning, match=r"converted no module.*4 RMSNorm-style.*rmsnorm=True"):
        out = convert_layernorm_to_dyt(model)
    assert out is model and not any(isinstance(m, DyT) for m in model.modules())
    with pytest.warns(UserWarning, match="no LayerNorm"):
        convert_layernorm_to_dyt(nn.Sequential(nn.Linear(4, 4)))


def test_rmsnorm_recipe_converts_without_bias_and_per_norm_alpha(caplog):
    """rmsnorm=True: the LLaMA recipe of the DyT paper (DyT without bias; alpha_init per norm,
    e.g. 7B: attention 0.8, FFN 0.2, final 0.2), alpha_init given as a function of the name."""
    model = nn.ModuleDict({"layers": nn.Sequential(_LlamaBlock(), _LlamaBlock()), "norm": nn.RMSNorm(16)})

    def alpha(name):
        return 0.8 if name.endswith("input_layernorm") else 0.2
    with caplog.at_level(logging.INFO, logger="tilefuse.nn"):
        convert_layernorm_to_dyt(model, alpha_init=alpha, rmsnorm=True)
    assert "converted 5 module(s)" in caplog.text and "5 RMSNorm" in caplog.text
    dyts = {n: m for n, m in model.named_modules() if isinstance(m, DyT)}
    assert len(dyts) == 5 and all(m.bias is None and m.channels_last for m in dyts.values())
    assert dyts["layers.0.input_layernorm"].alpha.item() == pytest.approx(0.8)
    assert dyts["layers.1.post_attention_layernorm"].alpha.item() == pytest.approx(0.2)
    assert dyts["norm"].alpha.item() == pytest.approx(0.2)
    model["layers"](torch.randn(2, 3, 16)).sum().backward()


def test_layernorm_conversion_logs_its_count(caplog):
    with caplog.at_level(logging.INFO, logger="tilefuse.nn"):
        convert_layernorm_to_dyt(nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 8), nn.LayerNorm(8)))
    assert "converted 2 module(s)" in caplog.text


def test_rmsnorm_and_alpha_arguments_are_checked():
    with pytest.raises(TypeError, match="rmsnorm"):
        convert_layernorm_to_dyt(nn.Linear(2, 2), rmsnorm=1)
    with pytest.raises(TypeError, match="alpha_init"):
        convert_layernorm_to_dyt(nn.Sequential(nn.LayerNorm(4)), alpha_init=lambda name: "0.5")
    with pytest.raises(ValueError, match="normalizes over"):
        convert_layernorm_to_dyt(nn.Sequential(nn.RMSNorm([2, 4])), rmsnorm=True)


def test_layers_converted_one_by_one_take_the_encoders_nested_tensors():
    """Converting an encoder's layers one at a time leaves the encoder's nested-tensor path on
    (the converter sees no encoder): in eval with a padding mask the DyTs then receive nested
    tensors, which they take piece by piece, giving the padded path's result on the kept rows."""
    torch.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, batch_first=True, dropout=0.0),
                                num_layers=2, enable_nested_tensor=True).eval()
    for layer in enc.layers:
        convert_layernorm_to_dyt(layer)
    assert enc.use_nested_tensor
    x = torch.randn(2, 5, 16)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    with torch.no_grad():
        nested = enc(x, src_key_padding_mask=mask)
        enc.use_nested_tensor = False
        padded = enc(x, src_key_padding_mask=mask)
    assert torch.allclose(nested[0], padded[0], atol=1e-6) and torch.allclose(nested[1, :3], padded[1, :3], atol=1e-6)
