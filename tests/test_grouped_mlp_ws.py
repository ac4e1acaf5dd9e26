"""grouped_glu_mlp's warp-specialised fp8_block store GEMM (GemmConfig.ws, ws_kernels.py).

The contract: a ``ws`` config gives grouped_gemm_kernel's fp8_block result bit for bit, on
Hopper through fp8_ws_gemm_kernel (fc2 and the fc1 dgrad) and elsewhere (the CPU, other GPUs,
operands outside its layout) through grouped_gemm_kernel itself. On the CPU these tests check
the config, the dispatch and its fallback, the sweep's candidates and the sm_90 compile (no
spills, 4 + 4 + 1 warps, four wgmma a consumer a K chunk); on a Hopper GPU the kernel itself
against grouped_gemm_kernel, with skewed and empty experts, partial row tiles, bias, and few
persistent programs.
"""

import dataclasses

import pytest
import torch

from tilefuse import launches
from tilefuse.ops.grouped_glu_mlp import launch, recipes, ws_kernels
from tilefuse.ops.grouped_glu_mlp import tune as grouped_tune
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig, dglu_config, dglu_tile_n, glu_config, heuristic
from tilefuse.ops.grouped_glu_mlp.kernels import EPI_DGLU, EPI_GLU, EPI_STORE
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs

from sm90_helpers import PTXAS, nvidia_compiler_available, run_compile_script

HOPPER = torch.cuda.is_available() and ws_kernels.available(torch.device("cuda"))
WS = dataclasses.replace(heuristic("fwd", 2, "fp8_block"), ws=True)
WS_NOGLU = dataclasses.replace(WS, rows_glu=False)          # fc1 + GLU on the Triton GLU launch
WS_ONE_STREAM = dataclasses.replace(WS, side_stream=False)   # no second stream


def test_ws_config_is_checked_and_named():
    assert WS.name.endswith("-ws") and not heuristic("fwd", 2, "fp8_block").name.endswith("-ws")
    with pytest.raises(TypeError, match="ws"):
        GemmConfig(128, 128, 128, 8, 3, ws=1)
    with pytest.raises(ValueError, match="128x128x128"):
        GemmConfig(64, 128, 128, 4, 3, ws=True)
    with pytest.raises(ValueError, match="128x128x128"):
        GemmConfig(128, 128, 64, 8, 3, ws=True)
    # rows_glu off: with ws (or a rows tile) only; side_stream off: the kernels route only
    assert WS_NOGLU.name.endswith("-ws-noglu") and WS_ONE_STREAM.name.endswith("-ws-1stream")
    assert dataclasses.replace(WS_NOGLU, side_stream=False).name.endswith("-ws-noglu-1stream")
    assert dataclasses.replace(heuristic("fwd", 2, "fp8_block"), side_stream=False).name.endswith("-p2-1stream")
    with pytest.raises(ValueError, match="rows_glu"):
        GemmConfig(128, 128, 128, 8, 3, rows_glu=False)
    with pytest.raises(TypeError, match="side_stream"):
        GemmConfig(128, 128, 128, 8, 3, side_stream=0)
    with pytest.raises(ValueError, match="side_stream"):
        GemmConfig(256, 128, 64, 4, 3, 1, compose=True, side_stream=False)


def test_the_glu_and_dglu_launches_drop_ws():
    """Only the store GEMMs take the Gluon kernel: the GLU and dGLU configs derived from a ws
    config are the ones derived from the same config without it."""
    base = dataclasses.replace(WS, ws=False)
    for recipe in ("fp8_block", None):
        for cfg in (WS, WS_NOGLU):
            assert glu_config(cfg, recipe) == glu_config(base, recipe)
            assert dglu_config(cfg, recipe) == dglu_config(base, recipe)


def test_the_fp8_sweep_times_the_ws_config_and_only_the_fp8_sweep():
    fp8 = grouped_tune.GroupedProblem.of(16384, 4096, 3584, 8, 2, "swiglu", 32, False, "fp8_block")
    bf16 = dataclasses.replace(fp8, recipe="")
    # the ws config with fc1 + GLU in it or on the Triton launch, each on two streams or one
    variants = {WS, WS_NOGLU, WS_ONE_STREAM, dataclasses.replace(WS_NOGLU, side_stream=False)}
    assert variants <= set(grouped_tune.candidates_for(fp8))
    assert not any(c.ws or not c.side_stream for c in grouped_tune.candidates_for(bf16))
    assert all(grouped_tune.FAMILY.is_valid(grouped_tune.FAMILY.key(fp8), c) for c in variants)
    assert not grouped_tune.FAMILY.is_valid(grouped_tune.FAMILY.key(bf16), WS_ONE_STREAM)


def test_the_sweep_leaves_out_candidates_that_would_run_the_baselines_path(monkeypatch):
    """Where the Gluon kernels do not run (the CPU, a GPU other than Hopper) a compose config
    runs the compose route on torch._grouped_mm (the baseline) and a ws config the Triton
    kernels without ws: the sweep leaves those out (timing them would time the baseline
    against itself, and noise of 3% would record a winner), keeps one of the configs that still differ (a
    ws config on one stream: the heuristic tiles on one stream), and the table's space
    (candidates, is_valid) stays whole. Where Gluon runs, the sweep takes every candidate."""
    fp8 = grouped_tune.GroupedProblem.of(16384, 4096, 3584, 8, 2, "swiglu", 32, False, "fp8_block")
    bf16 = dataclasses.replace(fp8, recipe="")
    fam = grouped_tune.FAMILY
    monkeypatch.setattr(grouped_tune, "_ws_runs_here", lambda: False)
    assert any(c.compose for c in fam.candidates(bf16))
    assert not any(c.compose for c in fam.sweep_candidates(bf16))
    assert [c for c in fam.sweep_candidates(bf16)] == [c for c in fam.candidates(bf16) if not c.compose]
    assert [c for c in fam.sweep_candidates(fp8) if c.ws] == [WS_ONE_STREAM]
    assert [c for c in fam.sweep_candidates(fp8) if not c.ws] == [c for c in fam.candidates(fp8) if not c.ws]
    assert all(fam.is_valid(fam.key(fp8), c) for c in (WS, WS_NOGLU))
    monkeypatch.setattr(grouped_tune, "_ws_runs_here", lambda: True)
    assert fam.sweep_candidates(bf16) == fam.candidates(bf16) and fam.sweep_candidates(fp8) == fam.candidates(fp8)


