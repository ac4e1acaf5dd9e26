"""GroupedGLUMLP: torch.compile(fullgraph=True) on every dtype (fp32 / fp16 trace the unfused
composition as an opaque custom op instead of failing on its host-side per-expert loop), and the
named GLU layout (glu_layout) with its state-dict record, checked on load."""

import pytest
import torch

import tilefuse
from tilefuse import policy
from tilefuse.nn import GroupedGLUMLP
from tilefuse.ops.grouped_glu_mlp.op import grouped_mlp_unfused_bwd_op, grouped_mlp_unfused_op
from tilefuse.ops.grouped_glu_mlp.reference import glu_index, grouped_glu_mlp_reference

E, H = 3, 16
COUNTS = [4, 0, 5]


def _inputs(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(sum(COUNTS), H, generator=g).to(dtype).requires_grad_(True)
    probs = torch.rand(sum(COUNTS), generator=g).requires_grad_(True)
    return x, torch.tensor(COUNTS), probs


# fp16 F = 4: rows of 8 bytes, off torch._grouped_mm's 16 (its per-expert loop even in eager).
@pytest.mark.parametrize("dtype,ffn,bias", [(torch.float32, 8, False), (torch.float32, 8, True),
                                            (torch.float16, 8, False), (torch.float16, 4, True),
                                            (torch.bfloat16, 4, False)],
                         ids=["fp32", "fp32-bias", "fp16", "fp16-F4-bias", "bf16-F4"])
def test_compile_fullgraph_matches_eager(dtype, ffn, bias):
    torch.compiler.reset()   # one module per case: each would be a recompile of forward
    torch.manual_seed(0)
    m = GroupedGLUMLP(E, H, ffn, glu_interleave=None if ffn == 4 else 4, bias=bias, dtype=dtype)
    x, counts, probs = _inputs(dtype)

    def loss(mod, x_, p_):
        return mod(x_, counts, p_).float().square().sum()
    compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
    got = torch.autograd.grad(loss(compiled, x, probs), (x, probs, *m.parameters()))
    want = torch.autograd.grad(loss(m, x, probs), (x, probs, *m.parameters()))
    # The opaque op's backward evaluates the explicit formulas in float32 where eager rounds z
    # and h to the input dtype: equal to fp32 roundoff, to a few (2.5) ulps of the 16-bit
    # dtype else (bf16 2e-2, fp16 2.4e-3).
    k = 1e-5 if dtype == torch.float32 else 2.5 * torch.finfo(dtype).eps
    for g, w in zip(got, want):
        torch.testing.assert_close(g.float(), w.float(), rtol=k, atol=k * float(w.abs().max()))
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, counts, probs), m(x, counts, probs), rtol=0, atol=0)


def test_unfused_custom_ops_opcheck():
    torch.manual_seed(1)
    m = GroupedGLUMLP(E, H, 8, glu_interleave=4, bias=True)
    x, counts, probs = _inputs(torch.float32)
    args = (x.detach(), counts, probs.detach(), *(p.detach() for p in m.parameters()), "swiglu", 4)
    torch.library.opcheck(grouped_mlp_unfused_op, args)
    dy = torch.randn(sum(COUNTS), H)
    torch.library.opcheck(grouped_mlp_unfused_bwd_op, (dy, *args), test_utils=("test_schema", "test_faketensor"))


