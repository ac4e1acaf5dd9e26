"""How the so2_mixing_stack backward reads its weights (issue 15).

The GEMM kernels read a weight tile (k, n) at ``k * w_stride_k + n * w_stride_n``; they are fast
when n, the tile's inner index, has unit stride, as in the forward (W contiguous). The backward
multiplies by W^T: reading it through W's swapped strides made every backward GEMM launch ~4.5x
slower than a forward one on the H200, so launch.backward now copies W^T contiguous once per call
and every backward GEMM (the final layer's, the relay's, the fused kernel) reads that copy with
the forward's convention. Here:

- every backward GEMM launch and every fused launch gets unit stride along n, and the matrix it
  reads through its strides is exactly this layer's W^T segment (relay with and without weight
  gradients, fused; contiguous, stored-as-transpose and sliced weights);
- the new reads give bitwise the results of the old swapped-stride reads (same products, same
  order: the gradients did not change);
- weights stored as their transpose (the case where the W^T "copy" is the caller's storage itself)
  give bitwise the contiguous call's output and gradients, relay and fused (the other layouts,
  transposed/sliced/strided/expanded, are in tests/test_layouts_so2_dyt_quant.py);
- on a GPU, the whole backward replays from a CUDA graph;
- the weight gradients, chunked over the edges (launch.weight_grad), match float64.
"""

import dataclasses
import inspect

import pytest
import torch

import tilefuse
from tilefuse import launches, tuning
from tilefuse.ops.so2_mixing_stack import kernels, launch
from tilefuse.ops.so2_mixing_stack import tune as so2_tune
from tilefuse.ops.so2_mixing_stack.configs import So2Config, heuristic
from tilefuse.ops.so2_mixing_stack.reference import So2Dims

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# Partial row tiles (37 edges) and partial column tiles (M0 = M1 = 32 < BLOCK_N = 64); two gated
# layers so the relay loop and the final layer both run.
L, CF, F, E, NL = 1, 16, 2, 37, 3
D = So2Dims(L, CF)
FUSED = So2Config(16, 64, CF, 4, 1, fused=True)
RELAY = heuristic(L, CF)


def _inputs(seed=0, n_edges=E):
    g = torch.Generator().manual_seed(seed)

    def randn(*shape, scale=1.0):
        return (torch.randn(shape, generator=g) * scale).to(DEVICE)

    return {
        "u0": randn(F, n_edges, D.row, scale=0.5),
        "alpha": (torch.rand((n_edges, F), generator=g) + 0.2).to(DEVICE),
        "w0_all": randn(NL, F, D.m0, D.m0, scale=D.m0 ** -0.5),
        "w1_all": randn(NL, F, D.m1, D.m1, scale=D.m1 ** -0.5),
        "gw_all": randn(NL - 1, F, CF, D.lg, scale=CF ** -0.5),
        "grad_out": randn(n_edges, F, D.row),
    }


def stored_transposed(w):
    """``w``'s values, stored as W^T contiguous (w.transpose(-1, -2) is contiguous)."""
    return w.transpose(-1, -2).contiguous().transpose(-1, -2)


def sliced(w):
    """``w``'s values inside a larger NaN buffer (storage offset, padded rows)."""
    base = torch.full(tuple(s + 3 for s in w.shape), float("nan"), dtype=w.dtype, device=w.device)
    idx = tuple(slice(1, 1 + s) for s in w.shape)
    base[idx] = w
    return base[idx]


WEIGHT_LAYOUTS = {"contiguous": lambda w: w, "stored-transposed": stored_transposed, "sliced": sliced}


class _Recorded:
    """Wraps a Triton kernel object: ``kernel[grid](...)`` records its arguments by name."""

    def __init__(self, kernel, log):
        self.kernel, self.log = kernel, log
        self.names = list(inspect.signature(kernel.fn).parameters)

    def __getitem__(self, grid):
        run = self.kernel[grid]

        def call(*args, **kwargs):
            self.log.append({**dict(zip(self.names, args)), **kwargs})
            return run(*args, **kwargs)
        return call


def _value(x):
    return int(getattr(x, "value", x))


@pytest.fixture
def recorded(monkeypatch):
    """{'gemm': [...], 'fused': [...]}: the arguments of every so2_gemm_kernel and
    so2_bwd_fused_kernel launch (launch.py imports them from kernels at call time)."""
    log = {"gemm": [], "fused": []}
    monkeypatch.setattr(kernels, "so2_gemm_kernel", _Recorded(kernels.so2_gemm_kernel, log["gemm"]))
    monkeypatch.setattr(kernels, "so2_bwd_fused_kernel", _Recorded(kernels.so2_bwd_fused_kernel, log["fused"]))
    return log


