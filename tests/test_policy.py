"""The execution level: ``level()`` blocks nest, stay in their thread, and under asyncio in
their task, and leaving one restores exactly what it replaced; set_level and TILEFUSE_LEVEL
below them. Kernels never run under an active FakeTensorMode."""

import asyncio
import threading

import pytest

import tilefuse
from tilefuse import policy


def test_level_blocks_nest_and_fall_back_to_set_level():
    tilefuse.set_level(1)
    try:
        with tilefuse.level(3):
            assert policy.get_level() == 3
            with tilefuse.level(0):
                assert policy.get_level() == 0
            assert policy.get_level() == 3
        assert policy.get_level() == 1
    finally:
        tilefuse.set_level(None)
    assert policy.get_level() == policy.DEFAULT_LEVEL


def test_a_level_block_is_not_seen_by_another_thread():
    seen = []
    with tilefuse.level(0):
        worker = threading.Thread(target=lambda: seen.append(policy.get_level()))
        worker.start()
        worker.join()
        assert policy.get_level() == 0
    assert seen == [policy.DEFAULT_LEVEL]


def test_a_block_in_a_generator_closed_after_its_enclosing_block_leaves_no_level_behind():
    """A level(3) block in a generator still suspended when an enclosing level(1) block closes:
    closing the generator afterwards leaves the default level, for eager and compiled code
    (restoring what its entry had replaced put the closed block's 1 back for good, above
    set_level too); the same with an async generator."""
    import torch

    def gen():
        with tilefuse.level(3):
            yield

    with tilefuse.level(1):
        g = gen()
        next(g)
        assert policy.get_level() == 3   # the generator's block is open in this context
    assert policy.get_level() == 3
    g.close()
    assert policy.get_level() == policy.DEFAULT_LEVEL
    f = torch.compile(lambda x: x + policy.get_level(), backend="eager")
    assert int(f(torch.zeros(1))) == policy.DEFAULT_LEVEL
    tilefuse.set_level(0)
    try:
        assert policy.get_level() == 0
    finally:
        tilefuse.set_level(None)

    async def agen():
        with tilefuse.level(0):
            yield

    async def main():
        with tilefuse.level(1):
            a = agen()
            await a.__anext__()
        await a.aclose()
        return policy.get_level()

    assert asyncio.run(main()) == policy.DEFAULT_LEVEL


def test_a_generator_s_block_closed_on_another_thread_is_reported():
    """Closed on another thread, a generator's block cannot leave the context it was opened in
    (its level stays there): the close raises, saying so. Opened on a thread of its own, whose
    context and per-thread state end with it."""
    outcome = []

    def opener():
        def gen():
            with tilefuse.level(0):
                yield

        g = gen()
        next(g)
        errors = []

        def closer():
            try:
                g.close()
            except RuntimeError as exc:
                errors.append(str(exc))

        worker = threading.Thread(target=closer)
        worker.start()
        worker.join()
        outcome.append((errors, policy.get_level()))

    thread = threading.Thread(target=opener)
    thread.start()
    thread.join()
    (errors, level_there), = outcome
    assert len(errors) == 1 and "another context" in errors[0], errors
    assert level_there == 0   # the block stays open where it was opened
    assert policy.get_level() == policy.DEFAULT_LEVEL


def test_interleaved_blocks_of_two_asyncio_tasks_each_see_their_own_level():
    """Task A enters level(0), task B enters level(3), A leaves, B checks: with a per-thread
    stack A's exit popped B's entry (B saw 0) and B's exit left A's 0 behind."""
    seen = {}

    async def task(name, n, entered, other_entered, left=None, other_left=None):
        with tilefuse.level(n):
            entered.set()
            await other_entered.wait()
            if other_left is not None:
                await other_left.wait()
            seen[name] = policy.get_level()
        if left is not None:
            left.set()

    async def main():
        a_in, b_in, a_out = asyncio.Event(), asyncio.Event(), asyncio.Event()
        await asyncio.gather(task("a", 0, a_in, b_in, left=a_out), task("b", 3, b_in, a_in, other_left=a_out))

    asyncio.run(main())
    assert seen == {"a": 0, "b": 3}
    assert policy.get_level() == policy.DEFAULT_LEVEL
    assert getattr(policy._traced, "level", None) is None   # the tracer's mirror left clean