def test_compiled_double_backward_of_the_opaque_op_matches_reference():
    """create_graph through the opaque op's autograd (called directly, as traced graphs do):
    differentiates the unfused composition."""
    torch.manual_seed(2)
    m = GroupedGLUMLP(E, H, 8, glu_interleave=4)
    x, counts, probs = _inputs(torch.float32)
    y = grouped_mlp_unfused_op(x, counts, probs, m.fc1_weight, m.fc2_weight, None, None, "swiglu", 4)
    dx, = torch.autograd.grad(y.square().sum(), x, create_graph=True)
    r = torch.randn_like(dx)    # a dense gradient: torch._grouped_mm's double backward refuses an expanded one
    second = torch.autograd.grad((dx * r).sum(), probs)[0]
    x64 = x.detach().double().requires_grad_(True)
    p64 = probs.detach().double().requires_grad_(True)
    y64 = grouped_glu_mlp_reference(x64, counts, p64, m.fc1_weight.double(), m.fc2_weight.double(),
                                    glu_interleave=4, compute_dtype=torch.float64)
    dx64, = torch.autograd.grad(y64.square().sum(), x64, create_graph=True)
    want = torch.autograd.grad((dx64 * r.double()).sum(), p64)[0]
    # fp32: each first-order result within k eps32 of exact (test_grouped_mlp_reference.
    # fp32_tolerance, k = H + 2F + max m_e + 16); the second order chains two such passes.
    k = 2 * (H + 2 * 8 + max(COUNTS) + 16) * torch.finfo(torch.float32).eps
    torch.testing.assert_close(second.double(), want, rtol=k, atol=k * float(want.abs().max()))


# --- glu_layout ---------------------------------------------------------------------------------

def test_glu_layout_names_the_layout():
    assert (GroupedGLUMLP(2, 8, 64).glu_layout, GroupedGLUMLP(2, 8, 64).glu_interleave) == ("interleaved", 32)
    m = GroupedGLUMLP(2, 8, 64, glu_layout="halves")
    assert (m.glu_layout, m.glu_interleave) == ("halves", None) and "glu_layout='halves'" in repr(m)
    assert GroupedGLUMLP(2, 8, 64, glu_interleave=None).glu_layout == "halves"
    m = GroupedGLUMLP(2, 8, 64, glu_layout="interleaved", glu_interleave=1)
    assert (m.glu_layout, m.glu_interleave) == ("interleaved", 1)


