"""DyT's lean eager path: call plans cached per argument metadata (ops/dyt/plan.py) and the
compiled-kernel launcher (ops/triton_common.CompiledLauncher).

Each invalidation test would fail if a stale plan ran: it records which kernels launched with
which constexprs (``launched`` sends every launch through the JIT, where
``CompiledLauncher._jit`` sees it; on the CPU that is the interpreter anyway) or checks a result
a stale layout would get wrong."""

import contextlib
import gc
import tracemalloc

import pytest
import torch

import tilefuse
from tilefuse import launches, tuning
from tilefuse.ops import triton_common
from tilefuse.ops.dyt import configs, plan as plans, reference
from tilefuse.ops.dyt.configs import DyTConfig, DyTProblem
from tilefuse.ops.dyt.op import dyt_op
from tilefuse.ops.triton_common import CompiledLauncher
from tilefuse.tuning import store, table

from dyt_helpers import check_against_reference, make_inputs, run
from launcher_fakes import FakeCompiled

@pytest.fixture
def launched(monkeypatch):
    """Every kernel launch as (kernel name, grid, constexprs and options), all through the JIT."""
    monkeypatch.setattr(triton_common, "DIRECT_LAUNCH", False)
    calls = []
    real = CompiledLauncher._jit

    def spy(self, tensors):
        calls.append((self.fn.__name__, self.grid, dict(self.kwargs)))
        return real(self, tensors)
    monkeypatch.setattr(CompiledLauncher, "_jit", spy)
    return calls


def fwd_tiles(calls):
    return [(kw["BLOCK_M"], kw["BLOCK_N"], kw["num_warps"]) for name, _, kw in calls if name == "dyt_fwd_kernel"]


def tiles(cfg):
    return (cfg.block_m, cfg.block_n, cfg.num_warps)


def inputs(shape=(50, 32), dtype=torch.float32, bias=True, channels_last=True, device="cpu", seed=0):
    return make_inputs(shape, dtype, torch.float32, bias, channels_last, device, seed=seed)


def detached(*tensors):
    return [None if t is None else t.detach() for t in tensors]


# --- invalidation ----------------------------------------------------------------------------

def test_level_changes_reach_cached_plans(monkeypatch, device):
    x, a, w, b, _ = inputs(device=device)
    spy_calls = []
    real_ref = reference.dyt_reference
    monkeypatch.setattr(reference, "dyt_reference", lambda *args, **kw: spy_calls.append(1) or real_ref(*args, **kw))
    with launches.counting() as launched:
        tilefuse.dyt(x, a, w, b)
        tilefuse.dyt(x, a, w, b)            # the plan is cached now
    assert launched["dyt_fwd"] == 2 and not spy_calls
    for set_zero in (lambda: tilefuse.level(0), lambda: _env_level(monkeypatch, "0"), _global_level_0):
        with set_zero(), launches.counting() as launched:
            y = tilefuse.dyt(x, a, w, b)
        assert sum(launched.values()) == 0 and len(spy_calls) == 1, "a stale level-2 plan ran"
        torch.testing.assert_close(y, real_ref(x, a, w, b))
        spy_calls.clear()
        with launches.counting() as launched:
            tilefuse.dyt(x, a, w, b)         # back at level 2: the kernels again
        assert launched["dyt_fwd"] == 1 and not spy_calls


@contextlib.contextmanager
def _env_level(monkeypatch, value):
    monkeypatch.setenv("TILEFUSE_LEVEL", value)
    yield
    monkeypatch.delenv("TILEFUSE_LEVEL")


@contextlib.contextmanager
def _global_level_0():
    tilefuse.set_level(0)
    yield
    tilefuse.set_level(None)


def test_a_level_change_between_forward_and_backward_reaches_the_backward(device):
    x, a, w, b, dy = inputs(device=device)
    y = tilefuse.dyt(x, a, w, b)
    # set_level, not ``with tilefuse.level(0)``: the level context is thread-local, and on CUDA
    # autograd runs the backward on its device thread (measured on the H200: the context did not
    # reach it there).
    tilefuse.set_level(0)
    try:
        with launches.counting() as launched:
            y.backward(dy)
    finally:
        tilefuse.set_level(None)
    assert sum(launched.values()) == 0, "the forward's (level-2) plan ran the backward kernels"
    check_against_reference(x, a, w, b, dy, True, (y, x.grad, a.grad, w.grad, b.grad))


@pytest.mark.usefixtures("tuning_table")
def test_registering_a_config_reaches_cached_plans(launched, device):
    x, a, w, b, _ = inputs((50, 32), device=device)
    problem = DyTProblem("fwd", 50, 32, 4, False)
    default = configs.heuristic(problem)
    other = DyTConfig(16 if default.block_m != 16 else 8, 32, 2, 4)
    assert configs.keep(problem, other) and tiles(other) != tiles(default)
    tilefuse.dyt(x, a, w, b)
    tilefuse.dyt(x, a, w, b)
    tuning.register("dyt", {problem: other})
    y = tilefuse.dyt(x, a, w, b)
    assert fwd_tiles(launched) == [tiles(default)] * 2 + [tiles(other)], "a stale plan kept the old config"
    check_against_reference(x, a, w, b, None, True, (y, None, None, None, None))
    with tilefuse.level(1):
        tilefuse.dyt(x, a, w, b)             # level 1 never reads the table
    tuning.unregister("dyt")
    tilefuse.dyt(x, a, w, b)
    assert fwd_tiles(launched)[3:] == [tiles(default)] * 2


