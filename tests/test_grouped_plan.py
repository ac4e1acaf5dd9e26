"""grouped_glu_mlp's call plans (ops/grouped_glu_mlp/plan.py, compose.ForwardPlan,
ws_rows.Prepared): the compose route's decisions and forward launches made once per argument
metadata. The planned call gives the unplanned call's bits (y and every gradient); a plan is
found again only under the same metadata, level, tuning table and device, and built anew
otherwise (a stale plan would run other kernels or skip a check); repeated calls do not grow
the cache or memory; bad arguments raise as before. On the CPU the plans run their kernels in
Triton's interpreter (ws_rows declines there: torch._grouped_mm); on a Hopper GPU through the
Gluon kernels and their direct launches (ws_rows.Prepared)."""

import contextlib

import numpy
import pytest
import torch

import tilefuse
from tilefuse import launches, tuning
from tilefuse.ops.grouped_glu_mlp import compose, configs, plan as plans, streams
from tilefuse.ops.grouped_glu_mlp.api import grouped_glu_mlp, problem_for
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs

pytestmark = pytest.mark.usefixtures("one_intra_op_thread")

COUNTS = (5, 0, 17, 9)
NAMES = ("x", "probs", "w1", "w2", "b1", "b2")


def _inputs(device, dtype=torch.bfloat16, bias=False, counts=COUNTS, H=64, F=64, seed=0):
    return random_inputs(list(counts), H, F, dtype, bias=bias, device=device,
                         generator=torch.Generator().manual_seed(seed))


def _call(i, activation="swiglu", interleave=32, grad=True):
    leaves = {k: i[k].detach().requires_grad_(grad) for k in NAMES if i[k] is not None}
    y = grouped_glu_mlp(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"], activation=activation,
                        glu_interleave=interleave, fc1_bias=leaves.get("b1"), fc2_bias=leaves.get("b2"))
    if not grad:
        return (y,)
    return (y, *torch.autograd.grad(y, list(leaves.values()), i["dy"]))


def _bits(t):
    return t.view(torch.int16) if t.element_size() == 2 else t.view(torch.int32)


@contextlib.contextmanager
def _planning_off():
    """The unplanned call (plans.ENABLED off) inside the block."""
    before, plans.ENABLED = plans.ENABLED, False
    try:
        yield
    finally:
        plans.ENABLED = before


@pytest.fixture
def fresh_plans():
    plans.clear()
    yield
    plans.clear()


@pytest.mark.parametrize("activation,interleave,bias", [("swiglu", 32, False), ("geglu", 8, True),
                                                        ("swiglu", None, True), ("geglu", None, False)])
@pytest.mark.parametrize("grad", [True, False])
def test_the_planned_call_gives_the_unplanned_bits(activation, interleave, bias, grad, device, fresh_plans,
                                                   monkeypatch):
    i = _inputs(device, bias=bias, seed=1)
    with launches.counting() as planned_launches:
        planned = [_call(i, activation, interleave, grad) for _ in range(2)]   # built, then found
    assert plans.cache_size() == 1 and planned_launches["grouped_mlp_compose"] == 2
    monkeypatch.setattr(plans, "ENABLED", False)
    with launches.counting() as unplanned_launches:
        want = _call(i, activation, interleave, grad)
    assert dict(planned_launches) == {k: 2 * v for k, v in unplanned_launches.items()}
    for got in planned:
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and torch.equal(_bits(g), _bits(w))
    if not grad:
        assert planned[1][0].grad_fn is None


