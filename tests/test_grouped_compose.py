"""grouped_glu_mlp's compose route (ops/grouped_glu_mlp/compose.py: torch._grouped_mm GEMMs, the
glue as Triton kernels; interpreter on CPU, compiled on a GPU) against the float64 reference:
every activation x interleave x bias x dtype, forward and every gradient; zero-token experts,
T off every block, more experts than one expert-scan chunk, T == 0; glue tilings; the dispatch
(launch counts: compose at levels 1-2 without a table entry, not at level 0, the fused kernels
with a table entry); NaN-poisoned outputs; determinism; layouts; double backward;
torch.compile(fullgraph=True) and custom-op checks; and on a GPU CUDA-graph capture and
inductor compile of the route.

Tolerances (normwise relative to float64): fp32 and bf16 as the fused kernels' tests derive
them (test_grouped_mlp_kernels.TOL: fp32 K-term IEEE dots 1e-5; bf16 about three roundings of
u = 2^-8 on the longest path, 3u rounded up to 1.6e-2). fp16 by the same derivation with
u = 2^-11: 3u = 1.5e-3, rounded up as bf16's is (4u) to 2e-3 (measured 3-5e-4). The compose
route rounds the same tensors (z, h, y, dh, dz, dx, the weight gradients) to x.dtype.
"""

import pytest
import torch
from sm90_helpers import PTXAS
from test_grouped_mlp_kernels import TOL as KERNEL_TOL
from tuning_helpers import FakeTimer

import tilefuse
from tilefuse import launches, tuning
from tilefuse.tuning import store
from tilefuse.ops.grouped_glu_mlp import compose, op
from tilefuse.ops.grouped_glu_mlp import configs as gconfigs
from tilefuse.ops.grouped_glu_mlp import tune as gtune
from tilefuse.ops.grouped_glu_mlp.api import grouped_glu_mlp, problem_for
from tilefuse.ops.grouped_glu_mlp.reference import grouped_glu_mlp_reference, random_inputs, uses_grouped_mm
from tilefuse.tuning.sweep import poisoned_allocations
from tilefuse.utils import normwise_rel_error as rel

pytestmark = pytest.mark.usefixtures("one_intra_op_thread")

TOL = {**KERNEL_TOL, torch.float16: 2e-3}
FLOAT_NAMES = ("x", "probs", "w1", "w2", "b1", "b2")
GRAD_NAMES = ("dx", "dprobs", "dw1", "dw2", "db1", "db2")
COMPOSE_LAUNCHES = ("grouped_mlp_compose", "grouped_mlp_compose_bwd")
# Glue tiles smaller than the shapes: several row and column tiles, several F and H steps in the
# dGLU, partial tiles everywhere.
SMALL_GLUE = compose.GlueConfig(glu_block_m=4, glu_block_f=8, dglu_block_m=4, dglu_block_f=8)


def _dtype_id(dtype):
    return str(dtype).split(".")[-1]


def inputs(counts, H, F, dtype, bias, device, seed=0, x_scale=1.0):
    i = random_inputs(counts, H, F, dtype, bias=bias, device=device, generator=torch.Generator().manual_seed(seed))
    if x_scale != 1.0:
        i["x"] = (i["x"].float() * x_scale).to(dtype)
    return i


def call_api(i, activation, interleave, dy=None, **kw):
    """(y, *gradients of x, probs, w1, w2[, b1, b2]) and the launch counts of the public call."""
    leaves = {k: i[k].detach().requires_grad_(True) for k in FLOAT_NAMES if i[k] is not None}
    with launches.counting() as launched:
        y = grouped_glu_mlp(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"],
                            activation=activation, glu_interleave=interleave, fc1_bias=leaves.get("b1"),
                            fc2_bias=leaves.get("b2"), **kw)
        grads = torch.autograd.grad(y, list(leaves.values()), i["dy"] if dy is None else dy)
    return (y, *grads), launched


def reference(i, activation, interleave):
    """(y, *gradients) of the float64 per-expert reference, in float64."""
    leaves = {k: i[k].detach().double().requires_grad_(True) for k in FLOAT_NAMES if i[k] is not None}
    y = grouped_glu_mlp_reference(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"],
                                  activation=activation, glu_interleave=interleave, fc1_bias=leaves.get("b1"),
                                  fc2_bias=leaves.get("b2"), compute_dtype=torch.float64)
    return (y, *torch.autograd.grad(y, list(leaves.values()), i["dy"].double()))


def assert_matches_reference(got, want, i, dtype, counts):
    names = ("y", *GRAD_NAMES)
    dtypes = [i["x"].dtype] + [i[k].dtype for k in FLOAT_NAMES if i[k] is not None]
    for name, a, r, want_dtype in zip(names, got, want, dtypes):
        assert a.dtype == want_dtype and a.shape == r.shape, name
        if r.numel():   # T == 0: empty y, dx, dprobs
            assert rel(a, r) < TOL[dtype], f"{name}: {rel(a, r):.2e} >= {TOL[dtype]:.1e}"
    # experts without tokens get exactly zero weight and bias gradients
    for e, n in enumerate(counts):
        if n == 0:
            for name, g in zip(names[3:], got[3:]):
                assert torch.count_nonzero(g[e]) == 0, (name, e)


# ---------------------------------------------------------------------------------------------
# Against the float64 reference, through the public API (level 2, no table entry)
COUNTS = [5, 0, 20, 12]     # T = 37: off every row block; a zero-token expert in the middle
CASES = [(act, inter, bias, dtype) for dtype in (torch.float32, torch.bfloat16, torch.float16)
         for act in ("swiglu", "geglu") for inter in (None, 8) for bias in (False, True)]


@pytest.mark.parametrize("activation,interleave,bias,dtype", CASES,
                         ids=[f"{a}-s{s}-{'bias' if b else 'nobias'}-{_dtype_id(d)}" for a, s, b, d in CASES])
