"""Tensors of unusual kinds at every public entry point. Negative-bit views (``z.conj().imag``:
a real tensor whose memory holds its values' negatives, flipped on read) as any tensor
argument give the values' result, forward and gradients: the kernels read memory through
data_ptr(), so the entry points resolve such views (utils.readable; the custom ops'
dispatcher does it for traced calls); ZeroTensors likewise. Unresolved, dyt's alpha (and a one-channel weight),
grouped_glu_mlp's weights on the fused kernels and the quantizers would take the negatives.
Sparse and nested tensors are refused by name (utils.check_tensor)."""

import pytest
import torch

import tilefuse
from tilefuse import launches, quant, tuning
from tilefuse.ops.grouped_glu_mlp.api import problem_for
from tilefuse.ops.grouped_glu_mlp import plan as gplan
from tilefuse.ops.grouped_glu_mlp import tune as gtune
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
from tilefuse.utils import normwise_rel_error as rel


def neg_view(t: torch.Tensor) -> torch.Tensor:
    """A tensor equal to t whose negative bit is set (t's negatives in memory)."""
    v = torch.complex(torch.zeros_like(t), -t.detach()).conj().imag
    assert v.is_neg() and torch.equal(v, t)
    return v.requires_grad_(t.requires_grad)


def _grads(y, leaves, dy):
    return torch.autograd.grad(y, [t for t in leaves if t.requires_grad], dy)


@pytest.mark.parametrize("arg", ["x", "alpha", "weight", "bias"])
@pytest.mark.parametrize("channels", [8, 1])
def test_dyt(arg, channels, device):
    g = torch.Generator().manual_seed(0)
    t = {"x": torch.randn(6, channels, generator=g), "alpha": torch.tensor([0.7]),
         "weight": torch.randn(channels, generator=g), "bias": torch.randn(channels, generator=g)}
    t = {k: v.to(device).requires_grad_(True) for k, v in t.items()}
    dy = torch.randn(6, channels, generator=g).to(device)
    want = tilefuse.dyt(t["x"], t["alpha"], t["weight"], t["bias"])
    want_grads = _grads(want, t.values(), dy)
    v = dict(t, **{arg: neg_view(t[arg])})
    got = tilefuse.dyt(v["x"], v["alpha"], v["weight"], v["bias"])
    assert torch.equal(got, want)
    for a, b in zip(_grads(got, v.values(), dy), want_grads):
        assert torch.equal(a, b)


@pytest.mark.parametrize("arg", ["x", "probs", "w1", "w2", "b1", "b2"])
@pytest.mark.parametrize("route", ["default", "fused kernels"])
def test_grouped_glu_mlp(arg, route, tuning_table, device):
    i = random_inputs([5, 0, 9], 32, 32, torch.float32, bias=True, device=device,
                      generator=torch.Generator().manual_seed(1))
    names = ("x", "probs", "w1", "w2", "b1", "b2")
    t = {k: i[k].requires_grad_(True) for k in names}
    if route == "fused kernels":
        problem = problem_for(i["x"], i["w2"], "swiglu", 8, True)
        tuning.register("grouped_glu_mlp", {problem: gtune.candidates_for(problem)[0]})

    def call(a):
        with tilefuse.level(2), launches.counting() as launched:
            y = tilefuse.grouped_glu_mlp(a["x"], i["counts"], a["probs"], a["w1"], a["w2"], glu_interleave=8,
                                         fc1_bias=a["b1"], fc2_bias=a["b2"])
        assert (launched["grouped_mlp_fwd"] == 1) is (route == "fused kernels")
        return y

    want = call(t)
    want_grads = _grads(want, t.values(), i["dy"])
    v = dict(t, **{arg: neg_view(t[arg])})
    got = call(v)
    assert rel(got, want) <= 1e-6
    for a, b in zip(_grads(got, v.values(), i["dy"]), want_grads):
        assert rel(a, b) <= 1e-6


@pytest.mark.parametrize("fn", ["quantize_fp8_block", "quantize_mxfp8", "quantize_nvfp4"])
def test_quantizers(fn, device):
    x = torch.randn(4, 128, generator=torch.Generator().manual_seed(2)).to(device)
    want, got = getattr(quant, fn)(x), getattr(quant, fn)(neg_view(x))
    assert torch.equal(got.dequantize(), want.dequantize())


