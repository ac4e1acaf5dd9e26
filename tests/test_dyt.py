"""DyT correctness: the real Triton kernels (interpreter on CPU, compiled on a GPU) against a
float64 reference, with outputs and scratch poisoned before every run."""

import pytest
import torch

import tilefuse
from tilefuse import launches

from dyt_helpers import case_id, check_against_reference, make_inputs, poison_outputs, rows_for, run
from sm90_helpers import PTXAS

WIDTHS = [1, 7, 16, 48, 100, 128, 256, 257, 1000, 4096]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@pytest.fixture(autouse=True)
def _poison():
    with poison_outputs():
        yield


def _cases():
    for width in WIDTHS:
        for dtype in DTYPES:
            for param_dtype in sorted({torch.float32, dtype}, key=str):
                for bias in (True, False):
                    shape = (rows_for(width), width)
                    yield pytest.param(shape, dtype, param_dtype, bias,
                                       id=case_id(shape, dtype, param_dtype, bias))


@pytest.mark.parametrize("shape,dtype,param_dtype,bias", list(_cases()))
def test_channels_last_matches_reference(shape, dtype, param_dtype, bias, device):
    inputs = make_inputs(shape, dtype, param_dtype, bias, True, device)
    with launches.counting() as launched:
        outs = run(*inputs, channels_last=True)
    assert launched["dyt_fwd"] == 1 and launched["dyt_bwd"] == 1, "the Triton kernels must run"
    check_against_reference(*inputs, True, outs)


def test_leading_dims_and_65537_rows_narrow(device):
    """More rows than a CUDA grid's y/z dimension holds (65,535): the 1-D grid covers them."""
    inputs = make_inputs((65537, 16), torch.float32, torch.float32, True, True, device)
    check_against_reference(*inputs, True, run(*inputs, channels_last=True))
    inputs = make_inputs((3, 5, 7, 48), torch.bfloat16, torch.float32, True, True, device)
    check_against_reference(*inputs, True, run(*inputs, channels_last=True))