def test_compose_matches_reference(activation, interleave, bias, dtype, tuning_table, device):
    H, F = 32, 16
    # geglu: x scaled so that |z| passes the clamp bound L = 7 in both directions
    i = inputs(COUNTS, H, F, dtype, bias, device, seed=1, x_scale=4.0 if activation == "geglu" else 1.0)
    got, launched = call_api(i, activation, interleave)
    assert [launched[k] for k in COMPOSE_LAUNCHES] == [1, 1] and not launched["grouped_mlp_fwd"]
    assert_matches_reference(got, reference(i, activation, interleave), i, dtype, COUNTS)


@pytest.mark.parametrize("bias", [False, True])
def test_a_forward_without_grad_records_no_node_and_gives_the_same_bits(bias, tuning_table, device):
    """Nothing to differentiate (inputs without grad, or torch.no_grad): the route's forward
    runs without its autograd.Function (no node, as a native op), with the same y bit for bit."""
    i = inputs(COUNTS, 32, 16, torch.bfloat16, bias, device, seed=3)
    (want, *_), _ = call_api(i, "swiglu", 8)
    args = (i["x"], i["counts"], i["probs"], i["w1"], i["w2"])
    kw = dict(activation="swiglu", glu_interleave=8, fc1_bias=i["b1"], fc2_bias=i["b2"])
    with launches.counting() as launched:
        plain = grouped_glu_mlp(*args, **kw)
        leaves = [t.detach().requires_grad_(True) for t in args[:1] + args[2:]]
        with torch.no_grad():
            no_grad = grouped_glu_mlp(leaves[0], i["counts"], *leaves[1:], **kw)
    assert launched["grouped_mlp_compose"] == 2 and not launched["grouped_mlp_compose_bwd"]
    for y in (plain, no_grad):
        assert y.grad_fn is None and not y.requires_grad
        assert torch.equal(y.view(torch.int16), want.view(torch.int16))


@pytest.mark.parametrize("counts", [[0, 13, 24, 0], [40], [1, 0, 0, 2], [0, 0, 0, 0]],
                         ids=["empty-ends", "one-expert", "few-rows", "T0"])
def test_splits(counts, tuning_table, device):
    """Leading and trailing empty experts, one expert, a handful of rows, no rows at all."""
    i = inputs(counts, 16, 32, torch.float32, True, device, seed=2)
    got, launched = call_api(i, "swiglu", 4)
    assert [launched[k] for k in COMPOSE_LAUNCHES] == [1, 1]
    assert_matches_reference(got, reference(i, "swiglu", 4), i, torch.float32, counts)


def test_more_experts_than_one_scan_chunk(device):
    """E = 40 > compose.E_CHUNK: rows find their expert over two chunks of end offsets (both
    biases read per-row expert rows)."""
    assert 40 > compose.E_CHUNK
    counts = [1 if e % 3 else 0 for e in range(40)]   # 26 rows, 14 empty experts
    i = inputs(counts, 16, 16, torch.float32, True, device, seed=3)
    with tilefuse.level(1):
        got, launched = call_api(i, "geglu", None)
    assert launched["grouped_mlp_compose"] == 1
    assert_matches_reference(got, reference(i, "geglu", None), i, torch.float32, counts)


@pytest.mark.parametrize("interleave", [None, 4])
def test_glue_tiling_changes_only_dprobs_summation_order(interleave, device):
    """Small glue tiles (several row and column tiles, several dGLU steps along F and H)
    against the default tiles: every elementwise result bitwise equal; dprobs, whose per-row
    sum is accumulated in BLOCK_F-wide steps, within fp32 summation error; both against the
    float64 reference."""
    i = inputs([11, 0, 17, 9], 32, 32, torch.bfloat16, True, device, seed=4)
    args = (i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["b1"], i["b2"], "swiglu", interleave)

    def run(glue):
        y, z, h, ends = compose.forward(*args, glue=glue)
        grads = compose.backward(i["dy"], i["x"], i["counts"], ends, i["probs"], i["w1"], i["w2"], i["b1"], i["b2"],
                                 z, h, "swiglu", interleave, glue=glue)
        return (y, *grads), (z, h)

    small, small_saved = run(SMALL_GLUE)
    default, default_saved = run(compose.DEFAULT_GLUE)
    for a, b in zip(small_saved, default_saved):
        assert torch.equal(a, b)
    for name, a, b in zip(("y", *GRAD_NAMES), small, default):
        if name == "dprobs":
            assert rel(a, b) < 64 * torch.finfo(torch.float32).eps
        else:
            assert torch.equal(a, b), name
    assert_matches_reference(small, reference(i, "swiglu", interleave), i, torch.bfloat16, [11, 0, 17, 9])


# ---------------------------------------------------------------------------------------------
# Dispatch
def _launched(i, level, **kw):
    with tilefuse.level(level):
        return call_api(i, "swiglu", 8, **kw)[1]


def test_dispatch_levels_and_table(tuning_table, device):
    i = inputs([9, 0, 14], 32, 32, torch.float32, False, device, seed=5)
    for level in (1, 2):
        launched = _launched(i, level)
        assert [launched[k] for k in COMPOSE_LAUNCHES] == [1, 1], level
        assert not launched["grouped_mlp_fwd"] and not launched["grouped_mlp_bwd"], level
    assert not _launched(i, 0)                     # level 0: the plain composition, no kernel
    problem = problem_for(i["x"], i["w2"], "swiglu", 8, False)
    tuning.register("grouped_glu_mlp", {problem: tuning.BASELINE})
    assert _launched(i, 2)["grouped_mlp_compose"] == 1   # swept, the baseline won: compose
    tuning.register("grouped_glu_mlp", {problem: gtune.candidates_for(problem)[0]})
    launched = _launched(i, 2)
    assert (launched["grouped_mlp_fwd"], launched["grouped_mlp_bwd"]) == (1, 1)
    assert not launched["grouped_mlp_compose"] and not launched["grouped_mlp_compose_bwd"]
    assert _launched(i, 1)["grouped_mlp_compose"] == 1   # level 1 ignores the table


