"""grouped_glu_mlp fused kernels (interpreter on CPU, compiled on a GPU) against the float64
per-expert reference: splits with zero-token experts and ragged counts, H and F off the tile
sizes, both activations, both interleaves, biases on/off, fp32, bf16 and fp16, every gradient;
determinism; dispatch (fused only with a table entry at level >= 2); the tuning family.

Tolerances (normwise relative to float64): fp32 operands use IEEE dots with K <= max(H, 2F, T)
terms, ~sqrt(K) eps32 each, through two chained GEMMs: 1e-5. bf16: z, h, y (and dz, dx) are
rounded to bf16 (u = 2**-8 relative), about three roundings on the longest path, each ~u/sqrt(3)
normwise for random data: 3u = 1.2e-2, rounded up to 1.6e-2 (measured 3-4e-3). fp16 the same
with u = 2**-11: 3u = 1.5e-3, rounded up to 2e-3 (tests/test_grouped_compose.py's bound).
"""

import dataclasses

import pytest
import torch
from sm90_helpers import PTXAS, nvidia_compiler_available, run_compile_script
from tuning_helpers import FakeTimer

import tilefuse
from tilefuse import launches, tuning
from tilefuse.ops.grouped_glu_mlp import kernels, launch
from tilefuse.ops.grouped_glu_mlp import tune as gtune
from tilefuse.ops.grouped_glu_mlp.api import grouped_glu_mlp, problem_for
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig
from tilefuse.ops.grouped_glu_mlp.reference import (glu_activation, glu_index, grouped_glu_mlp_reference,
                                                    random_inputs, split_glu)
from tilefuse.tuning.sweep import TIMED
from tilefuse.utils import normwise_rel_error as rel

TOL = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2, torch.float16: 2e-3}
SMALL = GemmConfig(32, 32, 32, 4, 2, 2)   # small tiles: several row and column tiles per expert


def make(counts, H, F, dtype, bias, device, seed=0):
    """(x, counts, probs, w1, w2, b1, b2), the floating ones requiring grad."""
    i = random_inputs(counts, H, F, dtype, bias=bias, device=device, generator=torch.Generator().manual_seed(seed))
    leaf = lambda t: None if t is None else t.requires_grad_(True)   # noqa: E731
    return (leaf(i["x"]), i["counts"], leaf(i["probs"]), leaf(i["w1"]), leaf(i["w2"]), leaf(i["b1"]),
            leaf(i["b2"]))


CASES = [
    ([5, 0, 37, 3], 48, 40, "swiglu", 8, True, torch.float32),
    ([17, 9, 0], 32, 64, "geglu", None, False, torch.float32),
    ([0, 33, 31, 1], 64, 96, "swiglu", 32, False, torch.bfloat16),
    ([70, 0], 24, 32, "geglu", 32, True, torch.bfloat16),
    ([9, 0, 40, 2], 32, 48, "swiglu", 8, True, torch.float16),
]


@pytest.mark.parametrize("counts,H,F,activation,interleave,bias,dtype", CASES,
                         ids=[f"E{len(c[0])}-T{sum(c[0])}-H{c[1]}-F{c[2]}-{c[3]}-s{c[4]}-{'bias' if c[5] else 'nobias'}"
                              f"-{str(c[6])[6:]}" for c in CASES])
def test_fused_matches_reference(counts, H, F, activation, interleave, bias, dtype, device):
    x, c, p, w1, w2, b1, b2 = make(counts, H, F, dtype, bias, device)
    with launches.counting() as launched:
        y, z, h = launch.forward(x, c, p, w1, w2, b1, b2, activation, interleave, config=SMALL)
        dy = torch.randn_like(y)
        grads = launch.backward(dy, x, c, p, w1, w2, b1, b2, z, h, activation, interleave, config=SMALL)
    assert launched["grouped_mlp_fwd"] == 1 and launched["grouped_mlp_bwd"] == 1
    leaves = [t.detach().double().requires_grad_(True) for t in (x, p, w1, w2, b1, b2) if t is not None]
    lb1, lb2 = (leaves[4], leaves[5]) if bias else (None, None)
    y_ref = grouped_glu_mlp_reference(leaves[0], c, leaves[1], leaves[2], leaves[3], activation=activation,
                                      glu_interleave=interleave, fc1_bias=lb1, fc2_bias=lb2,
                                      compute_dtype=torch.float64)
    ref_grads = torch.autograd.grad(y_ref, leaves, dy.double())
    assert rel(y, y_ref) < TOL[dtype]
    got = [g for g in grads if g is not None]
    for name, a, r, want_dtype in zip(["dx", "dprobs", "dw1", "dw2", "db1", "db2"], got, ref_grads,
                                      [t.dtype for t in (x, p, w1, w2, b1, b2) if t is not None]):
        assert a.dtype == want_dtype, name
        assert rel(a, r) < TOL[dtype], f"{name}: {rel(a, r):.2e}"
    # experts with zero tokens get exactly zero weight gradients
    for e, n in enumerate(counts):
        if n == 0:
            assert torch.count_nonzero(grads[2][e]) == 0 and torch.count_nonzero(grads[3][e]) == 0


