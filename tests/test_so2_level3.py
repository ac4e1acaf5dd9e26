"""so2_mixing_stack's level-3 variants (3xTF32 and 3xFP16 layer GEMMs, the latter also with the
forward gate's scalar block in 3xFP16): their config space
and keys, their validation against float64 (and that the validation rejects broken variants),
that they engage only at level 3, only on a key whose entry records a passed validation, and
the splits themselves (heads, tails, power-of-two scales, range limits).

On the CPU the interpreter forms every tl.dot product exactly and sums in a fixed order
(tilefuse's interpreter dot), so a split config differs from the exact path there only by its
operand split: these tests check the mechanism (keys, records, refusals, dispatch by launch
arguments) and the splits. Broken variants are made by perturbing a variant's outputs. On a
GPU the same tests run the real tensor-core dots.
"""


import pytest
import torch

import tilefuse
from tilefuse import tuning
from tilefuse.ops.so2_mixing_stack import configs, kernels, op
from tilefuse.ops.so2_mixing_stack import tune as so2_tune
from tilefuse.ops.so2_mixing_stack.configs import EXACT, FP16X3, FP16X3_GATE, TF32X3, So2Config
from tilefuse.ops.so2_mixing_stack.reference import So2Dims, so2_stack_backward_reference, so2_stack_forward_saving
from tilefuse.tuning.sweep import REJECTED, TIMED
from tilefuse.tuning.table import register_entries

from sm90_helpers import PTXAS
from test_so2_kernels import NL, make
from tuning_helpers import FakeTimer, LaunchSpy, level3_record, perturb_so2_runs

LMAX, CF = 1, 16
# One config of each kind the level-3 space holds: the two relay splits (3xfp16 also with the
# gate's scalar block split) and the fused route in 3xfp16 with the relay's sigma pass.
VARIANTS = {TF32X3: So2Config(32, 64, 16, 4, 2, precision=TF32X3),
            FP16X3: So2Config(64, 64, 16, 4, 3, precision=FP16X3),
            FP16X3_GATE: So2Config(64, 64, 16, 4, 3, precision=FP16X3_GATE),
            "fused-" + FP16X3: So2Config(64, 64, 16, 4, 2, fused=True, sigma_pass=True, precision=FP16X3)}


def _problem(n_edges=37):
    return so2_tune.So2Problem(LMAX, CF, 4, n_edges=n_edges, n_focus=1, n_layers=2, level3=True)


# The production-size floor of a validation (2**16 edges) cut to the tests' few dozen: the
# interpreter validates the mechanism, not the numbers. Records of fewer edges are refused.
TEST_MIN_EDGES = 32


@pytest.fixture(autouse=True)
def _validation_at_test_size(monkeypatch):
    monkeypatch.setattr(so2_tune, "LEVEL3_MIN_EDGES", TEST_MIN_EDGES)


def _record(key, config, edges=37, weight_grads=True, **changes):
    """A passed validation record of ``config`` at ``key`` as ``validate`` writes it, with
    ``changes`` over it (a missing output: its name set to None)."""
    record = level3_record(key, config, edges, weight_grads)
    errors = record["errors"]
    for name, value in changes.items():
        if name in errors:
            if value is None:
                del errors[name]
            else:
                errors[name] = value
        else:
            record[name] = value
    return record


def _passing_validate(weight_grads=True):
    """A stand-in for So2Family.validate: the variant passes with a record of its own."""
    return lambda self, problem, choice, *a: ([], _record(so2_tune.key_of(problem), choice, problem.n_edges,
                                                          weight_grads))


@pytest.fixture(params=sorted(VARIANTS))
def one_variant(request, monkeypatch):
    """The level-3 space cut to one config of each split (the interpreter is slow)."""
    variant = VARIANTS[request.param]
    monkeypatch.setattr(so2_tune, "level3_candidates", lambda lmax, cf: [variant])
    return variant


def _sweep(device, variant):
    device = torch.device(device)
    if device.type == "cuda":
        return tuning.sweep_key("so2_mixing_stack", _problem(), rounds=3, device=device)
    return tuning.sweep_key("so2_mixing_stack", _problem(), timer=FakeTimer(variant.name), rounds=2,
                            device="cpu")


# --- config space and keys ---------------------------------------------------------------

@pytest.mark.parametrize("label", sorted(VARIANTS))
def test_config_precision_is_checked_and_named(label):
    variant = VARIANTS[label]
    precision = variant.precision
    assert variant.name.endswith(f"-{precision}") and variant.name.startswith(variant.route)
    assert So2Config().precision == "ieee" and "-ieee" not in So2Config().name
    with pytest.raises(ValueError, match="precision"):
        So2Config(precision="tf32")
    if precision == FP16X3:   # the fused route takes 3xfp16 (and the exact dots), no other split
        assert So2Config(16, 64, 16, 4, 1, fused=True, precision=precision).route == "fused"
    else:
        with pytest.raises(ValueError, match="fused"):
            So2Config(16, 64, 16, 4, 1, fused=True, precision=precision)
    with pytest.raises(ValueError, match="compose"):
        So2Config(compose=True, precision=precision)
    with pytest.raises(ValueError, match="sigma_pass"):
        So2Config(sigma_pass=True, precision=precision)
    assert variant.dot_precision(True) == (FP16X3 if precision == FP16X3_GATE else precision)
    assert variant.gate_precision(True) == (FP16X3 if precision == FP16X3_GATE else EXACT)
    assert So2Config().gate_precision(True) == EXACT and So2Config().dot_precision(True) == EXACT
    assert variant.dot_precision(False) == "tf32" == So2Config().dot_precision(False)
    assert variant.gate_precision(False) == "tf32" == So2Config().gate_precision(False)
    assert variant.relay() == So2Config(variant.block_m, variant.block_n, variant.block_k, variant.num_warps,
                                        variant.num_stages, precision=precision)