def test_a_plan_is_found_only_under_its_metadata_level_and_table(device, fresh_plans, tuning_table):
    i = _inputs(device)
    args = (i["x"], i["counts"], i["probs"], i["w1"], i["w2"])
    grouped_glu_mlp(*args)
    assert plans.cache_size() == 1
    grouped_glu_mlp(*args)
    grouped_glu_mlp(*(t.clone() for t in args))                        # new tensors, same metadata
    assert plans.cache_size() == 1
    grouped_glu_mlp(i["x"].float(), i["counts"], i["probs"], i["w1"].float(), i["w2"].float())   # dtype
    assert plans.cache_size() == 2
    wide = torch.zeros(i["x"].shape[0], 2 * i["x"].shape[1], dtype=i["x"].dtype, device=device)
    wide[:, :i["x"].shape[1]] = i["x"]
    grouped_glu_mlp(wide[:, :i["x"].shape[1]], *args[1:])              # a row stride
    assert plans.cache_size() == 3
    grouped_glu_mlp(*args, glu_interleave=None)                         # an epilogue argument
    assert plans.cache_size() == 4
    # probs' dtype: probs in x's dtype (bfloat16, as valid as float32) get a plan of their own,
    # whose launches read bfloat16, with the bits of the unplanned call; probs of a third dtype
    # are refused as validate refuses them, not run through a plan built for another dtype
    assert args[2].dtype == torch.float32 and args[0].dtype == torch.bfloat16
    in_x_dtype = grouped_glu_mlp(args[0], args[1], args[2].to(args[0].dtype), *args[3:])
    assert plans.cache_size() == 5
    with _planning_off():
        assert torch.equal(in_x_dtype, grouped_glu_mlp(args[0], args[1], args[2].to(args[0].dtype), *args[3:]))
    with pytest.raises(TypeError, match="probs"):
        grouped_glu_mlp(args[0], args[1], args[2].double(), *args[3:])
    assert plans.cache_size() == 5
    with tilefuse.policy.level(1 if tilefuse.policy.get_level() != 1 else 2):   # the level
        grouped_glu_mlp(*args)
    assert plans.cache_size() == 6
    # a table registration: the next call is planned anew and runs the registered route
    tuning.register("grouped_glu_mlp", {problem_for(i["x"], i["w2"], "swiglu", 32, False):
                                        configs.heuristic("fwd", 2)})
    try:
        with tilefuse.policy.level(2), launches.counting() as launched:
            grouped_glu_mlp(*args)
        assert launched["grouped_mlp_fwd"] == 1 and not launched["grouped_mlp_compose"]
        assert plans.cache_size() == 7
    finally:
        tuning.unregister("grouped_glu_mlp")
    with tilefuse.policy.level(0), launches.counting() as launched:     # level 0: the reference
        grouped_glu_mlp(*args)
    assert not launched["grouped_mlp_compose"] and not launched["grouped_mlp_fwd"]


@pytest.mark.parametrize("op", ["grouped_glu_mlp", "dyt"])
def test_a_plan_another_thread_built_inside_a_collecting_block_still_records_the_key(device, fresh_plans, op):
    """tune(model)'s collecting() block records the keys of its thread's calls even where
    another thread built the call's plan after the block opened (a cached plan makes no
    lookup: while a block is open plans are not reused, table.collecting_any)."""
    import threading
    from tilefuse.ops.dyt import plan as dyt_plans
    from tilefuse.tuning import table
    if op == "dyt":
        x = torch.randn(8, 64, device=device)
        args = (x, torch.full((), 0.5, device=device), torch.ones(64, device=device), torch.zeros(64, device=device))
        call = tilefuse.dyt
    else:
        i = _inputs(device)
        args = (i["x"], i["counts"], i["probs"], i["w1"], i["w2"])
        call = grouped_glu_mlp
    dyt_plans.clear()
    with tilefuse.policy.level(2):
        with table.collecting() as alone:
            call(*args)
        def other_call():   # no collecting block of its own
            with tilefuse.policy.level(2):
                call(*args)
        other = threading.Thread(target=other_call)
        with table.collecting() as seen:
            other.start()
            other.join()
            call(*args)
    dyt_plans.clear()
    assert alone and list(seen) == list(alone)


