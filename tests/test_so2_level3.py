"""so2_mixing_stack's level-3 variant (3xTF32 layer GEMMs): its config space and keys, its
validation against float64 (and that the validation rejects broken variants), and that it
engages only at level 3, only on a key whose entry records a passed validation.

On the CPU the interpreter computes every tl.dot exactly (tilefuse's interpreter dot), so a
3xtf32 config differs from the exact path there only by its operand split: these tests check
the mechanism (keys, records, refusals, dispatch by launch arguments) and the split. Broken variants are made by perturbing a
variant's outputs. On a GPU the dispatch tests also run the real tf32x3 dots.
"""


import pytest
import torch

import tilefuse
from tilefuse import tuning
from tilefuse.ops.so2_mixing_stack import configs, kernels
from tilefuse.ops.so2_mixing_stack import tune as so2_tune
from tilefuse.ops.so2_mixing_stack.configs import TF32X3, So2Config
from tilefuse.ops.so2_mixing_stack.reference import So2Dims, so2_stack_backward_reference, so2_stack_forward_saving
from tilefuse.tuning.sweep import REJECTED, TIMED

from test_so2_kernels import make
from tuning_helpers import FakeTimer, LaunchSpy, perturb_so2_runs

LMAX, CF = 1, 16
VARIANT = So2Config(32, 64, 16, 4, 2, precision=TF32X3)


def _problem(n_edges=37):
    return so2_tune.So2Problem(LMAX, CF, 4, n_edges=n_edges, n_focus=1, n_layers=2, level3=True)


@pytest.fixture
def one_variant(monkeypatch):
    """The level-3 space cut to one tf32x3 config (the interpreter is slow)."""
    monkeypatch.setattr(so2_tune, "level3_candidates", lambda lmax, cf: [VARIANT])


def _sweep(device, timer_fast=VARIANT.name):
    device = torch.device(device)
    if device.type == "cuda":
        return tuning.sweep_key("so2_mixing_stack", _problem(), rounds=3, device=device)
    return tuning.sweep_key("so2_mixing_stack", _problem(), timer=FakeTimer(timer_fast), rounds=2,
                            device="cpu")


# --- config space and keys ---------------------------------------------------------------

def test_config_precision_is_checked_and_named():
    assert VARIANT.name.endswith("-3xtf32")
    assert So2Config().precision == "ieee" and "-ieee" not in So2Config().name
    with pytest.raises(ValueError, match="precision"):
        So2Config(precision="tf32")
    with pytest.raises(ValueError, match="fused"):
        So2Config(16, 64, 16, 4, 1, fused=True, precision=TF32X3)
    assert VARIANT.dot_precision(True) == "3xtf32"
    assert VARIANT.dot_precision(False) == "tf32" == So2Config().dot_precision(False)


def test_level3_keys_and_their_config_space():
    fam = so2_tune.FAMILY
    p = fam.problem_for_key("L3-C32-x4-l3")
    assert p.level3 and fam.key(p) == "L3-C32-x4-l3"
    assert not fam.problem_for_key("L3-C32-x4").level3
    with pytest.raises(ValueError, match="fp32 level-3"):
        fam.problem_for_key("L3-C32-x2-l3")
    variant = configs.level3_candidates(3, 32)[0]
    assert fam.is_valid("L3-C32-x4-l3", variant)
    assert not fam.is_valid("L3-C32-x4", variant)           # never on an exact key
    assert not fam.is_valid("L3-C32-x4-l3", So2Config(32, 64, 32, 4, 1, fused=True))
    assert all(c.precision == TF32X3 and not c.fused for c in fam.candidates(p))
    assert fam.change(variant) == tuning.ROUTE
    assert fam.expected_launches(p, variant) == ("so2_fwd_layer", "so2_bwd_relay_layer")
    assert {q.level3 for q in fam.default_problems()} == {False, True}
    (cli,) = fam.problems_from_cli("3x32", "fp32", "level3")
    assert cli.level3 and fam.key(cli) == "L3-C32-x4-l3"
    with pytest.raises(ValueError, match="fp32 only"):
        fam.problems_from_cli("3x32", "bf16", "level3")


def test_a_variant_entry_without_a_passed_validation_is_refused(tuning_table):
    with pytest.raises(ValueError, match="validation"):
        tuning.register("so2_mixing_stack", {"L3-C32-x4-l3": configs.level3_candidates(3, 32)[0]})
    # An exact winner for the level-3 key needs no validation (it is the exact path).
    tuning.register("so2_mixing_stack", {"L3-C32-x4-l3": "baseline"})
    fam = so2_tune.FAMILY
    with pytest.raises(ValueError, match="passed"):
        fam.check_entry("L3-C32-x4-l3", VARIANT, {"validation": {"passed": False}})
    fam.check_entry("L3-C32-x4-l3", VARIANT, {"validation": {"passed": True}})