def test_rows_off_16_bytes_run_the_fused_kernels(tuning_table, device):
    """H = 18 fp32 (72-byte rows): torch._grouped_mm refuses them, so not the compose route but
    the fused kernels at their heuristic tiles (op.route; not the per-expert loop, which reads
    the counts on the host)."""
    i = inputs([4, 0, 6], 18, 16, torch.float32, True, device, seed=6)
    assert not uses_grouped_mm(i["x"], 16) and not compose.takes(4, 18, 16)
    with tilefuse.level(2):
        got, launched = call_api(i, "swiglu", 8)
    assert launched == {"grouped_mlp_fwd": 1, "grouped_mlp_bwd": 1}, dict(launched)
    assert_matches_reference(got, reference(i, "swiglu", 8), i, torch.float32, [4, 0, 6])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=_dtype_id)
def test_takes_is_uses_grouped_mms_eager_criterion(dtype):
    for hidden in (8, 12, 16, 18, 24, 32, 36):
        for ffn in (4, 8, 10, 16, 20):
            x = torch.empty(3, hidden, dtype=dtype)
            assert compose.takes(dtype.itemsize, hidden, ffn) == uses_grouped_mm(x, ffn), (hidden, ffn)
    assert not compose.takes(8, 32, 32)    # float64


def test_tuner_baseline_is_the_compose_route(device):
    fam = gtune.FAMILY
    problem = fam.problem_for_key("H2048-F1408-E64-x2-T32768-swiglu-s32")
    assert fam.baseline(problem) == gtune.COMPOSE and fam.describe(gtune.COMPOSE) == "compose"
    assert fam.expected_launches(problem, gtune.COMPOSE) == COMPOSE_LAUNCHES
    # rows off 16 bytes (72-byte bf16 rows): the fused kernels at their heuristic tiles, as op.route
    # runs them for a key never swept (not the unfused composition's per-expert loop and its host
    # read of the counts); the heuristic is not among the candidates then
    odd = gtune.GroupedProblem.of(64, 36, 32, 4, 2, "swiglu", 16, False)
    heuristic = gconfigs.heuristic("fwd", 2)
    assert fam.baseline(odd) == heuristic == op.route(odd, torch.device(device))
    assert fam.expected_launches(odd, heuristic) == ("grouped_mlp_fwd", "grouped_mlp_bwd")
    assert heuristic not in fam.candidates(odd) and fam.candidates(odd)
    assert not any(c.compose for c in fam.candidates(odd))
    fp8 = fam.problem_for_key("H2048-F1408-E64-x2-T32768-swiglu-s32-fp8_block")
    assert fam.baseline(fp8) != gtune.COMPOSE


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("counts", [(5,), (5, 0, 9, 1), (0, 0), tuple(range(100)), (0,) * 33 + (7,)])
def test_ends_are_the_cumsum_of_valid_counts(counts, dtype):
    """compose._ends: torch.cumsum's int32 offsets in one launch, E from 1 to past a power of two."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    c = torch.tensor(counts, dtype=dtype, device=device)
    ends = compose._ends(c, sum(counts))
    assert ends.dtype == torch.int32 and torch.equal(ends, torch.cumsum(c, 0, dtype=torch.int32))


# Counts that sum to T = 15 only after a wrap: of int32 offsets, of an int32 sum, of an int64 sum.
WRAPPING_COUNTS = [((2 ** 32 + 5, 0, 10), torch.int64), ((2 ** 31 - 1, 2 ** 31 - 1, 17), torch.int32),
                   ((2 ** 63 - 1, 2 ** 63 - 1, 17), torch.int64)]
BAD_COUNTS = [((5, 0, 8), torch.int64), ((9, -1, 7), torch.int64), ((5, 0, 11), torch.int64), *WRAPPING_COUNTS]
BAD_COUNT_IDS = ["sum-short", "negative", "sum-long", "int32-offsets-wrap", "int32-sum-wrap", "int64-sum-wrap"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="on CUDA a failed check is a device-side assert "
                                                      "(the context is lost); on the CPU it raises at once")
@pytest.mark.parametrize("torch_ops", [False, True], ids=["ends-kernel", "torch-ops"])
@pytest.mark.parametrize("counts,dtype", BAD_COUNTS, ids=BAD_COUNT_IDS)
def test_ends_check_the_counts(counts, dtype, torch_ops, monkeypatch):
    """Counts that are negative or do not sum to T fail the route's device-side check, also
    where they sum to T only after a wrap (of the int32 offsets, an int32 or an int64 sum: each
    count is bounded by T and summed in int64), both in compose_ends_kernel and in the torch
    ops that check the counts of E > MAX_ENDS_EXPERTS experts (``torch_ops``: the bound set
    below E)."""
    if torch_ops:
        monkeypatch.setattr(compose, "MAX_ENDS_EXPERTS", 2)
    i = inputs((5, 0, 10), 16, 8, torch.float32, False, "cpu")
    bad = torch.tensor(counts, dtype=dtype)
    with pytest.raises(RuntimeError, match="tokens_per_expert must be non-negative and sum to T"):
        compose.forward(i["x"], bad, i["probs"], i["w1"], i["w2"], None, None, "swiglu", 8)
    with pytest.raises(RuntimeError, match="tokens_per_expert must be non-negative and sum to T"):
        compose._ends(bad, 15)
    assert compose._ends(torch.tensor((5, 0, 10), dtype=dtype), 15).tolist() == [5, 5, 15]


def test_default_grid_is_every_epilogue_key_of_the_spec_shapes():
    fam = gtune.FAMILY
    keys = [fam.key(p) for p in fam.default_problems()]
    assert len(keys) == len(set(keys)) == 3 * 2 * 2 * 2 + 3
    assert keys[:6] == ["H4096-F3584-E8-x2-T16384-swiglu-s32", "H2048-F1408-E64-x2-T32768-swiglu-s32",
                        "H2048-F768-E128-x2-T65536-swiglu-s32",
                        "H4096-F3584-E8-x2-T16384-swiglu-s32-fp8_block", "H2048-F1408-E64-x2-T32768-swiglu-s32-fp8_block",
                        "H2048-F768-E128-x2-T65536-swiglu-s32-fp8_block"]
    for gpu in ("NVIDIA H200", "NVIDIA H100 80GB HBM3"):     # each shipped table covers the grid, fp8_block included
        shipped = store.load_builtin({"gpu": gpu, "capability": "sm90"})["grouped_glu_mlp"]
        assert set(keys) <= set(shipped), gpu
        # and beyond it only keys swept on their own (fp8_block in the halves layout,
        # benchmarks/results/2026-12-07-h200-bf runs 18 on the H100 and 24 on the H200), each a
        # key of the family
        extra = set(shipped) - set(keys)
        assert extra == {k.replace("-s32-", "-s0-") for k in keys[3:6]}, gpu
        assert all(fam.key(fam.problem_for_key(k)) == k for k in extra)
    for (e, t, h, f) in gtune.DEFAULT_SHAPES:
        for act in ("swiglu", "geglu"):
            for inter in (32, 0):
                for bias in ("", "-bias"):
                    assert f"H{h}-F{f}-E{e}-x2-T{t}-{act}-s{inter}{bias}" in keys
    assert all(fam.problem_for_key(k) == p for k, p in zip(keys, fam.default_problems()))


@pytest.mark.parametrize("shape, dtype, key", [
    ("64x32768x2048x1408", None, "H2048-F1408-E64-x2-T32768-swiglu-s32"),
    ("64x30000x2048x1408-geglu", "bf16", "H2048-F1408-E64-x2-T32768-geglu-s32"),
    ("8x16384x4096x3584-s0-bias", "fp16", "H4096-F3584-E8-x2-T16384-swiglu-s0-bias"),
    ("8x16384x4096x3584-geglu-s16", "fp8_block", "H4096-F3584-E8-x2-T16384-geglu-s16-fp8_block"),
])
def test_cli_shape_names_the_epilogue_key(shape, dtype, key):
    (problem,) = gtune.FAMILY.problems_from_cli(shape, dtype, None)
    assert gtune.FAMILY.key(problem) == key


@pytest.mark.parametrize("shape, pass_, match", [
    ("64x32768x2048", None, "EXPERTSxTOKENSxHxF"),
    ("64x32768x2048x1408-relu", None, "EXPERTSxTOKENSxHxF"),
    ("64x32768x2048x1408-s24", None, "power of two"),
    ("64x32768x2048x1408-s256", None, "power of two"),   # 1408 is not a multiple of 256
    ("0x32768x2048x1408", None, "zero size"),
    ("64x32768x2048x1408", "fwd", "--pass"),
])
def test_cli_shape_refuses_what_is_not_a_key(shape, pass_, match):
    with pytest.raises(ValueError, match=match):
        gtune.FAMILY.problems_from_cli(shape, "bf16", pass_)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU interpreter sweep (fake timer)")
def test_sweep_times_fused_candidates_against_the_compose_baseline(tuning_table, monkeypatch):
    """A whole sweep with the compose baseline: its outputs pass the sweep's NaN-poisoned check,
    its launches prove it engaged, and a fused candidate that wins is recorded."""
    cand = gtune.GemmConfig(32, 32, 32, 4, 2, 1)
    monkeypatch.setattr(gtune, "candidates_for", lambda problem: [cand])
    problem = gtune.GroupedProblem.of(40, 32, 16, 3, 2, "geglu", 8, True)
    result = tuning.sweep_key("grouped_glu_mlp", problem, timer=FakeTimer(cand.name), rounds=2, device="cpu")
    assert result.baseline.name == "baseline compose"
    assert result.winner == cand, [c.reason for c in result.candidates]


def test_the_sweep_compares_the_bias_gradients(device):
    """A key with biases: the sweep's run returns db1 and db2 and compare checks them (a wrong
    or unwritten bias gradient rejects the candidate); a key without biases has none. (On the
    device kernels run on: the interpreter's CPU, else the GPU.)"""
    problem = gtune.GroupedProblem.of(40, 32, 16, 3, 2, "swiglu", 8, True)
    i = gtune.FAMILY.make_inputs(problem, torch.device(device), 0)
    want = gtune.FAMILY.run(problem, gtune.FAMILY.baseline(problem), i)
    assert set(want) == set(gtune.OUTPUTS)
    assert gtune.FAMILY.compare(problem, i, dict(want), want) == []
    for bad in (want["db1"] * 0.5, torch.full_like(want["db2"], float("nan"))):
        name = "db1" if bad.isfinite().all() else "db2"
        assert [m.split(":")[0] for m in gtune.FAMILY.compare(problem, i, {**want, name: bad}, want)] == [name]
    plain = gtune.GroupedProblem.of(40, 32, 16, 3, 2, "swiglu", 8, False)
    i = gtune.FAMILY.make_inputs(plain, torch.device(device), 0)
    assert set(gtune.FAMILY.run(plain, gtune.FAMILY.baseline(plain), i)) == {"y", "dx", "dprobs", "dw1", "dw2"}


def test_ties_go_to_the_config_with_fewer_moving_parts():
    """Within the tie margin the tuner picks the simpler config: one stream over two, the
    Triton kernels over the warp-specialised ones, pointers over descriptors, whatever the
    candidates' order."""
    from tilefuse.tuning.sweep import TIMED, CandidateResult, choose_winner
    plain = gtune.GemmConfig(64, 64, 32, 4, 3, 2, side_stream=False)
    for other in (gtune.GemmConfig(64, 64, 32, 4, 3, 2), gtune.GemmConfig(64, 64, 32, 4, 3, 2, tma=True,
                                                                           side_stream=False),
                  gtune.GemmConfig(128, 128, 128, 8, 3, 2, ws=True, side_stream=False)):
        for order in ((plain, other), (other, plain)):
            timed = [CandidateResult(c.name, c, TIMED, speedup=1.10) for c in order]
            assert choose_winner(gtune.FAMILY, timed) == plain, other.name


# ---------------------------------------------------------------------------------------------
# Poisoned outputs, NaN inputs, determinism, layouts
def _launch_route(i, activation="swiglu", interleave=8, glue=compose.DEFAULT_GLUE):
    y, z, h, ends = compose.forward(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["b1"], i["b2"], activation,
                                    interleave, glue=glue)
    grads = compose.backward(i["dy"], i["x"], i["counts"], ends, i["probs"], i["w1"], i["w2"], i["b1"], i["b2"], z, h,
                             activation, interleave, glue=glue)
    return [y, z, h, *(g for g in grads if g is not None)]


def test_poisoned_outputs_are_all_written(device):
    """Every allocation inside the route starts as NaN: every output element is written (the
    results equal an unpoisoned run bitwise)."""
    i = inputs([7, 0, 13, 3], 32, 16, torch.bfloat16, True, device, seed=7)
    plain = _launch_route(i, glue=SMALL_GLUE)
    with poisoned_allocations():
        poisoned = _launch_route(i, glue=SMALL_GLUE)
    for a, b in zip(plain, poisoned):
        assert torch.isfinite(b).all() and torch.equal(a, b)


@pytest.mark.parametrize("activation", ["swiglu", "geglu"])
def test_nan_inputs_propagate_and_never_pass(tuning_table, device, activation):
    """A NaN in one row of x reaches that row of y and dx, its expert's weight gradients and
    dprobs, where level 0 (torch's ops) has NaN: the same NaN positions in every output; the
    tolerance check (normwise) rejects it. GeGLU too: its clamps kept a NaN gate as 7
    (tl.minimum), so the row's y, dprobs and dW2 came out finite (and torch.clamp's backward
    passes no gradient through a NaN, so its dx row is zeros there, at level 0 as here)."""
    i = inputs([5, 0, 9, 4], 32, 16, torch.float32, True, device, seed=8)
    want = reference(i, activation, 8)
    i["x"] = i["x"].clone()
    i["x"][6, 3] = float("nan")            # row 6: expert 2's second row
    got, _ = call_api(i, activation, 8)
    y, dx, dprobs, dw1, dw2 = got[:5]
    assert torch.isnan(y[6]).all() and torch.isfinite(y[:5]).all() and torch.isfinite(y[14:]).all()
    assert torch.isnan(dprobs[6]) and torch.isfinite(dprobs[:5]).all()
    assert torch.isnan(dw1[2]).any() and torch.isfinite(dw1[0]).all() and torch.isnan(dw2[2]).any()
    assert torch.isnan(dx[6]).any() == (activation == "swiglu")
    with tilefuse.level(0):
        plain, _ = call_api(i, activation, 8)
    for name, a, b in zip(("y", *GRAD_NAMES), got, plain):
        assert torch.equal(torch.isnan(a), torch.isnan(b)), name
    assert not rel(y, want[0]) < TOL[torch.float32]


def test_deterministic(device):
    i = inputs([13, 0, 21, 6], 32, 32, torch.bfloat16, True, device, seed=9)
    first, second = _launch_route(i, "geglu"), _launch_route(i, "geglu")
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_any_layout_gives_the_contiguous_result(tuning_table, device):
    """Transposed weights and x, a strided probs and counts, transposed biases and an expanded
    incoming gradient: bitwise the same call on contiguous copies (the route copies what
    torch._grouped_mm or its glue cannot read as laid out)."""
    i = inputs([5, 0, 11, 3], 32, 16, torch.float32, True, device, seed=10)

    def transposed(t):
        return t.transpose(-2, -1).contiguous().transpose(-2, -1)

    def strided(t):
        return torch.stack((t, torch.full_like(t, 9 if not t.is_floating_point() else float("nan"))), -1)[..., 0]

    viewed = {**i, "x": transposed(i["x"]), "w1": transposed(i["w1"]), "w2": strided(i["w2"]),
              "b1": transposed(i["b1"]), "b2": strided(i["b2"]), "probs": strided(i["probs"]),
              "counts": strided(i["counts"])}
    dy = i["dy"][:1].expand(i["dy"].shape)
    got, launched = call_api(viewed, "swiglu", 8, dy=dy)
    want, _ = call_api(i, "swiglu", 8, dy=dy.contiguous())
    assert launched["grouped_mlp_compose"] == 1
    for name, a, b in zip(("y", *GRAD_NAMES), got, want):
        assert torch.equal(a, b), name


# ---------------------------------------------------------------------------------------------
# Autograd: double backward, custom ops, torch.compile
def test_double_backward_differentiates_the_unfused_composition(tuning_table, device):
    i = inputs([4, 0, 6, 5], 16, 16, torch.float32, True, device, seed=11)
    r = torch.randn(i["x"].shape, generator=torch.Generator().manual_seed(0)).to(device)

    def second_order(level):
        leaves = {k: i[k].detach().requires_grad_(True) for k in FLOAT_NAMES}
        with tilefuse.level(level), launches.counting() as launched:
            y = grouped_glu_mlp(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"],
                                glu_interleave=4, fc1_bias=leaves["b1"], fc2_bias=leaves["b2"])
            dx, = torch.autograd.grad(y, leaves["x"], i["dy"], create_graph=True)
            return torch.autograd.grad((dx * r).sum(), [leaves["probs"], leaves["w1"]]), launched

    got, launched = second_order(2)
    assert launched["grouped_mlp_compose"] == 1 and not launched["grouped_mlp_compose_bwd"]
    want, _ = second_order(0)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_custom_ops_opcheck(device):
    from tilefuse.ops.grouped_glu_mlp.op import grouped_mlp_compose_bwd_op, grouped_mlp_compose_fwd_op
    i = inputs([7, 0, 12], 32, 16, torch.float32, True, device, seed=12)
    args = (i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["b1"], i["b2"], "geglu", 8)
    # the route's _grouped_mm GEMMs, and compose configs' tiles (fc1's GLU in its epilogue or not)
    for tile in ((0, 0, 0, 0, True), (256, 3, 256, 3, True), (256, 3, 256, 3, False)):
        torch.library.opcheck(grouped_mlp_compose_fwd_op, (*args, *tile), test_utils=("test_schema", "test_faketensor"))
    y, z, h, ends = grouped_mlp_compose_fwd_op(*args, 0, 0, 0, 0, True)
    # and with weight gradients not asked for (empty tensors for them, real and fake alike)
    for tile, need in (((0, 0, 0, 0), ()), ((256, 3, 0, 0), ()), ((128, 5, 128, 5), ()), ((0, 0, 0, 0), (False, True)),
                       ((256, 3, 0, 0), (True, False)), ((128, 5, 128, 5), (False, False))):
        torch.library.opcheck(grouped_mlp_compose_bwd_op, (i["dy"], i["x"], i["counts"], ends, i["probs"], i["w1"],
                                                           i["w2"], None, i["b2"], z, h, "geglu", 8, *tile, *need),
                              test_utils=("test_schema", "test_faketensor"))


def _compile_and_compare(i, device, interleave):
    """torch.compile(fullgraph=True) of the public call: the compose custom ops run, and y and
    every gradient equal the eager call's bitwise (the same launchers)."""
    counts = i["counts"]

    def f(x, p, w1, w2, b1, b2):
        return grouped_glu_mlp(x, counts, p, w1, w2, glu_interleave=interleave, fc1_bias=b1, fc2_bias=b2)

    compiled = torch.compile(f, fullgraph=True, backend="inductor" if device == "cuda" else "aot_eager")
    results = []
    with launches.counting() as launched:
        for fn in (compiled, f):
            leaves = [i[k].detach().requires_grad_(True) for k in FLOAT_NAMES]
            y = fn(*leaves)
            results.append((y, *torch.autograd.grad(y, leaves, i["dy"])))
    assert [launched[k] for k in COMPOSE_LAUNCHES] == [2, 2]
    for name, a, b in zip(("y", *GRAD_NAMES), *results):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=_dtype_id)