def test_level3_keys_and_their_config_space():
    fam = so2_tune.FAMILY
    p = fam.problem_for_key("L3-C32-x4-l3")
    assert p.level3 and fam.key(p) == "L3-C32-x4-l3"
    assert not fam.problem_for_key("L3-C32-x4").level3
    with pytest.raises(ValueError, match="fp32 level-3"):
        fam.problem_for_key("L3-C32-x2-l3")
    candidates = fam.candidates(p)
    assert {c.precision for c in candidates} == {TF32X3, FP16X3, FP16X3_GATE}   # every split is timed
    tiles = lambda precision: {(c.block_m, c.block_n, c.num_warps, c.num_stages)  # noqa: E731
                               for c in candidates if c.precision == precision and not c.fused and not c.wgmma}
    assert tiles(FP16X3_GATE) == tiles(FP16X3) == set(configs.FP16X3_TILES)  # the gate's split at each 3xfp16 tile
    assert not any(c.compose for c in candidates)
    fused = [c for c in candidates if c.fused]   # Cf 32: the fused guards hold
    assert fused and all(c.precision == FP16X3 and c.sigma_pass and c.block_k == 32 for c in fused)
    assert not any(c.fused for c in fam.candidates(fam.problem_for_key("L2-C48-x4-l3")))   # Cf 48: no fusion
    assert len(set(candidates)) == len(candidates)
    variant = candidates[0]
    assert fam.is_valid("L3-C32-x4-l3", variant) and fam.is_valid("L3-C32-x4-l3", fused[0])
    assert not fam.is_valid("L3-C32-x4", variant)           # never on an exact key
    assert not fam.is_valid("L3-C32-x4", fused[0])
    assert not fam.is_valid("L3-C32-x4-l3", So2Config(32, 64, 32, 4, 1, fused=True))
    assert all(fam.change(c) == tuning.ROUTE for c in candidates)
    assert fam.expected_launches(p, variant) == ("so2_fwd_layer", "so2_bwd_relay_layer")
    assert fam.expected_launches(p, fused[0]) == ("so2_fwd_layer", "so2_bwd_fused_layer")
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
    key = "L1-C16-x4-l3"
    for variant in VARIANTS.values():
        with pytest.raises(ValueError, match="passed"):
            fam.check_entry(key, variant, {"validation": {"passed": False}})
        with pytest.raises(ValueError, match="passed"):
            fam.check_entry(key, variant, {"validation": _record(key, variant, passed="true")})
        fam.check_entry(key, variant, {"validation": _record(key, variant)})
        fam.check_entry(key, variant, {"validation": _record(key, variant, weight_grads=False)})


def _refusal(key, variant, validation):
    with pytest.raises(ValueError, match="validation record does not validate it") as info:
        so2_tune.FAMILY.check_entry(key, variant, {"validation": validation})
    with pytest.raises(ValueError, match="does not validate"):   # nor can it be installed
        register_entries("so2_mixing_stack", {key: {"winner": so2_tune.FAMILY.config_to_dict(variant),
                                                    "measured": {"validation": validation}}})
    return str(info.value)


@pytest.mark.parametrize("label", sorted(VARIANTS))
def test_a_passed_record_engages_only_its_own_variant_key_and_numbers(tuning_table, label):
    """'passed': true is not enough: the record must name the entry's key and config, hold each
    output's ratio (and errors that give it) within LEVEL3_ERROR_RATIO, the training outputs
    where it claims weight_grads, every range-limit set and production-size edges. A bare
    record, one with failing numbers, or one copied from another key or variant is refused."""
    key, variant = "L1-C16-x4-l3", VARIANTS[label]
    other = next(v for v in VARIANTS.values() if v != variant)
    over = {"error": 1e-3, "exact_error": 1e-7, "ratio": 1e4}
    cases = {
        "names the key": {"passed": True},
        "not 'L1-C16-x4-l3'": _record("L3-C32-x4-l3", variant),                 # another key's
        f"not {variant.name!r}": _record(key, other),                           # another variant's
        "not a production size": _record(key, variant, edges=TEST_MIN_EDGES - 1),
        "edges True": _record(key, variant, edges=True),
        "range_sets": _record(key, variant, range_sets=[]),
        "range_sets [": _record(key, variant, range_sets=sorted(so2_tune.RANGE_SETS)[:2]),
        "x_local: error": _record(key, variant, x_local=over),
        "grad_u0: no error": _record(key, variant, grad_u0=None),
        "dgw: no error": _record(key, variant, dgw=None),                       # weight_grads claimed
        "dw1: error": _record(key, variant, dw1={"error": 2e-6, "exact_error": 1e-6, "ratio": 0.9}),
        "grad_alpha: no error": _record(key, variant, grad_alpha={"error": 1e-7, "exact_error": 1e-7,
                                                                 "ratio": float("nan")}),
    }
    for why, validation in cases.items():
        assert why in _refusal(key, variant, validation), why
    # the number's limit itself: at the limit passes, rounding of the recorded errors allowed for
    at_limit = {"error": 1.5e-7, "exact_error": 1.0e-7, "ratio": so2_tune.LEVEL3_ERROR_RATIO}
    so2_tune.FAMILY.check_entry(key, variant, {"validation": _record(key, variant, x_local=at_limit)})


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


def test_split_fp16_heads_tails_and_column_scales(device):
    from tilefuse.ops.so2_mixing_stack.launch import split_fp16
    g = torch.Generator().manual_seed(0)
    w = torch.randn(3, 40, 24, generator=g) * 2.0 ** torch.linspace(-100, 100, 24).round()
    w[0, :, 0] = 0.0                                              # a zero column
    w[1, 0, 1] = torch.finfo(torch.float32).max                   # float32's largest
    w[2, :, 2] = torch.randn(40, generator=g) * 2.0 ** -140       # subnormal: the scale is clamped
    hi, lo, inv = (t.cpu() for t in split_fp16(w.to(device)))
    assert hi.dtype == lo.dtype == torch.float16 and hi.shape == lo.shape == w.shape
    assert inv.dtype == torch.float32 and inv.shape == (3, 24)
    assert torch.isfinite(hi).all() and torch.isfinite(lo).all() and torch.isfinite(inv).all()
    mantissa, exponent = torch.frexp(inv)
    assert torch.all(mantissa == 0.5) and torch.all((exponent - 1).abs() <= 126)     # powers of two
    scaled = w.double() / inv.double().unsqueeze(-2)              # w * s, exact
    col_max = scaled.abs().amax(dim=-2)
    ordinary = torch.ones_like(col_max, dtype=torch.bool)
    ordinary[0, 0] = ordinary[2, 2] = False
    assert torch.all((col_max[ordinary] >= 2 ** 14) & (col_max[ordinary] < 2 ** 15))
    assert inv[2, 2] == 2.0 ** -126                               # the clamp: s = 2**126
    assert torch.all(hi[0, :, 0] == 0) and torch.all(lo[0, :, 0] == 0)
    # a rounded float16 head, then a rounded tail: 22 bits, or half the tail's smallest
    # subnormal step (2**-24) for remainders below float16's normal range
    err = (hi.double() + lo.double() - scaled).abs()
    assert torch.all(err <= scaled.abs() * 2.0 ** -22 + 2.0 ** -25)