def _read_matrix(args):
    """The (F, K_LEN, N_LEN) matrix the kernel reads through the strides it was given (BWD and
    fused: N_START == K_START, so segment columns 0 .. N_LEN)."""
    w = args["w_ptr"]
    return torch.as_strided(w, (F, args["K_LEN"], args["N_LEN"]),
                            (args["w_focus_stride"], args["w_stride_k"], args["w_stride_n"]))


def _expected_bwd_weights(w0_all, w1_all, fused):
    """W^T segments in launch order: the final layer's pair, then per gated layer (last first)
    its pair; with ``fused`` the gated layers' pairs go to the fused kernel instead."""
    t = lambda w: w.transpose(-1, -2)  # noqa: E731
    final = [t(w0_all[NL - 1]), t(w1_all[NL - 1])]
    gated = [m for layer in range(NL - 2, -1, -1) for m in (t(w0_all[layer]), t(w1_all[layer]))]
    return (final, gated) if fused else (final + gated, [])


@pytest.mark.parametrize("layout", list(WEIGHT_LAYOUTS))
@pytest.mark.parametrize("route,weight_grads", [("relay", False), ("relay", True), ("fused", False)],
                         ids=["relay", "relay-weight-grads", "fused"])
def test_backward_gemms_read_weights_with_unit_inner_stride(recorded, route, weight_grads, layout,
                                                            one_intra_op_thread):
    ins = _inputs()
    w0_all, w1_all = (WEIGHT_LAYOUTS[layout](ins[k]) for k in ("w0_all", "w1_all"))
    x, z_all, u_final = launch.forward(ins["u0"], ins["alpha"], w0_all, w1_all, ins["gw_all"], D, True)
    recorded["gemm"].clear()
    cfg = FUSED if route == "fused" else RELAY
    grads = launch.backward(ins["grad_out"], x, z_all, u_final, ins["alpha"], w0_all, w1_all, ins["gw_all"],
                            D, True, weight_grads, config=cfg)
    assert all(torch.isfinite(t).all() for t in grads[:2])
    if weight_grads:
        assert all(torch.isfinite(t).all() for t in grads[2])
    bwd = [a for a in recorded["gemm"] if _value(a["MODE"]) in (_value(kernels.BWD), _value(kernels.BWD_HEAD))]
    assert len(bwd) == len(recorded["gemm"]), "the backward launches only BWD / BWD_HEAD-mode GEMMs"
    # the first GEMM reads grad_out itself (BWD_HEAD) unless the weight gradients need the head's g
    heads = [i for i, a in enumerate(recorded["gemm"]) if _value(a["MODE"]) == _value(kernels.BWD_HEAD)]
    assert heads == ([] if weight_grads else [0, 1])
    want_gemm, want_fused = _expected_bwd_weights(ins["w0_all"], ins["w1_all"], route == "fused")
    assert len(bwd) == len(want_gemm) and len(recorded["fused"]) == len(want_fused)
    for what, launched, wanted in (("BWD GEMM", bwd, want_gemm), ("fused", recorded["fused"], want_fused)):
        for i, (args, want) in enumerate(zip(launched, wanted)):
            m = args["K_LEN"]
            assert args["w_stride_n"] == 1, f"{what} launch {i}: inner (N) stride {args['w_stride_n']}, want 1"
            assert args["w_stride_k"] == m and args["w_focus_stride"] == m * m, \
                f"{what} launch {i}: strides {args['w_focus_stride'], args['w_stride_k']} (the forward's: {m * m, m})"
            assert torch.equal(_read_matrix(args), want), f"{what} launch {i} reads the wrong matrix"


def test_forward_gemms_keep_unit_inner_stride(recorded, one_intra_op_thread):
    """The convention the backward now matches (and that the forward must keep)."""
    ins = _inputs()
    launch.forward(ins["u0"], ins["alpha"], sliced(ins["w0_all"]), ins["w1_all"], ins["gw_all"], D, True)
    assert len(recorded["gemm"]) == 2 * NL
    assert all(a["w_stride_n"] == 1 for a in recorded["gemm"])