@pytest.mark.usefixtures("tuning_table")
def test_a_registration_between_forward_and_backward_reaches_the_backward(launched, device):
    x, a, w, b, dy = inputs((50, 32), device=device)
    problem = DyTProblem("bwd", 50, 32, 4, False)
    default = configs.heuristic(problem)
    other = next(c for c in configs.candidates(problem) if tiles(c) != tiles(default))
    tilefuse.dyt(x, a, w, b).backward(dy)          # the plan's backward launch exists
    y = tilefuse.dyt(x, a, w, b)
    tuning.register("dyt", {problem: other})
    y.backward(dy)
    bwd = [(kw["BLOCK_M"], kw["BLOCK_N"], kw["num_warps"]) for name, _, kw in launched if name == "dyt_bwd_cols_kernel"]
    assert bwd == [tiles(default), tiles(other)]


@pytest.mark.usefixtures("tuning_table")
def test_a_table_reload_reaches_cached_plans(launched, device):
    """Another process records an entry into the cache file; this one sees it after
    tuning.reload(), and only then (the table reads its files once)."""
    x, a, w, b, _ = inputs((50, 32), device=device)
    problem = DyTProblem("fwd", 50, 32, 4, False)
    default = configs.heuristic(problem)
    other = DyTConfig(16 if default.block_m != 16 else 8, 32, 2, 4)
    tilefuse.dyt(x, a, w, b)
    fingerprint, path = table.table_location()
    store.save(path, fingerprint, {"dyt": {"fwd-M64-N32-x4": {"winner": other.to_dict(), "measured": {}}}})
    tilefuse.dyt(x, a, w, b)
    tuning.reload()
    tilefuse.dyt(x, a, w, b)
    assert fwd_tiles(launched) == [tiles(default)] * 2 + [tiles(other)]


@pytest.mark.usefixtures("tuning_table")
def test_collecting_sees_the_keys_of_cached_plans(device):
    x, a, w, b, _ = inputs((4, 8, 16), device=device)
    with torch.no_grad():
        tilefuse.dyt(x, a, w, b)
        with table.collecting() as seen:
            tilefuse.dyt(x, a, w, b)
    assert ("dyt", "fwd-M32-N16-x4") in seen


def test_a_new_dtype_for_the_same_shape_gets_its_own_plan(launched, device):
    x, a, w, b, _ = inputs((50, 32), device=device)
    tilefuse.dyt(x, a, w, b)
    xb = x.detach().to(torch.bfloat16)
    y = tilefuse.dyt(xb, a, w, b)
    assert y.dtype == torch.bfloat16
    want = [tiles(configs.heuristic(DyTProblem("fwd", 50, 32, s, False))) for s in (4, 2)]
    assert want[0] != want[1] and fwd_tiles(launched) == want      # bf16 has its own fitted tile
    check_against_reference(xb, a, w, b, None, True, (y, None, None, None, None))


@pytest.mark.parametrize("change", ["transposed", "sliced", "channels_last_format", "bias_none", "bias_back",
                                    "weight_sliced", "bias_sliced", "weight_dtype", "to_channels_first",
                                    "to_channels_last"])
def test_new_strides_or_bias_for_the_same_shape_run_correctly(change, device):
    """A stale plan would read the new x in the old layout, add (or drop) a bias, read a
    parameter of new strides or dtype in the old ones (a weight or bias sliced out of a larger
    tensor, of the same shape), or apply the parameters along the other dimension (the same
    (N, C, L) tensors with C == L called channels-last, then channels-first, or the reverse)."""
    if change in ("weight_sliced", "bias_sliced", "weight_dtype"):
        x, a, w, b, _ = inputs((24, 16), device=device)
        tilefuse.dyt(x, a, w, b)
        if change == "weight_sliced":
            w = torch.randn(32, device=device)[::2]
        elif change == "bias_sliced":
            b = torch.randn(32, device=device)[::2]
        else:
            w = w.detach().to(torch.float64)
        args, cl = (x, a, w, b), True
    elif change in ("to_channels_first", "to_channels_last"):
        x, a, w, b, _ = inputs((2, 4, 4), channels_last=False, device=device)
        tilefuse.dyt(x, a, w, b, channels_last=change == "to_channels_first")
        args, cl = (x, a, w, b), change == "to_channels_last"
    elif change in ("transposed", "sliced"):
        x, a, w, b, _ = inputs((24, 24), device=device)
        tilefuse.dyt(x, a, w, b)
        x2 = x.detach().t() if change == "transposed" else torch.randn(24, 48, device=device)[:, ::2]
        assert x2.shape == x.shape and not x2.is_contiguous()
        args, cl = (x2, a, w, b), True
    elif change == "channels_last_format":
        x, a, w, b, _ = inputs((2, 6, 3, 5), channels_last=False, device=device)
        tilefuse.dyt(x, a, w, b, channels_last=False)
        args, cl = (x.detach().to(memory_format=torch.channels_last), a, w, b), False
    else:
        x, a, w, b, _ = inputs((50, 32), bias=change == "bias_none", device=device)
        if b is None:
            b = torch.randn(32, device=device)
        tilefuse.dyt(x, a, w, b if change == "bias_none" else None)
        args, cl = (x, a, w, None if change == "bias_none" else b), True
    y = tilefuse.dyt(*args, channels_last=cl)
    check_against_reference(*args, None, cl, (y, None, None, None, None))
    if change == "channels_last_format":
        assert y.stride() == args[0].stride()


def test_a_new_device_for_the_same_shape_gets_its_own_plan(device):
    x, a, w, b, _ = inputs(device=device)
    tilefuse.dyt(x, a, w, b)
    other = "meta" if device == "cpu" else "cpu"
    moved = [t.detach().to(other) for t in (x, a, w, b)]
    with launches.counting() as launched:
        y = tilefuse.dyt(*moved)
    assert y.device.type == other and y.shape == x.shape
    if other == "meta":
        assert sum(launched.values()) == 0            # no kernels on meta tensors
    else:
        check_against_reference(*moved, None, True, (y, None, None, None, None))