def test_a_call_plan_reads_the_level_once(monkeypatch, tuning_table, device):
    """A plan is stored under the level its key read; building it must not read the level
    again (another thread's set_level in between built a level-0 key's plan with level-2
    kernels, or the reverse, found again whenever that level came back). Here every reading
    after the first says 0: the dyt plan still runs the kernels at level 2's tuned config, and
    the grouped plan the compose route."""
    import torch

    from tilefuse import tuning
    from tilefuse.ops.dyt import configs as dyt_configs
    from tilefuse.ops.dyt import launch as dyt_launch
    from tilefuse.ops.dyt import plan as dyt_plans
    from tilefuse.ops.dyt.configs import DyTConfig, DyTProblem
    from tilefuse.ops.grouped_glu_mlp import plan as grouped_plans
    from tilefuse.ops.grouped_glu_mlp.reference import random_inputs

    x = torch.randn(50, 32, device=device)
    a, w, b = torch.tensor([0.5], device=device), torch.randn(32, device=device), torch.randn(32, device=device)
    problem = DyTProblem("fwd", 50, 32, 4, False)
    tuned = DyTConfig(16 if dyt_configs.heuristic(problem).block_m != 16 else 8, 32, 2, 4)
    tuning.register("dyt", {problem: tuned})
    picked = []
    real_pick = dyt_launch.pick_config
    monkeypatch.setattr(dyt_launch, "pick_config",
                        lambda p, level=None: picked.append(real_pick(p, level)) or picked[-1])

    def first_two_then_zero():
        readings = iter([2])
        return lambda: next(readings, 0)

    dyt_plans.clear()
    monkeypatch.setattr(policy, "get_level", first_two_then_zero())
    plan = dyt_plans.lookup(x, a, w, b, True)
    assert plan.level == 2 and plan.kernels is policy.kernels_enabled(x.device, 2)
    if plan.kernels:
        plan.launch_forward(x, a, w, b)
        assert picked == [tuned]
    i = random_inputs([5, 0, 9], 48, 40, torch.float32, bias=False, device=device)
    grouped_plans.clear()
    monkeypatch.setattr(policy, "get_level", first_two_then_zero())
    gplan = grouped_plans.lookup(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], None, None, "swiglu", 8, None)
    assert (gplan.forward is not None) is policy.kernels_enabled(x.device, 2)


