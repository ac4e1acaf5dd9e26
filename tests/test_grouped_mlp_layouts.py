"""grouped_glu_mlp with tensor arguments of any layout: transposed, sliced (wider buffers, at an
offset), strided and expanded views of x, tokens_per_expert, probs, the weights and biases, and
of the incoming gradient, on every path (the default: the compose route at level 2, where no
fused winner is selected, and the unfused composition at level 0; the fused kernels of a tuning
table entry; each quantized recipe's kernels; the level-0 renderings); T == 0; meta tensors.

The contract: the result does not depend on the layout. Each view-call is compared with the
same call on contiguous copies of the same values (the same path, the same kernels), bitwise:
y and every gradient with ``torch.equal``. The buffers around a view hold NaN (counts: 9), so a
kernel that reads past a view's elements (stride 1 assumed) shows up as well.

Shapes are tiny but off the tiles: ragged counts with a zero-token expert, T = 19 below every
BLOCK_M, H and F not multiples of the fused path's 64-wide tiles.
"""

import pytest
import torch

import tilefuse
from tilefuse import launches, tuning
from tilefuse.ops.grouped_glu_mlp import launch
from tilefuse.ops.grouped_glu_mlp.api import grouped_glu_mlp, problem_for
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs, uses_grouped_mm

pytestmark = pytest.mark.usefixtures("one_intra_op_thread")

COUNTS = [5, 0, 11, 3]
# path -> (H, F, dtype, glu_interleave, level, recipe)
PATHS = {
    "unfused": (48, 40, torch.float32, 8, 2, None),
    "fused": (48, 40, torch.float32, 8, 2, None),
    "fp8_block": (128, 128, torch.bfloat16, 32, 1, "fp8_block"),
    "mxfp8": (64, 32, torch.bfloat16, 8, 1, "mxfp8"),
    "nvfp4": (48, 32, torch.bfloat16, 8, 1, "nvfp4"),
}
FUSED_CONFIG = GemmConfig(64, 64, 32, 4, 3, 2)   # one of the fp32 sweep candidates
NAMES = ("x", "counts", "probs", "w1", "w2", "b1", "b2")
FLOAT_NAMES = ("x", "probs", "w1", "w2", "b1", "b2")


def _junk(t: torch.Tensor, n: int) -> torch.Tensor:
    """n slices of filler along t's last dimension: NaN, or 9 for integer tensors."""
    shape = (*t.shape[:-1], n)
    return torch.full(shape, 9 if not t.is_floating_point() else float("nan"), dtype=t.dtype, device=t.device)


# Views with t's values (the comparison is then against the contiguous base call) ...
def transposed(t):
    """Same values, the last two dimensions stored transposed (column-major)."""
    return t.transpose(-2, -1).contiguous().transpose(-2, -1)


def sliced(t):
    """A leading slice of a wider buffer: unit stride, a longer, 16-byte aligned row stride."""
    return torch.cat((t, _junk(t, 4)), -1)[..., :t.shape[-1]]


def offset(t):
    """A slice one element into a wider buffer (not 16-byte aligned; row stride n + 4)."""
    return torch.cat((_junk(t, 1), t, _junk(t, 3)), -1)[..., 1:1 + t.shape[-1]]


def strided(t):
    """Every other element of the last dimension of a twice-as-wide buffer (stride 2)."""
    return torch.stack((t, _junk(t, t.shape[-1])), -1)[..., 0]


# ... and views whose values differ from t (compared against their own contiguous copy).
def expanded(t):
    """t's first entry along dim 0 broadcast over dim 0 (stride 0): a row of x, an expert's
    weights or bias for every expert, one probability for every token."""
    return t[:1].expand(t.shape) if t.dim() > 1 else t[0].expand(t.shape)


# (argument, view) pairs, every argument under every view its shape allows. tokens_per_expert
# cannot be expanded (all experts would own the same number of tokens).
CASES = [(name, view) for name in NAMES for view in (transposed, sliced, offset, strided, expanded)
         if not (name in ("counts", "probs") and view in (transposed, sliced, offset))
         and not (name == "counts" and view is expanded)
         and not (name != "x" and view is sliced)]   # offset: a wider row too, and misaligned
DY_VIEWS = {
    "transposed": transposed,
    "sliced": sliced,
    "offset": offset,
    "strided": strided,
    "expanded row": lambda dy: dy[:1].expand(dy.shape),
    "expanded scalar": lambda dy: dy[0, 0].expand(dy.shape),   # what y.sum().backward() gives
}