@pytest.mark.parametrize("arg", range(5), ids=["u0", "alpha", "w0_all", "w1_all", "gw_all"])
def test_so2_mixing_stack(arg, device):
    from test_so2_kernels import make
    _, inputs = make(1, 2, 8, 37, device)
    want = tilefuse.so2_mixing_stack(*inputs, lmax=1, focus_dim=8)
    views = list(inputs)
    views[arg] = neg_view(inputs[arg])
    got = tilefuse.so2_mixing_stack(*views, lmax=1, focus_dim=8)
    assert rel(got, want) <= 1e-6


def test_zero_tensor_inputs_give_the_results_of_zeros(device):
    """A ZeroTensor (zeros owning no memory, torch._efficientzerotensor) as an input of the
    quantizers and of dyt gives the result of real zeros (utils.readable), where the kernels
    could not read its memory."""
    zero = torch._efficientzerotensor((4, 128), device=device)
    for fn in ("quantize_fp8_block", "quantize_mxfp8", "quantize_nvfp4"):
        want = getattr(quant, fn)(torch.zeros(4, 128, device=device))
        assert torch.equal(getattr(quant, fn)(zero).dequantize(), want.dequantize()), fn
    alpha, weight, bias = (torch.tensor([0.5], device=device), torch.randn(128, device=device),
                           torch.randn(128, device=device))
    assert torch.equal(tilefuse.dyt(zero, alpha, weight, bias), tilefuse.dyt(torch.zeros_like(zero), alpha, weight,
                                                                              bias))
    zero_bias = torch._efficientzerotensor((128,), device=device)
    assert torch.equal(tilefuse.dyt(zero + 1.0, alpha, weight, zero_bias),
                       tilefuse.dyt(torch.ones(4, 128, device=device), alpha, weight, torch.zeros(128, device=device)))


def _incoming(kind, dy):
    """An incoming gradient equal to dy: a negative-bit view of it, or a ZeroTensor (zeros that
    own no memory) in place of it."""
    return neg_view(dy) if kind == "negative-bit" else torch._efficientzerotensor(dy.shape, device=dy.device)


def _assert_grads(kind, got, want, tol=0.0):
    for a, b in zip(got, want):
        if kind == "zero":
            assert not a._is_zerotensor() and torch.count_nonzero(a) == 0
        elif tol == 0.0:
            assert torch.equal(a, b)
        else:
            assert rel(a, b) <= tol


@pytest.mark.parametrize("kind", ["negative-bit", "zero"])
@pytest.mark.parametrize("path", ["eager", "custom op"])
def test_dyt_takes_unusual_incoming_gradients(kind, path, device):
    """Autograd can hand a backward a negative-bit gradient (through ``torch.complex(a,
    y).conj().imag``, say) or a ZeroTensor. The backward's launches read the gradient's memory,
    so its entry points resolve it (utils.readable): the gradients are those of the plain
    tensor, not their negatives (a contiguous view reaches the kernels uncopied), and zeros."""
    from tilefuse.ops.dyt.op import dyt_op
    g = torch.Generator().manual_seed(3)
    t = [torch.randn(6, 8, generator=g), torch.tensor([0.7]), torch.randn(8, generator=g), torch.randn(8, generator=g)]
    t = [v.to(device).requires_grad_(True) for v in t]
    dy = torch.randn(6, 8, generator=g).to(device)
    call = tilefuse.dyt if path == "eager" else (lambda *a: dyt_op(*a, True))
    want = _grads(call(*t), t, dy)
    _assert_grads(kind, _grads(call(*t), t, _incoming(kind, dy)), want)


@pytest.mark.parametrize("kind", ["negative-bit", "zero"])
def test_so2_mixing_stack_takes_unusual_incoming_gradients(kind, device):
    from test_so2_kernels import make
    _, inputs = make(1, 2, 8, 37, device)
    leaves = [v for v in inputs if v.requires_grad]
    y = tilefuse.so2_mixing_stack(*inputs, lmax=1, focus_dim=8)
    dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(4)).to(device)
    want = _grads(y, leaves, dy)
    y = tilefuse.so2_mixing_stack(*inputs, lmax=1, focus_dim=8)
    _assert_grads(kind, _grads(y, leaves, _incoming(kind, dy)), want)


