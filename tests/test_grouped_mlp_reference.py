"""grouped_glu_mlp reference (CPU): the per-expert reference against an independent dense
float64 formulation, the explicit backward against autograd, the GLU column layout, the geglu
clamp regions, and the unfused composition (torch._grouped_mm and loop paths) against the
reference."""

import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from tilefuse.ops.grouped_glu_mlp.reference import (GEGLU_ALPHA, GEGLU_LIMIT, expert_rows, glu_activation,
                                                    glu_activation_backward, glu_index, grouped_glu_mlp_backward_reference,
                                                    grouped_glu_mlp_reference, grouped_glu_mlp_unfused, split_glu,
                                                    uses_grouped_mm)


pytestmark = pytest.mark.usefixtures("one_intra_op_thread")


F64 = torch.float64
EPS64 = torch.finfo(F64).eps
EPS32 = torch.finfo(torch.float32).eps
GRAD_NAMES = ("dx", "dprobs", "dfc1_weight", "dfc2_weight", "dfc1_bias", "dfc2_bias")

# Splits: ragged counts with a zero-token expert in the middle and a 1-token expert, leading
# zero-token experts, a single expert, and no tokens at all.
COUNTS = [(5, 0, 9, 1), (0, 0, 7), (12,), (0, 0)]
H, F = 24, 64        # H on no power-of-two or 16-byte boundary; F = 2 blocks of s = 32
INTERLEAVES = [32, None]
ACTS = ["swiglu", "geglu"]


def counts_id(counts):
    return "counts" + "-".join(map(str, counts))


def make_inputs(counts, hidden=H, ffn=F, bias=True, seed=0, x_scale=1.0, dtype=F64):
    """Weights ~ N(0, 1/fan_in) keep z and y O(x_scale); probs in [0.1, 1.1) like router
    probabilities. ``x_scale`` 4 puts ~8% of z beyond geglu's clamp L = 7."""
    gen = torch.Generator().manual_seed(seed)
    n_experts, n_tokens = len(counts), sum(counts)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen, dtype=F64) * scale).to(dtype)

    args = {
        "x": randn(n_tokens, hidden, scale=x_scale),
        "tokens_per_expert": torch.tensor(counts, dtype=torch.int64),
        "probs": (torch.rand(n_tokens, generator=gen, dtype=F64) + 0.1).to(dtype),
        "fc1_weight": randn(n_experts, 2 * ffn, hidden, scale=hidden ** -0.5),
        "fc2_weight": randn(n_experts, hidden, ffn, scale=ffn ** -0.5),
        "fc1_bias": randn(n_experts, 2 * ffn, scale=0.5) if bias else None,
        "fc2_bias": randn(n_experts, hidden, scale=0.5) if bias else None,
    }
    return args, randn(n_tokens, hidden)


def call(fn, args, **kw):
    return fn(args["x"], args["tokens_per_expert"], args["probs"], args["fc1_weight"], args["fc2_weight"],
              fc1_bias=args["fc1_bias"], fc2_bias=args["fc2_bias"], **kw)


def call_backward(dy, args, **kw):
    return grouped_glu_mlp_backward_reference(dy, args["x"], args["tokens_per_expert"], args["probs"],
                                              args["fc1_weight"], args["fc2_weight"], fc1_bias=args["fc1_bias"],
                                              fc2_bias=args["fc2_bias"], **kw)


