"""so2_mixing_stack's composition route (compose.py: the relay's pointwise kernels, cuBLAS
GEMMs) in the backward: against the float64 reference and the relay, with weight gradients,
engagement by launch counts, its IEEE-only GEMMs whatever the caller's matmul precision, and its
place in the tuning family (candidate, route margin, tolerance check that rejects a perturbed
route, a sweep whose winner the dispatch then runs)."""

import pytest
import torch

import tilefuse
from tilefuse import launches, tuning
from tilefuse.ops.so2_mixing_stack import compose, configs, launch
from tilefuse.ops.so2_mixing_stack import tune as so2_tune
from tilefuse.ops.so2_mixing_stack.configs import So2Config
from tilefuse.tuning.sweep import REJECTED, TIMED

from test_so2_kernels import NL, REL_TOL, make, reference_grads, rel
from tuning_helpers import FakeTimer, so2_candidates

LMAX, CF = 2, 16
COMPOSE = configs.compose_candidates(LMAX, CF)[0]


def test_compose_config():
    assert COMPOSE.compose and not COMPOSE.fused and COMPOSE.name.startswith("compose-")
    with pytest.raises(ValueError, match="one"):
        So2Config(fused=True, compose=True)
    with pytest.raises(ValueError, match="exact"):
        So2Config(compose=True, precision=configs.TF32X3)
    assert so2_tune.FAMILY.change(COMPOSE) == tuning.ROUTE
    assert COMPOSE in so2_tune.FAMILY.candidates(so2_tune.So2Problem(LMAX, CF, 4))
    assert COMPOSE not in so2_tune.FAMILY.candidates(so2_tune.So2Problem(LMAX, CF, 4, level3=True))


@pytest.mark.parametrize("weight_grads", [False, True])
def test_compose_backward_matches_reference_and_relay(device, weight_grads):
    d, inputs = make(LMAX, 2, CF, 37, device, grad=False)
    x_local, z_all, u_final = launch.forward(*inputs, d, True)
    grad_out = torch.randn(x_local.shape, generator=torch.Generator().manual_seed(3)).to(device)
    with launches.counting() as launched:
        got = launch.backward(grad_out, x_local, z_all, u_final, *inputs[1:], d, True, weight_grads, config=COMPOSE)
    assert launched["so2_bwd_compose_layer"] == 2 and launched["so2_bwd_compose_gemm"] == 3
    assert not launched["so2_bwd_relay_layer"]
    relay = launch.backward(grad_out, x_local, z_all, u_final, *inputs[1:], d, True, weight_grads)
    _, ref = reference_grads([t.requires_grad_(True) for t in inputs], LMAX, CF, True, grad_out)
    assert rel(got[0], ref[0]) < REL_TOL and rel(got[1], ref[1]) < REL_TOL
    problem = so2_tune.So2Problem(LMAX, CF, 4)
    assert so2_tune.compose_mismatches(problem, {"grad_u0": got[0], "grad_alpha": got[1]},
                                       {"grad_u0": relay[0], "grad_alpha": relay[1]}) == []
    if weight_grads:
        for g, r, want in zip(got[2], relay[2], ref[2:5]):
            assert rel(g, want) < REL_TOL and rel(g, r) < REL_TOL


