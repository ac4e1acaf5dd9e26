"""grouped_glu_mlp fused kernels (interpreter on CPU, compiled on a GPU) against the float64
per-expert reference: splits with zero-token experts and ragged counts, H and F off the tile
sizes, both activations, both interleaves, biases on/off, fp32 and bf16, every gradient;
determinism; dispatch (fused only with a table entry at level >= 2); the tuning family.

Tolerances (normwise relative to float64): fp32 operands use IEEE dots with K <= max(H, 2F, T)
terms, ~sqrt(K) eps32 each, through two chained GEMMs: 1e-5. bf16: z, h, y (and dz, dx) are
rounded to bf16 (u = 2**-8 relative), about three roundings on the longest path, each ~u/sqrt(3)
normwise for random data: 3u = 1.2e-2, rounded up to 1.6e-2 (measured 3-4e-3).
"""

import pytest
import torch
from tuning_helpers import FakeTimer

import tilefuse
from tilefuse import launches, tuning
from tilefuse.ops.grouped_glu_mlp import launch
from tilefuse.ops.grouped_glu_mlp import tune as gtune
from tilefuse.ops.grouped_glu_mlp.api import grouped_glu_mlp, problem_for
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig
from tilefuse.ops.grouped_glu_mlp.reference import grouped_glu_mlp_reference
from tilefuse.tuning.sweep import TIMED

TOL = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2}
SMALL = GemmConfig(32, 32, 32, 4, 2, 2)   # small tiles: several row and column tiles per expert


def make(counts, H, F, dtype, bias, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    E, T = len(counts), sum(counts)

    def randn(*s, sc=1.0):
        return (torch.randn(s, generator=g) * sc).to(dtype).to(device).requires_grad_(True)

    x = randn(T, H)
    probs = torch.rand(T, generator=g).to(device).requires_grad_(True)
    w1, w2 = randn(E, 2 * F, H, sc=H ** -0.5), randn(E, H, F, sc=F ** -0.5)
    b1 = randn(E, 2 * F, sc=0.1) if bias else None
    b2 = randn(E, H, sc=0.1) if bias else None
    return x, torch.tensor(counts, dtype=torch.int32, device=device), probs, w1, w2, b1, b2


def rel(a, b):
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    d = float(b.norm())
    return float((a - b).norm()) / d if d else float(a.abs().max())


CASES = [
    ([5, 0, 37, 3], 48, 40, "swiglu", 8, True, torch.float32),
    ([17, 9, 0], 32, 64, "geglu", None, False, torch.float32),
    ([0, 33, 31, 1], 64, 96, "swiglu", 32, False, torch.bfloat16),
    ([70, 0], 24, 32, "geglu", 32, True, torch.bfloat16),
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


def test_fused_is_deterministic(device):
    x, c, p, w1, w2, b1, b2 = make([13, 0, 29], 32, 48, torch.bfloat16, True, device, seed=3)
    runs = []
    for _ in range(2):
        y, z, h = launch.forward(x, c, p, w1, w2, b1, b2, "swiglu", 16, config=SMALL)
        runs.append((y, *launch.backward(torch.ones_like(y), x, c, p, w1, w2, b1, b2, z, h, "swiglu", 16,
                                         config=SMALL)))
    for a, b in zip(*runs):
        assert torch.equal(a, b)


def test_split_not_summing_to_T_is_caught(device):
    x, c, p, w1, w2, b1, b2 = make([5, 6], 32, 32, torch.float32, False, device)
    bad = torch.tensor([5, 4], dtype=torch.int32, device=device)
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
        assert call()["grouped_mlp_fwd"] == 0           # never swept: the unfused baseline
        tuning.register("grouped_glu_mlp", {problem_for(x, w2, "swiglu", 16, False): gtune.candidates_for(
            problem_for(x, w2, "swiglu", 16, False))[0]})
        launched = call()
        assert launched["grouped_mlp_fwd"] == 1 and launched["grouped_mlp_bwd"] == 1
    with tilefuse.level(1):
        assert call()["grouped_mlp_fwd"] == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU interpreter sweep (fake timer)")
def test_tuning_sweep_checks_and_records_a_fused_winner(tuning_table, monkeypatch):
    two = [GemmConfig(32, 32, 32, 4, 2, 1), GemmConfig(32, 64, 32, 4, 2, 2)]
    monkeypatch.setattr(gtune, "candidates_for", lambda problem: list(two))
    problem = gtune.GroupedProblem.of(64, 32, 32, 4, 4, "swiglu", 16, False)
    result = tuning.sweep_key("grouped_glu_mlp", problem, timer=FakeTimer(two[1].name), rounds=2, device="cpu")
    assert len(result.with_status(TIMED)) == 2, [c.reason for c in result.candidates]
    assert result.winner == two[1]
    assert tuning.lookup_config("grouped_glu_mlp", problem) == two[1]


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
    for g, e in zip(grads, eager):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