def inputs(path, device, seed=0):
    H, F, dtype, *_ = PATHS[path]
    i = random_inputs(COUNTS, H, F, dtype, bias=True, device=device, generator=torch.Generator().manual_seed(seed))
    return {name: i[name] for name in NAMES}, i["dy"]


def register_fused(args, path):
    """The tuning table's fused winner for this problem (the fused path; a recipe's kernels
    run at level 1 without one)."""
    if path == "fused":
        _, _, _, interleave, _, recipe = PATHS[path]
        tuning.register("grouped_glu_mlp", {problem_for(args["x"], args["w2"], "swiglu", interleave, True, recipe):
                                            FUSED_CONFIG})


def call(path, args, dy):
    """(y, d x, d probs, d w1, d w2, d b1, d b2) of the public API on ``path``; the tensors as
    given (any layout), the floating ones made leaves that require grad."""
    _, _, _, interleave, level, recipe = PATHS[path]
    leaves = {k: args[k].detach().requires_grad_(True) for k in FLOAT_NAMES}
    with tilefuse.level(level), launches.counting() as launched:
        y = grouped_glu_mlp(leaves["x"], args["counts"], leaves["probs"], leaves["w1"], leaves["w2"],
                            glu_interleave=interleave, fc1_bias=leaves["b1"], fc2_bias=leaves["b2"], recipe=recipe)
        grads = torch.autograd.grad(y, [leaves[k] for k in FLOAT_NAMES], dy)
    kernels = 0 if path == "unfused" else 1
    assert (launched["grouped_mlp_fwd"], launched["grouped_mlp_bwd"]) == (kernels, kernels), path
    assert launched["grouped_mlp_compose"] == (path == "unfused"), path    # level 2: the compose route
    assert y.shape == args["x"].shape and y.dtype == args["x"].dtype
    return (y, *grads)


def contiguous(args):
    return {k: v.contiguous() for k, v in args.items()}


def differences(got, want):
    """Names of the outputs that are not bitwise equal."""
    return [name for name, a, b in zip(("y", *(f"d{k}" for k in FLOAT_NAMES)), got, want) if not torch.equal(a, b)]


def check_every_argument_view(path, device):
    args, dy = inputs(path, device)
    register_fused(args, path)
    base = call(path, args, dy)
    failed = []
    for name, view in CASES:
        viewed = dict(args)
        viewed[name] = view(args[name])
        assert not viewed[name].is_contiguous(), (name, view.__name__)
        # expanded changes the values: its reference is the same call on a contiguous copy
        want = call(path, contiguous(viewed), dy) if view is expanded else base
        bad = differences(call(path, viewed, dy), want)
        if bad:
            failed.append(f"{name} {view.__name__}: {', '.join(bad)}")
    for label, view in DY_VIEWS.items():
        dy_view = view(dy)
        want = call(path, args, dy_view.contiguous()) if label.startswith("expanded") else base
        bad = differences(call(path, args, dy_view), want)
        if bad:
            failed.append(f"grad_output {label}: {', '.join(bad)}")
    assert not failed, failed


# ---------------------------------------------------------------------------------------------
# Every argument under every view, one at a time: the default route and the fused kernels.
def test_unfused_path_every_argument_view(device):
    args, _ = inputs("unfused", device)
    assert uses_grouped_mm(args["x"], PATHS["unfused"][1])   # the torch._grouped_mm composition
    check_every_argument_view("unfused", device)


def test_fused_path_every_argument_view(tuning_table, device):
    check_every_argument_view("fused", device)


# Each recipe's kernels: every argument in one layout at a time (one call per layout).
COMBOS = {
    "transposed": {"x": transposed, "counts": strided, "probs": strided, "w1": transposed, "w2": transposed,
                   "b1": transposed, "b2": transposed, "dy": transposed},
    "offset / strided": {"x": offset, "counts": strided, "probs": strided, "w1": strided, "w2": offset,
                         "b1": offset, "b2": strided, "dy": offset},
    "strided / offset": {"x": strided, "counts": strided, "probs": strided, "w1": offset, "w2": strided,
                         "b1": strided, "b2": offset, "dy": strided},
    "expanded": {"x": expanded, "counts": strided, "probs": expanded, "w1": expanded, "w2": expanded,
                 "b1": expanded, "b2": expanded, "dy": DY_VIEWS["expanded scalar"]},
}


@pytest.mark.parametrize("path", ["fp8_block", "mxfp8", "nvfp4"])
def test_recipe_kernels_every_layout(path, device):
    args, dy = inputs(path, device)
    base = call(path, args, dy)
    failed = []
    for combo, views in COMBOS.items():
        viewed = {k: views[k](v) for k, v in args.items()}
        dy_view = views["dy"](dy)
        want = call(path, contiguous(viewed), dy_view.contiguous()) if combo == "expanded" else base
        bad = differences(call(path, viewed, dy_view), want)
        if bad:
            failed.append(f"{combo}: {', '.join(bad)}")
    assert not failed, failed