# GeGLU's clamp edges (L = 7) as bfloat16 values: each edge, its neighbours one bfloat16 ulp
# away (2**-5 between 4 and 8) and points inside and past them.
GEGLU_GATES = [-20.0, -7.5, -7.0, -1.0, 0.0, 0.5, 3.0, 6.96875, 7.0, 7.03125, 7.5, 20.0]
GEGLU_UPS = [-20.0, -7.03125, -7.0, -6.96875, -3.0, 0.0, 5.0, 7.0, 7.03125, 20.0]


@pytest.mark.parametrize("route", ["fused", "compose"])
@pytest.mark.parametrize("interleave", [32, 8, None], ids=["s32", "s8", "halves"])
def test_geglu_clamp_edges_through_the_kernels(route, interleave, device):
    """Every (gate, up) pair of GEGLU_GATES x GEGLU_UPS reaches the kernels' GLU and dGLU as an
    exact pre-activation: x's token t is one-hot at column t, so z[t] = W1[e, :, t] (no
    rounding), and dW1[e, :, t] = dz[t] exactly as the kernel stored it. The gradient at the
    edges decides between the clamp's two sides (the gate's passes at zg = 7, the up's at
    |zu| = 7): dz must match the float64 reference elementwise, each element within bfloat16's
    two roundings, on the fused kernels and the compose route's glue, in each layout. Random
    inputs never land on an edge: a gate cut at zg < 7 instead of zg <= 7 passed every other
    test."""
    bf = torch.bfloat16
    H, F, counts = 16, 32, torch.tensor([2, 2], device=device)
    pairs = torch.cartesian_prod(torch.tensor(GEGLU_GATES), torch.tensor(GEGLU_UPS))   # (120, 2)
    T = -(-len(pairs) // F)
    grid = torch.zeros(T * F, 2)
    grid[:len(pairs)] = pairs
    gate_idx, up_idx = glu_index(F, interleave)
    w1 = torch.zeros(2, 2 * F, H)
    for t in range(T):
        w1[:, gate_idx, t] = grid[t * F:(t + 1) * F, 0]
        w1[:, up_idx, t] = grid[t * F:(t + 1) * F, 1]
    gen = torch.Generator().manual_seed(3)
    x = torch.eye(T, H)
    w2 = torch.randn(2, H, F, generator=gen) * 0.25
    probs, dy = torch.rand(T, generator=gen) + 0.5, torch.randn(T, H, generator=gen)
    x, probs, w1, w2, dy = (t.to(device=device, dtype=bf) for t in (x, probs, w1, w2, dy))
    leaves = [t.clone().requires_grad_(True) for t in (x, probs, w1, w2)]
    with launches.counting() as launched:
        if route == "fused":
            y, z, h = launch.forward(x, counts, probs, w1, w2, None, None, "geglu", interleave, config=SMALL)
            grads = launch.backward(dy, x, counts, probs, w1, w2, None, None, z, h, "geglu", interleave,
                                    config=SMALL)
            dw1 = grads[2]
        else:
            with tilefuse.level(1):
                y = grouped_glu_mlp(leaves[0], counts, leaves[1], leaves[2], leaves[3], activation="geglu",
                                    glu_interleave=interleave)
                y.backward(dy)
            dw1 = leaves[2].grad
    assert launched["grouped_mlp_bwd" if route == "fused" else "grouped_mlp_compose_bwd"] == 1
    ref = [t.detach().double().requires_grad_(True) for t in (x, probs, w1, w2)]
    y_ref = grouped_glu_mlp_reference(ref[0], counts, ref[1], ref[2], ref[3], activation="geglu",
                                      glu_interleave=interleave, compute_dtype=torch.float64)
    y_ref.backward(dy.double())
    assert rel(y, y_ref) < TOL[bf]
    got, want = dw1.double()[:, :, :T], ref[2].grad[:, :, :T]   # dz per (expert, FC1 row, token)
    assert torch.count_nonzero(dw1[:, :, T:]) == 0
    bound = 2 ** -7 * want.abs() + 1e-6 * want.abs().max()
    bad = (got - want).abs() > bound
    assert not bad.any(), [(e, r, t, float(got[e, r, t]), float(want[e, r, t])) for e, r, t in bad.nonzero()[:5]]


# TMA (GemmConfig.tma) on 16-bit operands, with the B modes each role takes at SMALL's 32-wide
# tiles (launch.tma_plan): interleave 8 and 16 read gate and up runs, 32 and halves contiguous
# weight rows; the dgrads read the weight's columns where K is a multiple of BLOCK_K and fall
# back to pointers elsewhere (H 48, 2F 80).
def record_plans(monkeypatch, name, keep):
    """Wrap launch.<name>, a TMA plan function, and return the list of keep(plan) of its calls."""
    calls, real = [], getattr(launch, name)

    def wrapper(*args, **kwargs):
        found = real(*args, **kwargs)
        calls.append(keep(found))
        return found

    monkeypatch.setattr(launch, name, wrapper)
    return calls


# The dGLU epilogue then reads z through a descriptor too: contiguous columns (halves) or runs.
ROWS, COLS, RUNS = kernels.TMA_B_ROWS, kernels.TMA_B_COLS, kernels.TMA_B_RUNS
TMA_CASES = [
    ([5, 0, 37, 3], 48, 40, "swiglu", 8, True, [RUNS, ROWS, None, None], []),
    ([17, 9, 0], 32, 64, "geglu", None, False, [ROWS, ROWS, COLS, COLS], [kernels.Z_CONTIGUOUS]),
    ([0, 33, 31, 1], 64, 96, "swiglu", 16, False, [RUNS, ROWS, COLS, COLS], [kernels.Z_RUNS]),
    ([70, 0], 24, 32, "geglu", 32, True, [ROWS, ROWS, None, COLS], []),
    # runs narrower than 16 bytes (interleave 4 and 1 of bf16 z): the dGLU reads z through pointers
    ([9, 0, 23], 32, 32, "swiglu", 4, False, [RUNS, ROWS, COLS, COLS], [kernels.Z_POINTERS]),
    ([6, 11], 32, 16, "geglu", 1, True, [RUNS, ROWS, COLS, COLS], [kernels.Z_POINTERS]),
]


@pytest.mark.parametrize("counts,H,F,activation,interleave,bias,modes,z_modes", TMA_CASES,
                         ids=[f"E{len(c[0])}-H{c[1]}-F{c[2]}-s{c[4]}" for c in TMA_CASES])
def test_tma_reads_match_pointer_reads(counts, H, F, activation, interleave, bias, modes, z_modes, device,
                                       monkeypatch):
    """Descriptors read the same tiles as the pointers (zero-filled where the pointers mask):
    every role engages the planned B mode (fc1 + GLU, fc2, fc2 dgrad + dGLU, fc1 dgrad), the
    dGLU its planned z mode, both weight gradients their descriptors, and the results are
    bitwise the pointer path's, but for dprobs: the dGLU's per-row sums of dh * act(z) over
    a tile's columns take the order of the layout z was loaded in, which differs between a
    descriptor and pointers (H200, triton 3.6: the last bits of dprobs, every other output
    equal). Both sum the same float32 terms, so they differ by at most two summation errors,
    2 n eps32 sum_j |dh_tj act_tj| with n <= 2F terms (dprob_reorder_bound)."""
    x, c, p, w1, w2, b1, b2 = make(counts, H, F, torch.bfloat16, bias, device, seed=5)
    dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(6)).to(x)
    planned = record_plans(monkeypatch, "tma_plan", lambda found: None if found is None else found[2])
    wgrads = record_plans(monkeypatch, "wgrad_tma_plan", lambda found: found is not None)
    z_planned = record_plans(monkeypatch, "dglu_z_plan", lambda found: found[1])
    runs = [fused_outputs(x, c, p, w1, w2, b1, b2, dy, activation, interleave, cfg)
            for cfg in (SMALL, dataclasses.replace(SMALL, tma=True))]
    assert planned == [None] * 4 + modes and wgrads == [False, False, True, True] and z_planned == z_modes
    assert_bitwise_but_dprobs(runs, dprob_reorder_bound(dy, runs[0][1], w2, counts, activation, interleave))