def upcast(args):
    return {k: (v.to(F64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v) for k, v in args.items()}


# ---------------------------------------------------------------------------------------------
# An independent float64 formulation: every expert on every row, then a 0/1 ownership mask.
# The GLU split is a reshape of the spec's block picture, the activations are written out from
# the spec's formulas, and nothing is shared with reference.py.
def dense_oracle(x, counts, probs, w1, w2, b1, b2, activation, interleave):
    n_experts, two_ffn, _ = w1.shape
    ffn = two_ffn // 2
    owner = torch.repeat_interleave(torch.arange(n_experts), torch.tensor(counts, dtype=torch.int64))
    mask = (owner[None, :] == torch.arange(n_experts)[:, None]).to(F64)          # (E, T)
    z = torch.einsum("th,eoh->eto", x, w1)                                       # (E, T, 2F)
    if b1 is not None:
        z = z + b1[:, None, :]
    if interleave is None:
        g, u = z[..., :ffn], z[..., ffn:]
    else:
        blocks = z.reshape(n_experts, x.shape[0], ffn // interleave, 2 * interleave)
        g = blocks[..., :interleave].reshape(n_experts, x.shape[0], ffn)
        u = blocks[..., interleave:].reshape(n_experts, x.shape[0], ffn)
    if activation == "swiglu":
        a = g / (1 + torch.exp(-g)) * u
    else:
        lim = 7.0
        gc = torch.where(g > lim, lim, g)
        uc = torch.where(u > lim, lim, torch.where(u < -lim, -lim, u))
        a = (uc + 1) * gc / (1 + torch.exp(-1.702 * gc))
    h = probs[None, :, None] * a                                                 # (E, T, F)
    y = torch.einsum("etf,ehf->eth", h, w2)
    if b2 is not None:
        y = y + probs[None, :, None] * b2[:, None, :]
    h_own = (mask[..., None] * h).sum(0)
    return (mask[..., None] * y).sum(0), h_own


# Tolerance of two float64 renderings of the same sums in different association orders. A
# K-term dot is within K eps * sum|terms| of the exact value (worst case); the forward chains an
# H-term dot, <= 12 pointwise roundings whose errors the activation's derivative (<= ~1.1 |u|
# relative to |a| ~ |g u|) passes on without growth, and an F-term dot; a backward entry adds one
# sum over an expert's rows (weight gradients) or over 2F columns (dx). So each side is off by
# <= k eps * sum|terms| with k = H + 2F + max(m_e) + 16 and the two differ by <= 2 k eps
# * sum|terms|. sum|terms| is stood in for by the largest entry of the result: for unit-scale
# random data it exceeds that entry by ~sqrt(K) at most, which the worst-case K (vs the typical
# sqrt(K)) growth absorbs.
def f64_tolerance(counts, hidden, ffn, reference):
    k = hidden + 2 * ffn + max(counts, default=0) + 16
    bound = 2 * k * EPS64
    return {"rtol": bound, "atol": bound * float(reference.abs().max()) if reference.numel() else 0.0}


# ---------------------------------------------------------------------------------------------
# Reference forward vs the dense formulation
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("interleave", INTERLEAVES, ids=lambda s: f"s{s}")
@pytest.mark.parametrize("activation", ACTS)
@pytest.mark.parametrize("counts", COUNTS, ids=counts_id)
def test_reference_matches_dense_formulation(counts, activation, interleave, bias):
    args, _ = make_inputs(counts, bias=bias, x_scale=4.0 if activation == "geglu" else 1.0)
    y = call(grouped_glu_mlp_reference, args, activation=activation, glu_interleave=interleave, compute_dtype=F64)
    y_dense, _ = dense_oracle(args["x"], counts, args["probs"], args["fc1_weight"], args["fc2_weight"],
                              args["fc1_bias"], args["fc2_bias"], activation, interleave)
    assert y.dtype == F64 and y.shape == (sum(counts), H)
    torch.testing.assert_close(y, y_dense, **f64_tolerance(counts, H, F, y_dense))


def test_reference_returns_x_dtype_and_computes_in_compute_dtype():
    args, _ = make_inputs((3, 2), bias=True)
    args32 = {k: (v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v) for k, v in args.items()}
    y64 = call(grouped_glu_mlp_reference, args32, compute_dtype=F64)
    y32 = call(grouped_glu_mlp_reference, args32)
    assert y64.dtype == y32.dtype == torch.float32
    # compute_dtype float64 rounds once, at the end: exactly the float64 result rounded.
    assert torch.equal(y64, call(grouped_glu_mlp_reference, upcast(args32), compute_dtype=F64).float())


@pytest.mark.parametrize("counts,match", [((3, 4), r"must sum to the number of rows of x \(T = 6\), got sum 7"),
                                          ((7, -1), "must be non-negative")])
def test_reference_checks_counts_on_the_host(counts, match):
    args, dy = make_inputs((4, 2))
    args["tokens_per_expert"] = torch.tensor(counts)
    with pytest.raises(ValueError, match="tokens_per_expert " + match):
        call(grouped_glu_mlp_reference, args, compute_dtype=F64)
    with pytest.raises(ValueError, match="tokens_per_expert " + match):
        call_backward(dy, args, activation="swiglu", glu_interleave=32, compute_dtype=F64)


# ---------------------------------------------------------------------------------------------
# Explicit backward vs autograd of the forward
def autograd_grads(args, dy, activation, interleave):
    names = ["x", "probs", "fc1_weight", "fc2_weight", "fc1_bias", "fc2_bias"]
    leaves = {k: (args[k].detach().clone().requires_grad_(True) if args[k] is not None else None) for k in names}
    leaf_args = {**args, **leaves}
    y = call(grouped_glu_mlp_reference, leaf_args, activation=activation, glu_interleave=interleave,
             compute_dtype=F64)
    present = [leaves[k] for k in names if leaves[k] is not None]
    grads = iter(torch.autograd.grad(y, present, dy, allow_unused=True))
    out = {}
    for name, grad_name in zip(names, GRAD_NAMES):
        if leaves[name] is None:
            out[grad_name] = None
        else:
            g = next(grads)
            out[grad_name] = torch.zeros_like(leaves[name]) if g is None else g
    return y, out


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("interleave", INTERLEAVES, ids=lambda s: f"s{s}")
@pytest.mark.parametrize("activation", ACTS)
@pytest.mark.parametrize("counts", COUNTS, ids=counts_id)
def test_explicit_backward_matches_autograd(counts, activation, interleave, bias):
    args, dy = make_inputs(counts, bias=bias, seed=1, x_scale=4.0 if activation == "geglu" else 1.0)
    _, expected = autograd_grads(args, dy, activation, interleave)
    got = call_backward(dy, args, activation=activation, glu_interleave=interleave,
               compute_dtype=F64)
    assert set(got) == set(GRAD_NAMES)
    for name in GRAD_NAMES:
        if expected[name] is None:
            assert got[name] is None, name
            continue
        assert got[name].shape == expected[name].shape and got[name].dtype == F64, name
        torch.testing.assert_close(got[name], expected[name], **f64_tolerance(counts, H, F, expected[name]),
                                   msg=lambda m, name=name: f"{name}: {m}")
    # Experts with zero tokens: exactly zero weight and bias gradients.
    for e, count in enumerate(counts):
        if count == 0:
            for name in ("dfc1_weight", "dfc2_weight", "dfc1_bias", "dfc2_bias"):
                if got[name] is not None:
                    assert torch.count_nonzero(got[name][e]) == 0, (name, e)


def test_explicit_backward_returns_each_inputs_dtype():
    args, dy = make_inputs((4, 0, 3), bias=True)
    args = {**args, "x": args["x"].float(), "fc1_weight": args["fc1_weight"].half(),
            "fc2_weight": args["fc2_weight"].bfloat16(), "fc1_bias": args["fc1_bias"].float(),
            "probs": args["probs"].bfloat16()}
    got = call_backward(dy.float(), args, activation="geglu", glu_interleave=None,
               compute_dtype=F64)
    assert [got[k].dtype for k in GRAD_NAMES] == [torch.float32, torch.bfloat16, torch.float16, torch.bfloat16,
                                                  torch.float32, F64]


# ---------------------------------------------------------------------------------------------
# GLU column layout
@pytest.mark.parametrize("ffn,s", [(64, 32), (96, 32), (12, 4), (6, 1), (8, 8), (10, None), (64, None)])
def test_glu_index_is_the_spec_formula_and_a_partition(ffn, s):
    gate, up = glu_index(ffn, s)
    assert gate.dtype == up.dtype == torch.int64 and gate.shape == up.shape == (ffn,)
    if s is None:
        expected_gate, expected_up = list(range(ffn)), list(range(ffn, 2 * ffn))
    else:
        expected_gate = [2 * s * (j // s) + j % s for j in range(ffn)]
        expected_up = [g + s for g in expected_gate]
    assert gate.tolist() == expected_gate and up.tolist() == expected_up
    # Every FC1 column is exactly one gate or one up column; the gate comes first in its pair.
    assert sorted(gate.tolist() + up.tolist()) == list(range(2 * ffn))
    assert bool((gate < up).all())


def test_interleave_32_keeps_pairs_inside_64_aligned_tiles():
    ffn = 256
    gate, up = glu_index(ffn, 32)
    assert torch.equal(gate // 64, up // 64)
    # Each 64-wide tile holds 32 whole pairs: gates in its first half, ups in its second.
    assert torch.equal(torch.bincount(gate // 64), torch.full((2 * ffn // 64,), 32))
    assert bool((gate % 64 < 32).all()) and bool((up % 64 >= 32).all())


def test_interleave_equal_to_ffn_is_halves():
    for a, b in zip(glu_index(48, 48), glu_index(48, None)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("s", [0, -2, 5, True, 2.0])
def test_glu_index_rejects_bad_interleave(s):
    with pytest.raises(ValueError, match="glu_interleave"):
        glu_index(12, s)


@pytest.mark.parametrize("ffn,s", [(64, 32), (12, 4), (10, None), (6, 6)])
def test_split_glu_views_equal_the_index_gather(ffn, s):
    z = torch.randn(5, 3, 2 * ffn)
    gate, up = split_glu(z, s)
    gate_idx, up_idx = glu_index(ffn, s)
    assert torch.equal(gate.reshape(5, 3, ffn), z[..., gate_idx])
    assert torch.equal(up.reshape(5, 3, ffn), z[..., up_idx])
    assert gate.data_ptr() == z.data_ptr()        # views: no copy


@pytest.mark.parametrize("activation", ACTS)
@pytest.mark.parametrize("s", [4, None], ids=lambda s: f"s{s}")
def test_reference_reads_gate_and_up_from_the_spec_columns(activation, s):
    """With x = 0 the FC1 output is b1; with W2 = I (H = F) and p = 1, y = a. So y_j must be
    act(b1[g(j)], b1[u(j)]) for g, u from the spec's block picture, spelled out here."""
    ffn = 12
    b1 = torch.linspace(-9, 9, 2 * ffn, dtype=F64)[torch.randperm(2 * ffn, generator=torch.Generator().manual_seed(3))]
    y = grouped_glu_mlp_reference(torch.zeros(2, ffn, dtype=F64), torch.tensor([2]), torch.ones(2, dtype=F64),
                                  torch.randn(1, 2 * ffn, ffn, dtype=F64), torch.eye(ffn, dtype=F64)[None],
                                  activation=activation, glu_interleave=s, fc1_bias=b1[None], compute_dtype=F64)
    for j in range(ffn):
        if s is None:
            g_col, u_col = j, ffn + j
        else:
            block, offset = divmod(j, s)
            g_col, u_col = 2 * s * block + offset, 2 * s * block + s + offset
        g, u = float(b1[g_col]), float(b1[u_col])
        if activation == "swiglu":
            expected = g / (1 + math.exp(-g)) * u
        else:
            gc, uc = min(g, 7.0), max(-7.0, min(u, 7.0))
            expected = (uc + 1) * gc / (1 + math.exp(-1.702 * gc))
        assert y[:, j].tolist() == pytest.approx([expected] * 2, rel=1e-13, abs=1e-13), j


# ---------------------------------------------------------------------------------------------
# Activations: every region of the clamped geglu, and both backward formulas vs autograd
L = GEGLU_LIMIT
GATE_POINTS = [-20.0, -L - 0.5, -L, -1.0, 0.0, 0.5, 3.0, L - 1e-9, L, L + 1e-9, L + 0.5, 20.0]
UP_POINTS = [-20.0, -L - 1e-9, -L, -L + 1e-9, -3.0, 0.0, 5.0, L, L + 1e-9, 20.0]


def activation_grid():
    g, u = torch.meshgrid(torch.tensor(GATE_POINTS, dtype=F64), torch.tensor(UP_POINTS, dtype=F64), indexing="ij")
    return g.reshape(-1), u.reshape(-1)


def test_geglu_forward_in_every_clamp_region():
    assert (L, GEGLU_ALPHA) == (7.0, 1.702)
    g, u = activation_grid()
    a = glu_activation(g, u, "geglu")
    for gi, ui, ai in zip(g.tolist(), u.tolist(), a.tolist()):
        gc = gi if gi <= L else L                      # the gate is clamped from above only
        uc = -L if ui < -L else (L if ui > L else ui)
        expected = (uc + 1) * gc / (1 + math.exp(-1.702 * gc))
        assert ai == pytest.approx(expected, rel=4 * EPS64, abs=4 * EPS64 * 20), (gi, ui)


@pytest.mark.parametrize("activation", ACTS)
def test_activation_backward_matches_autograd_in_every_region(activation):
    g, u = activation_grid()
    g, u = g.requires_grad_(True), u.requires_grad_(True)
    da = torch.linspace(-2, 2, g.numel(), dtype=F64)
    dg_auto, du_auto = torch.autograd.grad(glu_activation(g, u, activation), (g, u), da)
    dg, du = glu_activation_backward(da, g.detach(), u.detach(), activation)
    # The same few pointwise roundings in a different order: a few eps of the operands' scale.
    torch.testing.assert_close(dg, dg_auto, rtol=16 * EPS64, atol=16 * EPS64 * float(dg_auto.abs().max()))
    torch.testing.assert_close(du, du_auto, rtol=16 * EPS64, atol=16 * EPS64 * float(du_auto.abs().max()))
    if activation == "geglu":
        gd, ud = g.detach(), u.detach()
        # Clamped inputs get exactly zero gradient; the bounds themselves pass it (torch.clamp).
        assert torch.count_nonzero(dg[gd > L]) == 0 and torch.count_nonzero(du[(ud > L) | (ud < -L)]) == 0
        passing = (gd <= L) & (da != 0)
        assert bool((dg[passing & (ud != -1) & (ud > -L)] != 0).all())   # (u' + 1) = 0 at u = -1 only
        assert bool((du[(ud.abs() <= L) & (gd != 0) & (da != 0)] != 0).all())


def test_geglu_clamps_are_exercised_end_to_end():
    """The x_scale-4 inputs of the geglu grid put FC1 outputs in every clamp region, so the
    full-op backward comparisons above cover the masks, not only the activation unit test."""
    args, _ = make_inputs(COUNTS[0], bias=True, seed=1, x_scale=4.0)
    z = torch.cat([args["x"][s:e] @ args["fc1_weight"][k].t() + args["fc1_bias"][k]
                   for k, s, e in expert_rows(args["tokens_per_expert"], args["x"].shape[0])])
    gate_idx, up_idx = glu_index(F, 32)
    g, u = z[:, gate_idx], z[:, up_idx]
    assert int((g > L).sum()) > 0 and int((g < -L).sum()) > 0
    assert int((u > L).sum()) > 0 and int((u < -L).sum()) > 0


# ---------------------------------------------------------------------------------------------
# The unfused composition vs the reference
# Two shapes per dtype: 16-byte-aligned widths take torch._grouped_mm, others the loop.
UNFUSED_SHAPES = {torch.float32: [(32, 64), (30, 64)], torch.bfloat16: [(32, 64), (36, 64)]}


def unfused_leaves(args, dtype):
    return {k: (v.detach().to(dtype, copy=True).requires_grad_(True)
                if isinstance(v, torch.Tensor) and v.is_floating_point() else v) for k, v in args.items()}


# fp32 tolerance of the unfused composition against the float64 reference on the same
# (fp32-representable) inputs. Forward: FC1 is an H-term fp32 dot (<= H eps32 sum|terms|),
# FC2 an F-term one; the activation adds <= ~12 roundings. Backward: dh is an H-term dot,
# dx a 2F-term one, weight gradients sums over an expert's rows. Worst case k eps32 * sum|terms|
# with k = H + 2F + max(m_e) + 16, sum|terms| stood in for by the result's largest entry
# (see f64_tolerance). The reference's own float64 error is negligible beside it.
def fp32_tolerance(counts, hidden, ffn, reference):
    k = hidden + 2 * ffn + max(counts, default=0) + 16
    return {"rtol": k * EPS32, "atol": k * EPS32 * float(reference.abs().max()) if reference.numel() else 0.0}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("interleave", INTERLEAVES, ids=lambda s: f"s{s}")
@pytest.mark.parametrize("activation", ACTS)
@pytest.mark.parametrize("hidden,ffn", UNFUSED_SHAPES[torch.float32], ids=lambda v: str(v))
def test_unfused_fp32_matches_reference_with_gradients(hidden, ffn, activation, interleave, bias):
    counts = (5, 0, 9, 1)
    args, dy = make_inputs(counts, hidden=hidden, ffn=ffn, bias=bias, seed=2,
                           x_scale=4.0 if activation == "geglu" else 1.0, dtype=torch.float32)
    assert uses_grouped_mm(args["x"], ffn) == (hidden % 4 == 0)
    leaves = unfused_leaves(args, torch.float32)
    y = call(grouped_glu_mlp_unfused, leaves, activation=activation, glu_interleave=interleave)
    assert y.dtype == torch.float32
    y_ref = call(grouped_glu_mlp_reference, upcast(args), activation=activation, glu_interleave=interleave,
                 compute_dtype=F64)
    torch.testing.assert_close(y.double(), y_ref, **fp32_tolerance(counts, hidden, ffn, y_ref))

    grads_ref = call_backward(dy.double(), upcast(args), activation=activation,
                     glu_interleave=interleave, compute_dtype=F64)
    y.backward(dy)
    for name, grad_name in zip(("x", "probs", "fc1_weight", "fc2_weight", "fc1_bias", "fc2_bias"), GRAD_NAMES):
        if leaves[name] is None:
            continue
        got = leaves[name].grad
        assert got is not None and got.dtype == torch.float32, name
        torch.testing.assert_close(got.double(), grads_ref[grad_name],
                                   **fp32_tolerance(counts, hidden, ffn, grads_ref[grad_name]),
                                   msg=lambda m, name=name: f"{name}: {m}")
        if grad_name.startswith("dfc"):
            assert torch.count_nonzero(got[1]) == 0, name      # expert 1 has no tokens


@pytest.mark.parametrize("interleave", INTERLEAVES, ids=lambda s: f"s{s}")
@pytest.mark.parametrize("activation", ACTS)
@pytest.mark.parametrize("hidden,ffn", UNFUSED_SHAPES[torch.bfloat16], ids=lambda v: str(v))
def test_unfused_bf16_forward_within_rounding_of_reference(hidden, ffn, activation, interleave):
    """bf16 inputs, fp32 accumulation: the error is the roundings of z, h and y to bf16 (unit
    roundoff u = 2^-8 each), not the sums. A relative error r_a of the activation becomes at most
    r_a * sum_j |h_j w2_j| in y; r_a <= (2 + max|g|) u covers z's rounding through silu / the
    quick-gelu (relative derivative <= 1 + |g|), the up operand and h's rounding. So
    |y - y_ref| <= (2 + max|g|) u * sum_j |h_j w2_j| + u |y_ref| (+ fp32 sums, negligible)."""
    counts = (5, 0, 9, 1)
    args, _ = make_inputs(counts, hidden=hidden, ffn=ffn, bias=True, seed=4, dtype=torch.bfloat16)
    assert uses_grouped_mm(args["x"], ffn) == (hidden % 8 == 0)
    y = call(grouped_glu_mlp_unfused, args, activation=activation, glu_interleave=interleave)
    assert y.dtype == torch.bfloat16
    a64 = upcast(args)
    y_ref = call(grouped_glu_mlp_reference, a64, activation=activation, glu_interleave=interleave, compute_dtype=F64)
    _, h = dense_oracle(a64["x"], counts, a64["probs"], a64["fc1_weight"], a64["fc2_weight"], a64["fc1_bias"],
                        None, activation, interleave)
    owner = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts))
    terms = torch.einsum("tf,thf->th", h.abs(), a64["fc2_weight"][owner].abs())
    z = torch.cat([a64["x"][start:stop] @ a64["fc1_weight"][e].t() + a64["fc1_bias"][e]
                   for e, start, stop in expert_rows(a64["tokens_per_expert"], sum(counts))])
    max_g = float(z.abs().max())
    u = 2.0 ** -8
    bound = (2 + max_g) * u * terms + u * y_ref.abs()
    err = (y.double() - y_ref).abs()
    assert bool((err <= bound).all()), float((err / bound).max())


def test_unfused_reads_no_counts_on_the_host():
    """Under FakeTensorMode every value read raises: the torch._grouped_mm path runs forward and
    backward without one (bf16: the only dtype _grouped_mm's fake kernel accepts in torch 2.13),
    while the loop's expert ranges read the counts, which shows the check can fail (the unfused
    composition gives other fake inputs shapes only, as meta ones)."""
    with FakeTensorMode():
        args, dy = make_inputs((5, 0, 9, 1), hidden=32, ffn=64, bias=True, dtype=torch.bfloat16)
        leaves = unfused_leaves(args, torch.bfloat16)
        leaves["probs"] = args["probs"].float().requires_grad_(True)
        y = call(grouped_glu_mlp_unfused, leaves)
        y.backward(dy)
        assert y.shape == (15, 32) and leaves["fc1_bias"].grad.shape == (4, 128)
        with pytest.raises(Exception, match="local_scalar_dense|data-dependent|DataDependent|tolist"):
            expert_rows(args["tokens_per_expert"], 15)


@pytest.mark.parametrize("hidden", [32, 30], ids=["grouped_mm", "loop"])
@pytest.mark.parametrize("counts,dtype", [((5, 0, 8), torch.int64), ((9, -1, 7), torch.int64),
                                          ((2 ** 31 - 1, 2 ** 31 - 1, 17), torch.int32),
                                          ((2 ** 63 - 1, 2 ** 63 - 1, 17), torch.int64)],
                         ids=["sum-short", "negative", "int32-sum-wrap", "int64-sum-wrap"])
def test_unfused_checks_counts(hidden, counts, dtype):
    """Bad counts are caught, also those that sum to T = 15 only after a wrap."""
    args, _ = make_inputs((5, 0, 10), hidden=hidden, dtype=torch.float32)
    args["tokens_per_expert"] = torch.tensor(counts, dtype=dtype)
    # grouped_mm path: torch._assert_async (a device-side assert on CUDA; raises at once on CPU).
    exc, match = (RuntimeError, "tokens_per_expert must be non-negative and sum to T") if hidden == 32 \
        else (ValueError, "tokens_per_expert")
    with pytest.raises(exc, match=match):
        call(grouped_glu_mlp_unfused, args)


def test_unfused_backward_accepts_expanded_gradients():
    """y.sum().backward() hands torch._grouped_mm's backward a (0, 0)-strided gradient, which
    torch._grouped_mm refuses; the composition makes it contiguous first."""
    args, _ = make_inputs((5, 0, 9, 1), hidden=32, ffn=64, bias=False, dtype=torch.float32)
    leaves = unfused_leaves(args, torch.float32)
    assert uses_grouped_mm(leaves["x"], 64)
    call(grouped_glu_mlp_unfused, leaves).sum().backward()
    assert all(leaves[k].grad is not None for k in ("x", "probs", "fc1_weight", "fc2_weight"))


@pytest.mark.parametrize("hidden", [32, 30], ids=["grouped_mm", "loop"])
def test_unfused_is_deterministic_and_handles_empty_inputs(hidden):
    for counts in [(5, 0, 9, 1), (0, 0, 0, 0)]:
        args, dy = make_inputs(counts, hidden=hidden, bias=True, dtype=torch.float32)
        runs = []
        for _ in range(2):
            leaves = unfused_leaves(args, torch.float32)
            y = call(grouped_glu_mlp_unfused, leaves, activation="geglu")
            y.backward(dy)
            runs.append([y] + [leaves[k].grad for k in ("x", "probs", "fc1_weight", "fc2_weight", "fc1_bias",
                                                         "fc2_bias")])
        assert runs[0][0].shape == (sum(counts), hidden)
        for a, b in zip(*runs):
            assert torch.equal(a, b)
        if sum(counts) == 0:
            assert all(torch.count_nonzero(g) == 0 for g in runs[0][3:])