def test_a_stale_plan_never_runs_a_changed_level(device, fresh_plans):
    """The same arguments under level 0 after a planned call at the default level: the plan of
    level 1 is not used (no kernel runs), and back at the default level it is found again."""
    i = _inputs(device)
    args = (i["x"], i["counts"], i["probs"], i["w1"], i["w2"])
    grouped_glu_mlp(*args)
    with tilefuse.policy.level(0), launches.counting() as launched:
        grouped_glu_mlp(*args)
    assert sum(launched.values()) == 0
    with launches.counting() as launched:
        grouped_glu_mlp(*args)
    assert launched["grouped_mlp_compose"] == 1 and plans.cache_size() == 2


def test_repeated_calls_do_not_grow_the_cache_or_memory(device, fresh_plans):
    i = _inputs(device)
    args = (i["x"], i["counts"], i["probs"], i["w1"], i["w2"])
    for _ in range(3):
        grouped_glu_mlp(*args)
    if device == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
    for _ in range(20):
        grouped_glu_mlp(*args)
    assert plans.cache_size() == 1
    if device == "cuda":
        torch.cuda.synchronize()
        assert torch.cuda.memory_allocated() == before


def test_the_cache_keeps_at_most_max_plans(device, fresh_plans, monkeypatch):
    monkeypatch.setattr(plans, "MAX_PLANS", 3)
    for n in range(5):
        i = _inputs(device, counts=(4 + n, 3), H=32, F=32)
        grouped_glu_mlp(i["x"], i["counts"], i["probs"], i["w1"], i["w2"])
    assert plans.cache_size() == 3


def test_bad_arguments_raise_as_before_planned_or_not(device, fresh_plans):
    i = _inputs(device)
    args = [i["x"], i["counts"], i["probs"], i["w1"], i["w2"]]
    grouped_glu_mlp(*args)                       # a plan for the good metadata
    with pytest.raises(ValueError, match="probs"):
        grouped_glu_mlp(args[0], args[1], args[2][:-1], *args[3:])
    with pytest.raises(TypeError, match="x"):
        grouped_glu_mlp([1.0], *args[1:])
    with pytest.raises(ValueError, match="glu_interleave"):
        grouped_glu_mlp(*args, glu_interleave=7)
    with pytest.raises((TypeError, ValueError), match="glu_interleave"):
        grouped_glu_mlp(*args, glu_interleave=[32])        # unhashable: no key, validate names it
    # values equal to a cached plan's but of another type are checked, not served from it
    for bad in (32.0, numpy.int64(32)):
        with pytest.raises(TypeError, match="glu_interleave"):
            grouped_glu_mlp(*args, glu_interleave=bad)
    grouped_glu_mlp(*args, glu_interleave=1)
    with pytest.raises(TypeError, match="glu_interleave"):
        grouped_glu_mlp(*args, glu_interleave=True)


def test_a_plan_cache_limit_of_zero_turns_caching_off(device, fresh_plans, monkeypatch):
    from tilefuse.ops.dyt import plan as dyt_plans
    monkeypatch.setattr(dyt_plans, "MAX_PLANS", 0)
    monkeypatch.setattr(plans, "MAX_PLANS", 0)
    dyt_plans.clear()
    x = torch.randn(4, 8, device=device)
    y = tilefuse.dyt(x, torch.ones(1, device=device), torch.ones(8, device=device))
    assert y.shape == x.shape and dyt_plans.cache_size() == 0
    i = _inputs(device)
    grouped_glu_mlp(i["x"], i["counts"], i["probs"], i["w1"], i["w2"])
    assert plans.cache_size() == 0