def _old_bwd_gemm(a, w, res, out, k_start, k_len, cfg):
    """The pre-issue-15 launch: W read through its swapped strides (kernel docstring's W^T)."""
    grid = launch.tiled_grid(F, E, k_len, cfg)
    kernels.so2_gemm_kernel[grid](
        a, w, w, out, res, out, out, out, out, F, E, D.row, k_start, k_len, k_start, k_len, D.focus_dim, D.lg,
        w.stride(0), w.stride(2), w.stride(1), MODE=kernels.BWD, APPLY_ALPHA=False, DOT_PRECISION="ieee",
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, num_warps=cfg.num_warps,
        num_stages=cfg.num_stages)


def _old_fused(g_cur, z, gw, w0, w1, out, cfg):
    for w, start, length, seg_m0 in ((w0, 0, D.m0, True), (w1, D.m0, D.m1, False)):
        kernels.so2_bwd_fused_kernel[launch.tiled_grid(F, E, length, cfg)](
            g_cur, z, gw, out, w, w, out, out, E, D.row, D.m0, D.lg, start, length, start, length,
            w.stride(0), w.stride(2), w.stride(1), SEGMENT_M0=seg_m0, SIGMA_LOADED=False,
            DOT_PRECISION="ieee", BLOCK_M=cfg.block_m,
            BLOCK_N=cfg.block_n, CF_P=D.focus_dim, num_warps=cfg.num_warps, num_stages=cfg.num_stages)


def test_new_weight_reads_equal_the_old_swapped_stride_reads_bitwise(one_intra_op_thread):
    """Same products from another address, in the same K order: the backward's values are
    unchanged by the W^T copies (the relay GEMM pair and the fused layer, on NaN-poisoned outputs)."""
    ins = _inputs(seed=3)
    w0, w1, gw = ins["w0_all"][0], ins["w1_all"][0], ins["gw_all"][0]
    g_cur = torch.randn(F, E, D.row, generator=torch.Generator().manual_seed(4)).to(DEVICE)
    z = torch.randn(F, E, D.row, generator=torch.Generator().manual_seed(5)).to(DEVICE)
    poisoned = lambda: torch.full_like(g_cur, float("nan"))  # noqa: E731

    new, old = poisoned(), poisoned()
    launch._gemm_t(z, launch.transposed(w0), launch.transposed(w1), g_cur, new, D, RELAY)
    _old_bwd_gemm(z, w0, g_cur, old, 0, D.m0, RELAY)
    _old_bwd_gemm(z, w1, g_cur, old, D.m0, D.m1, RELAY)
    assert not new.isnan().any() and torch.equal(new, old)

    new, old = poisoned(), poisoned()
    launch.fused_layer(g_cur, z, gw, launch.transposed(w0), launch.transposed(w1), new, D, FUSED)
    _old_fused(g_cur, z, gw, w0, w1, old, FUSED)
    assert not new.isnan().any() and torch.equal(new, old)


@pytest.fixture(params=["relay", "fused"])
def route(request, tuning_table):
    if request.param == "fused":
        tuning.register("so2_mixing_stack", {so2_tune.So2Problem(L, CF, 4): FUSED})
    with tilefuse.level(2):
        yield request.param


def _run(ins, route):
    """(x_local, grads): all five tensors' gradients on the relay, (u0, alpha)'s on the fused route."""
    names = ("u0", "alpha", "w0_all", "w1_all", "gw_all")
    wanted = names if route == "relay" else names[:2]
    leaves = {k: ins[k].detach().requires_grad_(k in wanted) for k in names}
    with launches.counting() as launched:
        x = tilefuse.so2_mixing_stack(*(leaves[k] for k in names), lmax=L, focus_dim=CF)
        grads = torch.autograd.grad(x, [leaves[k] for k in wanted], ins["grad_out"])
    assert launched[f"so2_bwd_{route}_layer"] == NL - 1, "the route under test must run"
    return [x.detach(), *grads]