def test_split_tf32_heads_and_tails():
    from tilefuse.ops.so2_mixing_stack.launch import split_tf32
    g = torch.Generator().manual_seed(0)
    w = torch.randn(3, 40, 24, generator=g) * torch.logspace(-30, 30, 24)
    w[0, 0, :4] = torch.tensor([torch.finfo(torch.float32).max, -torch.finfo(torch.float32).max, 0.0, -0.0])
    hi, lo = split_tf32(w)
    for part in (hi, lo):   # TF32 values: the 13 low mantissa bits are zero
        assert torch.all(part.view(torch.int32) & 8191 == 0)
    assert torch.isfinite(hi).all() and torch.isfinite(lo).all()        # even at float32's largest
    err = ((hi.double() + lo.double()) - w.double()).abs()
    assert torch.all(err <= w.double().abs() * 2.0 ** -22)     # rounded head, then a rounded tail


# --- validation --------------------------------------------------------------------------

def test_reference64_in_chunks_equals_the_whole_reference(monkeypatch):
    problem = _problem(n_edges=23)
    inputs = so2_tune.FAMILY.make_inputs(problem, torch.device("cpu"), 0)
    monkeypatch.setattr(so2_tune, "REFERENCE_CHUNK", 5)
    chunked = so2_tune._reference64(problem, inputs)
    d = So2Dims(LMAX, CF)
    w = [t.double() for t in (inputs.w0_all, inputs.w1_all, inputs.gw_all)]
    x_local, z_all, u_final = so2_stack_forward_saving(inputs.u0.double(), inputs.alpha.double(), *w, lmax=LMAX,
                                                       focus_dim=CF)
    grad_u0, grad_alpha, _ = so2_stack_backward_reference(inputs.grad_out.double(), x_local, z_all, u_final,
                                                          inputs.alpha.double(), *w, lmax=LMAX, focus_dim=CF)
    # float64 GEMMs of other sizes sum in another order (BLAS blocking): a few ulps of float64
    for name, want in (("x_local", x_local), ("grad_u0", grad_u0), ("grad_alpha", grad_alpha)):
        torch.testing.assert_close(chunked[name], want, rtol=1e-12, atol=1e-13)
    assert so2_tune._reference64(problem, inputs) is chunked     # cached on the input set


def test_range_sets_scale_by_powers_of_two_near_the_limits():
    problem = _problem(n_edges=23)
    inputs = so2_tune.FAMILY.make_inputs(problem, torch.device("cpu"), 0)
    sets = so2_tune._range_sets(inputs)
    big = sets["grad_out near the largest float32"].grad_out
    assert 2.0 ** 124 < float(big.abs().max()) <= 2.0 ** 125
    ratio = big / inputs.grad_out
    assert torch.all(ratio == ratio.flatten()[0]) and torch.log2(ratio.flatten()[0]).frac() == 0
    assert 2.0 ** 99 < float(sets["u0 large"].u0.abs().max()) <= 2.0 ** 100
    small = sets["grad_out near the smallest normal"].grad_out.abs().median()
    assert 2.0 ** -122 < float(small) <= 2.0 ** -120


def test_sweep_validates_the_variant_and_records_it(tuning_table, one_variant, device):
    result = _sweep(device)
    (cand,) = result.candidates
    assert cand.status == TIMED, cand.reason
    record = cand.validation
    assert record["passed"] is True and record["edges"] == 37
    assert set(record["errors"]) == {"x_local", "grad_u0", "grad_alpha"}
    assert all(e["ratio"] <= so2_tune.LEVEL3_ERROR_RATIO for e in record["errors"].values())
    assert len(record["range_sets"]) == 3
    if torch.device(device).type == "cpu":   # the fake timer made the variant the winner
        assert result.winner == VARIANT
        assert result.entry()["measured"]["validation"] == record
        # the recorded entry is what level 3 then reads
        problem = _problem()
        with tilefuse.level(3):
            assert tuning.lookup_config("so2_mixing_stack", problem) == VARIANT