def test_the_sweep_expects_the_gluon_launch_only_where_it_runs(monkeypatch):
    fp8 = grouped_tune.GroupedProblem.of(16384, 4096, 3584, 8, 2, "swiglu", 32, False, "fp8_block")
    base = dataclasses.replace(WS, ws=False)
    monkeypatch.setattr(grouped_tune, "_ws_runs_here", lambda: False)
    assert "grouped_fp8_ws_gemm" not in grouped_tune.FAMILY.expected_launches(fp8, WS)
    monkeypatch.setattr(grouped_tune, "_ws_runs_here", lambda: True)
    assert "grouped_fp8_ws_gemm" in grouped_tune.FAMILY.expected_launches(fp8, WS)
    assert "grouped_fp8_ws_gemm" not in grouped_tune.FAMILY.expected_launches(fp8, base)
    # fc1 + GLU through it too where a z tile holds whole groups: interleave 32, not the halves
    assert "grouped_fp8_ws_glu" in grouped_tune.FAMILY.expected_launches(fp8, WS)
    assert "grouped_fp8_ws_glu" in grouped_tune.FAMILY.expected_launches(fp8, WS_ONE_STREAM)
    assert "grouped_fp8_ws_glu" not in grouped_tune.FAMILY.expected_launches(fp8, base)
    assert grouped_tune.FAMILY.expected_launches(fp8, WS_NOGLU) == ("grouped_mlp_fwd", "grouped_mlp_bwd",
                                                                    "grouped_fp8_ws_gemm")
    # the fc2 dgrad + dGLU with it
    assert "grouped_fp8_ws_dglu" in grouped_tune.FAMILY.expected_launches(fp8, WS)
    assert "grouped_fp8_ws_dglu" not in grouped_tune.FAMILY.expected_launches(fp8, base)
    # and in the halves layout (a tile's gate and up halves)
    halves = dataclasses.replace(fp8, interleave=0)
    assert "grouped_fp8_ws_glu" in grouped_tune.FAMILY.expected_launches(halves, WS)
    assert "grouped_fp8_ws_dglu" in grouped_tune.FAMILY.expected_launches(halves, WS)
    assert "grouped_fp8_ws_glu" not in grouped_tune.FAMILY.expected_launches(halves, WS_NOGLU)
    # not where a z tile splits a group (interleave 4: ws_kernels.glu_applies)
    assert "grouped_fp8_ws_glu" not in grouped_tune.FAMILY.expected_launches(dataclasses.replace(fp8, interleave=4),
                                                                              WS)
    # float32 x (fp8_block takes it): z and dz float32, which the ws epilogues' buffers do not hold
    fp32 = dataclasses.replace(fp8, itemsize=4)
    assert not {"grouped_fp8_ws_glu", "grouped_fp8_ws_dglu"} & set(grouped_tune.FAMILY.expected_launches(fp32, WS))
    assert "grouped_fp8_ws_gemm" in grouped_tune.FAMILY.expected_launches(fp32, WS)
    assert "grouped_fp8_ws_gemm" in grouped_tune.FAMILY.expected_launches(halves, WS)
    monkeypatch.setattr(ws_kernels, "TAKES_GLU", False)
    assert "grouped_fp8_ws_glu" not in grouped_tune.FAMILY.expected_launches(fp8, WS)
    assert "grouped_fp8_ws_dglu" in grouped_tune.FAMILY.expected_launches(fp8, WS)
    monkeypatch.setattr(ws_kernels, "TAKES_DGLU", False)
    assert "grouped_fp8_ws_dglu" not in grouped_tune.FAMILY.expected_launches(fp8, WS)