# (20, 3, 4, 5): a batch of 20, more per-row partials a channel than one block of the
# backward's second-stage reduction sums at a time (launch.REDUCE_BLOCK_P = 16).
@pytest.mark.parametrize("shape", [(2, 6, 5, 7), (3, 4, 64), (2, 3, 130), (4, 6, 1, 1), (5, 6), (20, 3, 4, 5)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_channels_first_matches_reference(shape, dtype, bias, device):
    inputs = make_inputs(shape, dtype, torch.float32, bias, False, device)
    y, *grads = outs = run(*inputs, channels_last=False)
    assert y.is_contiguous()
    check_against_reference(*inputs, False, outs)


@pytest.mark.parametrize("channels_last", [True, False], ids=["clast", "cfirst"])
def test_backward_reduction_sums_every_block_of_partials(channels_last, monkeypatch, device):
    """The backward's second-stage reduction walks its partials REDUCE_BLOCK_P at a time: with
    4 a block, the 16 or more row groups (channels-last; the interpreter has no more than 16)
    or 20 batch entries (channels-first) take several blocks, and every one must be summed into
    dweight, dbias and dalpha (a sum that kept the last block alone passed the suite before)."""
    from tilefuse.ops.dyt import launch
    from tilefuse.ops.dyt import plan as plans
    from tilefuse.ops.dyt.configs import DyTConfig
    monkeypatch.setattr(launch, "REDUCE_BLOCK_P", 4)
    from tilefuse.ops.plan_cache import PlanCache
    monkeypatch.setattr(plans, "_plans", PlanCache(lambda: 0))   # no cached plan's launches (16 a block)
    shape = (37, 48) if channels_last else (20, 3, 4, 5)
    x, a, w, b, dy = make_inputs(shape, torch.float32, torch.float32, True, channels_last, device, seed=5)
    cfg = DyTConfig(1, 64, 4, 8, False) if channels_last else None   # channels-last: 37 row blocks
    y = launch.forward(x.detach(), a.detach(), w.detach(), b.detach(), channels_last)
    dx, da, dw, db = launch.backward(dy, x.detach(), a.detach(), w.detach(), b.detach(), channels_last, config=cfg)
    check_against_reference(x, a, w, b, dy, channels_last, (y, dx, da, dw, db))


def test_channels_first_in_channels_last_memory_format(device):
    """NHWC-stored (N, C, H, W) input runs without a copy and keeps its memory format."""
    x, a, w, b, dy = make_inputs((3, 8, 5, 6), torch.float32, torch.float32, True, False, device)
    x = x.detach().to(memory_format=torch.channels_last).requires_grad_(True)
    dy = dy.to(memory_format=torch.channels_last)
    outs = run(x, a, w, b, dy, channels_last=False)
    assert outs[0].is_contiguous(memory_format=torch.channels_last)
    check_against_reference(x, a, w, b, dy, False, outs)


@pytest.mark.parametrize("alpha", [float("inf"), float("-inf")], ids=["+inf", "-inf"])
@pytest.mark.parametrize("channels_last", [True, False], ids=["clast", "cfirst"])
def test_infinite_alpha_matches_eager_on_real_elements(alpha, channels_last, device):
    """Padded lanes give tanh(inf * 0) = NaN; masking after the arithmetic keeps it out of the
    parameter gradients, which must equal eager PyTorch's."""
    shape = (37, 100) if channels_last else (3, 5, 7, 9)
    x, a, w, b, dy = make_inputs(shape, torch.float32, torch.float32, True, channels_last, device,
                                 alpha=alpha)
    y, dx, da, dw, db = run(x, a, w, b, dy, channels_last)

    xe, ae, we, be = (t.detach().clone().requires_grad_(True) for t in (x, a, w, b))
    view = (lambda p: p) if channels_last else (lambda p: p.reshape(1, -1, 1, 1))
    ye = view(we) * torch.tanh(ae * xe) + view(be)
    ye.backward(dy)
    torch.testing.assert_close(y, ye.detach(), rtol=0, atol=0)
    for name, got, ref in (("dalpha", da, ae.grad), ("dweight", dw, we.grad), ("dbias", db, be.grad)):
        assert torch.isfinite(got).all(), f"{name} has NaN/inf from padding"
        torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-5, msg=f"{name} differs from eager")
    # dx = alpha * dy * w * 0 = NaN in eager too (inf * 0); it must match, NaN for NaN.
    torch.testing.assert_close(dx, xe.grad, equal_nan=True)


def _eager_grads(x, a, w, b, dy, channels_last):
    """dx, dalpha, dweight, dbias of plain PyTorch ops (autograd) in x's and the parameters' dtypes."""
    xe, ae, we, be = (t.detach().clone().requires_grad_(True) for t in (x, a, w, b))
    view = (lambda p: p) if channels_last else (lambda p: p.reshape((1, -1) + (1,) * (x.dim() - 2)))
    (view(we) * torch.tanh(ae * xe) + view(be)).backward(dy)
    return xe.grad, ae.grad, we.grad, be.grad


@pytest.mark.parametrize("shape,channels_last,config", [
    ((5, 24), True, None), ((2, 3, 5), False, None),
    ((5, 24), True, (4, 32, False)), ((5, 24), True, (4, 32, True))],
    ids=["clast", "cfirst", "clast-M4", "clast-M4-prefetch"])
def test_infinite_weight_matches_eager(shape, channels_last, config, device):
    """An infinite weight reaches padded lanes (a partial row tile's padded rows hold their
    columns' weights; a channels-first row's padded columns hold that row's weight), where
    dy = 0 gives g = 0 * inf = NaN unless masked: dalpha must be eager's +inf (x, dy > 0), and
    dx, dweight, dbias eager's. Configs: the default one, and 4-row tiles (5 rows: a partial
    second tile) with and without the prefetching loop, on bfloat16 x (prefetch's dtype)."""
    from tilefuse.ops.dyt import launch
    from tilefuse.ops.dyt.configs import DyTConfig
    dtype = torch.float32 if config is None else torch.bfloat16
    g = torch.Generator().manual_seed(5)
    x = (torch.rand(shape, generator=g) + 0.1).to(dtype).to(device)      # positive: x * g = +inf, no -inf
    dy = (torch.rand(shape, generator=g) + 0.1).to(dtype).to(device)
    c = shape[-1] if channels_last else shape[1]
    a = torch.tensor([0.5], device=device)
    w = torch.ones(c, device=device)
    w[c // 2] = float("inf")
    b = torch.zeros(c, device=device)
    if config is None:
        _, *got = run(*(t.clone().requires_grad_(True) for t in (x, a, w, b)), dy, channels_last)
    else:
        cfg = DyTConfig(config[0], config[1], 4, 1, config[2])
        got = launch.backward(dy, x, a, w, b, channels_last, config=cfg)
    want = _eager_grads(x, a, w, b, dy, channels_last)
    assert got[1].item() == float("inf") == want[1].item()
    for name, got_t, want_t in zip(("dx", "dalpha", "dweight", "dbias"), got, want):
        torch.testing.assert_close(got_t, want_t, msg=f"{name} differs from eager")


@pytest.mark.parametrize("dtype,param_dtype", [(torch.bfloat16, torch.float32), (torch.float32, torch.bfloat16),
                                               (torch.float16, torch.bfloat16)],
                         ids=["bf16x-fp32p", "fp32x-bf16p", "fp16x-bf16p"])
def test_gradient_dtypes(dtype, param_dtype, device):
    x, a, w, b, dy = make_inputs((9, 40), dtype, param_dtype, True, True, device)
    a.data = a.data.to(torch.float16)  # alpha's dtype is independent of weight's
    y, dx, da, dw, db = run(x, a, w, b, dy, True)
    assert (y.dtype, dx.dtype) == (dtype, dtype)
    assert (da.dtype, dw.dtype, db.dtype) == (torch.float16, param_dtype, param_dtype)


@pytest.mark.parametrize("channels_last", [True, False], ids=["clast", "cfirst"])
def test_two_runs_bitwise_equal(channels_last, device):
    shape = (300, 48) if channels_last else (5, 6, 11, 13)
    inputs = make_inputs(shape, torch.bfloat16, torch.float32, True, channels_last, device, seed=3)
    first = run(*inputs, channels_last)
    for t in inputs[:4]:
        t.grad = None
    second = run(*inputs, channels_last)
    for f, s in zip(first, second):
        assert torch.equal(f, s)


def test_empty_input_gives_empty_output_and_zero_grads(device):
    for shape, channels_last in (((0, 16), True), ((0, 4, 3, 3), False), ((2, 4, 0), False)):
        x, a, w, b, dy = make_inputs(shape, torch.float32, torch.float32, True, channels_last, device)
        y, dx, da, dw, db = run(x, a, w, b, dy, channels_last)
        assert y.shape == x.shape and dx.shape == x.shape
        for g in (da, dw, db):
            assert torch.equal(g, torch.zeros_like(g))


def test_level_zero_runs_reference_and_level_one_runs_kernels(device):
    inputs = make_inputs((17, 32), torch.float32, torch.float32, True, True, device)
    with tilefuse.level(0), launches.counting() as launched:
        outs0 = run(*inputs, True)
    assert sum(launched.values()) == 0
    check_against_reference(*inputs, True, outs0)
    for t in inputs[:4]:
        t.grad = None
    with tilefuse.level(1), launches.counting() as launched:
        outs1 = run(*inputs, True)
    assert launched["dyt_fwd"] == 1 and launched["dyt_bwd"] == 1
    check_against_reference(*inputs, True, outs1)


def test_tanh_accuracy_over_range(device):
    """tanh_f32 (through the forward kernel with w = 1, b = 0, alpha = 1) within 3 ulp of
    float64 tanh from subnormal to saturated arguments, and exact at +-inf and NaN. Densest
    where the exp form's error is largest, just above the switch from the polynomial
    (|u| = 0.75, kernels._TANH_SMALL)."""
    mags = torch.logspace(-40, 2, 20001, dtype=torch.float64)
    near_switch = torch.linspace(0.70, 1.0, 30001, dtype=torch.float64)
    u = torch.cat([mags, -mags, torch.linspace(-1.2, 1.2, 8001, dtype=torch.float64),
                   near_switch, -near_switch]).float()
    x = torch.cat([u, torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0])]).to(device)
    one = torch.ones(1, device=device)
    y = tilefuse.dyt(x[:, None], one, torch.ones(1, device=device)).flatten().cpu()
    ref = torch.tanh(x.double().cpu())
    finite = torch.isfinite(x.cpu()) & (ref != 0)
    _, exponent = torch.frexp(ref[finite].float())   # |ref| = m * 2**e, m in [0.5, 1)
    ulp = torch.ldexp(torch.ones_like(ref[finite]), exponent.double() - 24)
    ulp = (y[finite].double() - ref[finite]).abs() / ulp
    assert ulp.max() <= 3.0, f"tanh error {ulp.max():.2f} ulp"
    assert y[-5:-3].tolist() == [1.0, -1.0] and torch.isnan(y[-3]) and y[-2] == 0 and y[-1] == 0