def test_misaligned_inputs_take_the_unplanned_path(device, fresh_plans, monkeypatch):
    """x 2 bytes off a 16-byte boundary (same metadata as an aligned x): the route copies it
    (compose.lay_out), as without plans, with the same bits."""
    i = _inputs(device)
    T, H = i["x"].shape
    buf = torch.empty(T * H + 1, dtype=i["x"].dtype, device=device)
    odd = buf[1:].view(T, H)
    odd.copy_(i["x"])
    args = (i["counts"], i["probs"], i["w1"], i["w2"])
    grouped_glu_mlp(i["x"], *args)
    got = grouped_glu_mlp(odd, *args)
    monkeypatch.setattr(plans, "ENABLED", False)
    assert torch.equal(_bits(got), _bits(grouped_glu_mlp(odd, *args)))


def test_a_misaligned_first_call_does_not_keep_aligned_calls_off_the_plan(device, fresh_plans):
    """The plan key holds metadata, not addresses: a first call on an x 2 bytes off 16 builds a
    plan without a forward (lay_out copies that x), which is not cached, so a later aligned
    call of the same metadata gets the planned forward, as when it comes first."""
    i = _inputs(device)
    T, H = i["x"].shape
    odd = torch.empty(T * H + 1, dtype=i["x"].dtype, device=device)[1:].view(T, H)
    odd.copy_(i["x"])
    args = (i["counts"], i["probs"], i["w1"], i["w2"], None, None, "swiglu", 32, None)
    planned = plans.lookup(i["x"], *args).forward is not None
    if not planned:
        pytest.skip("this device's route for the key has no forward plan")
    plans.clear()
    assert plans.lookup(odd, *args).forward is None and plans.cache_size() == 0
    assert plans.lookup(i["x"], *args).forward is not None


@pytest.mark.parametrize("rows", [(0, 0, True), (256, 3, True), (128, 5, True), (128, 5, False)],
                         ids=["vendor", "rows256s3", "rows128s5", "rows128s5-noglu"])
