"""Memory layouts of every tensor argument: so2_mixing_stack (relay and fused backward), dyt
(channels-last and channels-first) and the public quantizers.

Each argument in turn is given as a transposed view (its dims' memory order reversed), a sliced
view (an interior slice of a larger buffer: storage offset, padded rows), a strided view (every
other element along each dim) and, where the shape allows, an expanded (stride-0) view; so is
the incoming gradient (``out.sum().backward()`` hands the backward a stride-0 expanded one).
The output and every gradient must be bitwise equal (torch.equal) to the same call on
contiguous copies: the launchers read the strides or make the copy they need, and the same
kernels then see the same values. Gradients must come back contiguous (what the kernels write
and what the custom ops' fakes promise). The buffers around sliced and strided views are NaN,
so a kernel that reads the wrong elements fails loudly. Shapes are tiny, with partial tiles.

Also here: the quantizers' argument checks (``block=(1, 128.0)`` and friends).
"""

import functools

import numpy as np
import pytest
import torch

import tilefuse
from tilefuse import launches, tuning
from tilefuse.ops.dyt.op import dyt_op
from tilefuse.ops.dyt.verify import poisoned
from tilefuse.ops.so2_mixing_stack import op as so2_op
from tilefuse.ops.so2_mixing_stack import tune as so2_tune
from tilefuse.ops.so2_mixing_stack.configs import So2Config
from tilefuse.ops.so2_mixing_stack.reference import So2Dims
from tilefuse.quant import launch as quant_launch
from tilefuse.quant import quantize_fp8_block, quantize_mxfp8, quantize_nvfp4, unswizzle_scales

from quant_helpers import mixed, same_bits

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
KINDS = ("transposed", "sliced", "strided")


def relayout(c: torch.Tensor, kind: str) -> torch.Tensor:
    """A tensor with ``c``'s shape and values, stored as ``kind`` says (module docstring)."""
    c = c.detach()
    if kind == "transposed":
        rev = list(range(c.dim()))[::-1]
        return c.permute(rev).contiguous().permute(rev)
    if kind == "sliced":
        big = tuple(s + 3 for s in c.shape)
        idx = tuple(slice(1, 1 + s) for s in c.shape)
    elif kind == "strided":
        big = tuple(2 * s for s in c.shape)
        idx = tuple(slice(0, 2 * s, 2) for s in c.shape)
    else:
        raise ValueError(kind)
    fill = float("nan") if c.is_floating_point() else 0x5A5A5A5A
    base = torch.full(big, fill, dtype=c.dtype, device=c.device)
    base[idx] = c
    return base[idx]


def relaid(c: torch.Tensor, kind: str) -> torch.Tensor:
    v = relayout(c, kind)
    assert torch.equal(v, c)
    assert not v.is_contiguous() or v.storage_offset() > 0, "the case must not be a plain contiguous tensor"
    return v


def layout_cases(shapes: dict, expanded: dict) -> list:
    """(argument, kind) pairs: the kinds that give a layout different from contiguous for that
    argument's shape (no 'transposed' for a 1-D tensor, no 'strided' for one element), then the
    argument's expanded variants (names of ``expanded``)."""
    cases = []
    for name, shape in shapes.items():
        for kind in KINDS:
            if kind == "transposed" and sum(s > 1 for s in shape) < 2:
                continue
            if kind == "strided" and max(shape) <= 1:
                continue
            cases.append((name, kind))
        cases += [(name, kind) for kind in expanded.get(name, {})]
    return cases


def assert_same(got, want, what):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what}[{i}]"
        assert torch.equal(g, w), f"{what}[{i}]: max |diff| {(g.double() - w.double()).abs().max():.3g}"


# --- so2_mixing_stack -------------------------------------------------------------------------

# E = 5 edges: one partial row tile (BLOCK_M 32 relay, 16 fused); M0 = M1 = 32 < BLOCK_N = 64:
# partial column tiles.
SO2_L, SO2_CF, SO2_F, SO2_E, SO2_NL = 1, 16, 2, 5, 2
SO2_TENSORS = ("u0", "alpha", "w0_all", "w1_all", "gw_all")