def test_compose_gated_layers_accumulate_onto_their_input_gradient(device, monkeypatch):
    """Each gated layer's cuBLAS GEMMs add onto g_cur in place (compose.gemm_t with out is
    res: no copy of the surface into a new buffer first); only the final layer's GEMM, whose
    product reads g itself, writes a new buffer. The gradients are those of a backward whose
    every GEMM writes a new buffer, bit for bit (the same beta = 1 GEMM onto the same values)."""
    d, inputs = make(LMAX, 2, CF, 37, device, grad=False)
    x_local, z_all, u_final = launch.forward(*inputs, d, True)
    grad_out = torch.randn(x_local.shape, generator=torch.Generator().manual_seed(4)).to(device)
    original, in_place = compose.gemm_t, []

    def spy(a, w0t, w1t, res, out, dims):
        in_place.append(out is res)
        return original(a, w0t, w1t, res, out, dims)
    monkeypatch.setattr(compose, "gemm_t", spy)
    got = launch.backward(grad_out, x_local, z_all, u_final, *inputs[1:], d, True, False, config=COMPOSE)
    assert in_place == [False, True, True]

    def out_of_place(a, w0t, w1t, res, out, dims):
        fresh = torch.empty_like(out)
        original(a, w0t, w1t, res, fresh, dims)
        out.copy_(fresh)
    monkeypatch.setattr(compose, "gemm_t", out_of_place)
    want = launch.backward(grad_out, x_local, z_all, u_final, *inputs[1:], d, True, False, config=COMPOSE)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_compose_gemms_are_ieee_whatever_the_callers_precision(device, monkeypatch):
    seen = []
    real = torch.baddbmm

    def spy(*args, **kwargs):
        seen.append(torch.get_float32_matmul_precision())
        return real(*args, **kwargs)

    d, inputs = make(1, 1, CF, 9, device, grad=False)
    x_local, z_all, u_final = launch.forward(*inputs, d, True)
    saved = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    monkeypatch.setattr(torch, "baddbmm", spy)
    try:
        launch.backward(torch.ones_like(x_local), x_local, z_all, u_final, *inputs[1:], d, True, False,
                        config=configs.compose_candidates(1, CF)[0])
        assert torch.get_float32_matmul_precision() == "medium"     # restored
    finally:
        torch.set_float32_matmul_precision(saved)
    assert seen and set(seen) == {"highest"}


def test_compose_tolerance_rejects_a_perturbed_route():
    problem = so2_tune.So2Problem(LMAX, CF, 4)
    want = {"grad_u0": torch.randn(2, 50, 112), "grad_alpha": torch.rand(50, 2) + 0.5}
    close = {k: v * (1 + 1e-7) for k, v in want.items()}
    far = {k: v * (1 + 1e-3) for k, v in want.items()}
    assert so2_tune.compose_mismatches(problem, close, want) == []
    assert len(so2_tune.compose_mismatches(problem, far, want)) == 2
    # 16-bit keys allow their own roundings on top
    assert so2_tune.compose_tolerance(so2_tune.So2Problem(LMAX, CF, 2)) > so2_tune.compose_tolerance(problem)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU interpreter sweep (fake timer)")