@pytest.mark.parametrize("interleave", [16, None])
def test_the_forward_plan_runs_forward_bit_for_bit(rows, interleave, device):
    """compose.ForwardPlan.run against compose.forward on laid-out tensors (y, z, h, ends),
    with each rows tile (on Hopper fc1 and fc2 through ws_rows.Prepared, fc1 with the GLU in
    its epilogue at interleave 16 and, at 128 columns, in the halves layout, unless rows_glu
    is off), twice: built, then through the direct launches."""
    for bias in (False, True):
        i = _inputs(device, bias=bias, seed=4)
        t = compose.lay_out(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["b1"], i["b2"])
        fp = compose.ForwardPlan(*t, "swiglu", interleave, *rows)
        want = compose.forward(*t, "swiglu", interleave, *rows, laid_out=True)
        for _ in range(2):
            with launches.counting() as launched:
                got = fp.run(*t)
            for g, w in zip(got, want):
                assert torch.equal(g, w)
            if device == "cuda" and rows[0] and torch.cuda.get_device_capability()[0] == 9:
                assert launched["grouped_ws_rows"] == 2
                # the GLU in fc1's epilogue: interleave 16, or the halves layout where F (64)
                # is a multiple of half the tile
                assert launched["grouped_ws_rows_glu"] == (rows[2] and (interleave is not None
                                                                        or 64 % (rows[0] // 2) == 0))


@pytest.mark.parametrize("tiles", [(0, 0, 0, 0), (256, 3, 256, 3), (128, 5, 128, 5)],
                         ids=["vendor", "wgrad256s3-rows256s3", "wgrad128s5-rows128s5"])
@pytest.mark.parametrize("interleave", [16, None])
def test_the_backward_plan_runs_backward_bit_for_bit(tiles, interleave, device):
    """compose.ForwardPlan.backward (a BackwardPlan for a contiguous dy) against
    compose.backward on the forward's own z, h and ends, with and without biases, twice:
    built, then through the direct launches; on Hopper the two dgrads through ws_rows and the
    two weight gradients through ws_wgrad where the tiles ask for them. A dy of another
    layout (expanded, as ``y.sum().backward()`` gives) takes compose.backward."""
    for bias in (False, True):
        i = _inputs(device, bias=bias, seed=5)
        t = compose.lay_out(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["b1"], i["b2"])
        x, counts, probs, w1, w2, b1, b2 = t
        fp = compose.ForwardPlan(*t, "swiglu", interleave, *tiles[2:])
        y, z, h, ends = fp.run(*t)
        saved = (x, counts, ends, probs, w1, w2, b1, b2, z, h, "swiglu", interleave, *tiles)
        dy = i["dy"]
        assert dy.is_contiguous()
        with launches.counting() as unplanned:
            want = compose.backward(dy, *saved)
        for _ in range(2):
            with launches.counting() as launched:
                got = fp.backward(dy, *saved)
            assert len(got) == len(want) == 6
            for g, w in zip(got, want):
                assert (g is None) == (w is None)
                if g is not None:
                    assert g.dtype == w.dtype and torch.equal(_bits(g), _bits(w))
            assert dict(launched) == dict(unplanned) and launched["grouped_mlp_compose_bwd"] == 1
            if device == "cuda" and torch.cuda.get_device_capability()[0] == 9:
                # dW2 (E, H = 64, F) is off ws_wgrad's 128-row tile: torch._grouped_mm, as unplanned
                assert launched["grouped_ws_rows"] == (2 if tiles[2] else 0)
                assert launched["grouped_ws_wgrad"] == (1 if tiles[0] else 0)
        assert len(fp._backward) == 1
        expanded = torch.ones((), dtype=dy.dtype, device=device).expand(dy.shape)
        with launches.counting() as launched:
            got = fp.backward(expanded, *saved)
        for g, w in zip(got, compose.backward(expanded, *saved)):
            assert (g is None and w is None) or torch.equal(_bits(g), _bits(w))
        assert len(fp._backward) == 1   # the expanded dy built no plan


def test_the_side_stream_is_cuda_only():
    """streams.side_stream: no second stream for tensors off CUDA (the interpreter's paths run
    everything in order on the caller's stream)."""
    assert streams.side_stream(torch.zeros(1)) is None


def _raise_oom(*args, **kwargs):
    raise torch.OutOfMemoryError("dgrad")


@pytest.mark.parametrize("route", ["kernels", "compose"])
def test_a_backward_that_raises_between_fork_and_join_still_joins(route, monkeypatch, device):
    """An error after the weight gradient's fork (an OOM in a dgrad, say) still makes the
    caller's stream wait for the side stream (streams.joined) before dw2, which the side work
    writes, can go back to the allocator; and the error is the one raised. Streams faked: the
    fork runs its work and logs, the join logs."""
    from tilefuse.ops.grouped_glu_mlp import launch
    log, side = [], object()
    monkeypatch.setattr(streams, "side_stream", lambda t, priority=0: side)
    monkeypatch.setattr(streams, "on_side", lambda s, device, fn: (s is side and log.append("fork"), fn())[1])
    monkeypatch.setattr(streams, "join", lambda s, device: log.append("join") if s is side else None)
    i = random_inputs([5, 0, 7], 32, 32, torch.bfloat16, bias=False, device=device,
                      generator=torch.Generator().manual_seed(0))
    args = (i["dy"], i["x"], i["counts"], i["probs"], i["w1"], i["w2"], None, None)
    if route == "kernels":
        cfg = configs.heuristic("bwd", 2)
        y, z, h = launch.forward(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], None, None, "swiglu", 16,
                                 config=cfg)
        monkeypatch.setattr(launch, "_gemm", _raise_oom)
        with pytest.raises(torch.OutOfMemoryError, match="dgrad"):
            launch.backward(*args, z, h, "swiglu", 16, config=cfg)
    else:
        y, z, h, ends = compose.forward(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], None, None, "swiglu", 16)
        monkeypatch.setattr(compose, "_rows_gemm", _raise_oom)
        dy, x, counts, probs, w1, w2, b1, b2 = args
        with pytest.raises(torch.OutOfMemoryError, match="dgrad"):
            compose.backward(dy, x, counts, ends, probs, w1, w2, b1, b2, z, h, "swiglu", 16, 128, 3)
    assert log == ["fork", "fork", "join"], log   # the region's own fork (streams.joined), dW2's, the join


def test_a_recipe_forward_that_raises_between_fork_and_join_still_joins(monkeypatch, device):
    """The forward's fork (W2's quantizer beside FC1, with a recipe) is joined however the
    forward ends: an error in FC1 (an OOM, say) still makes the caller's stream wait for the
    side stream before the tensors it uses go back. Streams faked as in the backward's test."""
    from tilefuse.ops.grouped_glu_mlp import launch
    log, side = [], object()
    monkeypatch.setattr(streams, "side_stream", lambda t, priority=0: side)
    monkeypatch.setattr(streams, "on_side", lambda s, device, fn: (s is side and log.append("fork"), fn())[1])
    monkeypatch.setattr(streams, "join", lambda s, device: log.append("join") if s is side else None)
    monkeypatch.setattr(streams, "caller_uses", lambda *a: None)
    i = random_inputs([5, 0, 7], 128, 128, torch.bfloat16, bias=False, device=device,
                      generator=torch.Generator().manual_seed(0))
    monkeypatch.setattr(launch, "_gemm", _raise_oom)
    with pytest.raises(torch.OutOfMemoryError, match="dgrad"):
        launch.forward(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], None, None, "swiglu", 16,
                       config=configs.heuristic("fwd", 2, "fp8_block"), recipe="fp8_block")
    assert log == ["fork", "fork", "join"], log   # the region's own fork (streams.joined), W2's, the join