@pytest.mark.parametrize("kind", ["negative-bit", "zero"])
@pytest.mark.parametrize("route", ["default", "fused kernels"])
def test_grouped_glu_mlp_takes_unusual_incoming_gradients(kind, route, tuning_table, device):
    i = random_inputs([5, 0, 9], 32, 32, torch.float32, bias=True, device=device,
                      generator=torch.Generator().manual_seed(1))
    leaves = [i[k].requires_grad_(True) for k in ("x", "probs", "w1", "w2", "b1", "b2")]
    if route == "fused kernels":
        problem = problem_for(i["x"], i["w2"], "swiglu", 8, True)
        tuning.register("grouped_glu_mlp", {problem: gtune.candidates_for(problem)[0]})

    def call():
        with tilefuse.level(2), launches.counting() as launched:
            y = tilefuse.grouped_glu_mlp(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], glu_interleave=8,
                                         fc1_bias=i["b1"], fc2_bias=i["b2"])
        assert (launched["grouped_mlp_fwd"] == 1) is (route == "fused kernels")
        return y
    want = _grads(call(), leaves, i["dy"])
    _assert_grads(kind, _grads(call(), leaves, _incoming(kind, i["dy"])), want, tol=1e-6)


def _sparse(t):
    return t.detach().to_sparse()


def _nested(t):
    return torch.nested.nested_tensor([t.detach()[:2], t.detach()[2:]], layout=torch.jagged)


@pytest.mark.parametrize("kind", [_sparse, _nested], ids=["sparse", "nested"])
def test_sparse_and_nested_tensors_are_refused_by_name(kind, device):
    """Sparse (COO) and nested tensors have no strided memory for the kernels to read: each
    entry point names the argument in a TypeError (not a RuntimeError from inside torch:
    'memory format option is only supported by strided tensors' and the like)."""
    x, a, w = torch.randn(4, 16), torch.tensor([0.5]), torch.ones(16)
    with pytest.raises(TypeError, match="dyt: x must be a dense \\(strided\\) tensor"):
        tilefuse.dyt(kind(x), a, w)
    with pytest.raises(TypeError, match="dyt: weight must be a dense"):
        tilefuse.dyt(x, a, _sparse(w))
    i = random_inputs([2, 2], 16, 16, torch.float32, bias=False, device="cpu")
    with pytest.raises(TypeError, match="grouped_glu_mlp: x must be a dense"):
        tilefuse.grouped_glu_mlp(kind(i["x"]), i["counts"], i["probs"], i["w1"], i["w2"])
    with pytest.raises(TypeError, match="grouped_glu_mlp: fc1_weight must be a dense"):
        tilefuse.grouped_glu_mlp(i["x"], i["counts"], i["probs"], _sparse(i["w1"]), i["w2"])
    with pytest.raises(TypeError, match="quantize_nvfp4: x must be a dense"):
        quant.quantize_nvfp4(kind(torch.randn(4, 32)))
    from test_so2_kernels import make
    _, inputs = make(1, 2, 8, 4, "cpu", grad=False)
    with pytest.raises(TypeError, match="so2_mixing_stack: w0_all must be a dense"):
        tilefuse.so2_mixing_stack(inputs[0], inputs[1], _sparse(inputs[2]), *inputs[3:], lmax=1, focus_dim=8)


@pytest.mark.parametrize("arg", ["x", "alpha", "weight", "bias"])
@pytest.mark.parametrize("kind", ["sparse", "mkldnn"])
def test_a_cached_dyt_plan_does_not_take_another_layout(arg, kind):
    """dyt's plan cache (ops/dyt/plan.py) keys each tensor's layout: after a dense call has
    cached its plan, a sparse or mkldnn tensor of the same shape, dtype and device (whose
    strides match, for mkldnn) still gets validate's TypeError naming it, not the dense plan's
    launch (NotImplementedError or RuntimeError from inside torch)."""
    if kind == "mkldnn" and not torch.backends.mkldnn.is_available():
        pytest.skip("this torch build has no mkldnn")
    t = {"x": torch.randn(4, 16), "alpha": torch.tensor([0.5]), "weight": torch.ones(16), "bias": torch.zeros(16)}
    tilefuse.dyt(t["x"], t["alpha"], t["weight"], t["bias"])    # the dense plan, cached
    t[arg] = t[arg].to_sparse() if kind == "sparse" else t[arg].to_mkldnn()
    with pytest.raises(TypeError, match=f"dyt: {arg} must be a dense \\(strided\\) tensor"):
        tilefuse.dyt(t["x"], t["alpha"], t["weight"], t["bias"])