# fp8_block reads its float8 data through descriptors too (its scales through pointers): SMALL's
# tile, and one whose dGLU halves write dz's fp8 copy in the epilogue (launch.dglu_quantizes_dz).
FP8_TMA = [GemmConfig(32, 32, 128, 4, 2, 2), GemmConfig(32, 64, 128, 4, 2, 2)]


@pytest.mark.parametrize("interleave", [32, 16])
@pytest.mark.parametrize("base", FP8_TMA, ids=["tile32", "tile64-dz-copy"])
def test_fp8_tma_reads_match_pointer_reads(base, interleave, device, monkeypatch):
    """fp8_block with GemmConfig.tma: every GEMM launch but the fc1 + GLU (launch.tma_plan says
    why) and both weight gradients read through descriptors (the dGLU does without it too), and
    the results are bitwise the pointer path's but dprobs (bounded as in the 16-bit test, with
    the dequantized dy and W2 dgrad copy the dGLU multiplies)."""
    from tilefuse.ops.grouped_glu_mlp import recipes
    counts, H, F = [45, 0, 83, 1], 128, 128
    i = random_inputs(counts, H, F, torch.bfloat16, bias=True, device=device,
                      generator=torch.Generator().manual_seed(7))
    planned = record_plans(monkeypatch, "tma_plan", lambda found: found is not None)
    wgrads = record_plans(monkeypatch, "wgrad_tma_plan", lambda found: found is not None)
    inputs = [i[k] for k in ("x", "counts", "probs", "w1", "w2", "b1", "b2", "dy")]
    runs = [fused_outputs(*inputs, "swiglu", interleave, cfg, "fp8_block")
            for cfg in (base, dataclasses.replace(base, tma=True))]
    # not the GLU; the dGLU reads through descriptors in both runs (configs.dglu_config)
    assert planned == [False, False, True, False] + [False, True, True, True] and wgrads == [False] * 2 + [True] * 2
    dy_q = recipes.dequant_rows("fp8_block", i["dy"])
    w2_q = recipes.dequant_weight("fp8_block", i["w2"], transpose=True)
    assert_bitwise_but_dprobs(runs, dprob_reorder_bound(dy_q, runs[0][1], w2_q, counts, "swiglu", interleave))