def test_compile_fullgraph_runs_the_compose_ops(dtype, tuning_table, device):
    torch.compiler.reset()
    _compile_and_compare(inputs([6, 0, 9, 2], 32, 16, dtype, True, device, seed=13), device, 8)


def _count_wgrads(monkeypatch) -> list:
    """The output shapes of the weight-gradient GEMMs ``torch._grouped_mm`` runs from here on:
    its 2-D x 2-D calls (dW_e = a_e^T b_e over the ragged token dimension; fc1, fc2 and the
    dgrads take a 3-D weight)."""
    ran, grouped_mm = [], torch._grouped_mm

    def counted(a, b, *args, **kwargs):
        out = grouped_mm(a, b, *args, **kwargs)
        if a.dim() == 2 and b.dim() == 2:
            ran.append(tuple(out.shape))
        return out
    monkeypatch.setattr(torch, "_grouped_mm", counted)
    return ran


@pytest.mark.parametrize("planned", [False, True], ids=["backward", "BackwardPlan"])
def test_a_wgrad_that_falls_back_still_forks_before_the_join(planned, device, monkeypatch):
    """A Gluon wgrad tile asked for, one weight gradient wanted, and its Gluon launch declines
    (ws_wgrad.applies fails, e.g. dW2 at H = 2880; on the CPU it always declines): it runs on
    the caller's stream, yet the side stream is joined, so it must have been forked first.
    Under CUDA-graph capture a join without a fork waits on a stream outside the capture and
    invalidates it; the BackwardPlan forks a wgrad only where its Gluon launch was prepared, so
    the region's own fork (streams.joined) must come first. Streams faked: each fork logs and
    runs its work, the join logs."""
    from tilefuse.ops.grouped_glu_mlp import streams, ws_rows, ws_wgrad
    monkeypatch.setattr(ws_wgrad, "prepare", lambda *a, **k: None)
    monkeypatch.setattr(ws_wgrad, "launch", lambda *a, **k: False)
    monkeypatch.setattr(ws_rows, "prepare", lambda *a, **k: None)
    i, saved, backward = _wgrad_tile_backward([6, 0, 9, 2], 19, device, planned)
    log, side = [], object()
    monkeypatch.setattr(streams, "side_stream", lambda t, priority=0: side)
    monkeypatch.setattr(streams, "on_side", lambda s, device, fn: (log.append("fork") if s is side else None, fn())[1])
    monkeypatch.setattr(streams, "join", lambda s, device: log.append("join") if s is side else None)
    got = backward(i["dy"], *saved, need_dw1=False, need_dw2=True)
    assert log and log[0] == "fork" and log[-1] == "join" and log.count("join") == 1, log
    assert got[2] is None and got[3] is not None and torch.isfinite(got[3].float()).all()