def _so2_inputs(n_edges=SO2_E, n_layers=SO2_NL, dtype=torch.float32, seed=0) -> dict:
    g = torch.Generator().manual_seed(seed)
    d = So2Dims(SO2_L, SO2_CF)

    def randn(*shape, scale=1.0):
        return (torch.randn(shape, generator=g) * scale).to(dtype).to(DEVICE)

    return {
        "u0": randn(SO2_F, n_edges, d.row, scale=0.5),
        "alpha": (torch.rand((n_edges, SO2_F), generator=g) + 0.2).to(dtype).to(DEVICE),
        "w0_all": randn(n_layers, SO2_F, d.m0, d.m0, scale=d.m0 ** -0.5),
        "w1_all": randn(n_layers, SO2_F, d.m1, d.m1, scale=d.m1 ** -0.5),
        "gw_all": randn(n_layers - 1, SO2_F, SO2_CF, d.lg, scale=SO2_CF ** -0.5),
        "grad_out": randn(n_edges, SO2_F, d.row),
    }


SO2_EXPANDED = {
    "u0": {"expanded-focus": lambda c: c[:1].expand_as(c)},
    "alpha": {"expanded-focus": lambda c: c[:, :1].expand_as(c),
              "expanded-scalar": lambda c: c[0, 0].expand(c.shape)},
    "w0_all": {"expanded-layers": lambda c: c[:1].expand_as(c),
               "expanded-focus": lambda c: c[:, :1].expand_as(c)},
    "w1_all": {"expanded-layers": lambda c: c[:1].expand_as(c)},
    "gw_all": {"expanded-focus": lambda c: c[:, :1].expand_as(c)},
    # what out.sum().backward() hands the backward
    "grad_out": {"expanded-scalar": lambda c: torch.ones((), dtype=c.dtype, device=c.device).expand(c.shape)},
}
SO2_CASES = layout_cases({k: tuple(v.shape) for k, v in _so2_inputs().items()}, SO2_EXPANDED)


@pytest.fixture(params=["relay", "fused"])
def so2_route(request, tuning_table):
    """The backward route: the relay (no table entry), or the fused kernel (a table entry for
    the key; it engages only without weight gradients, so the fused runs take u0's and
    alpha's gradients only)."""
    if request.param == "fused":
        tuning.register("so2_mixing_stack", {
            so2_tune.So2Problem(SO2_L, SO2_CF, 4): So2Config(16, 64, SO2_CF, 4, 1, fused=True)})
    with tilefuse.level(2):
        yield request.param


def so2_run(ins: dict, route: str, entry: str = "function"):
    """(x_local, gradients): of all five tensors on the relay, of (u0, alpha) on the fused
    route; ``entry`` 'function' (the eager autograd.Function) or 'custom_op' (what
    torch.compile calls: tilefuse::so2_stack_fwd and its registered backward)."""
    wanted = SO2_TENSORS if route == "relay" else ("u0", "alpha")
    # detach() keeps the view's strides and storage offset: the leaf is the view itself.
    leaves = {k: ins[k].detach().requires_grad_(k in wanted) for k in SO2_TENSORS}
    args = [leaves[k] for k in SO2_TENSORS]
    with launches.counting() as launched:
        if entry == "function":
            x = tilefuse.so2_mixing_stack(*args, lmax=SO2_L, focus_dim=SO2_CF)
        else:
            x = so2_op.so2_stack_fwd_op(*args, SO2_L, SO2_CF, True)[0]
        grads = torch.autograd.grad(x, [leaves[k] for k in wanted], ins["grad_out"])
    n_layers = ins["w0_all"].shape[0]
    assert launched[f"so2_bwd_{route}_layer"] == n_layers - 1, "the route under test must run"
    return [x.detach(), *grads]


def assert_contiguous(outs, names):
    for name, t in zip(names, outs):
        assert t.is_contiguous(), f"{name} must be contiguous, got strides {t.stride()}"


SO2_OUT_NAMES = ("x_local", *(f"grad of {k}" for k in SO2_TENSORS))


@functools.lru_cache(maxsize=None)
def _so2_contiguous_result(route: str):
    return so2_run(_so2_inputs(), route)


@pytest.mark.parametrize("name,kind", SO2_CASES, ids=[f"{n}-{k}" for n, k in SO2_CASES])
def test_so2_argument_layout_matches_contiguous(so2_route, name, kind, one_intra_op_thread):
    ins = _so2_inputs()
    if kind in KINDS:
        ins[name] = relaid(ins[name], kind)
        want = _so2_contiguous_result(so2_route)
    else:
        ins[name] = SO2_EXPANDED[name][kind](ins[name])
        assert 0 in ins[name].stride()
        want = so2_run({k: v.contiguous() for k, v in ins.items()}, so2_route)
    got = so2_run(ins, so2_route)
    assert_same(got, want, f"{name} {kind}")
    assert_contiguous(got, SO2_OUT_NAMES)