@pytest.mark.parametrize("recipe", [None, "mxfp8"], ids=["unfused", "mxfp8-rendering"])
def test_level_0_every_layout(recipe, device):
    """Level 0: the unfused composition, and a recipe's plain-PyTorch rendering."""
    path = "mxfp8" if recipe else "unfused"
    args, dy = inputs(path, device)
    _, _, _, interleave, _, _ = PATHS[path]

    def run(a, g):
        leaves = {k: a[k].detach().requires_grad_(True) for k in FLOAT_NAMES}
        with tilefuse.level(0), launches.counting() as launched:
            y = grouped_glu_mlp(leaves["x"], a["counts"], leaves["probs"], leaves["w1"], leaves["w2"],
                                glu_interleave=interleave, fc1_bias=leaves["b1"], fc2_bias=leaves["b2"], recipe=recipe)
            out = (y, *torch.autograd.grad(y, [leaves[k] for k in FLOAT_NAMES], g))
        assert not launched
        return out

    base = run(args, dy)
    for combo, views in COMBOS.items():
        viewed = {k: views[k](v) for k, v in args.items()}
        dy_view = views["dy"](dy)
        want = run(contiguous(viewed), dy_view.contiguous()) if combo == "expanded" else base
        assert not differences(run(viewed, dy_view), want), combo


def test_compiled_fused_path_takes_any_layout(tuning_table, device):
    """torch.compile(fullgraph=True) through the custom ops (the copies are traced before
    them): non-contiguous arguments give bitwise the eager call on contiguous copies."""
    args, _ = inputs("fused", device)
    register_fused(args, "fused")
    _, _, _, interleave, level, _ = PATHS["fused"]
    counts = strided(args["counts"])
    views = [transposed(args["x"]), strided(args["probs"]), transposed(args["w1"]), offset(args["w2"]),
             transposed(args["b1"]), expanded(args["b2"])]

    def f(x, p, w1, w2, b1, b2):
        return grouped_glu_mlp(x, counts, p, w1, w2, glu_interleave=interleave, fc1_bias=b1, fc2_bias=b2)

    compiled = torch.compile(f, fullgraph=True, backend="inductor" if device == "cuda" else "aot_eager")
    got_leaves = [v.detach().requires_grad_(True) for v in views]
    want_leaves = [v.detach().contiguous().requires_grad_(True) for v in views]
    with tilefuse.level(level), launches.counting() as launched:
        y = compiled(*got_leaves)
        got = (y, *torch.autograd.grad(y.sum(), got_leaves))
        y = f(*want_leaves)
        want = (y, *torch.autograd.grad(y.sum(), want_leaves))
    assert launched["grouped_mlp_fwd"] == 2 and launched["grouped_mlp_bwd"] == 2
    assert not differences(got, want)


def test_launchers_take_any_layout(device):
    """launch.forward / launch.backward called directly (the tuner's and `tilefuse check`'s
    entry point) with every tensor non-contiguous: bitwise the contiguous call, and dx
    row-major."""
    args, dy = inputs("fused", device)
    H, F, _, interleave, _, _ = PATHS["fused"]
    viewed = {"x": transposed(args["x"]), "counts": strided(args["counts"]), "probs": strided(args["probs"]),
              "w1": transposed(args["w1"]), "w2": strided(args["w2"]), "b1": transposed(args["b1"]),
              "b2": strided(args["b2"])}

    def run(a, g):
        y, z, h = launch.forward(*(a[k] for k in NAMES), "swiglu", interleave, config=FUSED_CONFIG)
        return (y, *launch.backward(g, *(a[k] for k in NAMES), z, h, "swiglu", interleave, config=FUSED_CONFIG))

    want = run(args, dy)
    got = run(viewed, dy.t().contiguous().t())
    assert got[1].is_contiguous()
    for name, a, b in zip(("y", "dx", "dprobs", "dw1", "dw2", "db1", "db2"), got, want):
        assert torch.equal(a, b), name


# ---------------------------------------------------------------------------------------------
# T == 0: empty y, empty dx / dprobs, zero weight and bias gradients, on every path.
@pytest.mark.parametrize("path,level", [("unfused", 2), ("unfused", 0), ("fused", 2), ("fp8_block", 1),
                                        ("mxfp8", 1), ("nvfp4", 1), ("nvfp4", 0)])