def test_joined_forks_then_joins_once_and_keeps_the_error_when_the_join_fails(monkeypatch):
    """A region forks as it starts, so its join follows a fork even where nothing ran beside:
    under CUDA-graph capture the join of a side stream never forked into the capture
    invalidates it."""
    log = []
    monkeypatch.setattr(streams, "on_side", lambda s, device, fn: (log.append(("fork", s)), fn())[1])
    monkeypatch.setattr(streams, "join", lambda s, device: log.append("join"))
    with streams.joined("side", "cuda"):
        pass
    assert log == [("fork", "side"), "join"]

    def broken(s, device):
        raise RuntimeError("CUDA error: device-side assert triggered")

    monkeypatch.setattr(streams, "join", broken)
    with pytest.raises(ValueError, match="the first error"):
        with streams.joined("side", "cuda"):
            raise ValueError("the first error")


@pytest.mark.gpu
def test_side_streams_are_per_thread_device_and_priority(device):
    """One side stream per thread, device and priority, asked for once: another thread asks
    for its own (torch's pool of 32 streams a device and priority may still hand two threads
    the same one: streams.py)."""
    import threading
    t = torch.zeros(1, device=device)
    mine = streams.side_stream(t)
    assert mine is streams.side_stream(t) and mine != torch.cuda.current_stream()
    high = streams.side_stream(t, streams.HIGH)
    assert high is streams.side_stream(t, streams.HIGH) and high.priority < mine.priority
    other = []
    thread = threading.Thread(target=lambda: other.extend((streams.side_stream(t), streams.side_stream(t))))
    thread.start()
    thread.join()
    assert other[0] is other[1] and other[0] is not None and other[0] is not mine