def _quantized_operands(E, T, N, K, device, seed=0, counts=None):
    g = torch.Generator().manual_seed(seed)
    if counts is None:
        counts = [T // 2, 0, T - T // 2 - T // 7, T // 7][:E] + [0] * max(0, E - 4)
        counts[-1] += T - sum(counts)
    a = torch.randn(T, K, generator=g).bfloat16().to(device)
    w = (torch.randn(E, N, K, generator=g) * 0.05).bfloat16().to(device)
    counts = torch.tensor(counts, dtype=torch.int32, device=device)
    return recipes.quantize_rows("fp8_block", a), recipes.quantize_weight("fp8_block", w), counts


def test_applies_only_where_the_kernel_runs(device):
    qa, qw, counts = _quantized_operands(3, 64, 128, 128, device)
    c = torch.empty(64, 128, dtype=torch.bfloat16, device=device)
    ran = ws_kernels.launch(qa, qw, c, counts, N=128, stages=3)
    assert ran == HOPPER
    if HOPPER:   # the layout contract (the device is fine): a bad ring depth, a transposed output
        assert not ws_kernels.applies(qa, qw, c, 1) and not ws_kernels.applies(qa, qw, c, ws_kernels.MAX_STAGES + 1)
        assert not ws_kernels.applies(qa, qw, torch.empty(128, 64, dtype=c.dtype, device=device).t(), 3)


def test_glu_applies_takes_whole_groups_or_the_halves_only(monkeypatch):
    """fc1 + GLU through the ws kernel only where a 128-column z tile holds whole (gate, up)
    groups (an interleave of 8 to 64, a power of two) or a tile's gate and up halves (the halves
    layout: None or 0, not False), with h (T, F) of
    z's dtype, contiguous probs and an fc1 bias of 2F columns; the rest of ``applies`` as for
    the store GEMMs. (The device check is bypassed: the layout rules are the host's.)"""
    monkeypatch.setattr(ws_kernels, "available", lambda device: True)
    qa, qw, counts = _quantized_operands(3, 64, 256, 128, "cpu")
    z = torch.empty(64, 256, dtype=torch.bfloat16)
    h = torch.empty(64, 128, dtype=torch.bfloat16)
    probs = torch.rand(64)
    b1 = torch.zeros(3, 256, dtype=torch.bfloat16)
    for interleave in (8, 16, 32, 64, 0, None):
        assert ws_kernels.glu_applies(qa, qw, z, h, probs, b1, 0, interleave)
        assert ws_kernels.glu_applies(qa, qw, z, h, probs, None, 1, interleave)
    for interleave in (4, 24, 128, 32.0, True, False, 0.0):
        assert not ws_kernels.glu_applies(qa, qw, z, h, probs, b1, 0, interleave), interleave
    assert not ws_kernels.glu_applies(qa, qw, z, h, probs, b1, 2, 32)                  # no such activation
    assert not ws_kernels.glu_applies(qa, qw, z, h.half(), probs, b1, 0, 32)           # h not z's dtype
    assert not ws_kernels.glu_applies(qa, qw, z, torch.empty(64, 256, dtype=h.dtype), probs, b1, 0, 32)  # not (T, F)
    assert not ws_kernels.glu_applies(qa, qw, z, torch.empty(64, 256, dtype=h.dtype)[:, ::2], probs, b1, 0, 32)
    assert not ws_kernels.glu_applies(qa, qw, z, h, torch.rand(128)[::2], b1, 0, 32)   # probs strided
    assert not ws_kernels.glu_applies(qa, qw, z, h, None, b1, 0, 32)
    assert not ws_kernels.glu_applies(qa, qw, z, h, probs, b1[:, :128], 0, 32)         # bias of F columns
    assert not ws_kernels.glu_applies(qa, qw, z.t().contiguous().t(), h, probs, b1, 0, 32)   # z column-major
    # float32 z and h (fp8_block takes float32 x): the z buffer is 16-bit, so the Triton launch
    # runs fc1 (launch raised KeyError on its layout before)
    z32, h32 = z.float(), h.float()
    assert not ws_kernels.glu_applies(qa, qw, z32, h32, probs, b1.float(), 0, 32)
    assert not ws_kernels.launch(qa, qw, z32, counts, N=256, probs=probs, glu=(h32, 0, 32))


@pytest.mark.skipif(ws_kernels.gluon is None, reason="needs Gluon")
def test_the_ws_launch_hands_the_kernel_its_arguments_in_order(monkeypatch):
    """The host side of ws_kernels.launch, which only a Hopper GPU reaches otherwise: its
    SpecializingLauncher gets every parameter of fp8_ws_gemm_kernel, the constexprs in the
    kernel's order with their values, and the shared layouts made once (ws_wgrad._layout)."""
    from tilefuse.ops import triton_common
    from tilefuse.ops.grouped_glu_mlp.ws_wgrad import _layout
    seen = []

    class Launcher:
        def __init__(self, fn, **options):
            self.fn, self.options = fn, options

        def __call__(self, grid, args, constexprs):
            seen.append((self.fn, self.options, args, constexprs))

    qa, qw, counts = _quantized_operands(3, 64, 256, 128, "cpu")
    monkeypatch.setattr(triton_common, "specializing_launcher", Launcher)
    monkeypatch.setattr(ws_kernels, "applies", lambda *a: True)
    monkeypatch.setattr(ws_kernels, "glu_applies", lambda *a: True)
    monkeypatch.setattr(ws_kernels, "dglu_applies", lambda *a: True)
    monkeypatch.setattr(ws_kernels, "DGLU_STAGES", 3)
    z = torch.empty(64, 256, dtype=torch.bfloat16)
    h = torch.empty(64, 128, dtype=torch.bfloat16)
    part = torch.empty(64, 2, dtype=torch.float32)
    dz_rows = recipes.empty_fp8_rows(64, 256, "cpu")
    probs = torch.rand(64)
    assert ws_kernels.launch(qa, qw, z, counts, N=256, probs=probs, glu=(h, 0, 32))
    assert ws_kernels.launch(qa, qw, z, counts, N=256)
    assert ws_kernels.launch(qa, qw, z, counts, N=128, probs=probs, dglu=(z, part, 1, 16, dz_rows))
    assert ws_kernels.launch(qa, qw, z, counts, N=128, probs=probs, dglu=(z, part, 0, 32, None))
    assert ws_kernels.launch(qa, qw, z, counts, N=256, probs=probs, glu=(h, 1, None))   # the halves layout
    assert ws_kernels.launch(qa, qw, z, counts, N=128, probs=probs, dglu=(z, part, 0, None, None))
    with pytest.raises(ValueError, match="glu and dglu"):
        ws_kernels.launch(qa, qw, z, counts, N=256, probs=probs, glu=(h, 0, 32), dglu=(z, part, 0, 32, None))
    assert len(seen) == 6
    for (fn, options, args, constexprs), kind in zip(seen, ("glu", "store", "dglu-q", "dglu", "glu-halves",
                                                            "dglu-halves")):
        # (the interpreter may hand the launcher its own wrapper of the kernel: compare parameters)
        assert tuple(fn.arg_names) == tuple(ws_kernels.fp8_ws_gemm_kernel.arg_names)
        assert options == {"num_warps": 4, "maxnreg": ws_kernels.MAXNREG}
        assert len(args) + len(constexprs) == len(fn.arg_names)
        named = dict(zip(fn.arg_names[len(args):], constexprs))
        values = dict(zip(fn.arg_names, args))
        assert named["GLU"] == {"glu": 0, "glu-halves": 1}.get(kind, -1)
        assert named["DGLU"] == {"dglu-q": 1, "dglu": 0, "dglu-halves": 0}.get(kind, -1)
        assert named["INTERLEAVE"] == {"glu": 32, "dglu-q": 16, "dglu": 32}.get(kind, 0)   # halves: 0, not None
        assert named["QUANT_DZ"] == (kind == "dglu-q")
        # B's tiles: in the halves layout's fc1 half a tile's rows (its gate rows, then their up
        # rows, two loads), else the whole tile
        b_block = [ws_kernels.BLOCK // 2 if kind == "glu-halves" else ws_kernels.BLOCK, ws_kernels.BLOCK]
        assert list(args[1].block_shape) == b_block
        assert args[1].layout is _layout(tuple(b_block), torch.float8_e4m3fn)
        # the dGLU's ring is DGLU_STAGES deep (its float32 buffers take the rest of the SM's memory)
        assert named["STAGES"] == (3 if kind.startswith("dglu") else ws_kernels.MAX_STAGES)
        assert not named["HAS_BIAS"]
        assert named["BLOCK_M"] == named["BLOCK_N"] == named["BLOCK_K"] == ws_kernels.BLOCK
        assert (named["CONSUMER_REGS"], named["PRODUCER_REGS"]) == (ws_kernels.CONSUMER_REGS,
                                                                    ws_kernels.PRODUCER_REGS)
        if kind != "store":
            assert (named["Z_ROWS"], named["Z_COLS"]) == (ws_kernels.BLOCK // 2, ws_kernels.BLOCK)
            assert named["Z_LAYOUT"] is _layout((ws_kernels.BLOCK // 2, ws_kernels.BLOCK),
                                                torch.bfloat16 if kind.startswith("glu") else torch.float32)
        if kind.startswith("dglu"):
            assert values["z_ptr"] is z and values["part_ptr"] is part and values["probs_ptr"] is probs
            assert values["ldz"] == 256 and values["n_part_cols"] == 2 and values["N"] == 128
            assert (values["q_ptr"], values["q_scale_ptr"]) == ((dz_rows.data, dz_rows.scales) if kind == "dglu-q"
                                                                else (z, z))
        # F, the activation columns (the halves' gate-to-up distance): N / 2 of fc1's z columns,
        # the dGLU's N itself
        assert values["F"] == 128
        assert args[0].layout is _layout((ws_kernels.BLOCK, ws_kernels.BLOCK), torch.float8_e4m3fn)


@pytest.mark.parametrize("cfg", (WS, WS_NOGLU, WS_ONE_STREAM, dataclasses.replace(WS_NOGLU, side_stream=False)),
                         ids=lambda c: c.name)
@pytest.mark.parametrize("interleave", [32, None])
def test_a_ws_config_gives_the_triton_kernels_bits(cfg, interleave, device, monkeypatch):
    """The whole fp8_block forward and backward with a ws config equals the same config
    without it, bit for bit: through the Gluon kernel on Hopper (which must then launch for fc2
    and the fc1 dgrad, and for fc1 + GLU and the fc2 dgrad + dGLU unless rows_glu is off;
    dprobs, whose partials the ws dGLU sums in another order, to rounding there), through
    grouped_gemm_kernel elsewhere (the fallback); at interleave 32 and in the halves layout,
    whose dz the quantizer copies. With side_stream off no second stream is
    asked for (with it on, three forks on CUDA: W2's quantizer and the two weight gradients)."""
    from tilefuse.ops.grouped_glu_mlp import streams
    asked = []
    side_stream = streams.side_stream
    monkeypatch.setattr(streams, "side_stream", lambda *a: asked.append(a) or side_stream(*a))
    counts = [70, 0, 45, 13]
    i = random_inputs(counts, 128, 128, torch.bfloat16, bias=True, device=device,
                      generator=torch.Generator().manual_seed(3))
    outs = []
    for config in (dataclasses.replace(cfg, ws=False, rows_glu=True, side_stream=True), cfg):
        asked.clear()
        with launches.counting() as launched:
            y, z, h = launch.forward(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["b1"], i["b2"], "swiglu",
                                     interleave, config=config, recipe="fp8_block")
            grads = launch.backward(i["dy"], i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["b1"], i["b2"], z,
                                    h, "swiglu", interleave, config=config, recipe="fp8_block")
        assert launched["grouped_fp8_ws_gemm"] == (2 if config.ws and HOPPER else 0)
        # interleave 32 and the halves layout: the ws GLU applies
        assert launched["grouped_fp8_ws_glu"] == (1 if config.ws and config.rows_glu and HOPPER else 0)
        ws_dglu = launched["grouped_fp8_ws_dglu"]
        assert ws_dglu == (1 if config.ws and config.rows_glu and HOPPER else 0)   # F = 128
        assert len(asked) == (2 if config.side_stream else 0)   # the forward's and the backward's
        outs.append((y, z, h, *grads))
    for name, want, got in zip(("y", "z", "h", "dx", "dprobs", "dw1", "dw2", "db1", "db2"), *outs):
        if name == "dprobs" and ws_dglu:   # two float32 summation orders of each 64-wide half's products
            torch.testing.assert_close(got, want, rtol=0, atol=128 * torch.finfo(torch.float32).eps
                                       * want.abs().max().item())
            continue
        assert torch.equal(want.view(torch.int16) if want.dtype == torch.bfloat16 else want,
                           got.view(torch.int16) if got.dtype == torch.bfloat16 else got), name


def test_the_custom_ops_carry_every_kernels_route_field(monkeypatch):
    """Under torch.compile the kernels route runs through tilefuse::grouped_mlp_fwd / _bwd: their
    config arguments give back the config the table chose, ws, rows_glu, side_stream and
    maxnreg included (a field they did not carry would run another config when compiled)."""
    from tilefuse.ops.grouped_glu_mlp import op
    carried = {f.name for f in dataclasses.fields(GemmConfig)} - {"compose", "rows_block_n", "rows_stages"}
    for cfg in (WS, WS_NOGLU, WS_ONE_STREAM, heuristic("wgrad", 2, "fp8_block"), GemmConfig(64, 64, 32, 4, 3, 2)):
        args = op._op_config_args(cfg, "fp8_block")
        assert len(args) == len(carried) + 1 and args[7] == "fp8_block"
        assert op._op_config(*args[:7], *args[8:]) == cfg
    seen = []
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    monkeypatch.setattr(op, "grouped_mlp_fwd_op", lambda *a: seen.append(a) or (None,))
    i = random_inputs([3, 5], 128, 128, torch.bfloat16, bias=False, device="cpu",
                      generator=torch.Generator().manual_seed(0))
    # the trailing keep and keep_cols: the dgrad copies where a backward can run, the column-wise
    # copies only where a weight gradient will be asked for
    for trainable, keeps in (((), (False, False)), (("x",), (True, False)), (("x", "w2"), (True, True))):
        seen.clear()
        t = {k: i[k].clone().requires_grad_(k in trainable) for k in ("x", "probs", "w1", "w2")}
        op.fused_apply(t["x"], i["counts"], t["probs"], t["w1"], t["w2"], None, None, "swiglu", 32, WS_NOGLU,
                       "fp8_block")
        assert seen[0][9:-2] == op._op_config_args(WS_NOGLU, "fp8_block")
        assert seen[0][-2:] == keeps, trainable


_SM90_WS = r'''
import json
import re
import triton
from sm90_helpers import cubin_report
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from tilefuse.ops.grouped_glu_mlp import ws_kernels as W

out = {}
lay = gl.NVMMASharedLayout.get_default_for([W.BLOCK, W.BLOCK], gl.float8e4nv)
desc = "tensordesc<fp8e4nv[%d, %d],%s>" % (W.BLOCK, W.BLOCK, lay)
half_lay = gl.NVMMASharedLayout.get_default_for([W.BLOCK // 2, W.BLOCK], gl.float8e4nv)
half_desc = "tensordesc<fp8e4nv[%d, %d],%s>" % (W.BLOCK // 2, W.BLOCK, half_lay)   # the halves GLU's B
ints = ["T", "N", "K", "E", "n_tiles", "ldc", "a_scale_ld", "bs_e", "bs_k", "bs_n", "b_rows", "bias_e", "ldh", "ldz",
        "n_part_cols", "F"]
# (GLU, DGLU, interleave, ring, bias or dz's fp8 copy): the store GEMM at each ring depth;
# fc1 + GLU (SwiGLU at interleave 32 and in the halves layout, GeGLU at 64) at the deepest,
# with and without bias; the fc2 dgrad + dGLU (SwiGLU at 32 and 8, GeGLU at 8 and 64) at its ring,
# with and without dz's copy, and GeGLU in the halves layout without it
variants = ([(-1, -1, 0, s, b) for s in (2, 3, W.MAX_STAGES) for b in (False, True)]
            + [(act, -1, i, W.MAX_STAGES, b) for act, i in ((0, 32), (1, 64), (0, 0)) for b in (False, True)]
            + [(-1, act, i, W.DGLU_STAGES, q) for act, i in ((0, 32), (0, 8), (1, 8), (1, 64)) for q in (False, True)]
            + [(-1, 1, 0, W.DGLU_STAGES, False)])
for glu, dglu, interleave, stages, flag in variants:
    sig = {"a_desc": desc, "b_desc": half_desc if glu >= 0 and interleave == 0 else desc, "counts_ptr": "*i32",
           "c_ptr": "*bf16", "a_scale_ptr": "*fp32",
           "b_scale_ptr": "*fp32", "probs_ptr": "*fp32", "bias_ptr": "*bf16", "h_ptr": "*bf16", "z_ptr": "*bf16",
           "part_ptr": "*fp32", "q_ptr": "*u8", "q_scale_ptr": "*fp32", **{n: "i32" for n in ints}}
    z_shape = [W.BLOCK // 2, W.BLOCK] if max(glu, dglu) >= 0 else [8, 8]
    z_layout = (gl.NVMMASharedLayout.get_default_for(z_shape, gl.bfloat16) if glu >= 0
                else gl.NVMMASharedLayout.get_default_for(z_shape, gl.float32) if dglu >= 0 else W._TOKEN_LAYOUT)
    ce = dict(HAS_BIAS=flag and dglu < 0, GLU=glu, INTERLEAVE=interleave, DGLU=dglu, QUANT_DZ=flag and dglu >= 0,
              BLOCK_M=W.BLOCK, BLOCK_N=W.BLOCK, BLOCK_K=W.BLOCK, STAGES=stages, Z_ROWS=z_shape[0],
              Z_COLS=z_shape[1], Z_LAYOUT=z_layout, CONSUMER_REGS=W.CONSUMER_REGS, PRODUCER_REGS=W.PRODUCER_REGS)
    src = GluonASTSource(W.fp8_ws_gemm_kernel, {**sig, **{k: "constexpr" for k in ce}}, constexprs=ce)
    c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": W.MAXNREG})
    u = cubin_report(c)
    sass = u["sass"]
    out[f"glu{glu}-dglu{dglu}-i{interleave}-s{stages}-{int(flag)}"] = {
        "regs": u["regs"], "stack": u["stack"], "smem": c.metadata.shared, "warps": c.metadata.num_warps,
        "qgmma": sass.count("QGMMA"), "waits": re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", sass),
        "setmaxnreg": sass.count("USETMAXREG")}
print(json.dumps(out))
'''


@pytest.mark.skipif(not nvidia_compiler_available() or ws_kernels.gluon is None,
                    reason="needs Triton's NVIDIA backend with Gluon")
@pytest.mark.parametrize("ptxas", PTXAS)
def test_ws_kernel_compiles_for_sm90_without_spills(ptxas):
    """The store GEMM at each ring depth, fc1 + GLU (two activations and interleaves, and the
    halves layout) at the deepest, with and without bias, and the fc2 dgrad + dGLU (two
    activations, three interleaves: SwiGLU's whole-tile z at 8, its most chunks, and 32) with
    and without dz's fp8 copy, and in the halves layout without it: no stack, 12 warps (two consumer warp groups and
    the producer's), the registers reallocated between them (setmaxnreg), the ring within an
    SM's 227 KB, and each consumer's chunk pairs as scheduled: four k32 wgmma for each chunk of
    a pair and for an odd last chunk (three issue sites), a wait for the pair's first chunk
    with the second still in flight, then one for none in flight, one for the odd chunk.
    ptxas serialises every wgmma of a kernel it cannot prove safe (a wait after each k32), which
    this would catch."""
    usage = run_compile_script(_SM90_WS, ptxas=ptxas)
    assert len(usage) == 21
    for name, u in usage.items():
        assert u["stack"] == 0, (name, u)
        assert u["warps"] == 12, (name, u)
        assert u["setmaxnreg"] > 0, (name, u)
        assert u["smem"] <= 227 * 1024, (name, u)
        if name.startswith(("glu0-dglu-1-i0-", "glu1-dglu-1-i0-")):
            # fc1 + GLU in the halves layout: each chunk a gate and an up wgmma of 64 columns
            # (four k32 each), a pair's first chunk waited for with the second's two in flight
            assert u["qgmma"] == 2 * 3 * 2 * 4, (name, u)
            assert sorted(u["waits"]) == ["0x0"] * 4 + ["0x2"] * 2, (name, u)
        else:
            assert u["qgmma"] == 2 * 3 * 4, (name, u)
            assert sorted(u["waits"]) == ["0x0"] * 4 + ["0x1"] * 2, (name, u)


# --- Hopper only ---------------------------------------------------------------------------

@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
@pytest.mark.parametrize("E,T,N,K,bias", [(4, 1000, 384, 256, False), (5, 777, 256, 384, True),
                                          (3, 300, 128, 128, False), (2, 130, 128, 640, True)])
@pytest.mark.parametrize("programs", [None, 1, 3])
@pytest.mark.parametrize("stages", [2, 3, ws_kernels.MAX_STAGES])
def test_ws_kernel_is_bitwise_grouped_gemm_kernel(E, T, N, K, bias, programs, stages):
    qa, qw, counts = _quantized_operands(E, T, N, K, "cuda", seed=T)
    g = torch.Generator(device="cuda").manual_seed(1)
    probs = torch.rand(T, generator=g, device="cuda")
    b = torch.randn(E, N, generator=g, device="cuda").bfloat16() if bias else None
    want = torch.full((T, N), float("nan"), dtype=torch.bfloat16, device="cuda")
    got = torch.full_like(want, float("nan"))
    launch._gemm(EPI_STORE, qa, qw, want, counts, heuristic("fwd", 2, "fp8_block"), K=K, N=N, b_strides=(0, 0, 0),
                 ldc=N, probs=probs, bias=b, recipe="fp8_block")
    assert ws_kernels.launch(qa, qw, got, counts, N=N, stages=stages, probs=probs, bias=b, programs=programs)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
def test_ws_kernel_with_every_token_in_one_expert_and_none_at_all():
    qa, qw, counts = _quantized_operands(4, 513, 256, 256, "cuda", counts=[0, 0, 513, 0])
    want = torch.full((513, 256), float("nan"), dtype=torch.bfloat16, device="cuda")
    got = torch.full_like(want, float("nan"))
    launch._gemm(EPI_STORE, qa, qw, want, counts, heuristic("fwd", 2, "fp8_block"), K=256, N=256,
                 b_strides=(0, 0, 0), ldc=256, recipe="fp8_block")
    assert ws_kernels.launch(qa, qw, got, counts, N=256)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))


def _assert_ws_glu_is_the_triton_glu(qa, qw, counts, probs, b1, act, interleave, dtype=torch.bfloat16,
                                     programs=None):
    """fc1 + GLU through ws_kernels.launch against grouped_gemm_kernel's EPI_GLU launch at the
    fp8 heuristic's glu_config (launch.forward's fallback): z and h bit for bit, outputs
    poisoned with NaN first."""
    T, H = qa.data.shape
    F = qw.data.shape[1] // 2
    z_want = torch.full((T, 2 * F), float("nan"), dtype=dtype, device="cuda")
    h_want = torch.full((T, F), float("nan"), dtype=dtype, device="cuda")
    z_got, h_got = torch.full_like(z_want, float("nan")), torch.full_like(h_want, float("nan"))
    launch._gemm(EPI_GLU, qa, qw, h_want, counts, glu_config(heuristic("fwd", 2, "fp8_block"), "fp8_block"), K=H,
                 N=F, b_strides=(0, 0, 0), ldc=F, F=F, probs=probs, bias=b1, z=z_want, act=act,
                 interleave=interleave or 0, recipe="fp8_block")
    assert ws_kernels.launch(qa, qw, z_got, counts, N=2 * F, probs=probs, bias=b1, programs=programs,
                             glu=(h_got, act, interleave))
    assert torch.equal(z_got.view(torch.int16), z_want.view(torch.int16))
    assert torch.equal(h_got.view(torch.int16), h_want.view(torch.int16))


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
@pytest.mark.parametrize("E,T,H,F,bias", [(4, 1000, 256, 128, False), (5, 777, 384, 256, True),
                                          (3, 300, 128, 128, True), (2, 130, 640, 384, False),
                                          (4, 900, 256, 320, True)])
@pytest.mark.parametrize("act,interleave", [(0, 32), (1, 64), (0, 8), (1, 16), (0, 0), (1, 0)])
@pytest.mark.parametrize("programs", [None, 3])
def test_ws_glu_is_bitwise_grouped_gemm_kernels_glu(E, T, H, F, bias, act, interleave, programs):
    """fc1 + GLU through the ws kernel gives grouped_gemm_kernel's EPI_GLU z and h bit for bit
    (the fp8_block forward's fc1 launch at its glu_config), with skewed and empty experts,
    partial row tiles, the fc1 bias (added before z is rounded), both activations, four
    interleaves and the halves layout (a tile's gate and up rows in two 128x128 scale blocks,
    the up rows' block offset by half a block where F is an odd multiple of 64: F 320), one
    program an SM and three programs."""
    qa, qw, counts = _quantized_operands(E, T, 2 * F, H, "cuda", seed=T + interleave)
    g = torch.Generator(device="cuda").manual_seed(2)
    probs = torch.rand(T, generator=g, device="cuda")
    b1 = torch.randn(E, 2 * F, generator=g, device="cuda").bfloat16() if bias else None
    _assert_ws_glu_is_the_triton_glu(qa, qw, counts, probs, b1, act, interleave, programs=programs)


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
def test_ws_glu_with_every_token_in_one_expert_and_interleave_4_declined():
    """All tokens in one expert (the others empty): z and h bitwise the Triton launch's, at
    interleave 32 and in the halves layout (interleave None as the op's callers name it, with
    the fc1 bias and F a multiple of 64 but not of 128); interleave 4, below the kernel's
    smallest (ws_kernels.glu_interleave_ok), is declined, so launch.py keeps the Triton GLU there."""
    qa, qw, counts = _quantized_operands(4, 513, 256, 256, "cuda", counts=[0, 0, 513, 0])
    probs = torch.rand(513, device="cuda")
    _assert_ws_glu_is_the_triton_glu(qa, qw, counts, probs, None, 0, 32)
    z_got = torch.empty(513, 256, dtype=torch.bfloat16, device="cuda")
    h_got = torch.empty(513, 128, dtype=torch.bfloat16, device="cuda")
    assert not ws_kernels.launch(qa, qw, z_got, counts, N=256, probs=probs, glu=(h_got, 0, 4))
    qa, qw, counts = _quantized_operands(4, 513, 2 * 192, 256, "cuda", counts=[0, 0, 513, 0])
    b1 = torch.randn(4, 2 * 192, device="cuda").bfloat16()
    _assert_ws_glu_is_the_triton_glu(qa, qw, counts, probs, b1, 1, None)


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
@pytest.mark.parametrize("bias", [False, True])
def test_ws_kernel_writes_float16_as_the_triton_kernel_does(bias):
    """A float16 op (x, z, h, y in float16): the store GEMM and fc1 + GLU bitwise the Triton
    launches, the rounding to float16 included."""
    E, T, H, F = 3, 700, 256, 128
    qa, qw, counts = _quantized_operands(E, T, 2 * F, H, "cuda", seed=5)
    g = torch.Generator(device="cuda").manual_seed(4)
    probs = torch.rand(T, generator=g, device="cuda")
    b1 = torch.randn(E, 2 * F, generator=g, device="cuda").half() if bias else None
    _assert_ws_glu_is_the_triton_glu(qa, qw, counts, probs, b1, 1, 32, dtype=torch.float16)
    b2 = torch.randn(E, 2 * F, generator=g, device="cuda").half() if bias else None
    c_want = torch.full((T, 2 * F), float("nan"), dtype=torch.float16, device="cuda")
    c_got = torch.full_like(c_want, float("nan"))
    launch._gemm(EPI_STORE, qa, qw, c_want, counts, heuristic("fwd", 2, "fp8_block"), K=H, N=2 * F,
                 b_strides=(0, 0, 0), ldc=2 * F, probs=probs, bias=b2, recipe="fp8_block")
    assert ws_kernels.launch(qa, qw, c_got, counts, N=2 * F, probs=probs, bias=b2)
    assert torch.equal(c_got.view(torch.int16), c_want.view(torch.int16))


# --- the fc2 dgrad + dGLU -------------------------------------------------------------------

def _dglu_operands(E, T, H, F, device, seed=0, counts=None, dtype=torch.bfloat16):
    """dy's row-wise copy (T, H), W2's dgrad copy (E, F, H), counts, probs and a saved z
    (T, 2F) wide enough to reach GeGLU's clamps."""
    qa, qw, counts = _quantized_operands(E, T, F, H, device, seed=seed, counts=counts)
    g = torch.Generator().manual_seed(seed + 1)
    probs = torch.rand(T, generator=g).to(device)
    z = (torch.randn(T, 2 * F, generator=g) * 4).to(dtype).to(device)
    return qa, qw, counts, probs, z


def test_dglu_applies_takes_whole_groups_and_whole_tiles_only(monkeypatch):
    """The fc2 dgrad + dGLU through the ws kernel only where F is whole 128-column tiles, an
    interleave of 8 to 64 (each 64-wide half holds whole groups) or the halves layout without
    dz's fp8 copy (its 1x128 blocks span a tile's gate or up columns), dz contiguous and 16-bit, z
    of dz's shape and dtype, contiguous probs, the partials of 64-wide halves and dz's fp8 copy
    (if any) in quantize_rows' layout. (The device check is bypassed: the layout rules are the
    host's.)"""
    monkeypatch.setattr(ws_kernels, "available", lambda device: True)
    T, H, F = 64, 128, 256
    qa, qw, counts, probs, z = _dglu_operands(3, T, H, F, "cpu")
    dz = torch.empty(T, 2 * F, dtype=torch.bfloat16)
    part = torch.empty(T, 4, dtype=torch.float32)
    rows = recipes.empty_fp8_rows(T, 2 * F, "cpu")
    for interleave in (8, 16, 32, 64):
        assert ws_kernels.dglu_applies(qa, qw, dz, z, probs, part, rows, 0, interleave)
        assert ws_kernels.dglu_applies(qa, qw, dz, z, probs, part, None, 1, interleave)
    for interleave in (0, None):   # the halves layout: without dz's copy only
        assert ws_kernels.dglu_applies(qa, qw, dz, z, probs, part, None, 0, interleave)
        assert not ws_kernels.dglu_applies(qa, qw, dz, z, probs, part, rows, 0, interleave)
    for interleave in (4, 128, 24, 32.0, False):
        assert not ws_kernels.dglu_applies(qa, qw, dz, z, probs, part, rows, 0, interleave), interleave
        assert not ws_kernels.dglu_applies(qa, qw, dz, z, probs, part, None, 0, interleave), interleave
    assert not ws_kernels.dglu_applies(qa, qw, dz, z, probs, part, rows, 2, 32)   # no such activation
    assert not ws_kernels.dglu_applies(qa, qw, dz.float(), z.float(), probs, part, rows, 0, 32)       # float32 dz
    assert not ws_kernels.dglu_applies(qa, qw, dz, z.half(), probs, part, rows, 0, 32)                # z not dz's dtype
    assert not ws_kernels.dglu_applies(qa, qw, dz, z[:, :F], probs, part, rows, 0, 32)                # z not (T, 2F)
    assert not ws_kernels.dglu_applies(qa, qw, dz, z.t().contiguous().t(), probs, part, rows, 0, 32)  # z column-major
    wide = torch.empty(T, 4 * F, dtype=torch.bfloat16)
    assert not ws_kernels.dglu_applies(qa, qw, wide[:, :2 * F], z, probs, part, rows, 0, 32)          # dz strided
    assert not ws_kernels.dglu_applies(qa, qw, dz, z, None, part, rows, 0, 32)
    assert not ws_kernels.dglu_applies(qa, qw, dz, z, torch.rand(2 * T)[::2], part, rows, 0, 32)      # probs strided
    assert not ws_kernels.dglu_applies(qa, qw, dz, z, probs, None, rows, 0, 32)
    assert not ws_kernels.dglu_applies(qa, qw, dz, z, probs, part[:, :2], rows, 0, 32)                # 128-wide halves
    assert not ws_kernels.dglu_applies(qa, qw, dz, z, probs, part.double(), rows, 0, 32)
    assert not ws_kernels.dglu_applies(qa, qw, dz, z, probs, part, recipes.empty_fp8_rows(T, F, "cpu"), 0, 32)
    bad_scales = recipes.QuantRows(rows.data, rows.scales.t().contiguous().t(), T, None)
    assert not ws_kernels.dglu_applies(qa, qw, dz, z, probs, part, bad_scales, 0, 32)
    # dz of other than 2F columns (W2's dgrad copy has F rows)
    dz2 = torch.empty(T, 4 * F, dtype=torch.bfloat16)
    assert not ws_kernels.dglu_applies(qa, qw, dz2, torch.empty_like(dz2), probs, torch.empty(T, 8), None, 0, 32)
    # the dGLU has no bias, and one launch takes one epilogue
    assert not ws_kernels.launch(qa, qw, dz, counts, N=F, probs=probs, bias=torch.zeros(3, F, dtype=torch.bfloat16),
                                 dglu=(z, part, 0, 32, rows))


def _assert_ws_dglu_is_the_triton_dglu(qa, qw, counts, probs, z, act, interleave, quant, programs=None,
                                       stages=ws_kernels.DGLU_STAGES):
    """The fc2 dgrad + dGLU through ws_kernels.launch against grouped_gemm_kernel's EPI_DGLU
    launch at the fp8 heuristic's dglu_config (launch.backward's fallback), outputs poisoned
    first: dz and (quant) dz's fp8 copy, data and scales, bit for bit; the dprob partials, each
    a sum of 64 float32 products, summed in another order, to rounding (the tolerance: 64
    roundings of the largest partial, a bound on two orders' difference for sums without
    cancellation)."""
    T, H = qa.data.shape
    F = qw.data.shape[1]
    dcfg = dglu_config(heuristic("bwd", 2, "fp8_block"), "fp8_block")
    assert dglu_tile_n(dcfg) == 128   # the partials' layout both launches share
    outs = []
    for ws in (False, True):
        dz = torch.full((T, 2 * F), float("nan"), dtype=z.dtype, device="cuda")
        part = torch.full((T, 2 * F // 128), float("nan"), dtype=torch.float32, device="cuda")
        rows = recipes.empty_fp8_rows(T, 2 * F, "cuda") if quant else None
        if quant:
            rows.data.fill_(0x55)
            rows.scales.fill_(float("nan"))
        if ws:
            assert ws_kernels.launch(qa, qw, dz, counts, N=F, probs=probs, programs=programs, stages=stages,
                                     dglu=(z, part, act, interleave, rows))
        else:
            launch._gemm(EPI_DGLU, qa, qw, dz, counts, dcfg, K=H, N=F, b_strides=(0, 0, 0), ldc=2 * F, F=F,
                         probs=probs, z=z, part=part, act=act, interleave=interleave, recipe="fp8_block",
                         dz_rows=rows)
        outs.append((dz, part, rows))
    (dz_want, part_want, rows_want), (dz_got, part_got, rows_got) = outs
    assert torch.equal(dz_got.view(torch.int16), dz_want.view(torch.int16))
    if quant:
        assert torch.equal(rows_got.data, rows_want.data)
        assert torch.equal(rows_got.scales.view(torch.int32), rows_want.scales.view(torch.int32))
    # NaN and +-inf exactly where the Triton launch's partials have them (a NaN or inf in a
    # row's dh or z), the rest to rounding
    finite = part_want.isfinite()
    assert torch.equal(part_got.isfinite(), finite)
    assert torch.equal(part_got[~finite].nan_to_num(), part_want[~finite].nan_to_num())
    eps = torch.finfo(torch.float32).eps
    torch.testing.assert_close(part_got[finite], part_want[finite], rtol=0,
                               atol=64 * eps * part_want[finite].abs().max().item())


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
@pytest.mark.parametrize("E,T,H,F", [(4, 1000, 256, 128), (5, 777, 384, 256), (3, 300, 128, 128), (2, 130, 640, 384)])
@pytest.mark.parametrize("act,interleave,quant", [(0, 32, True), (1, 64, True), (0, 8, True), (1, 16, True),
                                                  (0, 32, False), (1, 64, False), (0, 8, False), (1, 16, False),
                                                  (0, 0, False), (1, 0, False)])
def test_ws_dglu_is_bitwise_grouped_gemm_kernels_dglu(E, T, H, F, act, interleave, quant):
    """The fc2 dgrad + dGLU through the ws kernel gives grouped_gemm_kernel's EPI_DGLU dz and
    dz's fp8 copy bit for bit, its dprob partials to rounding: skewed and empty experts,
    partial row tiles, both activations (z wide enough to reach GeGLU's clamps), four
    interleaves, with and without the copy, and the halves layout (without it)."""
    qa, qw, counts, probs, z = _dglu_operands(E, T, H, F, "cuda", seed=T + interleave)
    _assert_ws_dglu_is_the_triton_dglu(qa, qw, counts, probs, z, act, interleave, quant)


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
@pytest.mark.parametrize("programs,stages", [(1, 2), (3, 3), (None, 4)])
def test_ws_dglu_with_few_programs_shallow_rings_one_expert_and_float16(programs, stages):
    """Programs that take many tiles, each ring depth the launch allows, every token in one
    expert (the others empty), and a float16 op (z, dz in float16)."""
    qa, qw, counts, probs, z = _dglu_operands(4, 513, 256, 256, "cuda", seed=7, counts=[0, 0, 513, 0])
    _assert_ws_dglu_is_the_triton_dglu(qa, qw, counts, probs, z, 0, 32, True, programs=programs, stages=stages)
    qa, qw, counts, probs, z = _dglu_operands(3, 700, 256, 128, "cuda", seed=8, dtype=torch.float16)
    _assert_ws_dglu_is_the_triton_dglu(qa, qw, counts, probs, z, 1, 32, True, programs=programs, stages=stages)


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
def test_ws_dglu_keeps_nan_and_inf_blocks_as_the_triton_dglu():
    """A NaN and an inf in dy reach dz: their 1x128 blocks' fp8 scales are NaN and their codes
    the Triton epilogue's, bit for bit (the block amax from the bits, as block_amax), and the
    rows' dprob partials NaN as the Triton launch's."""
    qa, qw, counts, probs, z = _dglu_operands(3, 300, 256, 256, "cuda", seed=9)
    qa.data[5, 3] = 0x7F      # E4M3 NaN
    qa.scales[1, 17] = float("inf")
    _assert_ws_dglu_is_the_triton_dglu(qa, qw, counts, probs, z, 0, 32, True)
    z[40, 7] = float("inf")   # and an inf in the saved z
    _assert_ws_dglu_is_the_triton_dglu(qa, qw, counts, probs, z, 1, 16, True)