@pytest.mark.parametrize("channels_last", [True, False], ids=["clast", "cfirst"])
def test_fake_tensors_take_the_reference_and_never_a_real_tensors_plan(channels_last, monkeypatch, device):
    """FakeTensors outside torch.compile (memory estimators run a model's eager forward and
    backward under FakeTensorMode) have no memory to launch on: forward and backward give fake
    tensors with the real run's shapes, strides and dtypes, and no kernel launches (the plan's
    launch entry points raise). Real, fake, real: the FakeTensors' call does not find the real
    tensors' cached plan, and the real tensors' second call does not find the fake one's."""
    from torch._subclasses.fake_tensor import FakeTensorMode, is_fake
    shape = (50, 32) if channels_last else (2, 32, 5, 3)
    real = inputs(shape, torch.bfloat16, channels_last=channels_last, device=device)
    with launches.counting() as launched:
        want = run(*real, channels_last)
    assert launched["dyt_fwd"] == launched["dyt_bwd"] == 1     # kernels run for these tensors here

    def no_launch(*args, **kwargs):
        raise AssertionError("a kernel launch on fake tensors")
    mode = FakeTensorMode()
    x, a, w, b, dy = (mode.from_tensor(t.detach()).requires_grad_(t.requires_grad) for t in real)
    with monkeypatch.context() as patch, mode:
        patch.setattr(plans.Plan, "launch_forward", no_launch)
        patch.setattr(plans.Plan, "launch_backward", no_launch)
        got = run(x, a, w, b, dy, channels_last)
    for name, g, r in zip(("y", "dx", "dalpha", "dweight", "dbias"), got, want):
        assert is_fake(g), name
        assert (g.shape, g.stride(), g.dtype, g.device) == (r.shape, r.stride(), r.dtype, r.device), name

    x, a, w, b, dy = real
    for t in (x, a, w, b):
        t.grad = None
    with launches.counting() as launched:
        again = run(x, a, w, b, dy, channels_last)
    assert launched["dyt_fwd"] == launched["dyt_bwd"] == 1
    for g, r in zip(again, want):
        assert torch.equal(g, r)


@pytest.mark.parametrize("case", ["real arguments", "real x, fake parameters", "real x, fake parameters, no mode",
                                  "backward under the mode"])
def test_an_active_fake_mode_takes_the_reference_with_real_tensors(case, monkeypatch, device):
    """Under FakeTensorMode(allow_non_fake_inputs=True) every allocation (y, dx, scratch) is
    fake whatever the arguments: no kernel may launch, however real x is, nor the plan cached
    for the same real tensors outside the mode be found there (by the forward, or by the
    backward of a forward run outside it); FakeTensor parameters with a real x have no memory
    either. Results are fake, as eager PyTorch's and level 0's, with the real run's metadata
    (outside a mode, those computed from real tensors only are real, as eager PyTorch's);
    afterwards the real tensors launch the kernels again where they run."""
    from torch._subclasses.fake_tensor import FakeTensorMode, is_fake
    real = inputs((50, 32), torch.bfloat16, device=device)
    with launches.counting() as launched:
        want = run(*real, True)
    kernels = launched["dyt_fwd"] == 1
    x, a, w, b, dy = real
    for t in (x, a, w, b):
        t.grad = None

    def no_launch(*args, **kwargs):
        raise AssertionError("a kernel launch under a fake mode or on fake tensors")
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    y = tilefuse.dyt(x, a, w, b) if case == "backward under the mode" else None
    with monkeypatch.context() as patch:
        patch.setattr(plans.Plan, "launch_forward", no_launch)
        patch.setattr(plans.Plan, "launch_backward", no_launch)
        if case == "backward under the mode":
            with mode:
                got = (None, *torch.autograd.grad(y, (x, a, w, b), torch.ones_like(y)))
        elif case == "real arguments":
            with mode:
                got = run(x, a, w, b, dy, True)
        else:
            fw, fb = (mode.from_tensor(t.detach()).requires_grad_(True) for t in (w, b))
            with contextlib.nullcontext() if case.endswith("no mode") else mode:
                got = run(x, a, fw, fb, dy, True)
    for name, g, r in zip(("y", "dx", "dalpha", "dweight", "dbias"), got, want):
        if g is None:
            continue
        assert (g.shape, g.stride(), g.dtype) == (r.shape, r.stride(), r.dtype), name
        if case.endswith("no mode") and name in ("dweight", "dbias"):
            # sums of dy * tanh(alpha x) and of dy: real tensors only, as eager PyTorch's are
            assert not is_fake(g) and torch.allclose(g, r, rtol=1e-4, atol=1e-4), name
        else:
            assert is_fake(g), name
    for t in (x, a, w, b):
        t.grad = None
    with launches.counting() as launched:
        again = run(x, a, w, b, dy, True)
    assert launched["dyt_fwd"] == launched["dyt_bwd"] == int(kernels)
    for g, r in zip(again, want):
        assert torch.equal(g, r)


def test_errors_are_never_cached(device):
    x, a, w, b, _ = inputs((6, 8), device=device)
    tilefuse.dyt(x, a, w, b)
    for _ in range(2):
        with pytest.raises(ValueError, match="weight must have shape"):
            tilefuse.dyt(x, a, torch.ones(9, device=device), b)
        with pytest.raises(TypeError, match="channels_last must be a bool"):
            tilefuse.dyt(x, a, w, b, channels_last=1)
        with pytest.raises(TypeError, match="bias must be a torch.Tensor"):
            tilefuse.dyt(x, a, w, [0.0] * 8)
        with pytest.raises(TypeError, match="x must be float32"):
            tilefuse.dyt(x.detach().to(torch.int32), a, w, b)