def fused_outputs(x, counts, probs, w1, w2, b1, b2, dy, activation, interleave, cfg, recipe=None):
    """(y, z, h, dx, dprobs, dw1, dw2[, db1, db2]) of launch.forward + backward with ``cfg`` for
    every GEMM and both weight gradients."""
    y, z, h = launch.forward(x, counts, probs, w1, w2, b1, b2, activation, interleave, config=cfg, recipe=recipe)
    grads = launch.backward(dy, x, counts, probs, w1, w2, b1, b2, z, h, activation, interleave, config=cfg,
                            wgrad_config=cfg, recipe=recipe)
    return (y, z, h, *(g for g in grads if g is not None))


def assert_bitwise_but_dprobs(runs, dprobs_bound):
    """The two runs' outputs (fused_outputs) bitwise equal, but dprobs: within dprobs_bound."""
    for name, a, b in zip(["y", "z", "h", "dx", "dprobs", "dw1", "dw2", "db1", "db2"], *runs):
        if name == "dprobs":
            assert torch.all((a - b).abs() <= dprobs_bound), (a - b).abs().max()
        else:
            assert torch.equal(a, b), name


@torch.no_grad()
def dprob_reorder_bound(dy, z, w2, counts, activation, interleave):
    """Per row, 4 F eps32 sum_j |dh_tj act(z_t)_j| (float64; dh = dy W2_e, act from the saved z):
    twice the error bound of a float32 sum of at most 2F of those terms in any order."""
    gate, up = split_glu(z.double(), interleave)
    act = glu_activation(gate, up, activation).flatten(-2) if interleave else glu_activation(gate, up, activation)
    dh = torch.cat([dy[s:s + m].double() @ w2[e].double()
                    for e, (s, m) in enumerate(zip(torch.tensor([0] + counts[:-1]).cumsum(0).tolist(), counts))])
    ffn = w2.shape[2]
    return (4 * ffn * torch.finfo(torch.float32).eps * (dh * act).abs().sum(1)).to(dy.device).float()


def test_fused_is_deterministic(device):
    x, c, p, w1, w2, b1, b2 = make([13, 0, 29], 32, 48, torch.bfloat16, True, device, seed=3)
    runs = []
    for _ in range(2):
        y, z, h = launch.forward(x, c, p, w1, w2, b1, b2, "swiglu", 16, config=SMALL)
        runs.append((y, *launch.backward(torch.ones_like(y), x, c, p, w1, w2, b1, b2, z, h, "swiglu", 16,
                                         config=SMALL)))
    for a, b in zip(*runs):
        assert torch.equal(a, b)


@pytest.mark.parametrize("counts,dtype", [((5, 0, 4), torch.int32), ((2 ** 31 - 1, 2 ** 31 - 1, 13), torch.int32),
                                          ((2 ** 63 - 1, 2 ** 63 - 1, 13), torch.int64)],
                         ids=["sum-short", "int32-sum-wrap", "int64-sum-wrap"])
def test_split_not_summing_to_T_is_caught(device, counts, dtype):
    """Counts off T are caught, also counts that reach T = 11 only by an int32 or int64 wrap."""
    x, c, p, w1, w2, b1, b2 = make([5, 0, 6], 32, 32, torch.float32, False, device)
    bad = torch.tensor(counts, dtype=dtype, device=device)
    if device == "cpu":
        with pytest.raises(RuntimeError, match="sum to T"):
            launch.forward(x, bad, p, w1, w2, b1, b2, "swiglu", 16, config=SMALL)


def test_public_api_runs_fused_only_with_a_table_entry(tuning_table, device):
    counts, H, F = [9, 0, 14], 32, 32
    x, c, p, w1, w2, b1, b2 = make(counts, H, F, torch.float32, False, device)

    def call():
        with launches.counting() as launched:
            y = grouped_glu_mlp(x, c, p, w1, w2, glu_interleave=16)
            torch.autograd.grad(y, (x, p, w1, w2), torch.ones_like(y))
        return launched

    with tilefuse.level(2):
        assert call()["grouped_mlp_fwd"] == 0           # never swept: the baseline route
        tuning.register("grouped_glu_mlp", {problem_for(x, w2, "swiglu", 16, False): gtune.candidates_for(
            problem_for(x, w2, "swiglu", 16, False))[0]})
        launched = call()
        assert launched["grouped_mlp_fwd"] == 1 and launched["grouped_mlp_bwd"] == 1
    with tilefuse.level(1):
        assert call()["grouped_mlp_fwd"] == 0