def test_an_active_fake_mode_makes_every_tensor_eager_fake():
    """Under FakeTensorMode(allow_non_fake_inputs=True) a real tensor has memory but whatever
    an op allocates is fake: kernels_run_on says no for it as for a FakeTensor, and says yes
    again once the mode is left."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    x = torch.randn(2, 3)
    assert not policy.is_eager_fake(x) and not policy.fake_mode_active()
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        assert policy.fake_mode_active() and policy.is_eager_fake(x)
        assert policy.is_eager_fake(torch.nn.Parameter(x)) and not policy.kernels_run_on(x)
        fake = mode.from_tensor(x)
    assert policy.is_eager_fake(fake) and not policy.kernels_run_on(fake)
    assert not policy.is_eager_fake(x) and not policy.fake_mode_active()
    assert policy.kernels_run_on(x) is policy.kernels_enabled(x.device)


@pytest.mark.parametrize("op", ["so2_mixing_stack", "grouped_glu_mlp", "quantize_fp8_block"])
def test_real_arguments_under_an_active_fake_mode_take_the_reference(op, tuning_table, device):
    """The ops that ask kernels_run_on / is_eager_fake, called with real tensors under
    FakeTensorMode(allow_non_fake_inputs=True) (after a real call, whose plans a cache may
    hold): every allocation is fake, so no kernel launches (it would take a FakeTensor's
    address) and the result is fake, as eager PyTorch's."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode, is_fake

    from tilefuse import launches
    if op == "so2_mixing_stack":
        from test_so2_kernels import make
        args = make(1, 1, 16, 37, device, grad=False)[1]
        call = lambda: tilefuse.so2_mixing_stack(*args, lmax=1, focus_dim=16)   # noqa: E731
    elif op == "grouped_glu_mlp":
        from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
        i = random_inputs(torch.tensor([5, 0, 11]), 32, 32, torch.float32, bias=True, device=device)
        call = lambda: tilefuse.grouped_glu_mlp(i["x"], i["counts"], i["probs"], i["w1"], i["w2"],   # noqa: E731
                                                fc1_bias=i["b1"], fc2_bias=i["b2"])
    else:
        x = torch.randn(4, 128, device=device)
        call = lambda: tilefuse.quant.quantize_fp8_block(x).data   # noqa: E731
    want = call()
    with FakeTensorMode(allow_non_fake_inputs=True), launches.counting() as launched:
        got = call()
    assert sum(launched.values()) == 0, dict(launched)
    assert is_fake(got) and (got.shape, got.dtype) == (want.shape, want.dtype)


def test_a_task_s_inherited_block_is_not_left_behind_for_compiled_code():
    """A task created inside a level(0) block that closes before the task's own level(1) block
    does: once every block has closed, compiled code sees the process's level, as eager code
    does (the mirror took the task's inherited 0 at its block's exit and kept it)."""
    import torch

    async def job():
        with tilefuse.level(1):
            await asyncio.sleep(0)

    async def main():
        with tilefuse.level(0):
            task = asyncio.create_task(job())
        await task

    asyncio.run(main())
    f = torch.compile(lambda x: x + policy.get_level(), backend="eager")
    assert policy.get_level() == policy.DEFAULT_LEVEL
    assert int(f(torch.zeros(1))) == policy.DEFAULT_LEVEL
    assert getattr(policy._traced, "level", None) is None and policy._traced.depth == 0


def test_levels_of_any_integer_type():
    """numpy's integers are levels too (they were refused by a message naming the same value);
    bools, floats and strings are not."""
    import numpy as np
    with tilefuse.level(np.int64(0)) as n:
        assert policy.get_level() == 0 and type(n) is int
    tilefuse.set_level(np.int32(1))
    try:
        assert policy.get_level() == 1
    finally:
        tilefuse.set_level(None)
    for bad in (True, 1.0, "1", np.float32(1), 4):
        with pytest.raises(ValueError, match="level must be one of"):
            tilefuse.set_level(bad)