def test_fresh_inputs_leave_the_global_generator_alone(capsys):
    """make_inputs draws a fresh seed per call without reseeding torch's global generator (other
    tests in the worker draw their data from it) and prints the seed a failure is reproduced by."""
    after = []
    for _ in range(2):
        torch.manual_seed(0)
        make_inputs((2, 8), torch.float32, torch.float32, False, True, "cpu")
        after.append(torch.randn(4))
    assert torch.equal(after[0], after[1])
    seeds = [line.rsplit(" ", 1)[1] for line in capsys.readouterr().out.splitlines() if "seed" in line]
    assert len(seeds) == 2 and seeds[0] != seeds[1]


def test_reference_comparison_catches_errors(device):
    """The checker itself: a slightly wrong value, a NaN, or a wrong dtype each fail it."""
    from tilefuse.ops.dyt.verify import compare_to_reference
    inputs = make_inputs((33, 48), torch.float32, torch.float32, True, True, device)
    outs = run(*inputs, channels_last=True)
    assert all(c.ok for c in compare_to_reference(*inputs, True, outs))
    y, dx, da, dw, db = outs
    bumped = y.clone()
    # An absolute error of 1e-4: over 20x the bound wherever |w t| + |b| < 10 (8 u32 (|w t| + |b|)
    # + u32 |y|), whatever the random inputs; a relative bump can vanish where y cancels to ~0.
    bumped[7, 5] += 1e-4
    nan_dw = dw.clone()
    nan_dw[3] = float("nan")
    for bad, name in (((bumped, dx, da, dw, db), "y"), ((y, dx, da, nan_dw, db), "dweight"),
                      ((y, dx.double(), da, dw, db), "dx.dtype")):
        failed = [c.name for c in compare_to_reference(*inputs, True, bad) if not c.ok]
        assert failed == [name]