@pytest.mark.parametrize("kwargs,exc,msg", [
    ({"glu_layout": "concat"}, ValueError, "glu_layout must be None or one of"),
    ({"glu_layout": 0}, TypeError, "glu_layout must be None or one of"),
    ({"glu_layout": "halves", "glu_interleave": 4}, ValueError, "glu_interleave=4 is the block size"),
    ({"glu_layout": "interleaved", "glu_interleave": None}, ValueError,
     "glu_layout='interleaved' needs glu_interleave"),
    ({"glu_layout": "interleaved", "glu_interleave": 48}, ValueError, "glu_interleave=48 must divide"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_glu_layout_bad_arguments_name_the_argument(kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        GroupedGLUMLP(2, 8, 64, **kwargs)


def test_halves_layout_module_equals_interleaved_with_permuted_rows():
    """The same expert in both layouts: fc1 rows moved from halves to interleaved order give
    the same result."""
    torch.manual_seed(3)
    halves = GroupedGLUMLP(E, H, 8, glu_layout="halves")
    inter = GroupedGLUMLP(E, H, 8, glu_layout="interleaved", glu_interleave=4)
    gate, up = glu_index(8, 4)
    with torch.no_grad():
        inter.fc1_weight[:, gate] = halves.fc1_weight[:, :8]
        inter.fc1_weight[:, up] = halves.fc1_weight[:, 8:]
        inter.fc2_weight.copy_(halves.fc2_weight)
    x, counts, probs = _inputs(torch.float32)
    with tilefuse.level(0):
        torch.testing.assert_close(inter(x, counts, probs), halves(x, counts, probs), rtol=1e-5, atol=1e-5)


def test_state_dict_records_and_checks_the_layout():
    src = GroupedGLUMLP(E, H, 8, glu_interleave=4)
    state = src.state_dict()
    assert int(state["glu_layout"]) == 4
    GroupedGLUMLP(E, H, 8, glu_interleave=4).load_state_dict(state)              # same layout
    assert int(GroupedGLUMLP(E, H, 8, glu_layout="halves").state_dict()["glu_layout"]) == 0
    with pytest.raises(RuntimeError, match=r"saved with its GLU rows interleaved in blocks of 4 .*"
                                           r"reads them halves.*glu_interleave=4"):
        GroupedGLUMLP(E, H, 8, glu_layout="halves").load_state_dict(state)
    with pytest.raises(RuntimeError, match="interleaved in blocks of 2"):
        GroupedGLUMLP(E, H, 8, glu_interleave=2).load_state_dict(state)
    dst = GroupedGLUMLP(E, H, 8, glu_interleave=2)
    before = dst.fc1_weight.detach().clone()
    with pytest.raises(RuntimeError, match="interleaved in blocks of 2"):
        dst.load_state_dict(state, strict=False)        # a mismatch raises whatever strict says
    assert torch.equal(dst.fc1_weight, before)          # and loads nothing
    bare = {k: v for k, v in state.items() if k != "glu_layout"}
    with pytest.warns(UserWarning, match=r"no 'glu_layout'.*torch.tensor\(4\)"), \
            pytest.raises(RuntimeError, match='Missing key.*"glu_layout"'):
        GroupedGLUMLP(E, H, 8, glu_interleave=4).load_state_dict(bare)
    with pytest.warns(UserWarning, match="cannot be checked"):
        dst = GroupedGLUMLP(E, H, 8, glu_interleave=4)
        result = dst.load_state_dict(bare, strict=False)
    assert result.missing_keys == ["glu_layout"] and torch.equal(dst.fc1_weight, src.fc1_weight)
    with pytest.raises(RuntimeError, match="one-element integer tensor"):
        GroupedGLUMLP(E, H, 8, glu_interleave=4).load_state_dict({**bare, "glu_layout": torch.tensor(4.0)})
    # nested under a prefix
    outer = torch.nn.ModuleDict({"mlp": GroupedGLUMLP(E, H, 8, glu_interleave=4)})
    outer.load_state_dict({"mlp." + k: v for k, v in state.items()})
    with pytest.raises(RuntimeError, match="mlp.fc1_weight was saved"):
        torch.nn.ModuleDict({"mlp": GroupedGLUMLP(E, H, 8, glu_layout="halves")}).load_state_dict(
            {"mlp." + k: v for k, v in state.items()})


def test_meta_and_fake_state_dicts_load_like_nn_linears():
    """A state dict on the meta device (deferred initialisation with assign=True) or of fake
    tensors (memory estimates) loads as nn.Linear's does, warning that its layout record holds
    no value to check; a real state dict loads into a module built inside a FakeTensorMode."""
    import io

    from torch._subclasses.fake_tensor import FakeTensorMode
    buf = io.BytesIO()
    torch.save(GroupedGLUMLP(E, H, 8, glu_interleave=4).state_dict(), buf)
    buf.seek(0)
    meta = torch.load(buf, map_location="meta", weights_only=True)
    dst = GroupedGLUMLP(E, H, 8, glu_interleave=4, device="meta")
    with pytest.warns(UserWarning, match="'glu_layout' is a meta tensor without a value"):
        assert dst.load_state_dict(meta, assign=True).missing_keys == []
    assert dst.fc1_weight.is_meta
    real = GroupedGLUMLP(E, H, 8, glu_interleave=4).state_dict()
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        GroupedGLUMLP(E, H, 8, glu_interleave=4).load_state_dict(real)
        with pytest.raises(RuntimeError, match="interleaved in blocks of 4"):   # still checked: a real value
            GroupedGLUMLP(E, H, 8, glu_interleave=2).load_state_dict(real)
        fake = {k: mode.from_tensor(v) for k, v in real.items()}
        with pytest.warns(UserWarning, match="is a fake tensor without a value"):
            GroupedGLUMLP(E, H, 8, glu_interleave=2).load_state_dict(fake)


def test_blocks_of_f_and_halves_load_into_each_other():
    """Interleave blocks of s = F are the halves layout row for row: state dicts move between
    the two (the default s of 32 at F 32 included); another s is still refused."""
    interleaved, halves = GroupedGLUMLP(E, H, 8, glu_interleave=8), GroupedGLUMLP(E, H, 8, glu_layout="halves")
    halves.load_state_dict(interleaved.state_dict())
    assert torch.equal(halves.fc1_weight, interleaved.fc1_weight)
    GroupedGLUMLP(E, H, 8, glu_interleave=8).load_state_dict(halves.state_dict())
    GroupedGLUMLP(E, H, 32, glu_layout="halves").load_state_dict(GroupedGLUMLP(E, H, 32).state_dict())
    with pytest.raises(RuntimeError, match="interleaved in blocks of 8"):
        GroupedGLUMLP(E, H, 8, glu_interleave=4).load_state_dict(interleaved.state_dict())
    x, counts, probs = _inputs(torch.float32)
    torch.testing.assert_close(halves(x, counts, probs), interleaved(x, counts, probs), rtol=0, atol=0)


@pytest.mark.parametrize("kernels", [True, False], ids=["kernels", "no-kernels"])
@pytest.mark.parametrize("level", [0, 1, 2])
def test_double_backward_takes_an_expanded_incoming_gradient(level, kernels, monkeypatch):
    """A second backward whose incoming gradient is expanded (``g.sum()`` differentiated, g a
    create_graph gradient of x, probs, a weight or a bias): torch._grouped_mm's backward takes
    row-major gradients only ("Invalid strides/sizes"), so the unfused composition's inputs lay
    out the gradient a second backward brings to theirs (reference._LaidOutGradient). At every
    level, with the kernels (the interpreter here; levels 1-2 then differentiate the unfused
    composition inside the op) and without them (CPU tensors where the interpreter is off: the
    plain composition, as at level 0; on the H200 image, torch 2.11, levels 1-2 failed so,
    results/2026-12-04-h200-aj run 13)."""
    if not kernels:
        monkeypatch.setattr(policy, "interpreter_enabled", lambda: False)
    g0 = torch.Generator().manual_seed(3)
    x = torch.randn(5, 16, generator=g0).requires_grad_(True)
    w1 = torch.randn(2, 16, 16, generator=g0).requires_grad_(True)
    w2 = torch.randn(2, 16, 8, generator=g0).requires_grad_(True)
    b1 = (torch.randn(2, 16, generator=g0) * 0.1).requires_grad_(True)
    probs = torch.rand(5, generator=g0).requires_grad_(True)
    counts = torch.tensor([3, 2])
    leaves = (x, probs, w1, w2, b1)
    with tilefuse.level(level):
        y = tilefuse.grouped_glu_mlp(x, counts, probs, w1, w2, glu_interleave=None, fc1_bias=b1)
        firsts = torch.autograd.grad(y.pow(2).sum(), leaves, create_graph=True)
        got = [torch.autograd.grad(g.sum(), leaves, retain_graph=True, allow_unused=True) for g in firsts]
    l64 = [t.detach().double().requires_grad_(True) for t in leaves]
    y64 = grouped_glu_mlp_reference(l64[0], counts, l64[1], l64[2], l64[3], glu_interleave=None, fc1_bias=l64[4],
                                    compute_dtype=torch.float64)
    firsts64 = torch.autograd.grad(y64.pow(2).sum(), l64, create_graph=True)
    want = [torch.autograd.grad(g.sum(), l64, retain_graph=True, allow_unused=True) for g in firsts64]
    k = 2 * (16 + 2 * 8 + 3 + 16) * torch.finfo(torch.float32).eps   # the double backward test's bound, H 16, F 8
    for row_got, row_want in zip(got, want):
        for a, b in zip(row_got, row_want):
            if b is None or not b.any():   # a gradient the first one does not depend on
                assert a is None or not a.any()
                continue
            torch.testing.assert_close(a.double(), b, rtol=k, atol=k * float(b.abs().max()))