def test_a_bad_level_in_the_environment_is_still_reported(monkeypatch, device):
    x, a, w, b, _ = inputs((6, 8), device=device)
    tilefuse.dyt(x, a, w, b)
    monkeypatch.setenv("TILEFUSE_LEVEL", "7")
    with pytest.raises(ValueError, match="TILEFUSE_LEVEL"):
        tilefuse.dyt(x, a, w, b)


# --- bounds -------------------------------------------------------------------------------------

def test_the_cache_stays_within_its_bound(monkeypatch, device):
    monkeypatch.setattr(plans, "MAX_PLANS", 8)
    plans.clear()
    a, w = torch.tensor([0.5], device=device), torch.ones(4, device=device)
    sizes = []
    for rows in range(1, 30):
        tilefuse.dyt(torch.randn(rows, 4, device=device), a, w)
        sizes.append(plans.cache_size())
    assert max(sizes) == 8          # plans were cached, and never more than the bound
    plans.clear()
    x = torch.randn(5, 4, device=device)
    for _ in range(50):
        tilefuse.dyt(x, a, w)
    assert plans.cache_size() == 1


def test_dy_layouts_per_plan_are_bounded(device):
    x, a, w, b, dy = inputs((6, 8), device=device)
    plan = plans.lookup(*detached(x, a, w, b), True)
    sizes = []
    for k in range(3 * plans.MAX_DY_LAYOUTS):
        dy_k = torch.randn(6, 8 * (k + 2), device=device)[:, ::k + 2]
        plan.launch_backward(dy_k, *detached(x, a, w, b))
        sizes.append(len(plan._bwd))
    assert max(sizes) == plans.MAX_DY_LAYOUTS       # layouts were kept, never more than the bound


def _training_step(x, a, w, b, dy):
    """One forward + backward through tilefuse.dyt that leaves no gradients behind."""
    def step():
        tilefuse.dyt(x, a, w, b).backward(dy)
        x.grad = a.grad = w.grad = b.grad = None
    return step


def test_repeated_calls_do_not_grow_memory(device):
    """A leak grows with every call; a one-time replacement does not. Tracing starts after the
    warm-up, so in a traced window every object that replaces an untraced one (a cache slot, a
    free list's block) looks new: the GPU suite saw 4.4 KB at the C++ autograd apply once after
    other test files ran (results/2026-12-01-h200-l run 9), and 7.0 KB in the 120 calls after
    the first 40 once with only this file before it (results/2026-12-02-h200-o run 3), while
    a fresh process grew by nothing in four windows of 40-480 calls (the same folder, run 4).
    So three windows of 120 calls are measured after a first one of 40, each against the end
    of the one before: a leak of 32 bytes a call grows every window past the bound and fails;
    a one-time replacement inflates one window only."""
    x, a, w, b, dy = inputs((16, 32), device=device)
    step = _training_step(x, a, w, b, dy)
    for _ in range(5):
        step()
    gc.collect()
    tracemalloc.start()
    windows = []
    try:
        for _ in range(40):
            step()
        gc.collect()
        prev = tracemalloc.take_snapshot()
        for _ in range(3):
            for _ in range(120):
                step()
            gc.collect()
            snap = tracemalloc.take_snapshot()
            ours = [s for s in snap.compare_to(prev, "lineno") if "tilefuse" in str(s.traceback)]
            sites = "; ".join(f"{s.traceback} +{s.size_diff} B ({s.count_diff:+d} blocks)"
                              for s in sorted(ours, key=lambda s: -s.size_diff)[:6])
            windows.append((sum(s.size_diff for s in ours), sites))
            prev = snap
    finally:
        tracemalloc.stop()
    assert min(grown for grown, _ in windows) < 120 * 32, \
        "tilefuse's Python objects grew in every window of 120 calls: " + " | ".join(
            f"{grown} bytes: {sites}" for grown, sites in windows)


# --- the lean path and the custom op agree bitwise ----------------------------------------------

LAYOUTS = {
    "clast": ((3, 7, 24), True, lambda t: t),
    "cfirst": ((2, 6, 3, 5), False, lambda t: t),
    "cfirst-channels_last_format": ((2, 6, 3, 5), False, lambda t: t.to(memory_format=torch.channels_last)),
    "strided": ((12, 24), True, lambda t: t.t().contiguous().t()),
}


def _grads_of(fn, x, a, w, b, dy):
    leaves = [t.detach().clone().requires_grad_(True) if t is not None else None for t in (x, a, w, b)]
    y = fn(*leaves)
    y.backward(dy)
    return [y.detach()] + [t.grad for t in leaves if t is not None]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_lean_path_and_custom_op_agree_bitwise(layout, dtype, bias, device):
    shape, cl, make = LAYOUTS[layout]
    x, a, w, b, dy = inputs(shape, dtype, bias, cl, device, seed=3)
    x = make(x.detach())
    if layout == "strided":
        assert not x.is_contiguous()
    lean = _grads_of(lambda *t: tilefuse.dyt(*t, channels_last=cl), x, a, w, b, dy)
    custom = _grads_of(lambda *t: dyt_op(*t, cl), x, a, w, b, dy)
    direct = _grads_of(lambda *t: torch.ops.tilefuse.dyt(*t, cl), x, a, w, b, dy)
    for got, want, again in zip(lean, custom, direct):
        assert got.dtype == want.dtype and got.stride() == want.stride()
        assert torch.equal(got, want) and torch.equal(got, again)
    with torch.no_grad():                     # no autograd: the Function is skipped
        assert torch.equal(tilefuse.dyt(*detached(x, a, w, b), channels_last=cl), lean[0])
    with torch.inference_mode():
        assert torch.equal(tilefuse.dyt(*detached(x, a, w, b), channels_last=cl), lean[0])