def test_sweep_picks_compose_and_dispatch_runs_it(tuning_table, monkeypatch):
    so2_candidates(monkeypatch, compose=None)
    problem = so2_tune.So2Problem(LMAX, CF, 4, n_edges=37, n_focus=1)
    result = tuning.sweep_key("so2_mixing_stack", problem, timer=FakeTimer(COMPOSE.name), rounds=2, device="cpu")
    (cand,) = result.candidates
    assert cand.status == TIMED and result.winner == COMPOSE
    d, inputs = make(LMAX, 1, CF, 37, "cpu")
    x = tilefuse.so2_mixing_stack(*inputs, lmax=LMAX, focus_dim=CF)
    with launches.counting() as launched:
        torch.autograd.grad(x, inputs[:2], torch.ones_like(x))
    assert launched["so2_bwd_compose_layer"] == 2 and not launched["so2_bwd_relay_layer"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU interpreter sweep (fake timer)")
def test_sweep_keeps_the_relay_when_compose_wins_by_less_than_the_route_margin(tuning_table, monkeypatch):
    """The composition route is a route change (tuning.ROUTE): 2% faster than the relay is
    below its margin, so the relay stays and the dispatch runs it; 10% faster wins."""
    so2_candidates(monkeypatch, compose=None)
    problem = so2_tune.So2Problem(LMAX, CF, 4, n_edges=37, n_focus=1)
    result = tuning.sweep_key("so2_mixing_stack", problem, timer=FakeTimer(COMPOSE.name, 0.98), rounds=2,
                              device="cpu")
    (cand,) = result.candidates
    assert cand.status == TIMED and result.winner == tuning.BASELINE
    assert tuning.lookup_config("so2_mixing_stack", problem) is None
    d, inputs = make(LMAX, 1, CF, 37, "cpu")
    x = tilefuse.so2_mixing_stack(*inputs, lmax=LMAX, focus_dim=CF)
    with launches.counting() as launched:
        torch.autograd.grad(x, inputs[:2], torch.ones_like(x))
    assert launched["so2_bwd_relay_layer"] == 2 and not launched["so2_bwd_compose_layer"]
    result = tuning.sweep_key("so2_mixing_stack", problem, timer=FakeTimer(COMPOSE.name, 0.90), rounds=2,
                              device="cpu")
    assert result.winner == COMPOSE


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU interpreter sweep (fake timer)")
def test_sweep_rejects_a_composition_off_the_relay(tuning_table, monkeypatch):
    so2_candidates(monkeypatch, compose=None)
    real = compose.gemm_t

    def off(a, w0t, w1t, res, out, d, *rest):
        real(a, w0t * (1 + 1e-3), w1t, res, out, d, *rest)

    monkeypatch.setattr(compose, "gemm_t", off)
    problem = so2_tune.So2Problem(LMAX, CF, 4, n_edges=37, n_focus=1)
    result = tuning.sweep_key("so2_mixing_stack", problem, timer=FakeTimer(COMPOSE.name), rounds=2, device="cpu")
    (cand,) = result.candidates
    assert cand.status == REJECTED and "composition" in cand.reason and result.winner == tuning.BASELINE


# ---------------------------------------------------------------------------------------------
# The forward's composition route (compose.gated_layer, compose.final): float32 forward keys.
@pytest.mark.parametrize("lmax,cf,n_edges,apply_alpha", [(1, 16, 37, True), (2, 16, 1, False), (2, 32, 129, True),
                                                          (1, 96, 33, True), (2, 16, 0, True)])
def test_compose_forward_matches_reference_and_the_kernels_forward(lmax, cf, n_edges, apply_alpha, device):
    """x_local, z (every gated layer's, all columns: the gate kernel's scalar block and the
    cuBLAS GEMMs') and u_final against the float64 reference and within the composition's
    tolerance of the heuristic forward; engaged by launch counts; Cf 96 takes the gate kernel's
    chunked dots and the separate sigma kernel; E = 0 and 1."""
    from tilefuse.ops.so2_mixing_stack.reference import so2_stack_forward_saving
    d, inputs = make(lmax, 2, cf, n_edges, device, grad=False)
    cfg = configs.compose_candidates(lmax, cf)[0]
    with launches.counting() as launched:
        got = launch.forward(*inputs, d, apply_alpha, config=cfg)
    assert launched["so2_fwd_compose_gemm"] == (NL if n_edges else 0)
    kernels = launch.forward(*inputs, d, apply_alpha)
    ref = so2_stack_forward_saving(*[t.double() for t in inputs], lmax=lmax, focus_dim=cf, apply_alpha=apply_alpha)
    problem = so2_tune.So2Problem(lmax, cf, 4, forward=True)
    for g, k, r in zip(got, kernels, ref):
        assert g.shape == k.shape and g.dtype == k.dtype and torch.isfinite(g).all()
        if n_edges:
            assert rel(g, r.to(g.dtype)) < REL_TOL
    assert so2_tune.compose_mismatches(problem, dict(zip(("x_local", "z_all", "u_final"), got)),
                                       dict(zip(("x_local", "z_all", "u_final"), kernels))) == []


def test_forward_keys_offer_the_composition_for_float32_only():
    fwd32, fwd16 = (so2_tune.So2Problem(LMAX, CF, size, forward=True) for size in (4, 2))
    assert COMPOSE in so2_tune.FAMILY.candidates(fwd32) and COMPOSE not in so2_tune.FAMILY.candidates(fwd16)
    assert "so2_fwd_compose_gemm" in so2_tune.FAMILY.expected_launches(fwd32, COMPOSE)
    assert "so2_fwd_compose_gemm" not in so2_tune.FAMILY.expected_launches(fwd32, so2_tune.FAMILY.baseline(fwd32))


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU interpreter sweep (fake timer)")
def test_forward_sweep_picks_the_composition_and_dispatch_runs_it(tuning_table, monkeypatch):
    """A forward key whose composition route times 10% faster than the heuristic tiles: the
    sweep picks it (its outputs within the tolerance), and the op's forward then runs cuBLAS's
    GEMMs; the backward, on that saved forward, still matches float64."""
    so2_candidates(monkeypatch, compose=None)
    problem = so2_tune.So2Problem(LMAX, CF, 4, n_edges=37, n_focus=1, forward=True)
    result = tuning.sweep_key("so2_mixing_stack", problem, timer=FakeTimer(COMPOSE.name, 0.90), rounds=2,
                              device="cpu")
    (cand,) = result.candidates
    assert cand.status == TIMED and result.winner == COMPOSE
    d, inputs = make(LMAX, 1, CF, 37, "cpu")
    with launches.counting() as launched:
        x = tilefuse.so2_mixing_stack(*inputs, lmax=LMAX, focus_dim=CF)
        grads = torch.autograd.grad(x, inputs[:2], torch.ones_like(x))
    assert launched["so2_fwd_compose_gemm"] == NL
    _, ref = reference_grads(inputs, LMAX, CF, True, torch.ones_like(x))
    assert rel(grads[0], ref[0]) < REL_TOL and rel(grads[1], ref[1]) < REL_TOL


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU interpreter sweep (fake timer)")
def test_forward_sweep_rejects_a_composition_off_the_kernels(tuning_table, monkeypatch):
    so2_candidates(monkeypatch, compose=None)
    real = compose.gated_layer

    def off(u, w0, w1, z, u_next, sigma, d):
        real(u, w0, w1 * (1 + 1e-3), z, u_next, sigma, d)

    monkeypatch.setattr(compose, "gated_layer", off)
    problem = so2_tune.So2Problem(LMAX, CF, 4, n_edges=37, n_focus=1, forward=True)
    result = tuning.sweep_key("so2_mixing_stack", problem, timer=FakeTimer(COMPOSE.name, 0.5), rounds=2,
                              device="cpu")
    (cand,) = result.candidates
    assert cand.status == REJECTED and "composition" in cand.reason and result.winner == tuning.BASELINE


def test_the_composition_check_works_in_float64_chunks(monkeypatch):
    """compose_mismatches (a sweep's check of a composition choice) compares outputs of many
    GB on the GPU at lmax 6 (the saved z: a surface a gated layer); its float64 work goes in
    chunks (utils.NORMWISE_CHUNK), never a whole float64 copy of an output, which had taken
    the check to about 22 of the sweep's 12 planned surfaces. Same numbers as the whole sums."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from tilefuse import utils

    class LargestFloat64(TorchDispatchMode):
        largest = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in (out if isinstance(out, (tuple, list)) else (out,)):
                if isinstance(t, torch.Tensor) and t.dtype == torch.float64:
                    LargestFloat64.largest = max(LargestFloat64.largest, t.numel())
            return out

    problem = so2_tune.So2Problem(LMAX, CF, 4, forward=True)
    g = torch.Generator().manual_seed(7)
    want = {name: torch.randn(shape, generator=g) for name, shape in
            (("x_local", (37, 2, 112)), ("z_all", (2, 2, 37, 112)), ("u_final", (2, 37, 112)))}
    got = {name: t * (1 + 1e-7) for name, t in want.items()}
    far = {**got, "z_all": want["z_all"] * 1.01}
    whole = [float((got[n].double() - want[n].double()).norm() / want[n].double().norm()) for n in want]
    monkeypatch.setattr(utils, "NORMWISE_CHUNK", 1000)
    with LargestFloat64():
        assert so2_tune.compose_mismatches(problem, got, want) == []
        assert [m.split(":")[0] for m in so2_tune.compose_mismatches(problem, far, want)] == ["z_all"]
    assert 0 < LargestFloat64.largest <= 1000
    assert [utils.normwise_rel_error(got[n], want[n]) for n in want] == pytest.approx(whole, rel=1e-12)