def test_split_fp16_kernel_reads_any_strides_and_matches_the_formula(device):
    """The split kernel on a transposed view (the backward's W^T) with K and N not multiples of
    its tiles equals, bitwise, the formula on a contiguous copy: frexp scales, float16 round to
    nearest even. Zero columns differ only in the unused scale (2**126 here, any power there)."""
    from tilefuse.ops.so2_mixing_stack.launch import split_fp16
    g = torch.Generator().manual_seed(1)
    w = torch.randn(2, 3, 37, 70, generator=g) * 2.0 ** torch.linspace(-60, 60, 37).round().unsqueeze(-1)
    view = w.transpose(-1, -2)                                    # (2, 3, 70, 37): columns of w's rows
    hi, lo, inv = (t.cpu() for t in split_fp16(view.to(device)))
    ref = view.contiguous()
    _, exponent = torch.frexp(ref.abs().amax(dim=-2))
    shift = (15 - exponent).clamp(-126, 126)
    scaled = torch.ldexp(ref, shift.unsqueeze(-2))
    want_hi = scaled.to(torch.float16)
    assert torch.equal(hi, want_hi) and hi.is_contiguous()
    assert torch.equal(lo, (scaled - want_hi.float()).to(torch.float16))
    assert torch.equal(inv, torch.ldexp(torch.ones_like(scaled[..., 0, :]), -shift))
    empty = split_fp16(torch.zeros(2, 0, 8, device=device))
    assert [t.shape for t in empty] == [(2, 0, 8), (2, 0, 8), (2, 8)]
    assert torch.all(empty[2] == 2.0 ** -126)


def _fp16x3_segment(a, wt, block_k=16):
    """out = a[..., :K] @ wt by the 3xfp16 BWD GEMM on zero residuals (one column segment)."""
    from tilefuse.ops.so2_mixing_stack.launch import _gemm, split_fp16
    d = So2Dims(LMAX, CF)
    cfg = So2Config(64, 64, block_k, 4, 3, precision=FP16X3)
    res = torch.zeros_like(a)
    out = torch.full_like(a, float("nan"))
    _gemm(kernels.BWD, a, split_fp16(wt), res, out, d, cfg, k_start=0, k_len=d.m0, n_start=0, n_len=d.m0)
    return out[..., :d.m0]


def _within_split_bound(got, a, wt):
    """|got - a @ wt| <= 2**-17 (|a| @ |wt|) + 2**-36 max|a_row| sum|wt_col| elementwise: the
    split's 22-bit operands and dropped tail product (about 3 * 2**-22 a product), float32
    accumulation across K and, on a GPU, the tensor cores' truncation within a K tile, with
    room; the absolute term covers elements far below their row's maximum, whose tails are
    float16 subnormals. A split without its tails is ~2**-12 off and fails it."""
    a64, w64 = a[..., :wt.shape[-2]].double(), wt.double()
    want = a64 @ w64
    bound = 2.0 ** -17 * (a64.abs() @ w64.abs())
    bound += 2.0 ** -36 * a64.abs().amax(dim=-1, keepdim=True) * w64.abs().sum(dim=-2, keepdim=True)
    return (got.double() - want).abs() <= bound


def test_fp16x3_gemm_scales_each_row_tile_and_column(device):
    """Rows, their K tiles and W's columns at magnitudes float16 cannot hold unscaled (2**-90
    to 2**90), zero rows, and rows whose two K tiles differ by 2**80: every output element
    within the split's bound of float64."""
    d = So2Dims(LMAX, CF)
    g = torch.Generator().manual_seed(3)
    n_edges = 70    # two row blocks of 64, the second partial
    a = torch.randn(1, n_edges, d.row, generator=g)
    a *= 2.0 ** torch.linspace(-90, 90, n_edges).round().view(1, n_edges, 1)
    a[0, 5] = 0.0
    a[0, 6, :16] *= 2.0 ** 40                       # K tile 0 far above K tile 1
    a[0, 6, 16:d.m0] *= 2.0 ** -40
    a[0, 7, 3] = 2.0 ** 60                          # one large element among ordinary ones
    wt = torch.randn(1, d.m0, d.m0, generator=g) * 2.0 ** torch.linspace(-20, 20, d.m0).round()
    got = _fp16x3_segment(a.to(device), wt.to(device)).cpu()
    assert torch.isfinite(got).all()
    ok = _within_split_bound(got, a, wt)
    assert ok.all(), f"{int((~ok).sum())} elements outside the bound, first at {(~ok).nonzero()[0].tolist()}"
    assert torch.all(got[0, 5] == 0)


def test_fp16x3_gemm_is_finite_and_accurate_near_float32s_limits(device):
    """Activations near float32's largest value and near its smallest normal, with weights
    that keep the products finite: finite, and within the split's bound."""
    d = So2Dims(LMAX, CF)
    g = torch.Generator().manual_seed(4)
    a = torch.randn(1, 8, d.row, generator=g)
    a[0, :4] *= 2.0 ** 124
    a[0, 4:] *= 2.0 ** -122
    wt = torch.randn(1, d.m0, d.m0, generator=g) * 2.0 ** -8
    got = _fp16x3_segment(a.to(device), wt.to(device)).cpu()
    assert torch.isfinite(got).all()
    ok = _within_split_bound(got, a, wt)
    assert ok.all(), f"{int((~ok).sum())} elements outside the bound"