@pytest.mark.parametrize("op", ["dyt", "so2", "grouped"])
def test_checkpointing_across_levels_with_the_forward_s_level_for_the_recompute(op):
    """Activation checkpointing recomputes the forward inside the backward, at the level in
    force there; where that differs from the forward's (a block around the forward alone, or
    on CUDA autograd's device thread, which sees no block) and one side is level 0, the
    recompute saves other tensors and torch's checkpoint raises. The documented remedy
    (tilefuse.level's docstring): a context_fn whose recompute context is the forward's
    level. With it every pair of levels gives the gradients of the call without checkpointing."""
    import contextlib
    import itertools

    import torch
    from test_so2_kernels import make
    from torch.utils.checkpoint import checkpoint
    from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
    torch.manual_seed(0)
    if op == "dyt":
        args, fn = [torch.randn(4, 16), torch.tensor([0.5]), torch.randn(16), torch.randn(16)], tilefuse.dyt
    elif op == "so2":
        _, args = make(1, 1, 16, 5, "cpu")
        args = list(args)

        def fn(*t):
            return tilefuse.so2_mixing_stack(*t, lmax=1, focus_dim=16)
    else:
        g = random_inputs([3, 0, 5], 32, 32, torch.float32, bias=False, device="cpu")
        args = [g["x"], g["probs"], g["w1"], g["w2"]]

        def fn(x, p, w1, w2):
            return tilefuse.grouped_glu_mlp(x, g["counts"], p, w1, w2)

    def grads(fwd, bwd, checkpointed):
        ins = [t.detach().clone().requires_grad_() for t in args]
        with tilefuse.level(fwd):
            if checkpointed:
                y = checkpoint(fn, *ins, use_reentrant=False,
                               context_fn=lambda: (contextlib.nullcontext(), tilefuse.level(tilefuse.get_level())))
            else:
                y = fn(*ins)
        with tilefuse.level(bwd):
            return torch.autograd.grad(y.sum(), ins)

    for fwd, bwd in itertools.product(range(3), repeat=2):
        for got, want in zip(grads(fwd, bwd, True), grads(fwd, bwd, False)):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_compiled_code_follows_level_blocks_and_set_level():
    """A compiled function reading the level retraces when a block's or set_level's level
    changes (Dynamo guards the per-thread mirror it reads; it cannot trace the context
    variable), as it did before the blocks became a context variable."""
    import torch

    f = torch.compile(lambda x: x + policy.get_level(), backend="eager")
    x = torch.zeros(1)
    got = []
    with tilefuse.level(1):
        got.append(int(f(x)))
    with tilefuse.level(0):
        got.append(int(f(x)))
    got.append(int(f(x)))
    tilefuse.set_level(3)
    try:
        got.append(int(f(x)))
        with tilefuse.level(1):
            got.append(int(f(x)))
    finally:
        tilefuse.set_level(None)
    assert got == [1, 0, policy.DEFAULT_LEVEL, 3, 1]


TRITON_INTERPRET_VALUES = ["1", "0", "true", "TRUE", "True", "on", "ON", "yes", "Yes", "y", "Y",
                           " 1", "1 ", "true\n", "off", "no", "false", "", "2", "t", "enable"]


@pytest.mark.parametrize("value", TRITON_INTERPRET_VALUES + [None])
def test_the_interpreter_setting_is_read_as_triton_reads_it(value, monkeypatch):
    """tilefuse runs kernels on CPU tensors exactly when Triton interprets them: with " 1"
    Triton compiles (and a CPU launch fails, no driver), with "on" or "YES" it interprets (and
    tilefuse must not run the reference instead). Triton imported or not yet (the same parse)."""
    import sys

    import torch
    knobs = pytest.importorskip("triton.knobs")
    if value is None:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    else:
        monkeypatch.setenv("TRITON_INTERPRET", value)
    triton_says = bool(knobs.runtime.interpret)
    assert triton_says is (value is not None and value.lower() in ("1", "true", "on", "yes", "y"))
    assert policy.interpreter_enabled() is triton_says
    assert policy.kernels_enabled(torch.device("cpu"), 1) is (triton_says and policy.triton_available())
    with monkeypatch.context() as patch:
        patch.delitem(sys.modules, "triton.knobs")          # as before Triton is imported
        assert policy.interpreter_enabled() is triton_says


def test_a_value_set_on_triton_s_knob_is_followed(monkeypatch):
    """Triton's setting, not only the variable: ``triton.knobs.runtime.interpret = False``
    (kept by Triton without touching the environment here) turns tilefuse's kernels off on the
    CPU as it turns Triton's interpreter off."""
    knobs = pytest.importorskip("triton.knobs")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(knobs, "propagate_env", False)
    knobs.runtime.interpret = False
    try:
        assert knobs.runtime.interpret is False and policy.interpreter_enabled() is False
    finally:
        del knobs.runtime.interpret     # back to reading the variable (a restored value would pin it)
    assert policy.interpreter_enabled() is True