def test_reference_comparison_allows_the_error_of_one_minus_t_squared(device):
    """Where |alpha x| > ~4, 1 - t^2 is small against its absolute error (a few u32), which
    dalpha's terms x dy w (1 - t^2) carry: correct float32 dalphas, the kernels' and eager
    PyTorch's, pass at alpha = 3 (with a bound proportional to the terms alone, half of these
    seeds failed both by up to 2600x). At alpha = 0.5 (no saturation, dalpha well determined:
    a dalpha off by 1e-3 relative is 13x or more over the bound for these inputs) the correct
    ones pass and the wrong one fails. (At alpha = 3 so small a change can be within float32's
    own error: dalpha is then the sum of a few unsaturated terms.)"""
    from tilefuse.ops.dyt.verify import compare_to_reference
    for seed in range(6):
        g = torch.Generator().manual_seed(seed)
        x, w, b, dy = (torch.randn(6, generator=g).mul(s).to(device) for s in (3, 1, 1, 1))
        for a in (3.0, 0.5):
            alpha = torch.tensor([a], device=device)
            for fn in (tilefuse.dyt, lambda x, a, w, b: w * torch.tanh(a * x) + b):
                leaves = [t.clone().requires_grad_() for t in (x, alpha, w, b)]
                y = fn(*leaves)
                y.backward(dy)
                outs = (y, *(t.grad for t in leaves))
                assert [c.name for c in compare_to_reference(*leaves, dy, True, outs) if not c.ok] == [], (seed, a)
                if a == 0.5:
                    wrong = (y, outs[1], outs[2] * (1 + 1e-3), *outs[3:])
                    failed = [c.name for c in compare_to_reference(*leaves, dy, True, wrong) if not c.ok]
                    assert failed == ["dalpha"], seed