@pytest.mark.parametrize("layout", ["clast", "cfirst"])
@pytest.mark.parametrize("case", ["level 0 fp32", "level 0 bf16", "float64"])
def test_the_eager_call_and_custom_op_agree_bitwise_where_no_kernel_runs(layout, case, device):
    """Level 0 and float64 run the reference: the eager call differentiates it with autograd,
    the custom op (what torch.compile runs) calls the explicit backward formulas, which take
    autograd's ops in its order (reference.dyt_backward_reference), so both give the same
    gradients bit for bit, as the kernels' paths do at levels 1-3. The level is set process-wide
    (the conftest fixture puts it back): on CUDA the custom op's backward runs on autograd's
    device thread, which a ``with tilefuse.level(0)`` block does not reach, so it would run the
    kernels there."""
    shape, cl, _ = LAYOUTS[layout]
    dtype = {"level 0 fp32": torch.float32, "level 0 bf16": torch.bfloat16, "float64": torch.float64}[case]
    x, a, w, b, dy = inputs(shape, dtype, True, cl, device, seed=8)
    tilefuse.set_level(0 if case.startswith("level 0") else 2)
    lean = _grads_of(lambda *t: tilefuse.dyt(*t, channels_last=cl), x, a, w, b, dy)
    direct = _grads_of(lambda *t: torch.ops.tilefuse.dyt(*t, cl), x, a, w, b, dy)
    for got, want in zip(lean, direct):
        assert got.dtype == want.dtype and torch.equal(got, want)


def test_lean_path_carries_its_plan_to_the_backward(device):
    x, a, w, b, dy = inputs((6, 8), device=device)
    y = tilefuse.dyt(x, a, w, b)
    assert y.grad_fn.plan is plans.lookup(*detached(x, a, w, b), True)


@pytest.mark.parametrize("channels_last", [True, False], ids=["clast", "cfirst"])
def test_lean_path_and_torch_compile_agree_bitwise(channels_last, device):
    shape = (6, 40) if channels_last else (2, 8, 3, 5)
    x, a, w, b, dy = inputs(shape, channels_last=channels_last, device=device, seed=5)

    def f(*t):
        return tilefuse.dyt(*t, channels_last=channels_last)
    compiled = torch.compile(f, fullgraph=True, backend="inductor" if device == "cuda" else "aot_eager")
    for got, want in zip(_grads_of(compiled, x, a, w, b, dy), _grads_of(f, x, a, w, b, dy)):
        assert torch.equal(got, want)


# --- CompiledLauncher's route choices (a fake compiled kernel, any machine) ---------------------

class _FakeJIT:
    """A JITFunction stand-in: (x_ptr, y_ptr, n, BLOCK constexpr)."""

    arg_names = ["x_ptr", "y_ptr", "n", "BLOCK"]
    constexprs = [3]
    __name__ = "fake_kernel"

    def __init__(self):
        self.log = []
        self.compiled = FakeCompiled(self.log)

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.log.append(("jit", grid, args, kwargs))
            return self.compiled
        return launch


@pytest.fixture
def fake_launcher(monkeypatch):
    monkeypatch.setattr(triton_common, "current_cuda_device", lambda: 0)
    monkeypatch.setattr(triton_common, "current_cuda_stream", lambda device: 1234)
    fn = _FakeJIT()
    launcher = CompiledLauncher(fn, (7,), (5,), {"BLOCK": 64}, num_warps=4)
    launcher.direct = True        # as on a GPU (the interpreter always takes the JIT)
    return fn, launcher


def test_compiled_launcher_goes_direct_after_the_first_launch(fake_launcher):
    fn, launch = fake_launcher
    x, y = torch.zeros(8), torch.zeros(8)
    launch(x, y)
    launch(x, y)
    (jit, direct) = fn.log
    assert jit == ("jit", (7,), (x, y, 5), {"BLOCK": 64, "num_warps": 4})
    # The JIT's launch call, pointers as ints, constexprs included, no hooks registered.
    assert direct == ("direct", (7, 1, 1, 1234, fn.compiled.function, ("packed",), None, None, None,
                                 x.data_ptr(), y.data_ptr(), 5, 64))


def test_compiled_launcher_keys_its_kernels_on_pointer_alignment(fake_launcher):
    fn, launch = fake_launcher
    buf = torch.zeros(64)
    aligned, misaligned = buf[:8], buf[1:9]          # 4 bytes off a 16-byte boundary
    assert aligned.data_ptr() % 16 == 0 and misaligned.data_ptr() % 16 == 4
    for x in (aligned, aligned, misaligned, misaligned, aligned):
        launch(x, aligned)
    assert [e[0] for e in fn.log] == ["jit", "direct", "jit", "direct", "direct"]


def test_compiled_launcher_passes_tensors_and_metadata_to_launch_hooks(fake_launcher):
    fn, launch = fake_launcher
    x = torch.zeros(8)
    launch(x, x)
    hook = triton_common._triton_knobs.runtime.launch_enter_hook
    seen = []
    hook.add(seen.append)
    try:
        launch(x, x)
    finally:
        hook.remove(seen.append)
    args = fn.log[-1][1]
    assert args[6] == {"grid": (7,), "args": (x, x, 5, 64)} and args[7] is hook
    assert args[9] is x                        # tensors, as the JIT passes them


def test_compiled_launcher_falls_back_to_the_jit_when_a_direct_launch_fails(fake_launcher):
    fn, launch = fake_launcher
    x = torch.zeros(8)
    launch(x, x)
    fn.compiled.fail = True
    with pytest.warns(RuntimeWarning, match="through Triton's JIT"):
        launch(x, x)
    launch(x, x)
    assert [e[0] for e in fn.log] == ["jit", "jit", "jit"] and not launch.direct