def test_weights_stored_as_their_transpose_match_contiguous(route, one_intra_op_thread):
    """W^T storage: the backward's W^T is then the caller's own storage (no copy), read only."""
    ins = _inputs(seed=1)
    want = _run(ins, route)
    views = {**ins, "w0_all": stored_transposed(ins["w0_all"]), "w1_all": sliced(stored_transposed(ins["w1_all"]))}
    assert launch.transposed(views["w0_all"]).data_ptr() == views["w0_all"].data_ptr()
    before = [views[k].clone() for k in ("w0_all", "w1_all")]
    got = _run(views, route)
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.is_contiguous() and torch.equal(a, b), f"output {i}"
    for b, k in zip(before, ("w0_all", "w1_all")):
        assert torch.equal(b, views[k]), f"{k} must not be mutated"


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", [RELAY, FUSED], ids=["relay", "fused"])
def test_backward_captures_in_a_cuda_graph(cfg):
    """The W^T copies are device copies: the backward (head, W^T copies, GEMMs) replays from a
    CUDA graph with the eager results, on weights stored any way."""
    from gpu_helpers import assert_graph_replay_matches_eager
    ins = _inputs(seed=2)
    w0_all, w1_all = sliced(ins["w0_all"]), ins["w1_all"]
    x, z_all, u_final = launch.forward(ins["u0"], ins["alpha"], w0_all, w1_all, ins["gw_all"], D, True)

    def step():
        g_u, g_a, _ = launch.backward(ins["grad_out"], x, z_all, u_final, ins["alpha"], w0_all, w1_all,
                                      ins["gw_all"], D, True, False, config=cfg)
        return g_u, g_a

    assert_graph_replay_matches_eager(step)


# --- weight gradients: chunked over the edges -----------------------------------------------