def _column_major(t):
    """t's values in another layout: 2-D column-major, 1-D at stride 2 (the counts, the offsets,
    probs), others as they are."""
    if t.dim() == 1 and t.numel() > 1:
        return torch.stack([t, t], -1)[:, 0]
    return t.t().contiguous().t() if t.dim() == 2 and min(t.shape) > 1 else t


@pytest.mark.parametrize("route", ["default", "fused kernels"])
@pytest.mark.parametrize("bias", [False, True])
def test_grouped_glu_mlp_under_a_saved_tensor_hook_that_changes_layouts(route, bias, tuning_table, device):
    """A saved-tensor hook may give the saved tensors back in another layout (here x, z, h and
    the biases column-major, the counts, the expert offsets and probs at stride 2). The compose
    route's backward lays them out again and its call plan steps aside (its launches are fixed
    for the forward's layouts): the gradients are those without the hook, bit for bit (read
    as laid out, the counts, offsets and biases would give wrong gradients and a read past the
    fc1 bias)."""
    dtype = torch.bfloat16 if route == "default" else torch.float32
    i = random_inputs([5, 0, 11], 64, 64, dtype, bias=bias, device=device, generator=torch.Generator().manual_seed(5))
    if route == "fused kernels":
        problem = problem_for(i["x"], i["w2"], "swiglu", 32, False)
        tuning.register("grouped_glu_mlp", {problem: gtune.candidates_for(problem)[0]})

    def grads(unpack):
        leaves = [i[k].clone().requires_grad_(True) for k in ("x", "probs", "w1", "w2", "b1", "b2") if i[k] is not None]
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack), tilefuse.level(2):
            y = tilefuse.grouped_glu_mlp(leaves[0], i["counts"], leaves[1], leaves[2], leaves[3], glu_interleave=32,
                                         fc1_bias=leaves[4] if bias else None, fc2_bias=leaves[5] if bias else None)
        return torch.autograd.grad(y, leaves, i["dy"])
    for a, b in zip(grads(_column_major), grads(lambda t: t)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("op", ["so2_mixing_stack", "grouped_glu_mlp", "grouped_glu_mlp fp32", "grouped_glu_mlp fp8_block"])
def test_fake_tensors_launch_nothing_and_give_the_results_metadata(op, tuning_table, device):
    """FakeTensors outside torch.compile (memory estimators run a model's eager forward and
    backward under FakeTensorMode) own no memory: the ops take their plain-PyTorch paths, which
    give fake results and gradients of the real call's shapes and dtypes, and launch nothing
    (a launch on them would read address 0). dyt's and the quantizers' cases: test_dyt_lean,
    test_quant_api."""
    from torch._subclasses.fake_tensor import FakeTensorMode, is_fake
    if op == "so2_mixing_stack":
        from test_so2_kernels import make
        real = make(1, 1, 16, 37, device)[1]
        call = lambda *t: tilefuse.so2_mixing_stack(*t, lmax=1, focus_dim=16)   # noqa: E731
    else:
        dtype = torch.float32 if "fp32" in op else torch.bfloat16
        recipe = "fp8_block" if "fp8_block" in op else None
        size = 128 if recipe else 32
        i = random_inputs(torch.tensor([5, 0, 11]), size, size, dtype, bias=recipe is None, device=device)
        real = [i[k].requires_grad_(k not in ("counts",)) if i[k] is not None else None
                for k in ("x", "counts", "probs", "w1", "w2", "b1", "b2")]
        call = lambda x, c, p, w1, w2, b1, b2: tilefuse.grouped_glu_mlp(   # noqa: E731
            x, c, p, w1, w2, fc1_bias=b1, fc2_bias=b2, recipe=recipe)
    mode = FakeTensorMode()
    fake = [None if t is None else mode.from_tensor(t.detach()).requires_grad_(t.requires_grad) for t in real]
    with mode, launches.counting() as launched:
        y = call(*fake)
        grads = torch.autograd.grad(y, [t for t in fake if t is not None and t.requires_grad], torch.ones_like(y))
    assert sum(launched.values()) == 0, dict(launched)
    want = call(*real)
    assert is_fake(y) and (y.shape, y.dtype, y.device) == (want.shape, want.dtype, want.device)
    for g, t in zip(grads, [t for t in real if t is not None and t.requires_grad]):
        assert is_fake(g) and (g.shape, g.dtype) == (t.shape, t.dtype)


@pytest.mark.parametrize("got,largest", [
    (torch.tensor([-2 ** 31, 5], dtype=torch.int32), 2.0 ** 31), (torch.tensor([-128, 1], dtype=torch.int8), 128.0),
    (torch.tensor([True, False]), 1.0), (torch.tensor([1.0, float("nan")]), float("nan"))],
    ids=["int32 minimum", "int8 minimum", "bool", "nan"])
def test_normwise_rel_error_against_zeros_is_the_largest_magnitude_in_float64(got, largest, monkeypatch):
    """utils.normwise_rel_error where want is all zeros is max |got| taken in float64, chunked
    as the norms are: in got's dtype an integer minimum's magnitude overflows (int32's
    -2**31 read as 5, int8's -128 as 1), and a bool tensor has no abs (it raised)."""
    from tilefuse import utils
    monkeypatch.setattr(utils, "NORMWISE_CHUNK", 1)     # one element a chunk: the largest in a later one too
    for g in (got, got.flip(0)):
        assert rel(g, torch.zeros_like(g)) == pytest.approx(largest, nan_ok=True)


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    """A one-rank gloo process group on the CPU (a FileStore, no port) and its DeviceMesh of
    size 1; destroyed after this module's tests."""
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available in this torch build")
    if dist.is_initialized():
        pytest.skip("a default process group is already set up in this process")
    from torch.distributed.device_mesh import init_device_mesh
    store = dist.FileStore(str(tmp_path_factory.mktemp("gloo") / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield init_device_mesh("cpu", (1,))
    finally:
        dist.destroy_process_group()


def _distribute(mesh, t, placement=None):
    """t as a DTensor on ``mesh`` (replicated unless ``placement``), a leaf like t."""
    from torch.distributed.tensor import Replicate, distribute_tensor
    d = distribute_tensor(t.detach(), mesh, [placement or Replicate()])
    return d.requires_grad_(t.requires_grad)


@pytest.mark.parametrize("channels_last", [True, False])
def test_dyt_on_dtensors_gives_level_0s_result(mesh, channels_last):
    """DTensors (tensor parallelism's sequence-parallel norms: x sharded on the sequence dim,
    the parameters replicated) own no memory the kernels could read ("invalid python storage"
    at levels 1-3): dyt runs the reference on them at every level, as level 0 does, a DTensor
    result with ordinary autograd, equal to level 0's on the plain tensors, and launches nothing."""
    from torch.distributed.tensor import DTensor, Shard
    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 4, 8, generator=g, requires_grad=True)
    params = [torch.tensor([0.7]), torch.randn(4 if not channels_last else 8, generator=g),
              torch.randn(4 if not channels_last else 8, generator=g)]
    plain = [x] + [p.requires_grad_(True) for p in params]
    dy = torch.randn(2, 4, 8, generator=g)
    with tilefuse.level(0):
        want = tilefuse.dyt(*plain, channels_last=channels_last)
    want_grads = _grads(want, plain, dy)
    dts = [_distribute(mesh, x, Shard(2 if not channels_last else 1))] + [_distribute(mesh, p) for p in plain[1:]]
    for level in (2, 0):
        with tilefuse.level(level), launches.counting() as launched:
            got = tilefuse.dyt(*dts, channels_last=channels_last)
            grads = _grads(got, dts, _distribute(mesh, dy, dts[0].placements[0]))
        assert sum(launched.values()) == 0, dict(launched)
        assert isinstance(got, DTensor) and torch.equal(got.full_tensor(), want)
        for a, b in zip(grads, want_grads):
            assert isinstance(a, DTensor) and torch.equal(a.full_tensor(), b)


def test_nn_dyt_with_distributed_parameters_runs_on_dtensors(mesh):
    """tilefuse.nn.DyT whose parameters are replicated DTensors (distribute_module), called with
    a sharded DTensor: level 2 gives level 0's output and parameter gradients."""
    from torch.distributed.tensor import Shard, distribute_module
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(7))
    results = []
    for level in (0, 2):
        module = distribute_module(tilefuse.nn.DyT(8, alpha_init=0.6), mesh)
        with tilefuse.level(level):
            y = module(_distribute(mesh, x, Shard(1)))
            y.sum().backward()
        results.append([y.full_tensor()] + [p.grad.full_tensor() for p in module.parameters()])
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_so2_mixing_stack_on_dtensors_gives_level_0s_result(mesh):
    """so2_mixing_stack on DTensors takes the reference wholesale (the kernels would be handed
    the wrappers): a DTensor result and gradients, equal to level 0's on the plain tensors
    (the forward bit for bit; the gradients are autograd's of the reference, level 0's its
    explicit backward formulas)."""
    from torch.distributed.tensor import DTensor
    from test_so2_kernels import make
    _, inputs = make(1, 2, 8, 37, "cpu")
    with tilefuse.level(0):
        want = tilefuse.so2_mixing_stack(*inputs, lmax=1, focus_dim=8)
    dy = torch.randn(want.shape, generator=torch.Generator().manual_seed(8))
    want_grads = _grads(want, inputs, dy)
    dts = [_distribute(mesh, t) for t in inputs]
    with tilefuse.level(2), launches.counting() as launched:
        got = tilefuse.so2_mixing_stack(*dts, lmax=1, focus_dim=8)
        grads = _grads(got, dts, _distribute(mesh, dy))
    assert sum(launched.values()) == 0, dict(launched)
    assert isinstance(got, DTensor) and torch.equal(got.full_tensor(), want)
    for a, b in zip(grads, want_grads):
        assert isinstance(a, DTensor) and rel(a.full_tensor(), b) <= 1e-5


@pytest.mark.parametrize("arg", ["x", "tokens_per_expert", "fc1_weight", "fc2_bias"])
@pytest.mark.parametrize("level", [2, 0])
@pytest.mark.parametrize("plans", [True, False], ids=["plans", "no-plans"])
def test_grouped_glu_mlp_refuses_dtensors_by_name(mesh, arg, level, plans, monkeypatch):
    """grouped_glu_mlp cannot run on DTensors on any path (the kernels read memory the wrapper
    does not own; DTensor has no rules for the reference's torch._grouped_mm on plain offsets
    or its count check torch._assert_async): a TypeError naming the argument, at every level,
    with plans or without (the refusal is part of building a plan, and of the unplanned path),
    and after a call of plain tensors of the same metadata, instead of "invalid python
    storage" from a launch."""
    monkeypatch.setattr(gplan, "ENABLED", plans)
    i = random_inputs([5, 0, 9], 32, 32, torch.float32, bias=True, device="cpu")
    t = {"x": i["x"], "tokens_per_expert": i["counts"], "probs": i["probs"], "fc1_weight": i["w1"],
         "fc2_weight": i["w2"], "fc1_bias": i["b1"], "fc2_bias": i["b2"]}

    def call(t):
        return tilefuse.grouped_glu_mlp(t["x"], t["tokens_per_expert"], t["probs"], t["fc1_weight"],
                                        t["fc2_weight"], glu_interleave=8, fc1_bias=t["fc1_bias"],
                                        fc2_bias=t["fc2_bias"])

    with tilefuse.level(level):
        call(t)   # a plan for plain tensors of this metadata, where plans run
        t[arg] = _distribute(mesh, t[arg])
        for _ in range(2):   # and none is cached for the DTensor's key
            with pytest.raises(TypeError, match=f"grouped_glu_mlp: {arg} is a DTensor, a tensor subclass "
                                                "wrapping other tensors"):
                call(t)


@pytest.mark.parametrize("fn,arg", [("quantize_fp8_block", "x"), ("quantize_mxfp8", "x"), ("quantize_nvfp4", "x"),
                                    ("quantize_nvfp4", "amax"), ("quantize_nvfp4", "stochastic_bits")])
@pytest.mark.parametrize("level", [2, 0])
def test_quantizers_refuse_dtensors_by_name(mesh, fn, arg, level):
    """The quantizers' kernels read memory a DTensor does not own ("invalid python storage"),
    and their reference's bit shifts are wrong on DTensors (torch 2.13: ``t >> 23`` gives t, so
    level 0 would give wrong mxfp8 scales): a TypeError naming the argument."""
    x = torch.randn(4, 128, generator=torch.Generator().manual_seed(9))
    kwargs = {"x": x}
    if arg == "amax":
        kwargs["amax"] = x.abs().amax()
    elif arg == "stochastic_bits":
        kwargs["stochastic_bits"] = torch.zeros(4, 128, dtype=torch.int32)
    kwargs[arg] = _distribute(mesh, kwargs[arg])
    with tilefuse.level(level), pytest.raises(TypeError, match=f"{fn}: {arg} is a DTensor"):
        getattr(quant, fn)(kwargs.pop("x"), **kwargs)