def test_compiled_launcher_needs_tensors_scalars_constexprs_in_that_order():
    from triton.runtime.jit import JITFunction
    from tilefuse.ops.dyt import kernels
    fwd = JITFunction(kernels.dyt_fwd_kernel.fn)
    consts = dict(HAS_BIAS=True, PARAM_PER_ROW=False, BLOCK_M=1, BLOCK_N=16)
    assert triton_common._trailing_constexpr_names(fwd, 3, consts) == list(consts)
    shuffled = type("K", (), {"arg_names": ["x_ptr", "BLOCK", "n"], "constexprs": [1]})()
    assert triton_common._trailing_constexpr_names(shuffled, 1, {"BLOCK": 4}) is None
    assert triton_common._trailing_constexpr_names(fwd, 3, dict(consts, EXTRA=1)) is None
    assert triton_common._trailing_constexpr_names(object(), 3, consts) is None


def test_direct_launch_switch_sends_everything_through_the_jit(fake_launcher, monkeypatch):
    fn, launch = fake_launcher
    x = torch.zeros(8)
    monkeypatch.setattr(triton_common, "DIRECT_LAUNCH", False)
    for _ in range(3):
        launch(x, x)
    assert [e[0] for e in fn.log] == ["jit"] * 3


class _RecordingJIT:
    """Wraps a real dyt kernel: JIT launches run it (in the interpreter) and record the
    arguments the JIT binds (all parameters in order); the "compiled kernel" it returns records
    what the direct route passes."""

    def __init__(self, real):
        import inspect
        self.real, self.__name__ = real, real.fn.__name__
        self.signature = inspect.signature(real.fn)
        self.arg_names = list(self.signature.parameters)
        self.constexprs = [i for i, p in enumerate(self.signature.parameters.values())
                           if "constexpr" in str(p.annotation)]
        self.jit_args, self.direct_args = [], []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.real[grid](*args, **kwargs)
            params = {k: v for k, v in kwargs.items() if k in self.arg_names}
            self.jit_args.append((tuple(grid) + (1,) * (3 - len(grid)),
                                  tuple(self.signature.bind(*args, **params).arguments.values())))
            compiled = FakeCompiled([])
            compiled.run = lambda *a: self.direct_args.append(a)
            return compiled
        return launch


def test_the_direct_route_passes_what_the_jit_binds_for_each_dyt_kernel(monkeypatch, device):
    from tilefuse.ops.dyt import kernels
    names = ("dyt_fwd_kernel", "dyt_bwd_cols_kernel", "dyt_bwd_rows_kernel", "dyt_bwd_reduce_kernel")
    wrapped = {n: _RecordingJIT(getattr(kernels, n)) for n in names}
    for n, k in wrapped.items():
        monkeypatch.setattr(kernels, n, k)
    # as compiled: the direct route on. A constexpr, as the module's: the kernels read this
    # global too (to_output), and a plain bool fails their compile where no earlier test in the
    # process compiled them (a GPU xdist worker)
    monkeypatch.setattr(triton_common, "INTERPRETER", triton_common.tl.constexpr(False))
    monkeypatch.setattr(triton_common, "current_cuda_device", lambda: 0)
    monkeypatch.setattr(triton_common, "current_cuda_stream", lambda device: 99)
    plans.clear()
    try:
        for cl, shape in ((True, (20, 24)), (False, (2, 6, 3, 5))):
            x, a, w, b, dy = inputs(shape, channels_last=cl, device=device, seed=9)
            for _ in range(2):                # the JIT, then the direct route
                tilefuse.dyt(x, a, w, b, channels_last=cl).backward(dy)
    finally:
        plans.clear()                         # the plans hold the wrapped kernels
    for name, k in wrapped.items():
        runs = 2 if name in ("dyt_fwd_kernel", "dyt_bwd_reduce_kernel") else 1    # both layouts, or one
        assert len(k.jit_args) == len(k.direct_args) == runs, name
        for (grid, jit), direct in zip(k.jit_args, k.direct_args):
            # grid, stream, function, packed metadata, no launch metadata or hooks, then every
            # parameter in order: pointers as addresses, scalars and constexprs as the JIT binds
            assert direct[:9] == (*grid, 99, direct[4], ("packed",), None, None, None)
            assert len(direct[9:]) == len(jit) == len(k.arg_names)
            for want, got in zip(jit, direct[9:]):
                if isinstance(want, torch.Tensor):
                    assert type(got) is int
                else:
                    assert type(got) is type(want) and got == want


# --- GPU: the compiled-kernel route itself ------------------------------------------------------

def _fwd_bwd(x, a, w, b, dy, cl=True):
    return _grads_of(lambda *t: tilefuse.dyt(*t, channels_last=cl), x, a, w, b, dy)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_gpu_direct_launches_match_the_jit_bitwise(layout, dtype, monkeypatch):
    shape, cl, make = LAYOUTS[layout]
    x, a, w, b, dy = inputs(shape, dtype, True, cl, "cuda", seed=7)
    x = make(x.detach())
    monkeypatch.setattr(triton_common, "DIRECT_LAUNCH", False)
    want = _fwd_bwd(x, a, w, b, dy, cl)
    monkeypatch.setattr(triton_common, "DIRECT_LAUNCH", True)
    _fwd_bwd(x, a, w, b, dy, cl)                         # first launches: the JIT compiles
    before = triton_common.jit_launch_count()
    for _ in range(3):
        got = _fwd_bwd(x, a, w, b, dy, cl)
        for g, r in zip(got, want):
            assert torch.equal(g, r)
    assert triton_common.jit_launch_count() == before, "the direct route did not run"