@pytest.mark.parametrize("mode", ["planned", "unplanned", "compiled"])
def test_frozen_weights_run_no_weight_gradient_work(mode, tuning_table, device, monkeypatch):
    """Expert weights that ask for no gradient (frozen experts: the router or adapters trained):
    the compose route's backward runs no weight-gradient GEMM for them, through the call plan's
    BackwardPlan, compose.backward and the compiled backward op alike; with one frozen only the
    other's runs. dx, dprobs and the bias gradients are the all-trainable call's bit for bit,
    and so is the trainable weight's. The calls share one shape, hence one plan: an
    all-trainable call after the frozen ones still gets both weight gradients."""
    from tilefuse.ops.grouped_glu_mlp import plan as plans
    plans.clear()
    monkeypatch.setattr(plans, "ENABLED", mode == "planned")
    i = inputs([6, 0, 9, 2], 32, 16, torch.bfloat16, True, device, seed=17)
    counts = i["counts"]

    def f(x, p, w1, w2, b1, b2):
        return grouped_glu_mlp(x, counts, p, w1, w2, glu_interleave=8, fc1_bias=b1, fc2_bias=b2)
    if mode == "compiled":
        torch.compiler.reset()
        f = torch.compile(f, fullgraph=True, backend="inductor" if device == "cuda" else "aot_eager")
    planned_runs = []
    run_plan = compose.BackwardPlan.run
    monkeypatch.setattr(compose.BackwardPlan, "run", lambda *a, **k: planned_runs.append(1) or run_plan(*a, **k))
    ran = _count_wgrads(monkeypatch)
    dw1_shape, dw2_shape = tuple(i["w1"].shape), tuple(i["w2"].shape)

    def step(frozen):
        ran.clear()
        leaves = {k: i[k].detach().requires_grad_(k not in frozen) for k in FLOAT_NAMES}
        trainable = [k for k in FLOAT_NAMES if k not in frozen]
        with launches.counting() as launched:
            y = f(*leaves.values())
            grads = torch.autograd.grad(y, [leaves[k] for k in trainable], i["dy"])
        assert [launched[k] for k in COMPOSE_LAUNCHES] == [1, 1]
        return dict(zip(trainable, grads)), sorted(ran)

    full, ran_full = step(())
    assert ran_full == sorted([dw1_shape, dw2_shape])
    for frozen, want_ran in ((("w1", "w2"), []), (("w1",), [dw2_shape]), (("w2",), [dw1_shape]),
                             ((), sorted([dw1_shape, dw2_shape]))):
        got, ran_now = step(frozen)
        assert ran_now == want_ran, frozen
        for name, g in got.items():
            assert torch.equal(g, full[name]), (frozen, name)
    assert len(planned_runs) == (5 if mode == "planned" else 0)