def test_validation_rejects_a_less_accurate_variant(tuning_table, one_variant, monkeypatch, device):
    # a variant 1e-3 off: far above any fp32 path's error
    perturb_so2_runs(monkeypatch, lambda choice: choice.precision == TF32X3,
                     lambda name, t, inputs: t * (1 + 1e-3) if name == "grad_u0" else t)
    result = _sweep(device)
    (cand,) = result.candidates
    assert cand.status == REJECTED and "grad_u0" in cand.reason and "exact path" in cand.reason
    assert result.winner == tuning.BASELINE


def test_validation_rejects_a_variant_that_overflows_near_the_range_limit(tuning_table, one_variant, monkeypatch,
                                                                          device):
    def overflows(name, t, inputs):   # exact on ordinary inputs, inf on the largest ones
        if name != "grad_u0":
            return t
        return torch.where(inputs.grad_out.abs().amax() > 2.0 ** 100, torch.full_like(t, float("inf")), t)

    perturb_so2_runs(monkeypatch, lambda choice: choice.precision == TF32X3, overflows)
    result = _sweep(device)
    (cand,) = result.candidates
    assert cand.status == REJECTED and "largest float32" in cand.reason and "not finite" in cand.reason


# --- dispatch ----------------------------------------------------------------------------

def _run_op(device, lmax=LMAX):
    d, inputs = make(lmax, 1, CF, 37, device)
    x = tilefuse.so2_mixing_stack(*inputs, lmax=lmax, focus_dim=CF)
    grad_out = torch.randn(x.shape, generator=torch.Generator().manual_seed(1)).to(x.device)
    grads = torch.autograd.grad(x, inputs[:2], grad_out)
    return x, grads


def test_the_variant_engages_only_at_level_3_on_its_validated_key(tuning_table, one_variant, monkeypatch, device):
    spy = LaunchSpy(kernels.so2_gemm_kernel, "DOT_PRECISION")
    monkeypatch.setattr(kernels, "so2_gemm_kernel", spy)
    with tilefuse.level(3):   # no level-3 entry yet: exact
        _run_op(device)
    assert spy.seen and set(spy.seen) == {"ieee"}

    if torch.device(device).type == "cuda":   # on the GPU the sweep's own timing decides; install the variant
        monkeypatch.setattr(so2_tune.So2Family, "validate",
                            lambda self, *a: ([], {"passed": True, "note": "test"}))
        monkeypatch.setattr(tuning.sweep, "choose_winner", lambda family, timed: timed[0].choice)
    assert _sweep(device).winner == VARIANT

    for level in (0, 1, 2):
        spy.seen.clear()
        with tilefuse.level(level):
            _run_op(device)
        assert set(spy.seen) == (set() if level == 0 else {"ieee"}), level     # level 0: the reference

    spy.seen.clear()
    with tilefuse.level(3):
        x3, g3 = _run_op(device)
    assert spy.seen and set(spy.seen) == {"3xtf32"}          # forward and backward GEMMs

    spy.seen.clear()
    with tilefuse.level(3):   # another key (lmax 2) has no level-3 entry: exact
        _run_op(device, lmax=2)
    assert set(spy.seen) == {"ieee"}

    spy.seen.clear()
    with tilefuse.level(2):
        x2, g2 = _run_op(device)
    # 3xTF32 products carry ~2**-21 relative error each (test_split_tf32): within fp32's class
    torch.testing.assert_close(x3, x2, rtol=1e-5, atol=1e-5)
    for a, b in zip(g3, g2):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_level3_variant_under_torch_compile_custom_ops(tuning_table, one_variant, monkeypatch, device):
    """The custom ops (torch.compile's path) decide the variant when they run, as eager does."""
    if torch.device(device).type == "cuda":
        monkeypatch.setattr(so2_tune.So2Family, "validate",
                            lambda self, *a: ([], {"passed": True, "note": "test"}))
        monkeypatch.setattr(tuning.sweep, "choose_winner", lambda family, timed: timed[0].choice)
    assert _sweep(device).winner == VARIANT
    spy = LaunchSpy(kernels.so2_gemm_kernel, "DOT_PRECISION")
    monkeypatch.setattr(kernels, "so2_gemm_kernel", spy)
    d, inputs = make(LMAX, 1, CF, 37, device)
    with tilefuse.level(3):
        x_local, z_all, u_final = torch.ops.tilefuse.so2_stack_fwd(*[t.detach() for t in inputs], LMAX, CF, True)
        torch.ops.tilefuse.so2_stack_bwd(torch.randn_like(x_local), x_local, z_all, u_final,
                                         *[t.detach() for t in inputs[1:]], LMAX, CF, True, False)
    assert spy.seen and set(spy.seen) == {"3xtf32"}