def test_no_tokens(path, level, tuning_table, device):
    H, F, dtype, interleave, _, recipe = PATHS[path]
    i = random_inputs([0, 0, 0], H, F, dtype, bias=True, device=device, generator=torch.Generator().manual_seed(1))
    register_fused({"x": i["x"], "w2": i["w2"]}, path)
    leaves = [i[k].requires_grad_(True) for k in FLOAT_NAMES]
    with tilefuse.level(level), launches.counting() as launched:
        y = grouped_glu_mlp(leaves[0], i["counts"], leaves[1], leaves[2], leaves[3], glu_interleave=interleave,
                            fc1_bias=leaves[4], fc2_bias=leaves[5], recipe=recipe)
        grads = torch.autograd.grad(y.sum(), leaves)   # an expanded (0, 0)-strided gradient
    if path == "fused":
        assert launched["grouped_mlp_fwd"] == 1
    assert y.shape == (0, H) and y.dtype == dtype
    for t, g in zip(leaves, grads):
        assert g.shape == t.shape and g.dtype == t.dtype and g.device == t.device
        assert torch.count_nonzero(g) == 0


# ---------------------------------------------------------------------------------------------
# Meta tensors: shapes and dtypes, forward and backward, nothing run.
@pytest.mark.parametrize("recipe", [None, "nvfp4"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_meta_tensors(recipe, dtype):
    E, T, H, F = 3, 10, 32, 16
    meta = {"device": "meta", "dtype": dtype}
    x = torch.empty(T, H, **meta, requires_grad=True)
    probs = torch.empty(T, device="meta", requires_grad=True)
    w1, w2 = torch.empty(E, 2 * F, H, **meta, requires_grad=True), torch.empty(E, H, F, **meta, requires_grad=True)
    b1, b2 = torch.empty(E, 2 * F, **meta, requires_grad=True), torch.empty(E, H, **meta, requires_grad=True)
    counts = torch.empty(E, dtype=torch.int32, device="meta")
    with launches.counting() as launched:
        y = grouped_glu_mlp(x, counts, probs, w1, w2, glu_interleave=8, fc1_bias=b1, fc2_bias=b2, recipe=recipe)
        grads = torch.autograd.grad(y.sum(), (x, probs, w1, w2, b1, b2))
    assert not launched
    assert y.device.type == "meta" and y.shape == (T, H) and y.dtype == dtype
    for t, g in zip((x, probs, w1, w2, b1, b2), grads):
        assert g.device.type == "meta" and g.shape == t.shape and g.dtype == t.dtype


def test_module_on_meta():
    m = tilefuse.nn.GroupedGLUMLP(4, 64, 32, bias=True, device="meta", dtype=torch.bfloat16)
    y = m(torch.empty(20, 64, device="meta", dtype=torch.bfloat16), torch.empty(4, dtype=torch.int64, device="meta"),
          torch.empty(20, device="meta"))
    assert y.device.type == "meta" and y.shape == (20, 64) and y.dtype == torch.bfloat16


# ---------------------------------------------------------------------------------------------
# The unfused path's CUDA branch: bf16 runs torch._grouped_mm's CUTLASS kernel, which also
# refuses operands that are not 16-byte aligned and asserts on the device about ragged groups
# for a row-major x^T in its weight-gradient GEMM (reference._row_major).
@pytest.mark.gpu
def test_unfused_cutlass_branch_every_layout(device):
    i = random_inputs([5, 0, 11, 3], 64, 32, torch.bfloat16, bias=True, device=device,
                      generator=torch.Generator().manual_seed(2))
    args, dy = {name: i[name] for name in NAMES}, i["dy"]

    def run(a, g):
        leaves = {k: a[k].detach().requires_grad_(True) for k in FLOAT_NAMES}
        y = grouped_glu_mlp(leaves["x"], a["counts"], leaves["probs"], leaves["w1"], leaves["w2"], glu_interleave=8,
                            fc1_bias=leaves["b1"], fc2_bias=leaves["b2"])
        return (y, *torch.autograd.grad(y, [leaves[k] for k in FLOAT_NAMES], g))

    with tilefuse.level(1):
        base = run(args, dy)
        for name, view in [("x", transposed), ("x", offset), ("x", sliced), ("w1", transposed), ("w1", offset),
                           ("w2", transposed), ("w2", strided)]:
            viewed = dict(args)
            viewed[name] = view(args[name])
            assert not differences(run(viewed, dy), base), (name, view.__name__)
        for label, view in DY_VIEWS.items():
            dy_view = view(dy)
            want = run(args, dy_view.contiguous()) if label.startswith("expanded") else base
            assert not differences(run(args, dy_view), want), label