def _gluon_compose_plan(device, H, F, seed):
    """(inputs, the ForwardPlan, the backward's saved arguments after dy) of a compose forward
    whose config asks for the Gluon wgrad and rows tiles (128, 5 stages each), 528 tokens on
    four experts, one of them empty."""
    i = _inputs(device, counts=(300, 0, 211, 17), H=H, F=F, seed=seed)
    t = compose.lay_out(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["b1"], i["b2"])
    tiles = (128, 5, 128, 5)
    fp = compose.ForwardPlan(*t, "swiglu", 32, *tiles[2:])
    y, z, h, ends = fp.run(*t)
    x, counts, probs, w1, w2, b1, b2 = t
    return i, fp, (x, counts, ends, probs, w1, w2, b1, b2, z, h, "swiglu", 32, *tiles)


@pytest.mark.gpu
@pytest.mark.parametrize("planned", [False, True], ids=["backward", "BackwardPlan"])
def test_the_weight_gradients_beside_the_dgrads_give_one_streams_bits(planned, device, monkeypatch):
    """compose's "Two streams": with the weight gradients in Gluon, both run on the side stream
    (not the caller's), and the gradients are bitwise those of one stream (streams.BESIDE
    off), eagerly and replayed from a CUDA graph that captured the fork and the joins."""
    from gpu_helpers import capture_cuda_graph, one_and_two_streams
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("ws_wgrad's Gluon kernel runs on Hopper")
    i, fp, saved = _gluon_compose_plan(device, H=256, F=192, seed=7)
    dy = i["dy"]

    counted = []

    def run():
        with launches.counting() as launched:
            out = (fp.backward if planned else compose.backward)(dy, *saved)[:4]
        counted.append(launched)
        return out

    want, got, sides = one_and_two_streams(monkeypatch, run)
    launched = counted[-1]
    # the region's own fork (streams.joined), then each wgrad's; the plan passes its dgrads
    # through on_side too, with no stream (the caller's)
    beside = [s for s in sides if s is not None]
    assert launched["grouped_ws_wgrad"] == 2 and len(beside) == 3 and len(sides) == (5 if planned else 3)
    assert all(s != torch.cuda.current_stream() for s in beside)
    for g, w in zip(got, want):
        assert torch.equal(_bits(g), _bits(w))
    graph, captured = capture_cuda_graph(run)
    graph.replay()
    torch.cuda.synchronize()
    for g, w in zip(captured, want):
        assert torch.equal(_bits(g), _bits(w))


@pytest.mark.gpu
def test_a_plan_whose_wgrad_falls_back_captures_in_a_cuda_graph(device):
    """A GemmConfig.compose config's BackwardPlan with only dW2 wanted (fc1 frozen) at H = 192,
    where ws_wgrad's Gluon kernel declines dW2 (its columns not a multiple of 128): dW2 runs on
    the caller's stream, the side stream is still joined, and the CUDA-graph capture of the
    backward must hold (a join of a side stream never forked into it would invalidate it);
    replayed, the gradients are the eager call's bit for bit."""
    from gpu_helpers import capture_cuda_graph
    i, fp, saved = _gluon_compose_plan(device, H=192, F=128, seed=8)

    def run():
        return fp.backward(i["dy"], *saved, need_dw1=False, need_dw2=True)[:4]

    want = run()
    assert want[2] is None and want[3] is not None
    graph, captured = capture_cuda_graph(run)
    graph.replay()
    torch.cuda.synchronize()
    for g, w in zip(captured, want):
        assert (g is None and w is None) or torch.equal(_bits(g), _bits(w))


def test_a_saved_tensor_hook_that_changes_a_bias_layout_takes_the_unplanned_backward(device, fresh_plans):
    """The backward plan's dGLU launch fixed the biases' row strides: a saved-tensor hook that
    gives a row-padded bias back contiguous (as ``save_on_cpu`` does) sends the backward to
    the unplanned one, whose gradients equal the call without the hook bit for bit (the plan
    read the padded stride on the new buffer: wrong dprobs and reads past its end)."""
    i = _inputs(device, dtype=torch.float32, bias=True, seed=5)
    E, H, F = i["w2"].shape[0], i["w2"].shape[1], i["w2"].shape[2]
    padded = {"b1": torch.zeros(E, 2 * F + 16, device=device), "b2": torch.zeros(E, H + 16, device=device)}
    for name in ("b1", "b2"):
        padded[name][:, :i[name].shape[1]] = i[name]
    i.update(b1=padded["b1"][:, :2 * F], b2=padded["b2"][:, :H])
    want = _call(i)
    assert plans.cache_size() == 1

    def unpack(t):
        return t.clone(memory_format=torch.contiguous_format)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        got = _call(i)
    for a, b in zip(got, want):
        assert torch.equal(a, b)