@pytest.mark.gpu
def test_gpu_misaligned_views_get_their_own_kernels(monkeypatch):
    """x and dy 4 bytes off a 16-byte boundary: Triton compiles for them without the alignment
    assumption; the launcher must not hand them the aligned kernels (and back)."""
    torch.manual_seed(0)
    a = torch.tensor([0.7], device="cuda", requires_grad=True)
    w = torch.randn(256, device="cuda", requires_grad=True)
    b = torch.randn(256, device="cuda", requires_grad=True)
    buf, dbuf = torch.randn(64 * 256 + 1, device="cuda"), torch.randn(64 * 256 + 1, device="cuda")
    aligned, misaligned = buf[:-1].view(64, 256), buf[1:].view(64, 256)
    dy_aligned, dy_misaligned = dbuf[:-1].view(64, 256), dbuf[1:].view(64, 256)
    assert misaligned.data_ptr() % 16 == 4 and dy_misaligned.data_ptr() % 16 == 4

    def run(x, dy):
        y = tilefuse.dyt(x, a, w, b)
        return (y, *torch.autograd.grad(y, (a, w, b), dy))
    for x, dy in ((aligned, dy_aligned), (aligned, dy_aligned), (misaligned, dy_misaligned),
                  (misaligned, dy_misaligned), (aligned, dy_misaligned), (misaligned, dy_aligned)):
        got = run(x, dy)
        check_against_reference(x, a, w, b, None, True, (got[0], None, None, None, None))
        monkeypatch.setattr(triton_common, "DIRECT_LAUNCH", False)
        for g, want in zip(got, run(x, dy)):
            assert torch.equal(g, want)
        monkeypatch.setattr(triton_common, "DIRECT_LAUNCH", True)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,cl", [((64, 256), True), ((4, 16, 8, 8), False)], ids=["clast", "cfirst"])
def test_gpu_graph_capture_of_the_lean_path(shape, cl):
    from gpu_helpers import assert_graph_replay_matches_eager
    x, a, w, b, dy = inputs(shape, torch.float32, True, cl, "cuda", seed=2)
    xd, ad, wd, bd = detached(x, a, w, b)

    def step():
        leaves = [t.clone().requires_grad_(True) for t in (xd, ad, wd, bd)]
        y = tilefuse.dyt(*leaves, channels_last=cl)
        return (y, *torch.autograd.grad(y, leaves, dy))
    for _ in range(2):
        step()                                   # the plan's kept scratch exists before capture
    assert_graph_replay_matches_eager(step)
    eager = step()                               # an eager call after the capture, then a replay
    from tilefuse.utils import capture_cuda_graph
    graph, captured = capture_cuda_graph(step)
    step()
    graph.replay()
    torch.cuda.synchronize()
    for e, c in zip(eager, captured):
        assert torch.equal(e, c)


@pytest.mark.gpu
def test_gpu_backward_on_two_streams():
    x, a, w, b, dy = inputs((64, 256), torch.float32, True, True, "cuda", seed=4)
    want = _fwd_bwd(x, a, w, b, dy)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    outs = []
    for s in (s1, s2, s1, s2):
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            outs.append(_fwd_bwd(x, a, w, b, dy))
        torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    for got in outs:
        for g, r in zip(got, want):
            assert torch.equal(g, r)


@pytest.mark.gpu
def test_gpu_repeated_calls_do_not_grow_device_memory():
    x, a, w, b, dy = inputs((64, 256), torch.float32, True, True, "cuda", seed=1)
    step = _training_step(x, a, w, b, dy)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for _ in range(200):
        step()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before


@pytest.mark.parametrize("n,fits", [(2**31 - 2**16 - 1, True), (2**31 - 2**16, False), (2**31 - 1, False),
                                    (2**31, True), (2**31 + 7, True)],
                         ids=["below-the-edge", "edge", "2^31-1", "2^31", "past-2^31"])
@pytest.mark.parametrize("rows", [False, True], ids=["columns", "rows"])
def test_extents_within_a_tile_of_2_31_take_the_reference_formulas(n, fits, rows, device):
    """The kernels' tile indices are 32-bit below 2**31 (Triton passes larger integers as 64-bit):
    a row of 2**31 - 1 channels (or 2**31 - 1 rows) would wrap a tile's last index, so its plan
    runs the reference formulas, and the launchers refuse it; from 2**31 on and below the edge
    the kernels run. (Expanded tensors: one element of storage, no launch.)"""
    from tilefuse import policy
    from tilefuse.ops.dyt import launch
    shape = (n, 1) if rows else (n,)
    x = torch.zeros((1,) * len(shape), device=device).expand(shape)
    w = torch.ones(1, device=device).expand(shape[-1])
    plan = plans.lookup(x, torch.tensor([0.5], device=device), w, None, True)
    assert (plan.layout.n_rows, plan.layout.n_cols) == ((n, 1) if rows else (1, n))
    assert launch.addressable(plan.layout) is fits
    assert plan.kernels is (fits and policy.kernels_enabled(x.device))
    if not fits:
        with pytest.raises(ValueError, match="within a tile of 2\\*\\*31"):
            launch.ForwardLaunch(plan.layout, 4, False, x.device, None)
        with pytest.raises(ValueError, match="within a tile of 2\\*\\*31"):
            launch.BackwardLaunch(plan.layout, 4, False, x.device, None)


def _f64_grads(x, alpha, weight, bias, dy, channels_last):
    ins = [t.detach().double().requires_grad_(True) for t in (x, alpha, weight, bias)]
    y = reference.dyt_reference(*ins, channels_last=channels_last, compute_dtype=torch.float64)
    return torch.autograd.grad(y, ins, dy.double())