def test_weights_strided_across_experts_are_copied_where_32_bit_offsets_would_wrap(monkeypatch, device):
    """grouped_gemm_kernel offsets inside one expert's weight in 32 bits: a weight whose rows lie
    E * H apart (a permuted (2F, E, H) tensor; at DeepSeek-V3's E = 256, H = 7168, F = 2048 its
    last row of an expert is 7.5e9 elements past the first) runs through a contiguous copy,
    and a weight whose single expert holds 2**31 elements is refused by name. Here the limit
    is lowered to 2048 so that small tensors cross it: each expert's 2F x H = 1024 fits, the
    permuted layout's offsets (up to 3007) do not."""
    counts, H, F = [5, 0, 9], 32, 16
    x, c, p, w1, w2, b1, b2 = make(counts, H, F, torch.float32, False, device)
    w1p = w1.detach().permute(1, 0, 2).contiguous().permute(1, 0, 2).requires_grad_(True)
    assert torch.equal(w1p, w1) and w1p.stride() == (H, len(counts) * H, 1)
    monkeypatch.setattr(launch, "INT32_OFFSETS", 2048)
    strides = []
    real = launch._gemm

    def spy(epilogue, a, b, *args, **kwargs):
        strides.append((b.shape, kwargs["b_strides"]))
        return real(epilogue, a, b, *args, **kwargs)

    monkeypatch.setattr(launch, "_gemm", spy)
    y, z, h = launch.forward(x, c, p, w1p, w2, None, None, "swiglu", 8, config=SMALL)
    dy = torch.randn_like(y)
    grads = launch.backward(dy, x, c, p, w1p, w2, None, None, z, h, "swiglu", 8, config=SMALL)
    fc1_strides = [st for shape, st in strides if shape == w1.shape]
    assert len(fc1_strides) == 2 and all(st[0] == 2 * F * H for st in fc1_strides), strides   # the copy's
    leaves = [t.detach().double().requires_grad_(True) for t in (x, p, w1, w2)]
    y_ref = grouped_glu_mlp_reference(*leaves[:1], c, *leaves[1:], glu_interleave=8, compute_dtype=torch.float64)
    assert rel(y, y_ref) < TOL[torch.float32]
    for name, got, want in zip(["dx", "dprobs", "dw1", "dw2"], grads, torch.autograd.grad(y_ref, leaves, dy.double())):
        assert rel(got, want) < TOL[torch.float32], name
    monkeypatch.setattr(launch, "INT32_OFFSETS", 1024)
    with pytest.raises(ValueError, match="fc1_weight has 1024 elements an expert"):
        launch.forward(x, c, p, w1, w2, None, None, "swiglu", 8, config=SMALL)
    with pytest.raises(ValueError, match="fc1_weight has 1024 elements an expert"):   # a recipe's too
        launch.forward(x.detach().bfloat16(), c, p, w1.detach().bfloat16(), w2.detach().bfloat16(), None, None,
                       "swiglu", 8, recipe="mxfp8")


@pytest.mark.parametrize("H,F,dtype", [(36, 20, torch.bfloat16), (30, 12, torch.float32), (40, 4, torch.float16)],
                         ids=["bf16-H36-F20", "fp32-H30-F12", "fp16-F4"])