@pytest.mark.parametrize("n_edges", [37, 70])
def test_the_gate_splits_its_scalar_block_only_for_the_gate_variant(n_edges, monkeypatch, device):
    """The forward gate kernel's s = u_m0 @ W0[:, :Cf] (saved as z[..., :Cf] of every gated
    layer): under a "3xfp16-gate" config in 3xfp16 from the layer GEMMs' split weights, within
    the split's bound of float64, also for rows near float32's limits and partial row blocks;
    under plain 3xfp16 the exact dots (bitwise the exact path's s), so existing 3xfp16 table
    entries keep the arithmetic they were validated with."""
    from tuning_helpers import LaunchSpy
    from tilefuse.ops.so2_mixing_stack import launch
    d, (u0, alpha, w0, w1, gw) = make(LMAX, 2, CF, n_edges, "cpu", grad=False)
    u0 = u0.clone()
    u0[0, :3] *= 2.0 ** 100                      # rows far above the rest, and far below
    u0[1, 3:6] *= 2.0 ** -100
    spy = LaunchSpy(kernels.so2_fwd_gate_kernel, "S_PRECISION")
    monkeypatch.setattr(kernels, "so2_fwd_gate_kernel", spy)
    s_first = {}
    for name, cfg in (("exact", So2Config(64, 64, CF, 4, 2)), (FP16X3, VARIANTS[FP16X3]),
                      (FP16X3_GATE, VARIANTS[FP16X3_GATE])):
        spy.seen.clear()
        z_all = launch.forward(*(t.to(device) for t in (u0, alpha, w0, w1, gw)), d, True, config=cfg)[1]
        assert spy.seen == [FP16X3 if name == FP16X3_GATE else EXACT] * (NL - 1)
        s_first[name] = z_all[0, ..., :CF].cpu()
    assert torch.equal(s_first[FP16X3], s_first["exact"])
    got = s_first[FP16X3_GATE]
    assert torch.isfinite(got).all()
    ok = _within_split_bound(got, u0, w0[0, :, :, :CF])
    assert ok.all(), f"{int((~ok).sum())} elements outside the bound"


def test_the_gate_launches_on_gate_warps_and_its_outputs_do_not_depend_on_them(monkeypatch, device):
    """The forward launches its gate kernel on launch.gate_warps' warps (4 for the exact s at
    Cf 32, 2 for the split s), and the forward's outputs are bitwise the same with the other
    warp count (each element of s and sigma is one fixed-order dot), exact and 3xfp16-gate.
    The interpreter ignores warps; the GPU run is the one that can differ."""
    from tilefuse.ops.so2_mixing_stack import launch
    cf = 32
    d, inputs = make(LMAX, 2, cf, 45, "cpu", grad=False)
    inputs = [t.to(device) for t in inputs]
    spy = LaunchSpy(kernels.so2_fwd_gate_kernel, "num_warps")
    monkeypatch.setattr(kernels, "so2_fwd_gate_kernel", spy)
    chosen = launch.gate_warps
    other = {2: 4, 4: 2}

    def swapped(focus_dim, s_precision):
        return other[chosen(focus_dim, s_precision)]
    for cfg, warps in ((So2Config(64, 64, cf, 4, 2), 4), (So2Config(64, 64, cf, 4, 3, precision=FP16X3_GATE), 2)):
        outs = []
        for pick in (chosen, swapped):
            monkeypatch.setattr(launch, "gate_warps", pick)
            spy.seen.clear()
            outs.append(launch.forward(*inputs, d, True, config=cfg))
            assert spy.seen == [pick(cf, cfg.gate_precision(True))] * (NL - 1)
        assert spy.seen == [other[warps]] * (NL - 1)
        for a, b in zip(*outs):
            assert torch.equal(a, b)


def test_a_level3_gemm_refuses_weights_of_another_form(device):
    from tilefuse.ops.so2_mixing_stack.launch import _gemm, split_fp16, split_tf32
    d = So2Dims(LMAX, CF)
    a = torch.zeros(1, 4, d.row, device=device)
    wt = torch.zeros(1, d.m0, d.m0, device=device)
    segment = dict(k_start=0, k_len=d.m0, n_start=0, n_len=d.m0)
    for cfg, weights in ((VARIANTS[FP16X3], (*split_tf32(wt), None)), (VARIANTS[FP16X3], wt),
                         (VARIANTS[TF32X3], split_fp16(wt)), (So2Config(), split_fp16(wt))):
        with pytest.raises(ValueError, match="another form"):
            _gemm(kernels.BWD, a, weights, a, a.clone(), d, cfg, **segment)