def _wgrad_tile_backward(counts, seed, device, planned):
    """(inputs, the backward's saved arguments after dy, the backward) of a compose forward with
    a Gluon wgrad tile (128, 3 stages; no rows tile): through its BackwardPlan or
    compose.backward."""
    i = inputs(counts, 32, 16, torch.bfloat16, True, device, seed=seed)
    t = compose.lay_out(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["b1"], i["b2"])
    x, counts_t, probs, w1, w2, b1, b2 = t
    tiles = (128, 3, 0, 0)
    if planned:
        fp = compose.ForwardPlan(*t, "swiglu", 8, *tiles[2:])
        _, z, h, ends = fp.run(*t)
        backward = fp.backward
    else:
        _, z, h, ends = compose.forward(*t, "swiglu", 8, laid_out=True)
        backward = compose.backward
    return i, (x, counts_t, ends, probs, w1, w2, b1, b2, z, h, "swiglu", 8, *tiles), backward


@pytest.mark.parametrize("counts", [[6, 0, 9, 2], [0, 0, 0]], ids=["T37", "T0"])
@pytest.mark.parametrize("planned", [False, True], ids=["backward", "BackwardPlan"])
def test_no_weight_gradient_no_second_stream(planned, counts, device, monkeypatch):
    """compose.backward and the BackwardPlan with a Gluon wgrad tile (the variant that runs the
    weight gradients on a second stream): a weight gradient not asked for is None, its GEMM
    does not run, and with neither asked for no second stream is taken; the other gradients
    are the all-asked call's bit for bit. At T == 0 (no GEMM, no stream) a weight gradient
    asked for is zeros, one not asked for None."""
    if planned and not sum(counts):
        pytest.skip("a plan needs T > 0 (compose.ForwardPlan.applies)")
    i, saved, backward = _wgrad_tile_backward(counts, 18, device, planned)
    w1, w2 = saved[4], saved[5]
    sides = []
    side_stream = compose.streams.side_stream
    monkeypatch.setattr(compose.streams, "side_stream", lambda *a: sides.append(1) or side_stream(*a))
    ran = _count_wgrads(monkeypatch)
    full = backward(i["dy"], *saved)
    for need_dw1, need_dw2 in ((True, True), (False, True), (True, False), (False, False)):
        sides.clear()
        ran.clear()
        got = backward(i["dy"], *saved, need_dw1=need_dw1, need_dw2=need_dw2)
        assert len(sides) == (1 if (need_dw1 or need_dw2) and sum(counts) else 0)   # T == 0: no GEMM, no stream
        if sum(counts):   # at T == 0 no GEMM runs
            assert sorted(ran) == sorted([tuple(w1.shape)] * need_dw1 + [tuple(w2.shape)] * need_dw2)
        for name, g, want, needed in zip(GRAD_NAMES, got, full, (True, True, need_dw1, need_dw2, True, True)):
            if not needed:
                assert g is None, name
            else:
                assert torch.equal(g, want), name
        if not sum(counts) and need_dw1:
            assert torch.count_nonzero(got[2]) == 0