def test_rows_off_16_bytes_run_the_fused_kernels_without_reading_the_counts(H, F, dtype, device, monkeypatch):
    """Where torch._grouped_mm does not take the rows (not a multiple of 16 bytes), a key never
    swept runs the fused kernels at their heuristic tiles (op.route), not the unfused
    composition's per-expert loop, which reads tokens_per_expert on the host: nothing here
    may read the counts, and the result matches the float64 reference."""
    from tilefuse.ops.grouped_glu_mlp import reference

    def no_host_read(*args, **kwargs):
        raise AssertionError("tokens_per_expert read on the host")

    monkeypatch.setattr(reference, "expert_rows", no_host_read)
    counts = [7, 0, 12, 3]
    x, c, p, w1, w2, b1, b2 = make(counts, H, F, dtype, True, device, seed=4)
    with tilefuse.level(2), launches.counting() as launched:
        y = grouped_glu_mlp(x, c, p, w1, w2, glu_interleave=4, fc1_bias=b1, fc2_bias=b2)
        dy = torch.randn_like(y)
        grads = torch.autograd.grad(y, (x, p, w1, w2, b1, b2), dy)
    assert launched["grouped_mlp_fwd"] == 1 and launched["grouped_mlp_bwd"] == 1, dict(launched)
    assert launched["grouped_mlp_unfused"] == 0 and launched["grouped_mlp_compose"] == 0
    monkeypatch.undo()   # the reference reads the counts
    leaves = [t.detach().double().requires_grad_(True) for t in (x, p, w1, w2, b1, b2)]
    y_ref = grouped_glu_mlp_reference(leaves[0], c, *leaves[1:4], activation="swiglu", glu_interleave=4,
                                      fc1_bias=leaves[4], fc2_bias=leaves[5], compute_dtype=torch.float64)
    tol = TOL[dtype]
    assert rel(y, y_ref) < tol
    for name, got, want in zip(["dx", "dprobs", "dw1", "dw2", "db1", "db2"], grads,
                               torch.autograd.grad(y_ref, leaves, dy.double())):
        assert rel(got, want) < tol, f"{name}: {rel(got, want):.2e}"


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU interpreter sweep (fake timer)")
def test_tuning_sweep_checks_and_records_a_fused_winner(tuning_table, monkeypatch):
    two = [GemmConfig(32, 32, 32, 4, 2, 1), GemmConfig(32, 64, 32, 4, 2, 2)]
    monkeypatch.setattr(gtune, "candidates_for", lambda problem: list(two))
    problem = gtune.GroupedProblem.of(64, 32, 32, 4, 4, "swiglu", 16, False)
    result = tuning.sweep_key("grouped_glu_mlp", problem, timer=FakeTimer(two[1].name), rounds=2, device="cpu")
    assert len(result.with_status(TIMED)) == 2, [c.reason for c in result.candidates]
    assert result.winner == two[1]
    assert tuning.lookup_config("grouped_glu_mlp", problem) == two[1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU interpreter sweep (fake timer)")
def test_a_one_expert_key_sweeps_and_input_errors_are_the_sweep_s(tuning_table, monkeypatch):
    """A key of one expert (the op takes E = 1) sweeps: its check inputs gave that expert a
    multinomial weight of 0 (the zero-token expert every other key gets) and raised, reported
    as the first candidate's error. An error making the inputs aborts the sweep as its own."""
    two = [GemmConfig(32, 32, 32, 4, 2, 1), GemmConfig(32, 64, 32, 4, 2, 2)]
    monkeypatch.setattr(gtune, "candidates_for", lambda problem: list(two))
    problem = gtune.GroupedProblem.of(64, 32, 32, 1, 4, "swiglu", 16, False)
    result = tuning.sweep_key("grouped_glu_mlp", problem, timer=FakeTimer(two[1].name), rounds=2, device="cpu",
                              record=False)
    assert len(result.with_status(TIMED)) == 2 and result.winner == two[1], [c.reason for c in result.candidates]

    def broken(self, p, device, seed):
        raise RuntimeError("no inputs today")
    monkeypatch.setattr(gtune.GroupedFamily, "make_inputs", broken)
    with pytest.raises(tuning.SweepError, match=r"making the check inputs raised RuntimeError: no inputs today"):
        tuning.sweep_key("grouped_glu_mlp", problem, timer=FakeTimer(two[1].name), rounds=2, device="cpu",
                         record=False)


def test_opcheck_and_compile_fullgraph(tuning_table, device):
    from tilefuse.ops.grouped_glu_mlp.op import grouped_mlp_fwd_op
    x, c, p, w1, w2, b1, b2 = make([7, 0, 12], 32, 32, torch.float32, True, device)
    cfg = SMALL
    torch.library.opcheck(grouped_mlp_fwd_op, (x.detach(), c, p.detach(), w1.detach(), w2.detach(), b1.detach(),
                                               b2.detach(), "swiglu", 16, cfg.block_m, cfg.block_n, cfg.block_k,
                                               cfg.num_warps, cfg.num_stages, cfg.programs_per_sm),
                          test_utils=("test_schema", "test_faketensor"))
    problem = problem_for(x, w2, "swiglu", 16, True)
    tuning.register("grouped_glu_mlp", {problem: gtune.candidates_for(problem)[0]})

    def f(x, p, w1, w2, b1, b2):
        return grouped_glu_mlp(x, c, p, w1, w2, glu_interleave=16, fc1_bias=b1, fc2_bias=b2).square().sum()

    compiled = torch.compile(f, fullgraph=True, backend="inductor" if device == "cuda" else "aot_eager")
    with tilefuse.level(2), launches.counting() as launched:
        grads = torch.autograd.grad(compiled(x, p, w1, w2, b1, b2), (x, p, w1, w2))
    assert launched["grouped_mlp_fwd"] == 1 and launched["grouped_mlp_bwd"] == 1
    with tilefuse.level(2):
        eager = torch.autograd.grad(f(x, p, w1, w2, b1, b2), (x, p, w1, w2))
    for g, e in zip(grads, eager):   # the same kernels on the same dy (2y, exact either way)
        torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-6)