@pytest.mark.parametrize("entry", ["function", "custom_op"])
def test_so2_all_arguments_strided_at_once(so2_route, entry, one_intra_op_thread):
    """Every argument non-contiguous in the same call, 37 edges (two full row tiles and a
    partial one), three layers, through both entry points."""
    ins = _so2_inputs(n_edges=37, n_layers=3, seed=1)
    views = dict(ins)
    for name, kind in zip(ins, ("transposed", "transposed", "strided", "sliced", "transposed", "strided")):
        views[name] = relaid(ins[name], kind)
    got = so2_run(views, so2_route, entry)
    assert_same(got, so2_run(ins, so2_route, entry), entry)
    assert_contiguous(got, SO2_OUT_NAMES)


def test_so2_bf16_relay_all_arguments_strided(tuning_table, one_intra_op_thread):
    """16-bit inputs (the relay; fused is fp32 only) through the same layouts."""
    ins = _so2_inputs(dtype=torch.bfloat16, seed=2)
    views = {k: relaid(v, "transposed" if v.dim() > 1 else "sliced") for k, v in ins.items()}
    views["grad_out"] = SO2_EXPANDED["grad_out"]["expanded-scalar"](ins["grad_out"])
    want = so2_run({**ins, "grad_out": views["grad_out"].contiguous()}, "relay")
    got = so2_run(views, "relay")
    assert_same(got, want, "bf16")
    assert_contiguous(got, SO2_OUT_NAMES)