_SM90_LEVEL3 = r'''
import json
from sm90_helpers import compile_sm90
from tilefuse.ops.so2_mixing_stack import kernels as K
from tilefuse.ops.so2_mixing_stack.configs import FP16X3, level3_candidates

out = {}
ints = ["F", "E", "ROW", "K_START", "K_LEN", "N_START", "N_LEN", "CF", "LG", "w_focus_stride", "w_stride_k"]
fused_ints = ["E", "ROW", "M0", "LG", "K_START", "K_LEN", "N_START", "N_LEN", "w_focus_stride", "w_stride_k"]
for cfg in level3_candidates(3, 32):
    if cfg.precision != FP16X3 or cfg.wgmma:   # the Gluon kernel's compile: test_so2_wgmma.py
        continue
    if cfg.fused:   # both column passes, as launch.fused_layer launches them
        sig = {"g_ptr": "*fp32", "z_ptr": "*fp32", "gw_ptr": "*fp32", "sigma_ptr": "*fp32", "w_ptr": "*fp16",
               "wlo_ptr": "*fp16", "wscale_ptr": "*fp32", "out_ptr": "*fp32", **{n: "i32" for n in fused_ints}}
        for seg in (True, False):
            ce = dict(w_stride_n=1, SEGMENT_M0=seg, SIGMA_LOADED=cfg.sigma_pass, DOT_PRECISION=cfg.precision,
                      BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, CF_P=cfg.block_k)
            c, usage = compile_sm90(K.so2_bwd_fused_kernel, dict(sig), ce, num_warps=cfg.num_warps,
                                    num_stages=cfg.num_stages,
                                    divisible=[n for n in sig if n.endswith("_ptr")] + fused_ints[1:])
            usage["wgmma"] = c.asm["ptx"].count("wgmma.mma_async")
            usage["async_copies"] = c.asm["ttgir"].count("async_copy_global_to_local")
            out[f"{cfg.name}-{'m0' if seg else 'm1'}"] = usage
        continue
    sig = {"a_ptr": "*fp32", "w_ptr": "*fp16", "wlo_ptr": "*fp16", "wscale_ptr": "*fp32", "res_ptr": "*fp32",
           "out_ptr": "*fp32", "z_ptr": "*fp32", "sigma_ptr": "*fp32", "alpha_ptr": "*fp32", **{n: "i32" for n in ints}}
    # as launched: unit inner stride, 16-divisible segments (Cf 32)
    for mode in (K.FWD_GATED, K.FINAL, K.BWD, K.BWD_HEAD):
        ce = dict(w_stride_n=1, MODE=mode, APPLY_ALPHA=True, DOT_PRECISION=cfg.precision, BLOCK_M=cfg.block_m,
                  BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k)
        c, usage = compile_sm90(K.so2_gemm_kernel, dict(sig), ce, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
                                divisible=[n for n in sig if n.endswith("_ptr")] + ints[2:])
        usage["wgmma"] = c.asm["ptx"].count("wgmma.mma_async")
        usage["async_copies"] = c.asm["ttgir"].count("async_copy_global_to_local")
        out[f"{cfg.name}-mode{mode}"] = usage
sig = {"w_ptr": "*fp32", "hi_ptr": "*fp16", "lo_ptr": "*fp16", "inv_ptr": "*fp32",
       **{n: "i32" for n in ("K", "N", "stride_b", "stride_k", "stride_n")}}
c, usage = compile_sm90(K.split_fp16_kernel, sig, dict(BLOCK_K=64, BLOCK_N=32), num_warps=4)
out["split_fp16_kernel"] = usage
# The forward gate kernel at its launch shape (launch.GATE_BLOCK_M rows, gate_warps), its
# scalar block exact and in 3xfp16 (the "3xfp16-gate" configs), Cf 32.
from tilefuse.ops.so2_mixing_stack.launch import GATE_BLOCK_M, gate_warps
for s_precision, weight in (("ieee", "*fp32"), (FP16X3, "*fp16")):
    sig = {"u_ptr": "*fp32", "w0_ptr": weight, "w0lo_ptr": weight, "w0scale_ptr": "*fp32", "gw_ptr": "*fp32",
           "z_ptr": "*fp32", "u_next_ptr": "*fp32", "sigma_ptr": "*fp32",
           **{n: "i32" for n in ("E", "ROW", "M0", "LG", "CF")}}
    ce = dict(IEEE=True, S_PRECISION=s_precision, BLOCK_M=GATE_BLOCK_M, CF_P=32, BLOCK_K=32)
    c, usage = compile_sm90(K.so2_fwd_gate_kernel, sig, ce, num_warps=gate_warps(32, s_precision),
                            divisible=[n for n in sig if n.endswith("_ptr")] + ["ROW", "M0", "LG", "CF"])
    usage["mma"] = c.asm["ptx"].count("mma.sync") + c.asm["ptx"].count("wgmma.mma_async")
    out[f"gate-{s_precision}"] = usage
print(json.dumps(out))
'''


@pytest.mark.parametrize("ptxas", PTXAS)
def test_fp16x3_tiles_compile_for_sm90_without_spills(ptxas):
    """Every 3xfp16 candidate, each epilogue of the relay GEMM and both passes of the fused
    kernel, and the forward gate kernel with its scalar block split (the "3xfp16-gate"
    configs; the exact gate beside it), compiled for sm_90 as launched: no spills, the products on wgmma, the operand tiles
    loaded by pipelined async copies. The relay's FWD_GATED epilogue is the tight one at 64
    outputs a thread (244-250 registers on triton 3.6), the fused m = 0 pass at 128x128 (255;
    compile_report.py shows them)."""
    from sm90_helpers import nvidia_compiler_available, run_compile_script
    if not nvidia_compiler_available():
        pytest.skip("Triton's NVIDIA backend (ptxas) is not installed")
    report = run_compile_script(_SM90_LEVEL3, ptxas=ptxas)
    assert report.pop("split_fp16_kernel")["stack"] == 0
    exact_gate, split_gate = report.pop("gate-ieee"), report.pop(f"gate-{FP16X3}")
    assert exact_gate["stack"] == 0 == split_gate["stack"], (exact_gate, split_gate)
    assert exact_gate["mma"] == 0 < split_gate["mma"]      # the split's products on the tensor cores
    assert len(report) == 4 * len(configs.FP16X3_TILES) + 2 * len(configs.FUSED_FP16X3_TILES)
    for name, usage in report.items():
        assert usage["stack"] == 0, (name, usage)
        assert usage["wgmma"] > 0 and usage["async_copies"] >= 3, (name, usage)


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


def test_sweep_validates_the_variant_and_records_it(tuning_table, one_variant, monkeypatch, device):
    """The record names the key and the variant it validated, at production-size edges: a
    problem of fewer (37 here, a model's example) is swept at LEVEL3_MIN_EDGES, and its
    candidates checked and validated at one edge more (the family's check_problem: a partial
    last row block)."""
    monkeypatch.setattr(so2_tune, "LEVEL3_MIN_EDGES", 40)
    result = _sweep(device, one_variant)
    (cand,) = result.candidates
    if one_variant.precision == TF32X3:   # its tails' subnormals: the range set's accuracy bound
        assert cand.status == REJECTED and "on grad_out near the smallest normal" in cand.reason, cand.reason
        return
    assert cand.status == TIMED, cand.reason
    record = cand.validation
    assert record["passed"] is True and record["edges"] == 41 and "n_edges=40" in result.resized
    assert (record["key"], record["config"]) == (f"L{LMAX}-C{CF}-x4-l3", one_variant.name)
    assert set(record["errors"]) == {"x_local", "grad_u0", "grad_alpha", "dw0", "dw1", "dgw"}
    assert record["weight_grads"] is True   # the training backward validated too
    assert all(e["ratio"] <= so2_tune.LEVEL3_ERROR_RATIO for e in record["errors"].values())
    assert len(record["range_sets"]) == 3
    if torch.device(device).type == "cpu":   # the fake timer made the variant the winner
        assert result.winner == one_variant
        assert result.entry()["measured"]["validation"] == record
        # the recorded entry is what level 3 then reads
        problem = _problem()
        with tilefuse.level(3):
            assert tuning.lookup_config("so2_mixing_stack", problem) == one_variant