# The heuristic tilings compiled for sm_90 in a subprocess without the interpreter: TTGIR after
# inlining, the K loop's async copies (the software pipeline), and the spill stack.
_SM90_COMPILE = r'''
import json, re
from sm90_helpers import compile_sm90
from tilefuse.ops.grouped_glu_mlp import configs, kernels as G

def build(fn, sig, constexprs, divisible, cfg):
    c, usage = compile_sm90(fn, sig, constexprs, divisible=divisible, num_warps=cfg.num_warps,
                            num_stages=cfg.num_stages,
                            maxnreg=cfg.maxnreg if constexprs["TMA"] else None)   # as launch.py
    ir = c.asm["ttgir"]
    return {"calls": len(re.findall(r"tt\.call", ir)), "async": len(re.findall("async_copy_global_to_local", ir)),
            "tma": len(re.findall("async_tma_copy_global_to_local", ir)), "stack": usage["stack"],
            "regs": usage["regs"], "maxnreg": cfg.maxnreg}

out = {}
for recipe in (1, 0):
    recipe_name = "fp8_block" if recipe else None
    fwd = configs.heuristic("fwd", 2, recipe_name)
    op = "*u8" if recipe else "*bf16"
    gemm = {n: "i32" for n in ("T", "K", "N", "E", "F", "n_row_tiles_bound", "lda", "b_e_stride", "b_n_stride", "ldc",
                               "ldz", "bias_e_stride", "n_part_cols", "a_scale_ld", "b_scale_e_stride",
                               "b_scale_k_stride", "b_scale_n_stride", "b_scale_rows", "b_scale_cols", "b_rows")}
    gemm.update(a_ptr=op, b_ptr=op, c_ptr="*bf16", counts_ptr="*i32", probs_ptr="*fp32", bias_ptr="*bf16",
                z_ptr="*bf16", part_ptr="*fp32", q_ptr="*u8", q_scale_ptr="*fp32", a_scale_ptr="*fp32",
                b_scale_ptr="*fp32", gscale_ptr="*fp32")
    for name, epi, cfg in (("glu", 1, configs.glu_config(fwd, recipe_name)), ("store", 0, fwd),
                           ("dglu", 2, configs.dglu_config(fwd, recipe_name))):
        ce = dict(b_k_stride=1, EPILOGUE=epi, ACT=0, INTERLEAVE=32, HAS_BIAS=False, IEEE=False, RECIPE=recipe,
                  GLU_UNIFORM_SCALE=bool(recipe), QUANT_DZ=bool(recipe) and epi == 2, TMA=False, B_MODE=0,
                  Z_MODE=0, a_desc=None, b_desc=None, z_desc=None, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k)
        out[f"{'fp8' if recipe else 'bf16'}-{name}"] = build(
            G.grouped_gemm_kernel, gemm, ce, ["a_ptr", "b_ptr", "c_ptr", "z_ptr", "q_ptr", "K", "N", "F", "lda",
                                              "b_e_stride", "b_n_stride", "ldc", "ldz"], cfg)
    wcfg = configs.heuristic("wgrad", 2, recipe_name)
    wg = {n: "i32" for n in ("T", "N", "M", "lda", "ldb", "a_scale_ld", "b_scale_ld")}
    wg.update(a_ptr=op, b_ptr=op, c_ptr="*bf16", counts_ptr="*i32", a_scale_ptr="*fp32", b_scale_ptr="*fp32",
              gscale_ptr="*fp32")
    out[f"{'fp8' if recipe else 'bf16'}-wgrad"] = build(
        G.grouped_wgrad_kernel, wg, dict(IEEE=False, RECIPE=recipe, TMA=False, a_desc=None, b_desc=None,
                                         BLOCK_N=wcfg.block_n, BLOCK_M=wcfg.block_m, BLOCK_K=wcfg.block_k, GROUP_N=8),
        ["a_ptr", "b_ptr", "c_ptr", "N", "M", "lda", "ldb"], wcfg)
# bf16 through TMA (GemmConfig.tma), each B mode of launch.tma_plan, and the wgrad.
def desc(*block):
    return "tensordesc<bf16[" + ", ".join(str(b) for b in block) + "]>"

cfg = configs.dataclasses.replace(configs.heuristic("fwd", 2), tma=True)
for name, epi, mode, inter in (("glu-runs", 1, 2, 32), ("glu-rows", 1, 0, 128), ("store-rows", 0, 0, 32),
                               ("store-cols", 0, 1, 32), ("dglu", 2, 1, 32)):
    c = configs.dglu_config(cfg) if epi == 2 else cfg
    b_block = {0: (c.block_n, c.block_k), 1: (c.block_k, c.block_n), 2: (c.block_n // inter, 1, inter, c.block_k)}
    ce = dict(b_k_stride=1, EPILOGUE=epi, ACT=0, INTERLEAVE=inter, HAS_BIAS=False, IEEE=False, RECIPE=0,
              GLU_UNIFORM_SCALE=False, QUANT_DZ=False, TMA=True, B_MODE=mode, Z_MODE=0, z_desc=None,
              BLOCK_M=c.block_m, BLOCK_N=c.block_n, BLOCK_K=c.block_k)
    sig = dict(gemm, a_ptr="*bf16", b_ptr="*bf16", a_desc=desc(c.block_m, c.block_k), b_desc=desc(*b_block[mode]))
    if epi == 2:   # the saved z as runs of the interleave (launch.dglu_z_plan)
        del ce["z_desc"]
        ce["Z_MODE"], sig["z_desc"] = 2, desc(c.block_m, c.block_n // inter, 1, inter)
    out[f"tma-{name}"] = build(G.grouped_gemm_kernel, sig, ce, ["a_ptr", "b_ptr", "c_ptr", "z_ptr", "q_ptr", "K", "N",
                                                               "F", "lda", "b_e_stride", "b_n_stride", "ldc", "ldz"], c)
wcfg = configs.dataclasses.replace(configs.heuristic("wgrad", 2), tma=True)
sig = dict(wg, a_ptr="*bf16", b_ptr="*bf16", a_desc=desc(wcfg.block_k, wcfg.block_n),
           b_desc=desc(wcfg.block_k, wcfg.block_m))
out["tma-wgrad"] = build(G.grouped_wgrad_kernel, sig, dict(IEEE=False, RECIPE=0, TMA=True, BLOCK_N=wcfg.block_n,
                                                           BLOCK_M=wcfg.block_m, BLOCK_K=wcfg.block_k, GROUP_N=8),
                         ["a_ptr", "b_ptr", "c_ptr", "N", "M", "lda", "ldb"], wcfg)
# fp8_block's float8 data through TMA (not its fc1 + GLU: launch.tma_plan), weight rows.
def fdesc(*block):
    return "tensordesc<fp8e4nv[" + ", ".join(str(b) for b in block) + "]>"

fwd8 = configs.dataclasses.replace(configs.heuristic("fwd", 2, "fp8_block"), tma=True)
for name, epi, c in (("store", 0, fwd8), ("dglu", 2, configs.dglu_config(fwd8, "fp8_block"))):
    ce = dict(b_k_stride=1, EPILOGUE=epi, ACT=0, INTERLEAVE=32, HAS_BIAS=False, IEEE=False, RECIPE=1,
              GLU_UNIFORM_SCALE=True, QUANT_DZ=epi == 2, TMA=True, B_MODE=0, Z_MODE=0, z_desc=None,
              BLOCK_M=c.block_m, BLOCK_N=c.block_n, BLOCK_K=c.block_k)
    sig = dict(gemm, a_ptr="*u8", b_ptr="*u8", a_desc=fdesc(c.block_m, c.block_k), b_desc=fdesc(c.block_n, c.block_k))
    if epi == 2:
        del ce["z_desc"]
        ce["Z_MODE"], sig["z_desc"] = 2, desc(c.block_m, c.block_n // 32, 1, 32)
    out[f"tma-fp8-{name}"] = build(G.grouped_gemm_kernel, sig, ce, ["a_ptr", "b_ptr", "c_ptr", "z_ptr", "q_ptr", "K",
                                                                    "N", "F", "lda", "b_e_stride", "b_n_stride", "ldc",
                                                                    "ldz"], c)
wcfg8 = configs.dataclasses.replace(configs.heuristic("wgrad", 2, "fp8_block"), tma=True)
sig = dict(wg, a_ptr="*u8", b_ptr="*u8", a_desc=fdesc(wcfg8.block_n, 128), b_desc=fdesc(wcfg8.block_m, 128))
out["tma-fp8-wgrad"] = build(G.grouped_wgrad_kernel, sig, dict(IEEE=False, RECIPE=1, TMA=True, BLOCK_N=wcfg8.block_n,
                                                               BLOCK_M=wcfg8.block_m, BLOCK_K=128, GROUP_N=8),
                             ["a_ptr", "b_ptr", "c_ptr", "N", "M", "lda", "ldb"], wcfg8)
print(json.dumps(out))
'''


