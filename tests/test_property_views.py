"""Property-based tests: every public op gives the same result for any layout of its inputs.

Hypothesis draws small shapes and, for every tensor argument (the incoming gradient included),
a layout: contiguous, transposed (dims reversed), sliced out of a larger tensor (storage
offset, padded rows), strided (every other element of each dim) or expanded (stride 0 along a
dim). Each example checks, for the forward and every gradient:

- the call on the views gives bitwise the results of the same call on contiguous copies (the
  op makes the copies it needs, or reads the strides; never the wrong elements); dyt's
  parameter gradients, reductions whose order follows the layout read, are held to the bound;
- those results are within the op's float64-derived bound of the float64 reference;
- no input was written.

The examples are derandomized (the same ones on every run; CI stays reproducible) and few per
op (``TILEFUSE_HYPOTHESIS_EXAMPLES``, default 10, scaled per op) to stay within CI's time: the kernels run in
Triton's interpreter on the CPU. Where CUDA is available the tensors are on the GPU, so the
compiled kernels run (CPU tensors there would take the plain-PyTorch paths, whose BLAS results
follow the operands' strides).
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilefuse
from tilefuse import quant
from tilefuse.check.grouped import RECIPE_TOL
from tilefuse.check.grouped import TOL as GROUPED_TOL
from tilefuse.check.so2 import TOL as SO2_TOL
from tilefuse.ops.dyt import verify as dyt_verify
from tilefuse.ops.grouped_glu_mlp import recipes
from tilefuse.ops.grouped_glu_mlp.reference import grouped_glu_mlp_reference
from tilefuse.ops.so2_mixing_stack.reference import So2Dims, so2_stack_reference
from tilefuse.quant import reference as quant_reference
from tilefuse.quant.swizzle import swizzle_scales
from tilefuse.utils import normwise_rel_error

pytestmark = pytest.mark.usefixtures("one_intra_op_thread")

EXAMPLES = int(os.environ.get("TILEFUSE_HYPOTHESIS_EXAMPLES", "10"))
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def examples(scale: float) -> settings:
    """``scale`` x EXAMPLES examples (cheaper ops get more)."""
    return settings(max_examples=max(1, int(scale * EXAMPLES)), deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

LAYOUTS = ("contiguous", "transposed", "sliced", "strided", "expanded")


def laid_out(values: torch.Tensor, layout: str, expand_dim: int = 0) -> torch.Tensor:
    """A tensor equal to ``values`` in the given memory layout. For "expanded", ``values`` must
    be constant along ``expand_dim`` (build them with :func:`draw_values`)."""
    shape = tuple(values.shape)
    if layout == "contiguous" or values.dim() == 0:
        return values.clone()
    if layout == "transposed":
        if values.dim() < 2:
            layout = "strided"
        else:
            dims = list(range(values.dim()))[::-1]
            return values.permute(dims).contiguous().permute(dims)
    if layout == "sliced":
        big = torch.zeros(tuple(n + 2 for n in shape), dtype=values.dtype, device=values.device)
        view = big[tuple(slice(1, 1 + n) for n in shape)]
        view.copy_(values)
        big[(0,) * values.dim()] = 7       # junk around the view
        return view
    if layout == "strided":
        big = torch.zeros(tuple(2 * n for n in shape), dtype=values.dtype, device=values.device)
        view = big[tuple(slice(None, None, 2) for _ in shape)]
        view.copy_(values)
        return view
    if layout == "expanded":
        if shape[expand_dim] == 0:
            return values.clone()
        one = values.narrow(expand_dim, 0, 1).clone()
        assert torch.equal(one.expand(shape), values), "values are not constant along the expanded dim"
        return one.expand(shape)
    raise ValueError(layout)


def draw_values(shape, layout, gen, *, scale=1.0, offset=0.0, dtype=torch.float32, expand_dim=0, kind="randn"):
    """Random values of ``shape`` (constant along ``expand_dim`` for the "expanded" layout), on
    DEVICE."""
    draw_shape = list(shape)
    if layout == "expanded" and len(shape):
        draw_shape[expand_dim] = min(shape[expand_dim], 1)
    rnd = torch.randn if kind == "randn" else torch.rand
    v = rnd(draw_shape, generator=gen) * scale + offset
    return v.expand(shape).to(dtype).contiguous().to(DEVICE)


def layouts(n):
    """One layout per tensor argument; contiguous only now and then (the contiguous call is the
    comparison anyway)."""
    return st.lists(st.sampled_from(LAYOUTS[1:] * 3 + LAYOUTS[:1]), min_size=n, max_size=n)


def grads(outputs, inputs, grad_output):
    diff = [t for t in inputs if t is not None and t.requires_grad]
    return list(torch.autograd.grad(outputs, diff, grad_output, allow_unused=True, materialize_grads=True))


def assert_same(got, want, what):
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    assert torch.equal(got, want), f"{what}: view call differs from the contiguous call " \
                                   f"(max |diff| {(got.double() - want.double()).abs().max().item():.3e})"


def on_views_and_copies(run, views, values):
    """(``run`` on the views, ``run`` on contiguous copies of ``values``), checking that the
    call on the views wrote none of them."""
    leaves = [None if t is None else t.detach() for t in views]
    before = snapshot(leaves)
    got = run(leaves)
    want = run([None if v is None else v.clone() for v in values])
    assert_unchanged(leaves, before)
    return got, want


def snapshot(ts):
    return [None if t is None else t.detach().clone() for t in ts]


def assert_unchanged(ts, before):
    for i, (t, b) in enumerate(zip(ts, before)):
        if t is not None:
            assert torch.equal(t.detach(), b), f"input {i} was written"


# ---------------------------------------------------------------------------------------------
# dyt
@given(rows=st.integers(1, 40), channels=st.integers(1, 40), spatial=st.integers(1, 5),
       channels_last=st.booleans(), has_bias=st.booleans(), alpha_dims=st.integers(0, 1),
       dtype=st.sampled_from([torch.float32, torch.bfloat16]), lay=layouts(5), seed=st.integers(0, 2**16))
@examples(2)
def test_dyt_any_layout(rows, channels, spatial, channels_last, has_bias, alpha_dims, dtype, lay, seed):
    gen = torch.Generator().manual_seed(seed)
    xshape = (rows, channels) if channels_last else (rows, channels, spatial)
    vals = [draw_values(xshape, lay[0], gen, dtype=dtype),
            draw_values((1,) * alpha_dims, "contiguous", gen, scale=0.3, offset=0.8),
            draw_values((channels,), lay[2], gen, offset=1.0),
            draw_values((channels,), lay[3], gen, scale=0.1) if has_bias else None,
            draw_values(xshape, lay[4], gen, dtype=dtype)]
    views = [None if v is None else laid_out(v, lay[i]) for i, v in enumerate(vals)]

    def run(ts):
        x, alpha, w, b, dy = ts
        ins = [t if t is None else t.requires_grad_(True) for t in (x, alpha, w, b)]
        y = tilefuse.dyt(*ins, channels_last=channels_last)
        return [y] + grads(y, ins, dy)

    got, want = on_views_and_copies(run, views, vals)
    # y and dx are elementwise: bitwise the contiguous call's. The parameter gradients are
    # reductions whose order follows the layout the kernel reads (a channels-first x laid out
    # channels-last is read as such, without a copy: on the H200 dalpha then differs from the
    # contiguous call's in the last bit), so they are held to the float64 bound below.
    for name, g, w in zip(("y", "dx"), got, want):
        assert_same(g, w, name)
    for name, g, w in zip(("dalpha", "dweight", "dbias"), got[2:], want[2:]):
        assert g.shape == w.shape and g.dtype == w.dtype, name
    x, alpha, w, b, dy = vals
    outs = got + [None] * (5 - len(got))
    failures = [c for c in dyt_verify.compare_to_reference(x, alpha, w, b, dy, channels_last, outs) if not c.ok]
    assert not failures, failures


# ---------------------------------------------------------------------------------------------
# so2_mixing_stack
@given(lmax=st.integers(1, 2), focus_dim=st.sampled_from([4, 8]), n_focus=st.integers(1, 2),
       n_edges=st.integers(1, 24), n_layers=st.integers(2, 3), apply_alpha=st.booleans(),
       weight_grads=st.booleans(), lay=layouts(6), seed=st.integers(0, 2**16))
@examples(2)
def test_so2_mixing_stack_any_layout(lmax, focus_dim, n_focus, n_edges, n_layers, apply_alpha, weight_grads, lay,
                                     seed):
    gen = torch.Generator().manual_seed(seed)
    d = So2Dims(lmax, focus_dim)
    shapes = [(n_focus, n_edges, d.row), (n_edges, n_focus), (n_layers, n_focus, d.m0, d.m0),
              (n_layers, n_focus, d.m1, d.m1), (n_layers - 1, n_focus, focus_dim, d.lg), (n_edges, n_focus, d.row)]
    scales = [0.5, 1.0, d.m0 ** -0.5, d.m1 ** -0.5, focus_dim ** -0.5, 1.0]
    vals = []
    for i, (shape, scale) in enumerate(zip(shapes, scales)):
        if i == 1:     # alpha > 0
            vals.append(draw_values(shape, lay[i], gen, scale=0.8, offset=0.2, kind="rand"))
        else:
            vals.append(draw_values(shape, lay[i], gen, scale=scale))
    views = [laid_out(v, lay[i]) for i, v in enumerate(vals)]
    kw = dict(lmax=lmax, focus_dim=focus_dim, apply_alpha=apply_alpha)

    def run(ts, fn=tilefuse.so2_mixing_stack):
        u0, alpha, w0, w1, gw, gout = ts
        diff = [u0, alpha] + ([w0, w1, gw] if weight_grads else [])
        for t in diff:
            t.requires_grad_(True)
        out = fn(u0, alpha, w0, w1, gw, **kw)
        return [out] + grads(out, diff, gout)

    got, want = on_views_and_copies(run, views, vals)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same(g, w, f"so2 output/grad {i}")
    ref = run([v.double() for v in vals], fn=so2_stack_reference)
    for i, (g, r) in enumerate(zip(got, ref)):
        if r.abs().max() > 0:
            assert normwise_rel_error(g, r) <= SO2_TOL[torch.float32], f"so2 output/grad {i} vs float64"
        else:
            assert torch.equal(g, torch.zeros_like(g)), f"so2 grad {i} should be zero"


# ---------------------------------------------------------------------------------------------
# grouped_glu_mlp
@st.composite
def grouped_problems(draw):
    recipe = draw(st.sampled_from([None, None, "mxfp8", "nvfp4"]))
    block = {None: 16, "mxfp8": 32, "nvfp4": 16}[recipe]
    n_experts = draw(st.integers(1, 3))
    counts = draw(st.lists(st.integers(0, 9), min_size=n_experts, max_size=n_experts))
    hidden = block * draw(st.integers(1, 2))
    ffn = block * draw(st.integers(1, 2))
    interleave = draw(st.sampled_from([None] + [s for s in (8, 16, 32) if ffn % s == 0]))
    activation = draw(st.sampled_from(["swiglu", "geglu"]))
    return recipe, counts, hidden, ffn, interleave, activation


@given(problem=grouped_problems(), has_bias=st.booleans(), lay=layouts(8), seed=st.integers(0, 2**16))
@examples(1)
def test_grouped_glu_mlp_any_layout(problem, has_bias, lay, seed):
    recipe, counts, hidden, ffn, interleave, activation = problem
    gen = torch.Generator().manual_seed(seed)
    dtype = torch.float32 if recipe is None else torch.bfloat16
    n_experts, n_tokens = len(counts), sum(counts)
    c = torch.tensor(counts, dtype=torch.int32, device=DEVICE)
    # tokens_per_expert: only "strided" and "sliced" keep arbitrary counts; "expanded" needs equal ones
    c_layout = lay[1] if lay[1] in ("strided", "sliced", "contiguous") else "contiguous"
    vals = [draw_values((n_tokens, hidden), lay[0], gen, dtype=dtype),
            c,
            draw_values((n_tokens,), lay[2], gen, scale=0.9, offset=0.05, kind="rand"),
            draw_values((n_experts, 2 * ffn, hidden), lay[3], gen, scale=hidden ** -0.5, dtype=dtype),
            draw_values((n_experts, hidden, ffn), lay[4], gen, scale=ffn ** -0.5, dtype=dtype),
            draw_values((n_experts, 2 * ffn), lay[5], gen, scale=0.1, dtype=dtype) if has_bias else None,
            draw_values((n_experts, hidden), lay[6], gen, scale=0.1, dtype=dtype) if has_bias else None,
            draw_values((n_tokens, hidden), lay[7], gen, dtype=dtype)]
    views = [None if v is None else laid_out(v, c_layout if i == 1 else lay[i]) for i, v in enumerate(vals)]
    kw = dict(activation=activation, glu_interleave=interleave, recipe=recipe)

    def run(ts):
        x, cnt, p, w1, w2, b1, b2, dy = ts
        diff = [t.requires_grad_(True) for t in (x, p, w1, w2, b1, b2) if t is not None]
        y = tilefuse.grouped_glu_mlp(x, cnt, p, w1, w2, fc1_bias=b1, fc2_bias=b2, **kw)
        return [y] + grads(y, diff, dy)

    got, want = on_views_and_copies(run, views, vals)
    names = ["y", "dx", "dprobs", "dw1", "dw2"] + (["db1", "db2"] if has_bias else [])
    for name, g, w in zip(names, got, want):
        assert_same(g, w, name)

    x, cnt, p, w1, w2, b1, b2, dy = vals
    if recipe is None:
        d64 = [None if t is None else t.double().requires_grad_(True) for t in (x, p, w1, w2, b1, b2)]
        y64 = grouped_glu_mlp_reference(d64[0], cnt, d64[1], d64[2], d64[3], activation=activation,
                                        glu_interleave=interleave, fc1_bias=d64[4], fc2_bias=d64[5],
                                        compute_dtype=torch.float64)
        ref = [y64] + grads(y64, d64, dy.double())
        tol = GROUPED_TOL[torch.float32]      # every path vs float64, as check/grouped.py bounds it
    else:
        rk = dict(activation=activation, glu_interleave=interleave, fc1_bias=b1, fc2_bias=b2, recipe=recipe)
        y64, z, h = recipes.recipe_forward(x, cnt, p, w1, w2, **rk)
        g = recipes.recipe_backward(dy, x, cnt, p, w1, w2, z, h, **rk)
        ref = [y64, g["dx"], g["dprobs"], g["dfc1_weight"], g["dfc2_weight"]] + (
            [g["dfc1_bias"], g["dfc2_bias"]] if has_bias else [])
        tol = RECIPE_TOL
    for name, gv, r in zip(names, got, ref):
        if r.numel() and r.abs().max() > 0:
            assert normwise_rel_error(gv, r) <= tol, f"{name} vs float64 ({recipe})"
        else:
            assert torch.count_nonzero(gv) == 0, f"{name} should be zero"


# ---------------------------------------------------------------------------------------------
# quantizers
@given(fmt=st.sampled_from(["fp8_rows", "fp8_weights", "mxfp8", "nvfp4", "nvfp4_2d"]), rows=st.integers(1, 40),
       col_blocks=st.integers(1, 2), swizzle=st.booleans(), layout=st.sampled_from(LAYOUTS),
       dtype=st.sampled_from([torch.float32, torch.bfloat16]), seed=st.integers(0, 2**16))
@examples(4)
def test_quantizers_any_layout(fmt, rows, col_blocks, swizzle, layout, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    width = {"fp8_rows": 128, "fp8_weights": 128, "mxfp8": 32, "nvfp4": 16, "nvfp4_2d": 16}[fmt]
    values = draw_values((rows, width * col_blocks), layout, gen, scale=3.0, dtype=dtype,
                         expand_dim=0 if rows > 1 else 1)
    view = laid_out(values, layout, expand_dim=0 if rows > 1 else 1)
    before = view.clone()

    def run(x):
        if fmt.startswith("fp8"):
            q = quant.quantize_fp8_block(x, block=(1, 128) if fmt == "fp8_rows" else (128, 128))
        elif fmt == "mxfp8":
            q = quant.quantize_mxfp8(x, swizzle=swizzle)
        else:
            q = quant.quantize_nvfp4(x, block_2d=fmt == "nvfp4_2d", swizzle=swizzle)
        return q

    got, want = run(view), run(values.clone())
    assert torch.equal(view, before)
    assert torch.equal(got.data.view(torch.uint8), want.data.view(torch.uint8)), "data differs from the contiguous call"
    assert torch.equal(got.scales.view(torch.uint8), want.scales.view(torch.uint8)), "scales differ"
    # the reference's bits (quant.reference is the exact formula)
    if fmt.startswith("fp8"):
        data, scales = quant_reference.quantize_fp8_block(values, (1, 128) if fmt == "fp8_rows" else (128, 128))
    elif fmt == "mxfp8":
        data, scales = quant_reference.quantize_mxfp8(values)
    else:
        data, scales, _ = quant_reference.quantize_nvfp4(values, None, fmt == "nvfp4_2d")
    if swizzle and fmt == "mxfp8":
        scales = swizzle_scales(scales)
    elif swizzle and fmt.startswith("nvfp4"):
        scales = swizzle_scales(quant_reference.nvfp4_scales_per_row(scales, rows, fmt == "nvfp4_2d"))
    assert torch.equal(got.data.view(torch.uint8), data.view(torch.uint8)), "data differs from the reference"
    assert torch.equal(got.scales.view(torch.uint8), scales.view(torch.uint8)), "scales differ from the reference"