def _probs_as_float64(t):
    return t.double()


def _probs_strided(t):
    return torch.full((2 * t.shape[0],), float("nan"), device=t.device)[::2].copy_(t)


@pytest.mark.parametrize("unpack_probs", [_probs_as_float64, _probs_strided], ids=["float64", "strided"])
def test_a_saved_tensor_hook_that_changes_probs_takes_the_unplanned_backward(unpack_probs, device, fresh_plans,
                                                                            monkeypatch):
    """A saved-tensor hook that hands probs back in another dtype (float64) or as a strided
    view (every other element of a larger buffer), the same values, sends the backward to the
    unplanned one, which specialises on it: the gradients equal the call without the hook bit
    for bit. The backward plan's launches were compiled for contiguous float32 probs, and
    would read float64 memory as float32 on the GPU, or the buffer's other elements."""
    i = _inputs(device, dtype=torch.float32, seed=7)
    want = _call(i)
    planned = []
    run = compose.BackwardPlan.run
    monkeypatch.setattr(compose.BackwardPlan, "run", lambda self, *a, **k: planned.append(1) or run(self, *a, **k))

    def unpack(t):
        return unpack_probs(t) if t.dtype == torch.float32 and t.dim() == 1 else t   # probs alone is 1-D float32
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        got = _call(i)
    assert planned == []
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and torch.equal(a, b)
    _call(i)
    assert planned == [1]                      # without the hook the plan's backward runs


def test_a_one_row_gradient_of_unit_row_stride_takes_the_unplanned_backward(device, fresh_plans, monkeypatch):
    """At T == 1 a loss on y's transpose hands back a (1, H) gradient of strides (1, 1), which
    is_contiguous but torch._grouped_mm refuses ("strides should be multiple of 16 bytes"):
    the planned call lays it out as the unplanned one does and gives its bits (before, the
    backward plan passed it on and raised)."""
    i = _inputs(device, counts=(1, 0), H=16, F=32, seed=8)
    H = i["w2"].shape[1]
    c = torch.randn(H, 1, generator=torch.Generator().manual_seed(9)).to(device, torch.bfloat16)

    def run():
        x = i["x"].detach().requires_grad_()
        w1 = i["w1"].detach().requires_grad_()
        w2 = i["w2"].detach().requires_grad_()
        y = grouped_glu_mlp(x, i["counts"], i["probs"], w1, w2)
        seen = []
        y.register_hook(lambda g: seen.append(g.stride()))
        (y.t() * c).sum().backward()
        assert seen == [(1, 1)]
        return x.grad, w1.grad, w2.grad
    got = run()
    assert plans.cache_size() == 1
    monkeypatch.setattr(plans, "ENABLED", False)
    want = run()
    for g, w in zip(got, want):
        assert torch.equal(_bits(g), _bits(w))


def test_a_plan_key_holds_the_layout(fresh_plans):
    """An mkldnn probs of a dense plan's shape and stride is refused (TypeError naming probs)
    after a dense call as on a fresh cache: the key holds each tensor's layout."""
    i = _inputs("cpu", dtype=torch.float32, seed=6)
    _call(i, grad=False)
    with pytest.raises(TypeError, match="probs must be a dense"):
        grouped_glu_mlp(i["x"], i["counts"], i["probs"].to_mkldnn(), i["w1"], i["w2"])