def test_so2_custom_op_reference_path_outputs_are_contiguous(monkeypatch, one_intra_op_thread):
    """Where kernels cannot run (CPU without the interpreter) the custom ops run the
    reference; their outputs must still have the strides the fakes promise (contiguous), for
    any input layout, or torch.compile'd code would read them wrongly."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    ins = {k: v.cpu() for k, v in _so2_inputs().items()}
    ins["alpha"] = relaid(ins["alpha"], "transposed")
    ins["w0_all"] = relaid(ins["w0_all"], "transposed")
    leaves = [ins[k].detach().requires_grad_(True) for k in SO2_TENSORS]
    with launches.counting() as launched:
        outs = so2_op.so2_stack_fwd_op(*leaves, SO2_L, SO2_CF, True)
        grads = torch.autograd.grad(outs[0], leaves, ins["grad_out"])
    assert sum(launched.values()) == 0, "the reference must run here"
    for what, t in [("x_local", outs[0]), ("z_all", outs[1]), ("u_final", outs[2]),
                    *zip(SO2_TENSORS, grads)]:
        assert t.is_contiguous(), f"{what}: strides {t.stride()} shape {tuple(t.shape)}"


# --- dyt --------------------------------------------------------------------------------------

# (id, x shape, channels_last): partial tiles in both dims (7 columns in a 8-wide block; 5
# spatial positions), the channels-first per-row-parameter path in 3-D and 4-D.
DYT_LAYOUTS = [("clast", (5, 7), True), ("cfirst3d", (2, 3, 5), False), ("cfirst4d", (2, 3, 4, 5), False)]
DYT_TENSORS = ("x", "alpha", "weight", "bias")


def _dyt_inputs(shape, channels_last, dtype=torch.float32, param_dtype=torch.float32, seed=0) -> dict:
    g = torch.Generator().manual_seed(seed)
    c = shape[-1] if channels_last else shape[1]
    return {
        "x": (torch.randn(shape, generator=g) * 2).to(dtype).to(DEVICE),
        "alpha": torch.tensor([0.3 + torch.rand(1, generator=g).item()]).to(param_dtype).to(DEVICE),
        "weight": torch.randn(c, generator=g).to(param_dtype).to(DEVICE),
        "bias": torch.randn(c, generator=g).to(param_dtype).to(DEVICE),
        "dy": torch.randn(shape, generator=g).to(dtype).to(DEVICE),
    }


DYT_EXPANDED = {
    "x": {"expanded-batch": lambda c: c[:1].expand_as(c)},
    "alpha": {"expanded-scalar": lambda c: c[0].expand(c.shape)},
    "weight": {"expanded-scalar": lambda c: c[0].expand(c.shape)},   # a per-channel weight from a scalar
    "bias": {"expanded-scalar": lambda c: c[0].expand(c.shape)},
    "dy": {"expanded-scalar": lambda c: torch.ones((), dtype=c.dtype, device=c.device).expand(c.shape)},
}


def _dyt_cases():
    out = []
    for lay_id, shape, channels_last in DYT_LAYOUTS:
        shapes = {k: tuple(v.shape) for k, v in _dyt_inputs(shape, channels_last).items()}
        for name, kind in layout_cases(shapes, DYT_EXPANDED):
            out.append(pytest.param(lay_id, shape, channels_last, name, kind, id=f"{lay_id}-{name}-{kind}"))
    return out


def dyt_run(ins: dict, channels_last: bool, entry: str):
    """(y, dx, dalpha, dweight, dbias), outputs poisoned with NaN before the launch."""
    leaves = {k: ins[k].detach().requires_grad_(True) for k in DYT_TENSORS}
    args = [leaves[k] for k in DYT_TENSORS]
    with poisoned(), launches.counting() as launched:
        if entry == "function":
            y = tilefuse.dyt(*args, channels_last=channels_last)
        else:
            y = dyt_op(*args, channels_last)
        grads = torch.autograd.grad(y, args, ins["dy"])
    assert launched["dyt_fwd"] == 1 and launched["dyt_bwd"] == 1
    return [y.detach(), *grads]


# the parameters' gradients (y and dx follow x's memory format: checked per test)
DYT_PARAM_GRADS = ("grad of alpha", "grad of weight", "grad of bias")


@pytest.mark.parametrize("entry", ["function", "custom_op"])
@pytest.mark.parametrize("lay_id,shape,channels_last,name,kind", _dyt_cases())
def test_dyt_argument_layout_matches_contiguous(lay_id, shape, channels_last, name, kind, entry):
    ins = _dyt_inputs(shape, channels_last)
    if kind in KINDS:
        ins[name] = relaid(ins[name], kind)
    else:
        ins[name] = DYT_EXPANDED[name][kind](ins[name])
        assert 0 in ins[name].stride()
    got = dyt_run(ins, channels_last, entry)
    want = dyt_run({k: v.contiguous() for k, v in ins.items()}, channels_last, entry)
    assert_same(got, want, f"{lay_id} {name} {kind}")
    # y and dx are allocated contiguous unless x is in channels_last memory format (not here)
    assert_contiguous(got, ("y", "dx", *DYT_PARAM_GRADS))


# A channels-first x stored channels_last (NHWC) runs without a copy on its movedim(1, -1)
# view, so its contiguous counterpart is the NHWC copy (the same kernels), and the output and
# dx keep that format. A storage offset, a sliced NHWC buffer (not movable: copied) and a
# strided dy on top.
def _nhwc_offset(c):
    base = torch.full((c.shape[0] + 1, *c.shape[2:], c.shape[1]), float("nan"), dtype=c.dtype, device=c.device)
    base[1:] = c.permute(0, 2, 3, 1)
    return base[1:].permute(0, 3, 1, 2)


def _nhwc_sliced(c):
    n, ch, h, w = c.shape
    base = torch.full((n, h, w + 2, ch), float("nan"), dtype=c.dtype, device=c.device)
    base[:, :, 1:-1] = c.permute(0, 2, 3, 1)
    return base[:, :, 1:-1].permute(0, 3, 1, 2)


@pytest.mark.parametrize("entry", ["function", "custom_op"])
@pytest.mark.parametrize("make_x,dy_kind,moved", [
    (lambda c: c.contiguous(memory_format=torch.channels_last), "strided", True),
    (_nhwc_offset, "transposed", True),
    (_nhwc_sliced, None, False),
], ids=["nhwc-dy-strided", "nhwc-offset-dy-transposed", "nhwc-sliced"])
def test_dyt_channels_first_nhwc_views(make_x, dy_kind, moved, entry):
    ins = _dyt_inputs((2, 3, 4, 5), False, seed=3)
    ins["x"] = make_x(ins["x"])
    assert torch.equal(ins["x"], _dyt_inputs((2, 3, 4, 5), False, seed=3)["x"])
    if dy_kind:
        ins["dy"] = relaid(ins["dy"], dy_kind)
    fmt = torch.channels_last if moved else torch.contiguous_format
    got = dyt_run(ins, False, entry)
    want = dyt_run({**ins, "x": ins["x"].contiguous(memory_format=fmt), "dy": ins["dy"].contiguous()}, False, entry)
    assert_same(got, want, "nhwc")
    for t in got[:2]:   # y and dx
        assert t.is_contiguous(memory_format=fmt)
    assert_contiguous(got[2:], DYT_PARAM_GRADS)


@pytest.mark.parametrize("channels_last,shape", [(True, (5, 7)), (False, (2, 3, 5))], ids=["clast", "cfirst"])
def test_dyt_16bit_all_arguments_strided_at_once(channels_last, shape):
    ins = _dyt_inputs(shape, channels_last, dtype=torch.bfloat16, param_dtype=torch.float16, seed=4)
    views = {k: relaid(v, "transposed" if v.dim() > 1 else "sliced") for k, v in ins.items()}
    views["weight"] = relaid(ins["weight"], "strided")
    got = dyt_run(views, channels_last, "function")
    assert_same(got, dyt_run(ins, channels_last, "function"), "16-bit")
    assert_contiguous(got, ("y", "dx", *DYT_PARAM_GRADS))


# --- quantizers -------------------------------------------------------------------------------

@pytest.fixture
def poison_quant_outputs():
    quant_launch.POISON_OUTPUTS = True
    yield
    quant_launch.POISON_OUTPUTS = False


# (rows, K): 37 rows are a partial tile and a partial 128-row block; K = 96 (mxfp8) and 48
# (nvfp4) leave a partial column tile (BLOCK_K 128 and 64).
QUANT_CALLS = {
    "fp8_1x128": ((37, 256), 128, lambda x, **kw: quantize_fp8_block(x)),
    "fp8_128x128_pow2": ((37, 256), 128, lambda x, **kw: quantize_fp8_block(x, block=(128, 128), pow2_scales=True)),
    "mxfp8": ((37, 96), 32, lambda x, **kw: quantize_mxfp8(x)),
    "mxfp8_swizzle": ((37, 96), 32, lambda x, **kw: quantize_mxfp8(x, swizzle=True)),
    "nvfp4": ((37, 48), 16, lambda x, **kw: quantize_nvfp4(x)),
    "nvfp4_2d_rht_swizzle": ((37, 48), 16, lambda x, **kw: quantize_nvfp4(x, block_2d=True, rht=True, swizzle=True)),
    "nvfp4_amax_stochastic": ((37, 48), 16, lambda x, **kw: quantize_nvfp4(x, **kw)),
}
QUANT_EXPANDED = {
    "x": {"expanded-rows": lambda c: c[:1].expand_as(c), "expanded-cols": lambda c: c[:, :1].expand_as(c)},
    "stochastic_bits": {"expanded-rows": lambda c: c[:1].expand_as(c)},
    "amax": {"expanded-scalar": lambda c: c[0].expand(c.shape)},
}


def _quant_inputs(call: str) -> dict:
    (rows, cols), block_cols, _ = QUANT_CALLS[call]
    ins = {"x": mixed(rows, cols, block_cols, seed=7, log2_range=8).to(DEVICE)}
    if call == "nvfp4_amax_stochastic":
        g = torch.Generator().manual_seed(8)
        ins["stochastic_bits"] = torch.randint(-2 ** 31, 2 ** 31, (rows, cols), generator=g,
                                               dtype=torch.int64).to(torch.int32).to(DEVICE)
        ins["amax"] = ins["x"].abs().amax().reshape(1) * 1.5
    return ins


def _quant_cases():
    out = []
    for call in QUANT_CALLS:
        shapes = {k: tuple(v.shape) for k, v in _quant_inputs(call).items()}
        out += [pytest.param(call, name, kind, id=f"{call}-{name}-{kind}")
                for name, kind in layout_cases(shapes, QUANT_EXPANDED)]
    return out


def quant_run(call: str, ins: dict):
    q = QUANT_CALLS[call][2](**ins)
    fields = [q.data, q.scales] + ([q.amax] if hasattr(q, "amax") else [])
    for f in fields:
        assert f.is_contiguous()
    return fields + [q.dequantize()]


@pytest.mark.parametrize("call,name,kind", _quant_cases())
def test_quantizer_argument_layout_matches_contiguous(poison_quant_outputs, call, name, kind):
    ins = _quant_inputs(call)
    if kind in KINDS:
        ins[name] = relaid(ins[name], kind)
    else:
        ins[name] = QUANT_EXPANDED[name][kind](ins[name])
        assert 0 in ins[name].stride()
    with launches.counting() as launched:
        got = quant_run(call, ins)
    assert sum(launched.values()) >= 1, "the kernels must run"
    want = quant_run(call, {k: v.contiguous() for k, v in ins.items()})
    for i, (g, w) in enumerate(zip(got, want)):
        assert same_bits(g, w), f"{call} {name} {kind}: field {i}"


def test_quantizer_uint32_stochastic_bits_views(poison_quant_outputs):
    """uint32 bits (read through an int32 view of the same strides), transposed and expanded."""
    ins = _quant_inputs("nvfp4_amax_stochastic")
    bits = ins["stochastic_bits"].view(torch.uint32)
    want = quant_run("nvfp4_amax_stochastic", {**ins, "stochastic_bits": bits})
    got = quant_run("nvfp4_amax_stochastic", {**ins, "stochastic_bits": relaid(bits, "transposed")})
    assert all(same_bits(g, w) for g, w in zip(got, want))
    expanded = bits[:, :1].expand_as(bits)
    got = quant_run("nvfp4_amax_stochastic", {**ins, "stochastic_bits": expanded})
    want = quant_run("nvfp4_amax_stochastic", {**ins, "stochastic_bits": expanded.contiguous()})
    assert all(same_bits(g, w) for g, w in zip(got, want))


# --- quantizer argument checks ----------------------------------------------------------------

X128 = torch.zeros(4, 128)

BAD_QUANT_ARGS = [
    # 128.0 == 128 and True == 1: a membership test alone let these reach the kernels
    (lambda: quantize_fp8_block(X128, block=(1, 128.0)), TypeError, "block"),
    (lambda: quantize_fp8_block(X128, block=(True, 128)), TypeError, "block"),
    (lambda: quantize_fp8_block(X128, block=(128.0, 128.0)), TypeError, "block"),
    (lambda: quantize_fp8_block(X128, block=128), TypeError, "block"),
    (lambda: quantize_fp8_block(X128, block=(1, 128, 1)), TypeError, "block"),
    (lambda: quantize_fp8_block(X128, block="1x128"), TypeError, "block"),
    (lambda: quantize_fp8_block(X128, block=(2, 128)), ValueError, "block must be one of"),
    (lambda: quantize_fp8_block(X128, pow2_scales=1), TypeError, "pow2_scales"),
    (lambda: quantize_mxfp8(X128, swizzle=1), TypeError, "swizzle"),
    (lambda: quantize_nvfp4(X128, swizzle=None), TypeError, "swizzle"),
    (lambda: quantize_nvfp4(X128, amax=torch.tensor([True])), TypeError, "amax"),
    (lambda: quantize_nvfp4(X128, stochastic_bits=torch.zeros(4, 128, dtype=torch.int64)), TypeError,
     "stochastic_bits"),
    (lambda: quantize_nvfp4(X128, stochastic_bits=[[0]]), TypeError, "stochastic_bits"),
    (lambda: quantize_fp8_block(X128).dequantize("float32"), TypeError, "dtype"),
    (lambda: quantize_mxfp8(X128).dequantize(torch.int32), TypeError, "dtype"),
    (lambda: quantize_nvfp4(X128).dequantize(undo_rht=1), TypeError, "undo_rht"),
    (lambda: unswizzle_scales(torch.zeros(512, dtype=torch.uint8), 128, True), TypeError, "cols"),
    (lambda: unswizzle_scales(torch.zeros(512, dtype=torch.uint8), -1, 4), ValueError, "rows"),
]


@pytest.mark.parametrize("call,exc,match", BAD_QUANT_ARGS, ids=[str(i) for i in range(len(BAD_QUANT_ARGS))])
def test_quantizer_bad_arguments_name_the_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_quantizer_block_accepts_a_list_and_integral_numbers():
    x = mixed(8, 128, 128, seed=9)
    want = quantize_fp8_block(x, block=(1, 128))
    for block in ([1, 128], (np.int64(1), np.int32(128))):
        got = quantize_fp8_block(x, block=block)
        assert got.block == (1, 128) and same_bits(got.data, want.data) and same_bits(got.scales, want.scales)