@pytest.mark.parametrize("method,name", [("run", "grad_u0"), ("run_training", "dw1")],
                         ids=["force-backward", "weight-gradients"])
def test_validation_rejects_a_less_accurate_variant(tuning_table, one_variant, monkeypatch, device, method, name):
    """A variant 1e-3 off in one output (far above any fp32 path's error) is rejected: grad_u0
    of the timed forward + force backward, or dw1 of the training backward, which the
    validation runs too (the variant's other outputs exact)."""
    real = getattr(so2_tune.So2Family, method)

    def off(self, problem, choice, inputs):
        out = real(self, problem, choice, inputs)
        return {**out, name: out[name] * (1 + 1e-3)} if choice.precision != EXACT else out

    monkeypatch.setattr(so2_tune.So2Family, method, off)
    result = _sweep(device, one_variant)
    (cand,) = result.candidates
    assert cand.status == REJECTED and name in cand.reason and "exact path" in cand.reason
    assert result.winner == tuning.BASELINE


def test_a_variant_validated_without_weight_gradients_trains_exactly(tuning_table, one_variant, monkeypatch,
                                                                    device):
    """An entry whose record predates the weight gradients' validation (no "weight_grads"):
    at level 3 the forward and the force backward run the variant, a training backward the
    exact path."""
    from tilefuse import launches
    monkeypatch.setattr(so2_tune.So2Family, "validate", _passing_validate(weight_grads=False))
    if torch.device(device).type == "cuda":
        monkeypatch.setattr(tuning.sweep, "choose_winner", lambda family, timed: timed[0].choice)
        monkeypatch.setattr(so2_tune, "level3_beats_exact", lambda problem: True)   # whatever it measured
    assert _sweep(device, one_variant).winner == one_variant
    spy = LaunchSpy(kernels.so2_gemm_kernel, "DOT_PRECISION")
    monkeypatch.setattr(kernels, "so2_gemm_kernel", spy)
    d, inputs = make(LMAX, 1, CF, 37, device)
    split = one_variant.dot_precision(True)
    with tilefuse.level(3):
        x = tilefuse.so2_mixing_stack(*inputs[:2], *[w.detach() for w in inputs[2:]], lmax=LMAX, focus_dim=CF)
        torch.autograd.grad(x, inputs[:2], torch.ones_like(x))      # force backward
    assert spy.seen and set(spy.seen) == {split}
    spy.seen.clear()
    with tilefuse.level(3), launches.counting() as launched:
        x = tilefuse.so2_mixing_stack(*inputs, lmax=LMAX, focus_dim=CF)
        forward_precisions = set(spy.seen)
        spy.seen.clear()
        torch.autograd.grad(x, inputs, torch.ones_like(x))          # training backward
    assert forward_precisions == {split} and set(spy.seen) == {"ieee"}
    assert launched["so2_bwd_relay_layer"] == NL - 1


def test_validation_rejects_a_variant_that_overflows_near_the_range_limit(tuning_table, one_variant, monkeypatch,
                                                                          device):
    def overflows(name, t, inputs):   # exact on ordinary inputs, inf on the largest ones
        if name != "grad_u0":
            return t
        return torch.where(inputs.grad_out.abs().amax() > 2.0 ** 100, torch.full_like(t, float("inf")), t)

    perturb_so2_runs(monkeypatch, lambda choice: choice.precision != EXACT, overflows)
    result = _sweep(device, one_variant)
    (cand,) = result.candidates
    assert cand.status == REJECTED and "largest float32" in cand.reason and "not finite" in cand.reason


def test_validation_holds_a_variant_to_the_error_bound_on_the_range_sets_too(tuning_table, one_variant,
                                                                             monkeypatch, device):
    """A variant as accurate as the exact path on the Gaussian set but 1e-3 off on a range set
    where the exact path keeps float32's accuracy (grad_u0 where grad_out sits near the
    smallest normal: a split whose tails fall into the subnormals) is rejected; the record
    holds each range set's errors."""
    def off_when_tiny(name, t, inputs):
        tiny = inputs.grad_out.abs().median() < 2.0 ** -100
        return t * (1 + 1e-3) if name == "grad_u0" and bool(tiny) else t

    perturb_so2_runs(monkeypatch, lambda choice: choice.precision != EXACT, off_when_tiny)
    result = _sweep(device, one_variant)
    (cand,) = result.candidates
    assert cand.status == REJECTED, cand.reason
    assert "grad_u0 on grad_out near the smallest normal" in cand.reason and "exact path" in cand.reason


def test_a_tf32_split_loses_accuracy_where_its_tails_are_subnormal_and_is_rejected(monkeypatch, device):
    """The 3xTF32 split's tails fall into float32's subnormals on grad_out near the smallest
    normal: grad_u0 and the weight gradients many times the exact path's error there (measured
    in the interpreter: 20-55x), which its validation rejects; 3xfp16's power-of-two row and
    column scales keep it within the bound. The Gaussian set passes both."""
    monkeypatch.setattr(so2_tune, "LEVEL3_MIN_EDGES", 1)
    problem = _problem()
    # the kernels' device (on a GPU machine CPU tensors run no kernel)
    inputs = so2_tune.FAMILY.make_inputs(problem, torch.device(device), 0)
    base = so2_tune.FAMILY.baseline(problem)
    want = so2_tune.FAMILY.run(problem, base, inputs)
    for label, rejected in (("3xtf32", True), ("3xfp16", False)):
        variant = VARIANTS[label]
        messages, record = so2_tune.FAMILY.validate(problem, variant, inputs, so2_tune.FAMILY.run(problem, variant,
                                                                                                  inputs), want)
        assert all(e["ratio"] <= 1.5 for e in record["errors"].values()), (label, record["errors"])
        tiny = record["range_errors"]["grad_out near the smallest normal"]
        assert (tiny["grad_u0"]["ratio"] > 1.5) is rejected and record["passed"] is not rejected, (label, messages)


# --- the fused route in 3xfp16 --------------------------------------------------------------

@pytest.mark.parametrize("lmax,n_focus,focus_dim,n_edges,apply_alpha",
                         [(1, 1, 16, 37, True), (2, 2, 32, 129, False), (2, 1, 16, 1, True)],
                         ids=["L1-F1-C16-E37", "L2-F2-C32-E129-noalpha", "L2-F1-C16-E1"])