@pytest.mark.parametrize("n_edges", [0, 1, 15, 37, 48, 200])
def test_weight_grad_chunks_the_edges_and_matches_float64(monkeypatch, n_edges):
    """launch.weight_grad on column slices of one surface (as the backward passes them): one
    batched GEMM of chunks per focus stream plus the remainder rows, within float32's worst-case
    dot bound of the float64 product; below two chunks, one GEMM."""
    monkeypatch.setattr(launch, "WGRAD_CHUNK_ROWS", 8)
    monkeypatch.setattr(launch, "WGRAD_MAX_CHUNKS", 5)
    g = torch.Generator().manual_seed(n_edges)
    surface = torch.randn(2, n_edges, 50, generator=g).to(DEVICE)
    a, b = surface[..., 3:19], surface[..., 20:44]
    batches, real_bmm = [], torch.bmm
    monkeypatch.setattr(torch, "bmm", lambda x, y: batches.append(x.shape[0]) or real_bmm(x, y))
    out = torch.full((2, 16, 24), float("nan"), device=DEVICE)
    assert launch.weight_grad(a, b, out) is out
    a64, b64 = a.double(), b.double()
    err = (out.double() - a64.transpose(-1, -2) @ b64).abs()
    bound = max(n_edges, 1) * torch.finfo(torch.float32).eps * (a64.abs().transpose(-1, -2) @ b64.abs())
    assert torch.all(err <= bound)
    chunks = min(5, n_edges // 8)
    assert batches == ([chunks] * 2 if chunks >= 2 else [])


def test_weight_grad_keeps_one_gemm_for_16_bit_inputs(monkeypatch):
    """16-bit partials would round to 16 bits before their sum: one GEMM (float32 inside)."""
    monkeypatch.setattr(launch, "WGRAD_CHUNK_ROWS", 8)
    surface = torch.randn(1, 64, 40, generator=torch.Generator().manual_seed(0)).to(DEVICE, torch.bfloat16)
    batches, real_bmm = [], torch.bmm
    monkeypatch.setattr(torch, "bmm", lambda x, y: batches.append(x.shape[0]) or real_bmm(x, y))
    out = torch.empty((1, 8, 8), dtype=torch.bfloat16, device=DEVICE)
    launch.weight_grad(surface[..., :8], surface[..., 8:16], out)
    assert batches == []
    assert torch.equal(out, surface[..., :8].transpose(-1, -2) @ surface[..., 8:16])


def test_training_backward_with_chunked_weight_grads_matches_float64(monkeypatch):
    """The training backward (weight gradients) with the edges cut into chunks and a remainder
    (37 edges, chunks of 4: 9 chunks and 1 row) against the float64 reference."""
    from test_so2_kernels import REL_TOL, reference_grads, rel
    monkeypatch.setattr(launch, "WGRAD_CHUNK_ROWS", 4)
    ins = _inputs()
    args = [ins[k] for k in ("u0", "alpha", "w0_all", "w1_all", "gw_all")]
    x_local, z_all, u_final = launch.forward(*args, D, True)
    _, _, dws = launch.backward(ins["grad_out"], x_local, z_all, u_final, *args[1:], D, True, True)
    _, ref = reference_grads(args, L, CF, True, ins["grad_out"])
    for got, want in zip(dws, ref[2:5]):
        assert rel(got, want) < REL_TOL


def test_weight_gradients_are_ieee_whatever_the_callers_precision(monkeypatch):
    """The training backward's torch matmuls (the chunked weight gradients and the gate that
    recovers each layer's input) run with TF32 off although the caller asked for "medium",
    which is restored after."""
    monkeypatch.setattr(launch, "WGRAD_CHUNK_ROWS", 4)   # chunked (bmm) and remainder (@) GEMMs
    seen = []

    def spying(real):
        def spy(*args, **kwargs):
            seen.append(torch.get_float32_matmul_precision())
            return real(*args, **kwargs)
        return spy

    for name in ("matmul", "bmm"):
        monkeypatch.setattr(torch, name, spying(getattr(torch, name)))
    # the remainder GEMM and the gate's s @ gw are written with the @ operator
    monkeypatch.setattr(torch.Tensor, "__matmul__", spying(torch.Tensor.__matmul__))
    ins = _inputs()
    args = [ins[k] for k in ("u0", "alpha", "w0_all", "w1_all", "gw_all")]
    x_local, z_all, u_final = launch.forward(*args, D, True)
    saved = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        seen.clear()
        launch.backward(ins["grad_out"], x_local, z_all, u_final, *args[1:], D, True, True)
        assert torch.get_float32_matmul_precision() == "medium"     # restored
    finally:
        torch.set_float32_matmul_precision(saved)
    assert len(seen) >= 3 and set(seen) == {"highest"}


def test_ieee_blocks_overlapping_across_threads_restore_the_callers_precision():
    """utils.ieee_matmul blocks that open and close out of order (two threads) keep "highest"
    until the last one closes, then give back the setting from before the first."""
    from overlap import overlapping
    from tilefuse.utils import ieee_matmul
    saved = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        assert overlapping(ieee_matmul, torch.get_float32_matmul_precision) == "highest"
        assert torch.get_float32_matmul_precision() == "high"
        with ieee_matmul(), ieee_matmul():   # nested in one thread
            assert torch.get_float32_matmul_precision() == "highest"
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(saved)


def test_ieee_blocks_keep_16_bit_sums_whole_and_restore_the_callers_setting():
    """Inside utils.ieee_matmul cuBLAS's reduced-precision split-K reductions of 16-bit GEMMs
    are off (the weight gradients of 16-bit inputs contract over up to millions of edges); the
    caller's settings come back after the last block closes."""
    from tilefuse.utils import ieee_matmul
    m = torch.backends.cuda.matmul
    saved = (m.allow_bf16_reduced_precision_reduction, m.allow_fp16_reduced_precision_reduction)
    try:
        m.allow_bf16_reduced_precision_reduction, m.allow_fp16_reduced_precision_reduction = True, False
        with ieee_matmul():
            with ieee_matmul("cpu"):
                assert not m.allow_bf16_reduced_precision_reduction and not m.allow_fp16_reduced_precision_reduction
            assert not m.allow_bf16_reduced_precision_reduction
        assert (m.allow_bf16_reduced_precision_reduction, m.allow_fp16_reduced_precision_reduction) == (True, False)
    finally:
        m.allow_bf16_reduced_precision_reduction, m.allow_fp16_reduced_precision_reduction = saved


def _fp32_precision_settings() -> dict:
    """Every float32 precision setting torch reads: the legacy matmul precision and cuBLAS TF32
    flag ("mixed" where torch refuses to read them: the two APIs mixed) and each per-backend
    ``fp32_precision`` (the generic one, cuBLAS's, oneDNN's and cuDNN's)."""
    b = torch.backends

    def legacy(read):
        try:
            return read()
        except RuntimeError:
            return "mixed"
    settings = {"legacy matmul": legacy(torch.get_float32_matmul_precision),
                "legacy cublas tf32": legacy(lambda: b.cuda.matmul.allow_tf32)}
    for name, where in [("generic", b), ("cuda.matmul", b.cuda.matmul), ("mkldnn", b.mkldnn),
                        ("mkldnn.matmul", getattr(b.mkldnn, "matmul", None)), ("cudnn", b.cudnn),
                        ("cudnn.conv", getattr(b.cudnn, "conv", None)), ("cudnn.rnn", getattr(b.cudnn, "rnn", None))]:
        settings[name] = getattr(where, "fp32_precision", None)
    return settings


def _default_fp32_precision() -> None:
    """torch's defaults for what the tests below set: legacy "highest", every setting "none"."""
    torch.set_float32_matmul_precision("highest")       # writes "ieee" to cuBLAS's and oneDNN's
    for backend, op in [("generic", "all"), ("cuda", "all"), ("mkldnn", "all"), ("cuda", "matmul"),
                        ("mkldnn", "matmul")]:
        torch._C._set_fp32_precision_setter(backend, op, "none")


@pytest.mark.skipif(not hasattr(torch._C, "_set_fp32_precision_setter"), reason="no per-backend fp32_precision")
@pytest.mark.parametrize("callers", ["default", "legacy high", "generic tf32", "cuda.matmul tf32", "allow_tf32"])
def test_ieee_blocks_give_back_every_precision_setting_as_it_was(callers):
    """After utils.ieee_matmul blocks (nested, one raising) every float32 precision setting reads
    as before, "none" included (follow the generic setting), whichever API set it: the block's
    legacy "highest" writes "ieee" to cuBLAS's and oneDNN's matmul settings, which, left so,
    keep a later ``torch.backends.fp32_precision = "tf32"`` (or "ieee") from either backend.
    The later change reaches what it reaches without the block."""
    from tilefuse.utils import ieee_matmul
    b = torch.backends
    setup = {"default": lambda: None, "legacy high": lambda: torch.set_float32_matmul_precision("high"),
             "generic tf32": lambda: setattr(b, "fp32_precision", "tf32"),
             "cuda.matmul tf32": lambda: setattr(b.cuda.matmul, "fp32_precision", "tf32"),
             "allow_tf32": lambda: setattr(b.cuda.matmul, "allow_tf32", True)}[callers]
    later = "tf32" if callers == "default" else "ieee"

    def after_later(block):
        _default_fp32_precision()
        setup()
        before = _fp32_precision_settings()
        if block:
            with pytest.raises(ZeroDivisionError), ieee_matmul():
                with ieee_matmul("cpu"):
                    assert (b.cuda.matmul.fp32_precision, b.mkldnn.matmul.fp32_precision) == ("ieee", "ieee")
                1 / 0
            assert _fp32_precision_settings() == before
        b.fp32_precision = later
        return _fp32_precision_settings()

    try:
        assert after_later(True) == after_later(False)
        if callers == "default":
            assert (b.cuda.matmul.fp32_precision, b.mkldnn.matmul.fp32_precision) == ("tf32", "tf32")
    finally:
        _default_fp32_precision()


@pytest.mark.parametrize("apply_alpha", [True, False], ids=["alpha", "no-alpha"])
@pytest.mark.parametrize("dtype,precision", [(torch.float32, "ieee"), (torch.bfloat16, "ieee"),
                                             (torch.float32, "3xfp16")],   # the level-3 split: fp32 only
                         ids=["ieee-fp32", "ieee-bf16", "3xfp16-fp32"])
def test_first_gemm_reading_grad_out_matches_the_stored_head(dtype, apply_alpha, precision, one_intra_op_thread):
    """Without weight gradients the backward's first GEMM reads grad_out itself (BWD_HEAD: a and
    the residual as grad_out * alpha, rounded to the gradient's dtype) and the head stores no g;
    with them the head stores g and that GEMM reads it (BWD). Both give bitwise the same grad_u0
    and grad_alpha, relay and fused, exact and 3xfp16 (the level-3 split of a); grad_out is
    edge-major with partial row tiles (37 edges), so a wrong row mapping changes the result."""
    ins = {k: v.to(dtype) for k, v in _inputs(seed=3).items()}
    x, z_all, u_final = launch.forward(ins["u0"], ins["alpha"], ins["w0_all"], ins["w1_all"], ins["gw_all"], D,
                                       apply_alpha)
    relay = dataclasses.replace(RELAY, precision=precision)
    args = (ins["grad_out"], x, z_all, u_final, ins["alpha"], ins["w0_all"], ins["w1_all"], ins["gw_all"], D,
            apply_alpha)
    stored = launch.backward(*args, True, config=relay)
    folded = launch.backward(*args, False, config=relay)
    assert stored[2] is not None and folded[2] is None
    for name, a, b in (("grad_u0", stored[0], folded[0]), ("grad_alpha", stored[1], folded[1])):
        assert torch.isfinite(a).all() and torch.equal(a, b), f"{name}: folded head differs from the stored head"
    if dtype == torch.float32 and precision == "ieee":     # the fused route: exact float32 only
        fused_out = launch.backward(*args, False, config=FUSED)
        assert torch.equal(fused_out[0], stored[0]) and torch.equal(fused_out[1], stored[1])