# ---------------------------------------------------------------------------------------------
# GPU only: the CUTLASS path (bf16, sm90+) captured in a CUDA graph, and compiled by inductor
def _needs_cutlass():
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("torch._grouped_mm's CUTLASS kernel (no host synchronization) needs sm90+")


@pytest.mark.gpu
@pytest.mark.parametrize("interleave", [32, None])
def test_cuda_graph_capture_of_forward_and_backward(interleave, device):
    from gpu_helpers import assert_graph_replay_matches_eager
    _needs_cutlass()
    i = inputs([300, 0, 211, 17], 256, 192, torch.bfloat16, True, device, seed=14)

    def step():
        return _launch_route(i, interleave=interleave)
    assert_graph_replay_matches_eager(step)

    def autograd_step():   # the public API's autograd.Function inside the graph
        leaves = [i[k].detach().requires_grad_(True) for k in FLOAT_NAMES]
        y = grouped_glu_mlp(leaves[0], i["counts"], leaves[1], leaves[2], leaves[3], glu_interleave=interleave,
                            fc1_bias=leaves[4], fc2_bias=leaves[5])
        return (y, *torch.autograd.grad(y, leaves, i["dy"]))
    with tilefuse.level(1):
        assert_graph_replay_matches_eager(autograd_step)