@pytest.mark.skipif(not nvidia_compiler_available(), reason="Triton's NVIDIA backend (ptxas) is not installed")
@pytest.mark.parametrize("ptxas", PTXAS)
def test_heuristic_gemms_compile_for_sm90_inlined_and_pipelined(ptxas):
    """The grouped GEMMs at their heuristic tiles, bf16 and fp8_block, for sm_90: every helper
    inlined (a call left in the K loop keeps it from being pipelined), async copies in the
    K loop (TMA copies for the descriptor variants: bf16 in every B mode, fp8_block's store, dGLU
    and wgrad; the fp8 limits carried over to them), and no spills except in the fp8 wgrad, fp8
    fc1 + GLU and both dGLU tiles, which spill a few dozen bytes under some Triton versions and
    were still the fastest measured on the H200 (configs.heuristic, configs.glu_config,
    configs.dglu_config). Compiled for sm_90: triton 3.6 (the H200 image) fp8 GLU 64, fp8 dGLU
    with the epilogue's dz copy 88, bf16 dGLU 32; triton 3.8 GLU 64, dGLU 8; the fp8 wgrad
    (whole blocks of the grouped column-wise copies) no stack under either, through pointers
    (uncapped: 240 / 242 registers) and through TMA at its 168-register cap (158 / 168). The
    capped build stays within its cap."""
    report = run_compile_script(_SM90_COMPILE, ptxas=ptxas)
    assert len(report) == 17
    for name, r in report.items():
        # The K loop's copies: cp.async through pointers, the copy engine through descriptors
        # (the bf16 wgrad's masked last step keeps pointer copies).
        copies = r["tma"] if name.startswith("tma-") else r["async"]
        assert r["calls"] == 0 and copies > 0 and (name == "tma-wgrad" or name.startswith("tma-") == (r["async"] == 0)), (name, r)
        limits = {"fp8-wgrad": 64, "fp8-glu": 64, "fp8-dglu": 96, "bf16-dglu": 48, "tma-fp8-wgrad": 16,
                  "tma-fp8-dglu": 96}
        assert r["stack"] <= limits.get(name, 0), (name, r)
        # A register cap (GemmConfig.maxnreg: fp8_block's wgrad through TMA) is what the build takes.
        assert r["maxnreg"] is None or not name.startswith("tma-") or r["regs"] <= r["maxnreg"], (name, r)
    assert report["tma-fp8-wgrad"]["maxnreg"] is not None