def test_fused_fp16x3_is_bitwise_its_relay(lmax, n_focus, focus_dim, n_edges, apply_alpha, device):
    """The fused kernel's contract in 3xfp16: equal bit for bit to the relay with the same tiles
    and precision (So2Config.relay), which is what runs where the fused guards fail."""
    from tilefuse import launches
    from tilefuse.ops.so2_mixing_stack import launch
    d, inputs = make(lmax, n_focus, focus_dim, n_edges, device, grad=False)
    u0, alpha, w0, w1, gw = inputs
    grad_out = torch.randn(n_edges, n_focus, d.row, generator=torch.Generator().manual_seed(2)).to(device)
    fused = So2Config(32, 64, focus_dim, 4, 2, fused=True, sigma_pass=True, precision=FP16X3)
    x_local, z_all, u_final = launch.forward(u0, alpha, w0, w1, gw, d, apply_alpha, config=fused)
    results = {}
    for cfg in (fused, fused.relay()):
        with launches.counting() as launched:
            results[cfg.route] = launch.backward(grad_out, x_local, z_all, u_final, alpha, w0, w1, gw, d,
                                                 apply_alpha, False, config=cfg)
        assert launched[f"so2_bwd_{cfg.route}_layer"] == NL - 1
    (gu_f, ga_f, _), (gu_r, ga_r, _) = results["fused"], results["relay"]
    assert torch.equal(gu_f, gu_r) and torch.equal(ga_f, ga_r)
    exact = launch.backward(grad_out, x_local, z_all, u_final, alpha, w0, w1, gw, d, apply_alpha, False)
    torch.testing.assert_close(gu_f, exact[0], rtol=1e-5, atol=1e-5)   # a 3xfp16 result, not the exact one


def test_a_fused_variant_with_weight_gradients_runs_its_relay(tuning_table, monkeypatch, device):
    """Weight gradients need gz in memory: at level 3 a fused variant's key then runs the relay
    with the variant's tiles and precision; the force backward runs the fused route."""
    from tilefuse import launches
    variant = VARIANTS["fused-" + FP16X3]
    monkeypatch.setattr(so2_tune, "level3_candidates", lambda lmax, cf: [variant])
    if torch.device(device).type == "cuda":
        monkeypatch.setattr(so2_tune.So2Family, "validate", _passing_validate())
        monkeypatch.setattr(tuning.sweep, "choose_winner", lambda family, timed: timed[0].choice)
        monkeypatch.setattr(so2_tune, "level3_beats_exact", lambda problem: True)   # whatever it measured
    assert _sweep(device, variant).winner == variant
    spy = LaunchSpy(kernels.so2_gemm_kernel, "DOT_PRECISION")
    monkeypatch.setattr(kernels, "so2_gemm_kernel", spy)
    d, inputs = make(LMAX, 1, CF, 37, device)
    with tilefuse.level(3), launches.counting() as launched:
        x = tilefuse.so2_mixing_stack(*inputs, lmax=LMAX, focus_dim=CF)
        grads = torch.autograd.grad(x, inputs, torch.ones_like(x))     # weight gradients too
    assert launched["so2_bwd_relay_layer"] == NL - 1 and launched["so2_bwd_fused_layer"] == 0
    assert set(spy.seen) == {FP16X3}
    assert all(torch.isfinite(g).all() for g in grads)
    spy.seen.clear()
    with tilefuse.level(3), launches.counting() as launched:   # the force backward: weights without grad
        x = tilefuse.so2_mixing_stack(*inputs[:2], *[w.detach() for w in inputs[2:]], lmax=LMAX, focus_dim=CF)
        torch.autograd.grad(x, inputs[:2], torch.ones_like(x))
    assert launched["so2_bwd_fused_layer"] == NL - 1 and launched["so2_bwd_relay_layer"] == 0
    assert set(spy.seen) == {FP16X3}


def _entry(config, baseline_us, speedup, **extra):
    winner = "baseline" if config is None else so2_tune.FAMILY.config_to_dict(config)
    return {"winner": winner, "measured": {"baseline_us": baseline_us, "speedup": speedup, **extra}}