@pytest.mark.gpu
def test_inductor_compile_of_the_cutlass_path(tuning_table, device):
    _needs_cutlass()
    torch.compiler.reset()
    i = inputs([300, 0, 211, 17], 256, 192, torch.bfloat16, True, device, seed=15)
    with tilefuse.level(1):
        _compile_and_compare(i, device, 32)


@pytest.mark.gpu
def test_cutlass_path_matches_reference_at_a_larger_shape(tuning_table, device):
    counts = [300, 0, 211, 17]
    i = inputs(counts, 256, 192, torch.bfloat16, True, device, seed=16)
    got, launched = call_api(i, "swiglu", 32)
    assert launched["grouped_mlp_compose"] == 1
    assert_matches_reference(got, reference(i, "swiglu", 32), i, torch.bfloat16, counts)


# ---------------------------------------------------------------------------------------------
# The glue kernels compiled for sm_90 (no GPU needed): vectorized, without spills
_SM90_GLUE = r'''
import json, re
from sm90_helpers import compile_sm90
from tilefuse.ops.grouped_glu_mlp import compose, compose_kernels as G

g = compose.DEFAULT_GLUE
out = {}
for inter in (32, 0):
    for bias in (False, True):
        sig = dict(z_ptr="*bf16", bias_ptr="*bf16", ends_ptr="*i32", probs_ptr="*fp32", h_ptr="*bf16", T="i32",
                   F="i32", E="i32", ldz="i32", ldh="i32", bias_e_stride="i32")
        ce = dict(ACT=0, INTERLEAVE=inter, HAS_BIAS=bias, BLOCK_M=g.glu_block_m, BLOCK_F=g.glu_block_f,
                  E_CHUNK=compose.E_CHUNK)
        built = [("glu", G.compose_glu_kernel, sig, ce, ["z_ptr", "h_ptr", "bias_ptr", "F", "ldz", "ldh",
                                                         "bias_e_stride"])]
        sig = dict(dh_ptr="*bf16", z_ptr="*bf16", b1_ptr="*bf16", ends_ptr="*i32", probs_ptr="*fp32",
                   dy_ptr="*bf16", b2_ptr="*bf16", dz_ptr="*bf16", dprobs_ptr="*fp32", T="i32", F="i32", H="i32",
                   E="i32", lddh="i32", ldz="i32", lddz="i32", ldy="i32", b1_e_stride="i32", b2_e_stride="i32")
        ce = dict(ACT=0, INTERLEAVE=inter, HAS_B1=bias, HAS_B2=bias, BLOCK_M=g.dglu_block_m, BLOCK_F=g.dglu_block_f,
                  BLOCK_H=g.dglu_block_f, E_CHUNK=compose.E_CHUNK)
        built.append(("dglu", G.compose_dglu_kernel, sig, ce, ["dh_ptr", "z_ptr", "dz_ptr", "dy_ptr", "b1_ptr",
                                                                "b2_ptr", "F", "H", "lddh", "ldz", "lddz", "ldy",
                                                                "b1_e_stride", "b2_e_stride"]))
        for name, fn, sig, ce, divisible in built:
            c, usage = compile_sm90(fn, sig, ce, divisible=divisible, num_warps=g.num_warps)
            ptx = c.asm["ptx"]
            out[f"{name}-s{inter}-{'bias' if bias else 'nobias'}"] = {
                "stack": usage["stack"], "v4_loads": len(re.findall(r"ld\.global(?:\.\w+)*\.v4", ptx)),
                "scalar_16bit_loads": len(re.findall(r"ld\.global(?:\.\w+)*\.b16", ptx))}
print(json.dumps(out))
'''


@pytest.mark.parametrize("ptxas", PTXAS)
def test_glue_kernels_compile_for_sm90_vectorized_without_spills(ptxas):
    """The default glue tiles compiled for sm_90 (bf16, 16-divisible sizes, as at the spec's
    shapes): the GLU column math (glu_cols, interleave 32 and halves) still lets every bf16 tile
    load be a 16-byte vector (no 2-byte loads), and nothing spills."""
    from sm90_helpers import nvidia_compiler_available, run_compile_script
    if not nvidia_compiler_available():
        pytest.skip("Triton's NVIDIA backend (ptxas) is not installed")
    report = run_compile_script(_SM90_GLUE, ptxas=ptxas)
    assert len(report) == 8
    for name, r in report.items():
        assert r["stack"] == 0 and r["v4_loads"] >= 3 and r["scalar_16bit_loads"] == 0, (name, r)