@pytest.mark.parametrize("shape,block_m,block_n", [((37, 48), 4, 64), ((301, 16), 16, 16), ((9, 1000), 1, 256)],
                         ids=["row-tiled", "narrow", "col-blocks"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_prefetch_backward_is_bitwise_the_plain_backward(shape, block_m, block_n, dtype, device):
    """The prefetching loop (next row block's loads first) does the same arithmetic in the
    same order as the plain loop with the same tile: dx and every gradient bitwise equal, and
    within the float64 bounds. Ragged rows and columns, partial tiles; one program per SM (two
    row groups under the interpreter), so each program visits several row blocks, the groups
    unevenly, and the last prefetch past the end is masked off. No tl.dot: the interpreter's
    result does not depend on numpy's BLAS."""
    from tilefuse.ops.dyt import launch
    from tilefuse.ops.dyt.configs import DyTConfig
    x, a, w, b, dy = make_inputs(shape, dtype, torch.float32, True, True, device, seed=11)
    outs = {}
    for prefetch in (False, True):
        cfg = DyTConfig(block_m, block_n, 8, 1, prefetch)
        with launches.counting() as launched:
            outs[prefetch] = launch.backward(dy, x.detach(), a.detach(), w.detach(), b.detach(), True, config=cfg)
        assert launched["dyt_bwd"] == 1
    for plain, pf in zip(outs[False], outs[True]):
        assert torch.equal(plain, pf)
    built = launch.BackwardLaunch(launch._layout(x, True), x.element_size(), True, x.device, cfg)
    assert built.main.kwargs["PREFETCH"] is True                       # the prefetching loop ran
    y = tilefuse.dyt(x.detach(), a.detach(), w.detach(), b.detach())
    check_against_reference(x, a, w, b, dy, True, (y, *outs[True]))


@pytest.mark.parametrize("shape,channels_last,block_m,block_n", [
    ((37, 48), True, 4, 64), ((301, 16), True, 16, 16), ((9, 1000), True, 1, 256), ((3, 5, 7, 9), False, 8, 64),
    ((60, 5, 3, 3), False, 2, 16)],
    ids=["row-tiled", "narrow", "col-blocks", "cfirst", "cfirst-many-blocks"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_prefetch_forward_is_bitwise_the_plain_forward(shape, channels_last, block_m, block_n, dtype, device):
    """The persistent prefetching forward computes the plain forward's tiles with the same
    arithmetic: y bitwise equal, every element written (outputs poisoned), within the float64
    bound. Ragged shapes, partial tiles, several row blocks per program (one program per SM:
    two under the interpreter), channels-first rows reading their channel's parameters: in
    "cfirst-many-blocks" each program's row blocks (150 of them, more than an H100 or H200 has
    SMs) hold other channels than its first one's (5 channels, not dividing a row group)."""
    from tilefuse.ops.dyt import launch
    from tilefuse.ops.dyt.configs import DyTConfig
    x, a, w, b, dy = make_inputs(shape, dtype, torch.float32, True, channels_last, device, seed=12)
    ys = {}
    for prefetch in (False, True):
        cfg = DyTConfig(block_m, block_n, 2, 1, prefetch)
        ys[prefetch] = launch.forward(x.detach(), a.detach(), w.detach(), b.detach(), channels_last, config=cfg)
    assert torch.equal(ys[False], ys[True])
    from tilefuse.ops.dyt import kernels
    built = launch.ForwardLaunch(launch._layout(x, channels_last), x.element_size(), True, x.device, cfg)
    assert built.launch.fn is kernels.dyt_fwd_persistent_kernel      # the prefetching kernel ran
    check_against_reference(x, a, w, b, None, channels_last, (ys[True], None, None, None, None))


def test_prefetch_configs_only_where_they_run():
    """prefetch is a candidate only for 16-bit x with 8+ elements a thread: in the backward
    channels-last only and at 8+ warps, in the forward (both layouts) at up to 8 warps;
    anywhere else it is outside the space (a table entry with it there is invalid). The
    heuristic's forward prefetches only at 4096 columns and more."""
    from tilefuse.ops.dyt import configs
    from tilefuse.ops.dyt.configs import DyTConfig, DyTProblem
    bf16_bwd = DyTProblem("bwd", 2 ** 20, 64, 2, False)
    pf = [c for c in configs.candidates(bf16_bwd) if c.prefetch]
    assert pf and all(c.num_warps >= 8 and c.block_m * c.block_n >= 256 * c.num_warps for c in pf)
    assert DyTConfig(64, 64, 8, 2, True).name == "M64-N64-w8-p2-pf"
    for problem in (DyTProblem("fwd", 2 ** 20, 64, 4, False), DyTProblem("bwd", 2 ** 20, 64, 4, False),
                    DyTProblem("bwd", 2 ** 20, 64, 2, True)):
        assert not any(c.prefetch for c in configs.candidates(problem))
        assert not configs.keep(problem, DyTConfig(64, 64, 8, 2, True))
    assert not configs.keep(bf16_bwd, DyTConfig(16, 64, 8, 2, True))       # 4 elements a thread
    for layout in (False, True):
        bf16_fwd = DyTProblem("fwd", 2 ** 20, 64, 2, layout)
        pf = [c for c in configs.candidates(bf16_fwd) if c.prefetch]
        assert pf and all(c.num_warps <= 8 and c.programs_per_sm <= 16 for c in pf)
        assert DyTConfig(8, 64, 2, 8, True) in pf
        assert not configs.heuristic(bf16_fwd).prefetch       # 64 columns: the plain forward
        assert not configs.keep(bf16_fwd, DyTConfig(64, 64, 16, 2, True))
    assert configs.heuristic(DyTProblem("fwd", 2 ** 14, 4096, 2, False)) == DyTConfig(1, 2048, 2, 8, True)


_SM90_PERSISTENT = r'''
import json
from sm90_helpers import compile_sm90
from tilefuse.ops.dyt import kernels as K

out = {}
sig = dict(dy_ptr="*bf16", x_ptr="*bf16", dx_ptr="*bf16", alpha_ptr="*fp32", weight_ptr="*fp32",
           dweight_part_ptr="*fp32", dbias_part_ptr="*fp32", dalpha_part_ptr="*fp32", n_rows="i32", n_cols="i32")
fwd_sig = dict(x_ptr="*bf16", y_ptr="*bf16", alpha_ptr="*fp32", weight_ptr="*fp32", bias_ptr="*fp32",
               n_rows="i32", n_cols="i32", n_channels="i32")
for n_groups in (1, None):              # 1: Triton passes an argument equal to 1 as a constant
    one = {"n_groups": 1} if n_groups == 1 else {}
    for prefetch in (False, True):
        s = dict(sig) if n_groups == 1 else dict(sig, n_groups="i32")
        ce = dict(HAS_BIAS=True, BLOCK_M=64, BLOCK_N=128, PREFETCH=prefetch, **one)
        c, usage = compile_sm90(K.dyt_bwd_cols_kernel, s, ce, divisible=["dy_ptr", "x_ptr", "dx_ptr", "n_cols"],
                                num_warps=16)
        out[f"bwd-pf{int(prefetch)}-groups{n_groups}"] = usage
    for per_row in (False, True):
        s = dict(fwd_sig) if n_groups == 1 else dict(fwd_sig, n_groups="i32")
        ce = dict(HAS_BIAS=True, PARAM_PER_ROW=per_row, BLOCK_M=8, BLOCK_N=256, **one)
        c, usage = compile_sm90(K.dyt_fwd_persistent_kernel, s, ce, divisible=["x_ptr", "y_ptr", "n_cols"],
                                num_warps=4)
        out[f"fwd-rows{int(per_row)}-groups{n_groups}"] = usage
print(json.dumps(out))
'''


@pytest.mark.parametrize("ptxas", PTXAS)
def test_persistent_kernels_compile_for_sm90_with_one_row_group(ptxas):
    """The backward (both loops) and the persistent forward (both layouts) compiled, not
    interpreted, with n_groups == 1, which Triton passes as a constant: a prefetching loop must
    not treat it as a tensor (the compile error this catches: results/2026-12-01-h200-i run 3).
    The interpreter always passes tensors, so only a compile for a GPU target catches this on a
    CPU."""
    from sm90_helpers import nvidia_compiler_available, run_compile_script
    if not nvidia_compiler_available():
        pytest.skip("Triton's NVIDIA backend (ptxas) is not installed")
    report = run_compile_script(_SM90_PERSISTENT, ptxas=ptxas)
    assert sorted(report) == sorted(f"{k}-groups{g}" for g in (1, None)
                                    for k in ("bwd-pf0", "bwd-pf1", "fwd-rows0", "fwd-rows1"))