def test_a_variant_runs_only_where_it_beats_what_level_2_runs(tuning_table, device):
    """The level-3 key's speedup is over the exact heuristic relay; the exact keys' winners are
    also faster than it. The variant runs only where its speedup beats level 2's (from the exact
    keys' records: forward and backward baseline times per edge and speedups) by the route
    margin; an exact key without an entry counts at the heuristic's speed."""
    variant = VARIANTS[FP16X3]
    fwd, bwd = So2Config(64, 64, 16, 4, 2), So2Config(32, 128, 16, 4, 2)
    key = f"L{LMAX}-C{CF}-x4"
    validation = {"validation": _record(key + "-l3", variant)}
    d, inputs = make(LMAX, 1, CF, 37, device)

    def level3_engages(l3_speedup, exact_entries, **extra):
        tuning.unregister("so2_mixing_stack")
        register_entries("so2_mixing_stack", {key + "-l3": _entry(variant, 1000.0, l3_speedup, **validation,
                                                                           **extra), **exact_entries})
        with tilefuse.level(3):
            got = op.level3_config(d, torch.float32, 37, 1, NL)
        assert so2_tune.level3_beats_exact(_problem()) == (got is not None)
        return got is not None

    # Level 2 here: forward 400 us at 1.25x, backward 600 us at 1.2x -> 1000 / 820 = 1.2195x.
    exact = {key + "-fwd": _entry(fwd, 400.0, 1.25), key: _entry(bwd, 600.0, 1.2)}
    assert not level3_engages(1.24, exact)                     # 1.7% over level 2: under the 3% margin
    assert level3_engages(1.26, exact)                         # 3.3% over it
    # Per edge: the backward key swept at half the edges takes half the time for the same speed.
    half = so2_tune.DEFAULT_EDGES // 2
    resized = {key + "-fwd": exact[key + "-fwd"],
               key: _entry(bwd, 300.0, 1.2, sweep_problem=f"So2Problem(lmax={LMAX}, n_edges={half})")}
    assert not level3_engages(1.24, resized) and level3_engages(1.26, resized)
    # No exact entries: level 2 runs the heuristic, the margin is over 1.
    assert level3_engages(1.031, {}) and not level3_engages(1.029, {})
    # Only the backward swept (its baseline winner counts 1x): the forward's time is the rest.
    only_bwd = {key: _entry(bwd, 600.0, 1.2)}                  # 1000 / (400 + 500) = 1.111x
    assert not level3_engages(1.14, only_bwd) and level3_engages(1.15, only_bwd)
    assert level3_engages(1.031, {key: _entry(None, 600.0, 1.0)})
    # A variant registered without the timing records: nothing to compare, it runs.
    tuning.unregister("so2_mixing_stack")
    register_entries("so2_mixing_stack", {key + "-l3": {"winner": so2_tune.FAMILY.config_to_dict(variant),
                                                               "measured": validation}, **exact})
    with tilefuse.level(3):
        assert op.level3_config(d, torch.float32, 37, 1, NL) == variant


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
    gate = LaunchSpy(kernels.so2_fwd_gate_kernel, "S_PRECISION")     # the gate's scalar block
    monkeypatch.setattr(kernels, "so2_fwd_gate_kernel", gate)
    with tilefuse.level(3):   # no level-3 entry yet: exact
        _run_op(device)
    assert spy.seen and set(spy.seen) == {"ieee"} == set(gate.seen)

    if one_variant.precision == TF32X3:   # its validation rejects it (the range sets): installed as passed
        monkeypatch.setattr(so2_tune.So2Family, "validate", _passing_validate())
    if torch.device(device).type == "cuda":   # on the GPU the sweep's own timing decides; install the variant
        monkeypatch.setattr(so2_tune.So2Family, "validate", _passing_validate())
        monkeypatch.setattr(tuning.sweep, "choose_winner", lambda family, timed: timed[0].choice)
        monkeypatch.setattr(so2_tune, "level3_beats_exact", lambda problem: True)   # whatever it measured
    assert _sweep(device, one_variant).winner == one_variant

    for level in (0, 1, 2):
        spy.seen.clear()
        gate.seen.clear()
        with tilefuse.level(level):
            _run_op(device)
        assert set(spy.seen) == (set() if level == 0 else {"ieee"}), level     # level 0: the reference
        assert set(gate.seen) == set(spy.seen), level

    spy.seen.clear()
    gate.seen.clear()
    with tilefuse.level(3):
        x3, g3 = _run_op(device)
    assert spy.seen and set(spy.seen) == {one_variant.dot_precision(True)}   # forward and backward GEMMs
    assert gate.seen and set(gate.seen) == {one_variant.gate_precision(True)}

    spy.seen.clear()
    gate.seen.clear()
    with tilefuse.level(3):   # another key (lmax 2) has no level-3 entry: exact
        _run_op(device, lmax=2)
    assert set(spy.seen) == {"ieee"} == set(gate.seen)

    spy.seen.clear()
    with tilefuse.level(2):
        x2, g2 = _run_op(device)
    # split products carry ~2**-21 relative error each (the split tests): within fp32's class
    torch.testing.assert_close(x3, x2, rtol=1e-5, atol=1e-5)
    for a, b in zip(g3, g2):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_level3_variant_under_torch_compile_custom_ops(tuning_table, one_variant, monkeypatch, device):
    """The custom ops (torch.compile's path) decide the variant when they run, as eager does."""
    if one_variant.precision == TF32X3:   # its validation rejects it (the range sets): installed as passed
        monkeypatch.setattr(so2_tune.So2Family, "validate", _passing_validate())
    if torch.device(device).type == "cuda":
        monkeypatch.setattr(so2_tune.So2Family, "validate", _passing_validate())
        monkeypatch.setattr(tuning.sweep, "choose_winner", lambda family, timed: timed[0].choice)
        monkeypatch.setattr(so2_tune, "level3_beats_exact", lambda problem: True)   # whatever it measured
    assert _sweep(device, one_variant).winner == one_variant
    spy = LaunchSpy(kernels.so2_gemm_kernel, "DOT_PRECISION")
    monkeypatch.setattr(kernels, "so2_gemm_kernel", spy)
    gate = LaunchSpy(kernels.so2_fwd_gate_kernel, "S_PRECISION")
    monkeypatch.setattr(kernels, "so2_fwd_gate_kernel", gate)
    d, inputs = make(LMAX, 1, CF, 37, device)
    with tilefuse.level(3):
        saved = torch.ops.tilefuse.so2_stack_fwd(*[t.detach() for t in inputs], LMAX, CF, True)
        torch.ops.tilefuse.so2_stack_bwd(torch.randn_like(saved[0]), *saved,
                                         *[t.detach() for t in inputs[1:]], LMAX, CF, True, False)
    assert spy.seen and set(spy.seen) == {one_variant.dot_precision(True)}
    assert gate.seen and set(gate.seen) == {one_variant.gate_precision(True)}


def test_level3_summary_says_why_the_exact_path_runs(monkeypatch):
    """tilefuse check's level-3 rows: the variant, or which of level3_config's reasons sends a
    level-3 call down the exact path."""
    d = So2Dims(1, 32)
    variant = VARIANTS[sorted(VARIANTS)[0]]
    monkeypatch.setattr(op, "lookup_config", lambda family, problem: None)
    assert op.level3_summary(d, 64, 2, NL) == "exact: no validated level-3 entry for the key"
    monkeypatch.setattr(op, "lookup_config", lambda family, problem: configs.heuristic(1, 32))
    assert op.level3_summary(d, 64, 2, NL) == "exact: the exact path won the key's level-3 sweep"
    monkeypatch.setattr(op, "lookup_config", lambda family, problem: variant)
    monkeypatch.setattr(so2_tune, "level3_beats_exact", lambda problem: False)
    assert op.level3_summary(d, 64, 2, NL) == (f"exact: the validated variant {variant.name} does not beat "
                                               f"level 2 by the route margin")
    monkeypatch.setattr(so2_tune, "level3_beats_exact", lambda problem: True)
    monkeypatch.setattr(op, "level3_trains", lambda *a: False)
    assert op.level3_summary(d, 64, 2, NL) == variant.name
    assert op.level3_summary(d, 64, 2, NL, training=True).startswith(f"{variant.name} forward; the training "
                                                                     f"backward exact")
    monkeypatch.setattr(op, "level3_trains", lambda *a: True)
    assert op.level3_summary(d, 64, 2, NL, training=True) == variant.name