@pytest.mark.parametrize("case", ["channels_last x unpacked contiguous", "x unpacked column-major"])
def test_saved_tensor_hooks_that_change_x_take_a_fresh_plan(case, device):
    """The forward's plan is carried to the backward only while the saved tensors are as it
    was built for: a saved-tensor hook may give x back in another layout
    (``torch.autograd.graph.save_on_cpu`` unpacks contiguous), and the plan's kernels would
    read it in the old one."""
    g = torch.Generator().manual_seed(11)
    if case.startswith("channels_last"):
        x = torch.randn(2, 5, 3, 4, generator=g).to(device).to(memory_format=torch.channels_last)
        channels_last, channels = False, 5

        def unpack(t):
            return t.contiguous()
    else:
        x = torch.randn(6, 5, generator=g).to(device)
        channels_last, channels = True, 5

        def unpack(t):
            return t.t().contiguous().t() if t.dim() == 2 else t
    x.requires_grad_(True)
    alpha = torch.tensor([0.7], device=device, requires_grad=True)
    weight = torch.randn(channels, generator=g).to(device).requires_grad_(True)
    bias = torch.randn(channels, generator=g).to(device).requires_grad_(True)
    dy = torch.randn(x.shape, generator=g).to(device)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        y = tilefuse.dyt(x, alpha, weight, bias, channels_last=channels_last)
    got = torch.autograd.grad(y, (x, alpha, weight, bias), dy)
    for a, b in zip(got, _f64_grads(x, alpha, weight, bias, dy, channels_last)):
        assert torch.allclose(a.double(), b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["x with more rows", "weight of another length", "weight on another device"])
def test_saved_tensor_hooks_that_change_a_shape_or_device_raise(case, device):
    """A saved-tensor hook that gives back x with another shape (same strides: 400 rows of 6
    for 4) or a parameter of another shape or device: the forward's plan would launch the
    backward with dy's 4 rows read as x's 400 (out of bounds; with x not requiring grad,
    autograd never checks dx and weight.grad came out silently wrong), or on a parameter that
    does not fit. The backward checks dy against the x it gets and validates the rest, and
    raises as eager PyTorch does, before any launch."""
    g = torch.Generator().manual_seed(13)
    x = torch.randn(4, 6, generator=g).to(device)         # no grad: only the parameters train
    alpha = torch.tensor([0.5], device=device, requires_grad=True)
    weight = torch.randn(6, generator=g).to(device).requires_grad_(True)
    other = "meta" if device == "cpu" else "cpu"
    swap = {"x with more rows": (x, torch.randn(400, 6, generator=g).to(device)),
            "weight of another length": (weight, torch.randn(12, generator=g).to(device)),
            "weight on another device": (weight, weight.detach().to(other))}[case]
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: swap[1] if t is swap[0] else t):
        y = tilefuse.dyt(x, alpha, weight)
    match = {"x with more rows": "dy must have x's shape", "weight of another length": "weight must have shape",
             "weight on another device": "weight is on"}[case]
    with launches.counting() as launched, pytest.raises(ValueError, match=match):
        y.backward(torch.ones(4, 6, device=device))
    assert launched["dyt_bwd"] == 0
    # unchanged saved tensors still take the forward's plan, and the kernels where they run
    with launches.counting() as launched:
        tilefuse.dyt(x, alpha, weight).backward(torch.ones(4, 6, device=device))
    assert launched["dyt_bwd"] == (1 if plans.lookup(x, alpha, weight, None, True).kernels else 0)


def test_the_older_vmaps_batched_gradients_run_the_reference():
    """autograd.grad's is_grads_batched and jacobian(vectorize=True) hand the backward the
    older vmap's batched tensors, which the kernels cannot read: the reference formulas run,
    and the Jacobian is float64's within float32 rounding."""
    g = torch.Generator().manual_seed(12)
    x, alpha, weight = torch.randn(3, 8, generator=g), torch.tensor([0.7]), torch.randn(8, generator=g)
    got = torch.autograd.functional.jacobian(lambda v: tilefuse.dyt(v, alpha, weight), x, vectorize=True)
    want = torch.autograd.functional.jacobian(
        lambda v: reference.dyt_reference(v, alpha.double(), weight.double(), compute_dtype=torch.float64),
        x.double(), vectorize=True)
    assert torch.allclose(got.double(), want, rtol=1e-5, atol=1e-6)


def test_a_channel_sum_over_no_rows_is_a_new_tensor():
    """The reference's channel sums of a 1-D x of no elements return a new tensor, not their
    input: the custom op's outputs may not alias its inputs."""
    dy = torch.empty(0)
    assert reference._reduce_to_channels(dy, True) is not dy


def test_verify_compare_takes_zero_and_nan_references():
    """ops/dyt/verify.compare (tilefuse check's comparison): an all-zero reference (a zero
    input, no bias) compares without error, NaN where the reference has NaN matches it, and a
    finite value where the reference is NaN is out of bound."""
    from tilefuse.ops.dyt.verify import compare
    zeros = torch.zeros(2, dtype=torch.float64)
    bound = torch.full((2,), 1e-7, dtype=torch.float64)
    assert compare("y", torch.zeros(2), zeros, bound).worst_over_bound == 0.0
    nan_ref = torch.tensor([1.0, float("nan")], dtype=torch.float64)
    assert compare("y", torch.tensor([1.0, float("nan")]), nan_ref, bound).worst_over_bound == 0.0
    off = compare("y", torch.tensor([1.0, 5.0]), nan_ref, bound)
    assert off.worst_over_bound == float("inf") and off.first_failure
    # the same infinity matches (inf - inf is NaN: it failed with no reason given before);
    # another infinity, or a finite value against one, fails and says where
    inf_ref = torch.tensor([float("inf"), -float("inf")], dtype=torch.float64)
    assert compare("y", torch.tensor([float("inf"), -float("inf")]), inf_ref, bound).ok
    for got in ([float("inf"), float("inf")], [float("inf"), 0.0]):
        c = compare("y", torch.tensor(got), inf_ref, bound)
        assert not c.ok and "flat index 1" in c.first_failure, c
    inf_bound = torch.full((2,), float("inf"), dtype=torch.float64)
    c = compare("y", torch.tensor([float("inf"), 0.0]), inf_ref, inf_bound)
    assert not c.ok and "NaN at flat index 1" in c.first_failure, c
