"""grouped_glu_mlp's quantized recipes (fp8_block, mxfp8, nvfp4): the kernels' GEMMs on quantized
operands against float64 GEMMs of the dequantized operands, the whole recipe forward and
backward against its float64 rendering (recipes.recipe_forward / recipe_backward) and the
FP8 recipes against the unquantized float64 reference; zero-token experts, T off the
scaling blocks, determinism, the public API's routing, bad input.

Tolerances:
- GEMM (elementwise): the operands are the dequantized values exactly (E4M3 x scale, E2M1 x
  E4M3 scale are exact in float32 / bfloat16), so the kernel differs from the float64 GEMM of
  the dequantized operands only by float32 roundings: at most K - 1 additions, one product of
  two scales and its product with the chunk sum (fp8_block), the decode-scale multiply
  (nvfp4), and in the reference the float32 rounding of each dequantized value (nvfp4:
  q * s * S_dec). The standard bound |fl(sum) - sum| <= gamma_n sum |a_k b_k|, gamma_n ~ n u,
  with n = K + 8 covers them all, u = 2^-24. On Hopper, FP8 MMAs accumulate with about 14
  bits inside a 128-wide chunk (DeepSeek-V3 report, section 3.3.2), so there the in-chunk
  part is 128 * 2^-14 instead.
- Recipe vs its float64 rendering (normwise): both quantize the same x, W1, W2 and dy to the
  same bits (the quantizer kernels equal quant.reference bit for bit) and round z, h, dz and
  the outputs to x.dtype at the same places. They differ by where a float32 result lands on
  the other side of an x.dtype rounding boundary than the float64 one: at most one ulp
  (eps_x relative) per output element, and, rarely, one ulp in a stored z / h / dz that then
  quantizes differently. Tolerance 2 eps_x (+ 16 sqrt(K) eps32 for float32 inputs, whose
  outputs keep the accumulation error).
- FP8 recipes vs the unquantized float64 reference (normwise): E4M3 rounds to nearest with 3
  mantissa bits, relative error <= u8 = 2^-4 per element (scaled values stay in E4M3's
  normal range but for elements below 2^-6 of their block's scale, whose absolute error is
  negligible normwise). A product of quantized operands is off by <= (1 + u8)^2 - 1, and each
  output is a chain of such GEMMs: tolerance n_q * u8 with n_q the number of quantized
  operands on its path (y: x, W1, h, W2 -> 4; dx: dy, W2, dz, W1 and z's x, W1 -> 6; ...).
"""

import dataclasses
import math
import threading

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import tilefuse
from tilefuse import launches, policy, tuning
from tilefuse.ops.grouped_glu_mlp import launch, recipes, tune
from tilefuse.ops.grouped_glu_mlp.api import grouped_glu_mlp, problem_for
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig, dglu_config, glu_config, heuristic
from tilefuse.ops.grouped_glu_mlp.kernels import EPI_DGLU, EPI_STORE
from tilefuse.ops.grouped_glu_mlp.reference import (expert_rows, glu_activation, glu_index,
                                                      grouped_glu_mlp_reference, random_inputs)
from tilefuse.ops.grouped_glu_mlp.tune import FAMILY
from tilefuse.quant import quantize_nvfp4
from tilefuse.utils import normwise_rel_error as rel

from gpu_helpers import assert_graph_replay_matches_eager
from quant_helpers import same_bits

ON_GPU = torch.cuda.is_available()
U32 = 2.0 ** -24
# Small tiles: several row and column tiles per expert in the interpreter; fp8_block needs K 128.
SMALL = {"fp8_block": GemmConfig(32, 32, 128, 4, 2, 2), "mxfp8": GemmConfig(32, 32, 32, 4, 2, 2),
         "nvfp4": GemmConfig(32, 32, 32, 4, 2, 2)}
SHAPE = {"fp8_block": (128, 128), "mxfp8": (64, 32), "nvfp4": (48, 32)}   # (H, F): multiples of the block
GRAD_NAMES = ("dx", "dprobs", "dfc1_weight", "dfc2_weight", "dfc1_bias", "dfc2_bias")


def make(counts, H, F, dtype, bias, device, seed=0):
    return random_inputs(counts, H, F, dtype, bias=bias, device=device, generator=torch.Generator().manual_seed(seed))


def run_kernels(i, activation, interleave, recipe, cfg=None):
    cfg = cfg or SMALL[recipe]
    with launches.counting() as launched:
        y, z, h = launch.forward(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["b1"], i["b2"], activation,
                                 interleave, config=cfg, recipe=recipe)
        grads = launch.backward(i["dy"], i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["b1"], i["b2"], z, h,
                                activation, interleave, config=cfg, wgrad_config=cfg, recipe=recipe)
    assert launched["grouped_mlp_fwd"] == 1 and launched["grouped_mlp_bwd"] == 1
    return y, z, h, dict(zip(GRAD_NAMES, grads))


# ---------------------------------------------------------------------------------------------
# GEMMs on quantized operands
def gemm_bound(a, b, K, recipe):
    """Elementwise bound on |kernel - float64 GEMM| for float64 operands a (M, K), b (K, N)."""
    in_chunk = 128 * 2.0 ** -14 if (ON_GPU and recipe == "fp8_block") else 0.0
    return (in_chunk + (K + 8) * U32) * (a.abs() @ b.abs())


@pytest.mark.parametrize("recipe", recipes.RECIPES)
@pytest.mark.parametrize("transposed", [False, True], ids=["fwd-usage", "dgrad-usage"])
def test_grouped_gemm_equals_float64_gemm_of_dequantized_operands(recipe, transposed, device):
    counts, n_out, K = [45, 0, 83], 128, 128         # fp8_block weights: 128x128 blocks per expert
    E, T = len(counts), sum(counts)
    g = torch.Generator().manual_seed(1)
    # Wide dynamic range per row and column: the scales matter.
    a = (torch.randn(T, K, generator=g) * torch.logspace(-2, 2, T)[:, None]).to(device)
    w_shape = (E, K, n_out) if transposed else (E, n_out, K)
    w = (torch.randn(w_shape, generator=g) * 0.1).to(device)
    qa = recipes.quantize_rows(recipe, a)
    qw = recipes.quantize_weight(recipe, w, transpose=transposed)
    out = torch.full((T, n_out), float("nan"), device=device)
    c = torch.tensor(counts, dtype=torch.int32, device=device)
    b_strides = (w.stride(0), w.stride(1), w.stride(2)) if transposed else (w.stride(0), w.stride(2), w.stride(1))
    with launches.counting():
        launch._gemm(EPI_STORE, qa, qw, out, c, SMALL[recipe], K=K, N=n_out, b_strides=b_strides, ldc=n_out,
                     recipe=recipe)
    a64 = recipes.dequant_rows(recipe, a).double()
    w64 = recipes.dequant_weight(recipe, w, transpose=transposed).double()
    start = 0
    for e, m in enumerate(counts):
        b64 = w64[e] if transposed else w64[e].t()
        want = a64[start:start + m] @ b64
        err = (out[start:start + m].double() - want).abs()
        bound = gemm_bound(a64[start:start + m], b64, K, recipe)
        assert bool((err <= bound).all()), f"expert {e}: max err/bound {float((err / bound).max()):.3g}"
        start += m


WGRAD_COUNTS = {
    "T135": [45, 0, 83, 7],             # not a multiple of any block
    # fp8_block's 128-token blocks of the grouped copies: an expert in one partial block, one
    # in two whole blocks and a partial one, an expert without tokens, one in a single partial
    # block, one in exactly one block; in the token index (the old aligned blocks) experts 1-4
    # start and end inside blocks.
    "T588": [100, 300, 0, 60, 128],
}


def _check_wgrad(recipe, counts, cfg, n_dim, m_dim, device):
    """launch._wgrad with ``cfg`` on the column-quantized copies of random (T, n_dim) and
    (T, m_dim) operands against the float64 GEMM of the dequantized copies, expert by expert
    (zeros for an expert without rows)."""
    E, T = len(counts), sum(counts)
    g = torch.Generator().manual_seed(2)
    a = (torch.randn(T, n_dim, generator=g) * torch.logspace(-1, 1, T)[:, None]).to(device)
    b = torch.randn(T, m_dim, generator=g).to(device)
    c = torch.tensor(counts, dtype=torch.int32, device=device)
    out = torch.full((E, n_dim, m_dim), float("nan"), device=device)
    launch._wgrad(recipes.quantize_cols(recipe, a, c), recipes.quantize_cols(recipe, b, c), out, c, T, cfg, recipe)
    a64, b64 = recipes.dequant_cols(recipe, a, c).double(), recipes.dequant_cols(recipe, b, c).double()
    start = 0
    for e, m in enumerate(counts):
        want = a64[start:start + m].t() @ b64[start:start + m]
        err = (out[e].double() - want).abs()
        bound = gemm_bound(a64[start:start + m].t(), b64[start:start + m], max(m, 1) + 128, recipe)
        assert bool((err <= bound).all()), f"expert {e}: max err/bound {float((err / bound).max()):.3g}"
        if m == 0:
            assert torch.count_nonzero(out[e]) == 0
        start += m


@pytest.mark.parametrize("group", [8, 2], ids=["group8", "group2"])
@pytest.mark.parametrize("counts", WGRAD_COUNTS.values(), ids=WGRAD_COUNTS.keys())
@pytest.mark.parametrize("recipe", recipes.RECIPES)
def test_wgrad_equals_float64_gemm_of_column_quantized_copies(recipe, counts, group, device, monkeypatch):
    """Each expert's gradient from its own rows; three row tiles (the last partial) and two
    column tiles per expert, in one group of row tiles or in groups of 2 (the last partial)."""
    monkeypatch.setattr(launch, "WGRAD_GROUP_N", group)
    _check_wgrad(recipe, counts, SMALL[recipe], 80, 48, device)


def test_fp8_wgrad_at_its_heuristic_tile(device):
    """fp8_block's wgrad at the tile the op launches (configs.heuristic: through TMA on the
    GPU), two row tiles and two column tiles per expert, each second one partial, over the
    128-token blocks of WGRAD_COUNTS' T588."""
    cfg = heuristic("wgrad", 2, "fp8_block")
    _check_wgrad("fp8_block", WGRAD_COUNTS["T588"], cfg, cfg.block_n + 16, cfg.block_m + 72, device)


@pytest.mark.parametrize("recipe", ["fp8_block", "mxfp8"])
def test_an_experts_weight_gradient_does_not_depend_on_other_experts_tokens(recipe, device):
    """The column-wise copies are grouped by expert: no block holds two experts' tokens, so an
    expert's copy (codes and scales) and its weight gradient are bitwise the same whatever the
    other experts' tokens hold, here 1e4 times larger and a NaN and an inf among them (in the
    token index the experts' boundaries fall inside 128-token blocks). Not nvfp4: its one
    amax per tensor couples the experts by design (module docstring of recipes.py)."""
    counts = [100, 60, 96]
    c = torch.tensor(counts, dtype=torch.int32, device=device)
    cfg = heuristic("wgrad", 2, recipe) if recipe == "fp8_block" else SMALL[recipe]
    g = torch.Generator().manual_seed(5)
    a = torch.randn(256, 128, generator=g).to(torch.bfloat16)
    b = torch.randn(256, 64, generator=g).to(torch.bfloat16)
    loud_a, loud_b = a.clone(), b.clone()
    loud_a[100:160] *= 1e4
    loud_b[100:160] *= 1e4
    loud_a[110, 3] = float("nan")
    loud_b[150, 7] = float("inf")
    grads = []
    for x, y in ((a, b), (loud_a, loud_b)):
        out = torch.full((3, 128, 64), float("nan"), device=device)
        qa, qb = recipes.quantize_cols(recipe, x.to(device), c), recipes.quantize_cols(recipe, y.to(device), c)
        launch._wgrad(qa, qb, out, c, 256, cfg, recipe)
        grads.append((out, qa))
    (quiet, qa), (loud, loud_qa) = grads
    for e in (0, 2):
        assert torch.equal(quiet[e], loud[e]), f"expert {e}"
        assert torch.isfinite(quiet[e]).all()
    assert not torch.equal(quiet[1], loud[1])
    if recipe == "fp8_block":   # expert 0 in block 0, expert 2 in block 2 of the copies
        for blk in (0, 2):
            cols = slice(128 * blk, 128 * blk + 128)
            assert torch.equal(qa.data[:, cols], loud_qa.data[:, cols])
            assert torch.equal(qa.scales[blk], loud_qa.scales[blk])


def test_expert_padded_is_the_grouped_layout(device):
    """recipes.expert_padded (the emulated recipes' column-wise copies, built on the device
    without a host sync): each expert's rows from a multiple of the block, zeros after them
    and past the last expert's, grouped_rows rows; no tokens gives an empty tensor."""
    t = torch.arange(1, 1 + 70 * 3, dtype=torch.float32).reshape(70, 3).to(device)
    counts = torch.tensor([0, 33, 5, 0, 32], device=device)
    got = recipes.expert_padded(t, counts, 16).cpu()
    assert got.shape == (16 * (5 + 4), 3) and recipes.grouped_rows("nvfp4", 70, 5) == got.shape[0]
    want = torch.zeros_like(got)
    want[0:33], want[48:53], want[64:96] = t[0:33].cpu(), t[33:38].cpu(), t[38:70].cpu()
    assert torch.equal(got, want)
    assert recipes.expert_padded(t[:0], torch.zeros(2, dtype=torch.int32, device=device), 16).shape == (0, 3)


def test_register_cap_is_a_config_field_the_descriptor_launches_take(monkeypatch):
    """GemmConfig.maxnreg: named, range-checked, stored in tables like any field; the launch
    passes it to Triton when it reads through descriptors and compiles the pointer loads
    uncapped (configs.GemmConfig says why)."""
    from tilefuse.ops.grouped_glu_mlp import kernels
    cfg = heuristic("wgrad", 2, "fp8_block")
    assert cfg.maxnreg == 168 and cfg.name.endswith("-tma-r168")
    assert "-r" not in heuristic("wgrad", 2).name
    for bad in (16, 256):
        with pytest.raises(ValueError, match="maxnreg"):
            GemmConfig(maxnreg=bad)
    for bad in ("168", 168.0, True):
        with pytest.raises(TypeError, match="maxnreg"):
            GemmConfig(maxnreg=bad)
    stored = FAMILY.config_to_dict(cfg)
    assert stored["maxnreg"] == 168 and FAMILY.config_from_dict(stored) == cfg
    with pytest.raises(TypeError, match="maxnreg"):
        FAMILY.config_from_dict({**stored, "maxnreg": 168.0})
    launched = []

    class Recorder:   # the kernel's parameters, for the SpecializingLauncher the launch goes through
        arg_names = kernels.grouped_wgrad_kernel.arg_names

        def __getitem__(self, grid):
            return lambda *args, **kw: launched.append((kw["TMA"], kw["maxnreg"]))

    monkeypatch.setattr(kernels, "grouped_wgrad_kernel", Recorder())
    counts = torch.tensor([100, 156], dtype=torch.int32)
    a = recipes.quantize_cols("fp8_block", torch.randn(256, 128), counts)
    out = torch.empty((2, 128, 128))
    for c in (cfg, dataclasses.replace(cfg, tma=False)):
        launch._wgrad(a, a, out, counts, 256, c, "fp8_block")
    assert launched == [(True, 168), (False, None)]


def test_fp8_dgrad_weight_copy_is_the_forward_quantization_transposed(device):
    """fp8_block's dgrad usage (W quantized and written transposed, K-contiguous; alone and as
    the second copy of quantize_weight_pair): 128x128 blocks are symmetric, so its codes and
    scales are exactly the forward's, transposed."""
    g = torch.Generator().manual_seed(8)
    w = (torch.randn(3, 256, 384, generator=g) * torch.logspace(-2, 2, 384)).to(torch.bfloat16).to(device)
    fwd = recipes.quantize_weight("fp8_block", w)
    dgrad = recipes.quantize_weight("fp8_block", w, transpose=True)
    assert dgrad.data.shape == (3, 384, 256) and dgrad.data.is_contiguous()
    assert torch.equal(dgrad.data, fwd.data.transpose(1, 2))
    assert torch.equal(dgrad.scales, fwd.scales.transpose(1, 2))
    pair_fwd, pair_dgrad = recipes.quantize_weight_pair("fp8_block", w)
    for a, b in ((pair_fwd, fwd), (pair_dgrad, dgrad)):
        assert torch.equal(a.data, b.data) and torch.equal(a.scales, b.scales)


@pytest.mark.parametrize("recipe", recipes.RECIPES)
def test_operand_copies_without_kernels_equal_the_kernels(recipe, monkeypatch):
    """Where kernels cannot run, the GEMM operand copies (rows, cols, both weight usages, the
    fp8 weight pair and the fp8 rows / cols pair) come from the reference quantizers in the
    same layouts: bitwise the kernels' copies (run here in the interpreter)."""
    g = torch.Generator().manual_seed(3)
    t = torch.randn(130, 256, generator=g).to(torch.bfloat16)
    w = (torch.randn(2, 256, 128, generator=g) * torch.logspace(-2, 2, 128)).to(torch.bfloat16)
    counts = torch.tensor([60, 0, 70], dtype=torch.int32)

    def copies():
        out = [recipes.quantize_rows(recipe, t), recipes.quantize_cols(recipe, t, counts),
               recipes.quantize_weight(recipe, w),
               recipes.quantize_weight(recipe, w, transpose=True)]
        if recipe == "fp8_block":
            pair = recipes.quantize_weight_pair(recipe, w)
            out += [pair[0], pair[1] or recipes.quantize_weight(recipe, w, transpose=True),
                    *recipes.quantize_rows_cols(recipe, t, counts)]
        return out
    kernels = copies()
    monkeypatch.setattr(recipes.policy, "kernels_enabled", lambda device, level=None: False)
    reference = copies()
    for k, r in zip(kernels, reference):
        assert torch.equal(k.data, r.data) and torch.equal(k.scales.view(torch.uint8), r.scales.view(torch.uint8))
        assert k.scales.shape == r.scales.shape


def test_fp8_glu_and_dglu_tiles_are_capped_and_16_bit_tiles_are_not():
    cfg = GemmConfig(128, 128, 128, 8, 3, 1)
    assert glu_config(cfg, "fp8_block") == GemmConfig(128, 64, 128, 4, 3, 2)   # the threads follow the tile
    assert glu_config(cfg, None) is cfg and glu_config(cfg, "mxfp8") is cfg
    assert dglu_config(cfg) == GemmConfig(128, 64, 128, 8, 3, 1)
    # 64 rows on 4 warps; the fp8 dGLU reads through TMA whatever the config says
    assert dglu_config(cfg, "fp8_block") == GemmConfig(64, 64, 128, 4, 3, 2, tma=True)
    assert dglu_config(GemmConfig(64, 128, 128, 4, 3, 2), "fp8_block") == GemmConfig(64, 64, 128, 4, 3, 2, tma=True)
    assert dglu_config(GemmConfig(64, 128, 128, 4, 3, 2, tma=True), "fp8_block").tma
    assert not dglu_config(cfg).tma and not dglu_config(cfg, "mxfp8").tma
    assert glu_config(GemmConfig(64, 128, 128, 4, 3, 2), "fp8_block") == GemmConfig(64, 64, 128, 4, 3, 2)


def test_nvfp4_dgrad_copy_is_the_transposed_quantization(device):
    """The kernels' dgrad usage quantizes W^T; with 16x16 blocks and one amax that is exactly
    the transpose of W's quantization (what recipes.dequant_weight relies on)."""
    w = torch.randn(48, 80, device=device) * torch.logspace(-3, 1, 80, device=device)
    amax = w.abs().max().reshape(1)
    fwd = quantize_nvfp4(w, amax=amax, block_2d=True).dequantize()
    dgrad = quantize_nvfp4(w.t(), amax=amax, block_2d=True).dequantize()
    assert torch.equal(dgrad.t(), fwd)


@pytest.mark.parametrize("transpose", [False, True], ids=["fwd", "dgrad"])
def test_nvfp4_weight_copies_are_one_launch_equal_to_per_expert_quantization(transpose, device):
    """The op's nvfp4 weight copy: one quantizer launch for all experts (each with its own
    amax), bitwise the per-expert public quantizer's data and swizzled scales."""
    g = torch.Generator().manual_seed(4)
    w = (torch.randn(3, 48, 80, generator=g) * torch.logspace(-3, 1, 80)).to(torch.bfloat16).to(device)
    with launches.counting() as launched:
        q = recipes.quantize_weight("nvfp4", w, transpose=transpose)
    assert launched["quant_nvfp4"] == 1
    src = w.transpose(1, 2) if transpose else w
    amax = w.float().abs().amax(dim=(1, 2))
    parts = [quantize_nvfp4(src[e], amax=amax[e], block_2d=True, swizzle=True) for e in range(3)]
    assert torch.equal(q.data, torch.stack([p.data for p in parts]))
    assert torch.equal(q.scales, torch.cat([p.scales.view(torch.uint8) for p in parts]))


# ---------------------------------------------------------------------------------------------
# The whole recipe
CASES = [
    ("fp8_block", [37, 0, 50], "swiglu", 32, True, torch.bfloat16),
    ("fp8_block", [3, 61, 0, 20], "geglu", None, False, torch.bfloat16),
    # runs of 4 bf16 columns: the dGLU's descriptors take A and B, its z reads through pointers
    ("fp8_block", [21, 0, 30], "swiglu", 4, False, torch.bfloat16),
    ("mxfp8", [0, 45, 40], "geglu", 8, True, torch.bfloat16),
    ("nvfp4", [29, 0, 58], "swiglu", None, False, torch.bfloat16),
    ("nvfp4", [40, 23], "geglu", 16, True, torch.float32),
]


def case_id(c):
    return (f"{c[0]}-E{len(c[1])}-T{sum(c[1])}-{c[2]}-s{c[3]}-{'bias' if c[4] else 'nobias'}-"
            f"{str(c[5]).split('.')[-1]}")


def recipe_tol(dtype, H, F, T):
    eps = torch.finfo(dtype).eps
    if dtype == torch.float32:
        return 2 * eps + 16 * math.sqrt(max(H, 2 * F, T)) * torch.finfo(torch.float32).eps
    return 2 * eps


@pytest.mark.parametrize("recipe,counts,activation,interleave,bias,dtype", CASES, ids=[case_id(c) for c in CASES])
def test_recipe_matches_its_float64_rendering(recipe, counts, activation, interleave, bias, dtype, device):
    H, F = SHAPE[recipe]
    i = make(counts, H, F, dtype, bias, device)
    y, z, h, grads = run_kernels(i, activation, interleave, recipe)
    kw = dict(activation=activation, glu_interleave=interleave, fc1_bias=i["b1"], fc2_bias=i["b2"], recipe=recipe)
    y_ref, z_ref, h_ref = recipes.recipe_forward(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], **kw)
    ref = recipes.recipe_backward(i["dy"], i["x"], i["counts"], i["probs"], i["w1"], i["w2"], z_ref, h_ref, **kw)
    tol = recipe_tol(dtype, H, F, sum(counts))
    for name, got, want in (("y", y, y_ref), ("z", z, z_ref), ("h", h, h_ref),
                            *((n, grads[n], ref[n]) for n in GRAD_NAMES if ref[n] is not None)):
        assert got.dtype == want.dtype, name
        assert rel(got, want) <= tol, f"{name}: {rel(got, want):.2e} > {tol:.2e}"
    for e, m in enumerate(counts):
        if m == 0:
            assert torch.count_nonzero(grads["dfc1_weight"][e]) == 0
            assert torch.count_nonzero(grads["dfc2_weight"][e]) == 0


def test_fp8_glu_tiles_whose_columns_straddle_scale_blocks(device):
    """fp8_block's FC1 + GLU tile reads one weight-scale block for all its gate columns and one
    for its up columns when the layout allows (launch.glu_scale_uniform); interleave 48 with
    32-column tiles puts some tiles' up columns in two 128-wide blocks, which takes the
    per-column scale path. Both layouts against the recipe's float64 rendering."""
    H, F = 128, 384
    assert not launch.glu_scale_uniform(F, 48, SMALL["fp8_block"].block_n)
    assert launch.glu_scale_uniform(F, 32, SMALL["fp8_block"].block_n)
    for interleave in (48, 32):
        i = make([37, 0, 50], H, F, torch.bfloat16, True, device, seed=7)
        y, z, h, grads = run_kernels(i, "swiglu", interleave, "fp8_block")
        kw = dict(activation="swiglu", glu_interleave=interleave, fc1_bias=i["b1"], fc2_bias=i["b2"],
                  recipe="fp8_block")
        y_ref, z_ref, h_ref = recipes.recipe_forward(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], **kw)
        ref = recipes.recipe_backward(i["dy"], i["x"], i["counts"], i["probs"], i["w1"], i["w2"], z_ref, h_ref, **kw)
        tol = recipe_tol(torch.bfloat16, H, F, 87)
        for name, got, want in (("y", y, y_ref), ("z", z, z_ref), ("h", h, h_ref), ("dx", grads["dx"], ref["dx"])):
            assert rel(got, want) <= tol, f"interleave {interleave} {name}: {rel(got, want):.2e} > {tol:.2e}"


# Quantized operands on each output's path (module docstring).
FP8_OPERANDS = {"y": 4, "dx": 6, "dprobs": 4, "dfc1_weight": 6, "dfc2_weight": 4}


# fp8_block's dGLU epilogue writes dz's row-wise copy when each 64-wide half of its tile holds
# whole 1x128 blocks of dz (interleave dividing 64); the tile of GemmConfig(32, 64, ...) has
# such halves, SMALL's do not.
DZ_FUSED = GemmConfig(32, 64, 128, 4, 2, 2)


@pytest.mark.parametrize("interleave", [32, 64, 4, 1])
def test_dglu_epilogue_writes_dz_rows_copy_bitwise(interleave, device):
    """The dGLU epilogue's fp8 copy of dz equals the quantizer kernel's copy of the dz it stored,
    bit for bit (codes and scales, outputs poisoned): blocks with a non-finite element (a row of
    dy with an inf), all-zero blocks (a zero row of dy), an expert without tokens, partial
    row tiles, and two column tiles."""
    counts, H, F = [45, 0, 83, 1], 128, 256
    i = make(counts, H, F, torch.bfloat16, False, device, seed=5)
    i["dy"][5] = float("inf")
    i["dy"][50] = 0.0
    T, c = sum(counts), i["counts"]
    dcfg = dglu_config(DZ_FUSED)
    assert launch.dglu_quantizes_dz("fp8_block", interleave, dcfg)
    assert not launch.dglu_quantizes_dz("fp8_block", 0, dcfg) and not launch.dglu_quantizes_dz(None, 32, dcfg)
    _, z, _ = launch.forward(i["x"], c, i["probs"], i["w1"], i["w2"], None, None, "swiglu", interleave,
                             config=DZ_FUSED, recipe="fp8_block")
    dz = torch.full((T, 2 * F), float("nan"), dtype=torch.bfloat16, device=device)
    part = torch.full((T, 2 * F // 64), float("nan"), device=device)
    rows = recipes.QuantRows(torch.full((T, 2 * F), 0x5A, dtype=torch.uint8, device=device),
                             torch.full((2 * F // 128, T), -1.0, device=device), T, None)
    launch._gemm(EPI_DGLU, recipes.quantize_rows("fp8_block", i["dy"]),
                 recipes.quantize_weight("fp8_block", i["w2"], transpose=True), dz, c, dcfg, K=H, N=F,
                 b_strides=None, ldc=dz.stride(0), F=F, probs=i["probs"], z=z, part=part, act=0,
                 interleave=interleave, recipe="fp8_block", dz_rows=rows)
    want = recipes.quantize_rows("fp8_block", dz)
    assert bool(dz[5].isnan().any()) and bool((dz[50] == 0).all())
    assert torch.equal(rows.data, want.data)
    assert torch.equal(rows.scales.view(torch.int32), want.scales.view(torch.int32))


@pytest.mark.parametrize("interleave", [32, None])
def test_backward_with_the_epilogue_dz_copy_matches_the_quantizer_path(interleave, device, monkeypatch):
    """launch.backward with the dGLU epilogue's dz copy against the quantizer kernel's copy (and
    the halves layout, which the epilogue does not copy): dx and every weight and bias gradient
    bitwise equal (they read dz or its copy, equal bit for bit).

    dprobs sums the dGLU epilogue's per-row partials sum_j dh_j act(z_j). The two launches are
    different compiled kernels, and the compiler may order each 64-term float32 partial sum
    differently (on the H200 under triton 3.6 it did; in the interpreter the bits agree). Bound
    per row: both sums are within gamma_n * S of the exact one, S = sum_j |dh_j act(z_j)| (float64
    from the dequantized operands; dh and act in float32 add a few units of u), n = 64 terms
    per partial plus the partial columns and the dy . b2 term, and one rounding to dprobs'
    dtype each."""
    counts, H, F = [45, 0, 83, 1], 128, 256
    i = make(counts, H, F, torch.bfloat16, True, device, seed=6)
    y, z, h, fused = run_kernels(i, "swiglu", interleave, "fp8_block", cfg=DZ_FUSED)
    monkeypatch.setattr(launch, "dglu_quantizes_dz", lambda *args: False)
    separate = run_kernels(i, "swiglu", interleave, "fp8_block", cfg=DZ_FUSED)[3]
    for name in GRAD_NAMES:
        if name != "dprobs":
            assert torch.equal(fused[name], separate[name]), name
    dy = recipes.dequant_rows("fp8_block", i["dy"]).double()
    w2 = recipes.dequant_weight("fp8_block", i["w2"], transpose=True).double()
    gate, up = glu_index(F, interleave)
    act = glu_activation(z[:, gate].double(), z[:, up].double(), "swiglu")
    s = torch.zeros(sum(counts), dtype=torch.float64, device=z.device)
    for e, start, stop in expert_rows(i["counts"], sum(counts)):
        s[start:stop] = ((dy[start:stop] @ w2[e]) * act[start:stop]).abs().sum(dim=1)
    n = 64 + 2 * F // 64 + 1 + 8
    ulp = torch.finfo(fused["dprobs"].dtype).eps * fused["dprobs"].double().abs()
    bound = 2 * n * U32 * s + ulp
    diff = (fused["dprobs"].double() - separate["dprobs"].double()).abs()
    assert bool((diff <= bound).all()), f"max diff/bound {float((diff / bound).max()):.3g}"


@pytest.mark.parametrize("recipe", ["fp8_block", "mxfp8"])
def test_fp8_recipes_are_within_quantization_error_of_the_unquantized_op(recipe, device):
    H, F = SHAPE[recipe]
    counts = [37, 0, 50]
    i = make(counts, H, F, torch.float32, False, device, seed=4)
    y, _, _, grads = run_kernels(i, "swiglu", 32 if F % 32 == 0 else None, recipe)
    leaves = [i[k].double().requires_grad_(True) for k in ("x", "probs", "w1", "w2")]
    y_ref = grouped_glu_mlp_reference(leaves[0], i["counts"], leaves[1], leaves[2], leaves[3],
                                      glu_interleave=32 if F % 32 == 0 else None, compute_dtype=torch.float64)
    ref = dict(zip(("dx", "dprobs", "dfc1_weight", "dfc2_weight"), torch.autograd.grad(y_ref, leaves,
                                                                                         i["dy"].double())))
    u8 = 2.0 ** -4
    assert rel(y, y_ref) <= FP8_OPERANDS["y"] * u8
    for name, want in ref.items():
        assert rel(grads[name], want) <= FP8_OPERANDS[name] * u8, f"{name}: {rel(grads[name], want):.3f}"


def test_recipe_is_deterministic(device):
    i = make([13, 0, 22], 128, 128, torch.bfloat16, True, device, seed=5)
    first = run_kernels(i, "swiglu", 32, "fp8_block")
    second = run_kernels(i, "swiglu", 32, "fp8_block")
    for a, b in zip((*first[:3], *first[3].values()), (*second[:3], *second[3].values())):
        assert torch.equal(a, b)       # dprobs included


def test_empty_token_batch(device):
    i = make([0, 0], 48, 32, torch.bfloat16, True, device)
    y, z, h, grads = run_kernels(i, "swiglu", None, "nvfp4")
    assert y.shape == (0, 48) and grads["dx"].shape == (0, 48)
    assert torch.count_nonzero(grads["dfc1_weight"]) == 0 and torch.count_nonzero(grads["dfc2_bias"]) == 0


# ---------------------------------------------------------------------------------------------
# Public API, module, tuning keys, bad input
def test_public_api_runs_recipe_kernels_at_level_1_and_the_rendering_at_level_0(device):
    i = make([20, 0, 31], 48, 32, torch.float32, False, device, seed=6)
    out = {}
    for level in (0, 1):
        leaves = [i[k].clone().requires_grad_(True) for k in ("x", "probs", "w1", "w2")]
        with tilefuse.level(level), launches.counting() as launched:
            y = grouped_glu_mlp(leaves[0], i["counts"], leaves[1], leaves[2], leaves[3], glu_interleave=16,
                                recipe="nvfp4")
            out[level] = (y, *torch.autograd.grad(y, leaves, i["dy"]))
        assert (launched["grouped_mlp_fwd"], launched["grouped_mlp_bwd"]) == ((1, 1) if level else (0, 0))
    tol = recipe_tol(torch.float32, 48, 32, 51)
    for a, b in zip(out[1], out[0]):
        assert rel(a, b) <= tol


@pytest.mark.parametrize("recipe", ["fp8_block", "mxfp8", "nvfp4"])
def test_a_backward_run_at_level_0_gives_the_kernel_forwards_gradients(recipe, device):
    """An eager call's backward follows its forward's decision even when level 0 is in force
    around backward(): the quantizers it calls then take the reference, whose copies of a
    transposed operand (the weight gradients' column-wise copies) must be laid out as the
    kernels write them. Was: mxfp8 / nvfp4 weight gradients off by 130-160% (column-major
    data read as row-major). Same bits as a backward at level 2."""
    H, F = SHAPE[recipe]
    i = make([20, 0, 13, 20], H, F, torch.bfloat16, False, device, seed=9)
    grads = {}
    for backward_level in (2, 0):
        leaves = [i[k].clone().requires_grad_(True) for k in ("x", "probs", "w1", "w2")]
        with tilefuse.level(2):
            y = grouped_glu_mlp(leaves[0], i["counts"], leaves[1], leaves[2], leaves[3], activation="geglu",
                                glu_interleave=8, recipe=recipe)
        with tilefuse.level(backward_level):
            grads[backward_level] = torch.autograd.grad(y, leaves, i["dy"])
    for a, b in zip(grads[0], grads[2]):
        assert torch.equal(a, b)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_fp8_backward_reads_the_dgrad_weight_copies_the_forward_wrote(compiled, device):
    """The op's forward writes W1's and W2's dgrad copies with their forward copies (one
    quantizer launch each), and x's and h's column-wise copies with their row-wise ones, and
    its backward reads them: 9 fp8 quantizer launches per step instead of 11 (x's, h's and
    dy's two copies each from two launches, recipes.PAIR_ROWS_COLS' default; the dGLU
    epilogue copies dz's row-wise copy at interleave 32), and gradients
    bitwise those of a backward that quantizes the weights, x and h itself. Through the
    autograd.Function and through the custom ops (torch.compile)."""
    H, F = SHAPE["fp8_block"]
    i = make([40, 0, 25], H, F, torch.bfloat16, True, device, seed=9)
    names = ("x", "probs", "w1", "w2", "b1", "b2")
    leaves = [i[k].clone().requires_grad_(True) for k in names]

    def f(x, p, w1, w2, b1, b2):
        return grouped_glu_mlp(x, i["counts"], p, w1, w2, glu_interleave=32, fc1_bias=b1, fc2_bias=b2,
                               recipe="fp8_block")
    if compiled:
        f = torch.compile(f, fullgraph=True, backend="inductor" if device == "cuda" else "aot_eager")
    with tilefuse.level(1), launches.counting() as launched:
        y = f(*leaves)
        got = torch.autograd.grad(y, leaves, i["dy"])
    assert launched["quant_fp8_block"] == 9 and launched["grouped_mlp_bwd"] == 1
    cfg = heuristic("fwd", 2, "fp8_block")
    args = [i[k] for k in ("x", "counts", "probs", "w1", "w2", "b1", "b2")]
    with launches.counting() as alone:
        y_want, z, h = launch.forward(*args, "swiglu", 32, config=cfg, recipe="fp8_block")
        want = launch.backward(i["dy"], *args, z, h, "swiglu", 32, config=cfg, recipe="fp8_block")
    assert alone["quant_fp8_block"] == 11
    assert torch.equal(y, y_want)
    for name, a, b in zip(names, got, want):
        assert torch.equal(a, b), name


def _pair_rows_cols(monkeypatch, paired: bool):
    """recipes.quantize_rows_cols as one launch (PAIR_ROWS_COLS on) or as two, quantize_rows
    and quantize_cols (off, the default)."""
    monkeypatch.setattr(recipes, "PAIR_ROWS_COLS", paired)


@pytest.mark.parametrize("counts,interleave", [([40, 0, 25], 32), ([150, 0, 70, 3], None)],
                         ids=["T65-i32", "T223-halves"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_fp8_paired_row_and_column_copies_give_the_separate_quantizers_bits(counts, interleave, compiled, device,
                                                                          monkeypatch):
    """The op with fp8_block, forward and backward, through the autograd.Function and the custom
    ops (torch.compile): x's, h's and dy's row-wise and column-wise copies each from one
    quantizer launch give the outputs and gradients, bit for bit, of the same op with every
    copy from its own launch (recipes.quantize_rows_cols split into quantize_rows and
    quantize_cols); a partial last token tile, an expert without tokens, both GLU layouts, a
    NaN and an inf in x. Launches: 4 in the forward (x, W1, h, W2) and 2 in the backward (dy's
    pair, and at interleave 32 dz's column-wise copy, the dGLU epilogue writing its row-wise
    one; in the halves layout dz's pair), three fewer than with every copy its own launch
    (x's, h's and dy's second copies), four in the halves layout (dz's too)."""
    H, F = SHAPE["fp8_block"]
    i = make(counts, H, F, torch.bfloat16, True, device, seed=13)
    names = ("x", "probs", "w1", "w2", "b1", "b2")
    x = i["x"].clone()
    x[len(x) - 2, 5] = float("nan")      # a non-finite block in the last, partial token tile
    x[0, H - 1] = -float("inf")

    def step():
        leaves = [(x if k == "x" else i[k]).clone().requires_grad_(True) for k in names]

        def f(x, p, w1, w2, b1, b2):
            return grouped_glu_mlp(x, i["counts"], p, w1, w2, glu_interleave=interleave, fc1_bias=b1, fc2_bias=b2,
                                   recipe="fp8_block")
        if compiled:
            torch._dynamo.reset()
            f = torch.compile(f, fullgraph=True, backend="inductor" if device == "cuda" else "aot_eager")
        with tilefuse.level(1), launches.counting() as fwd:
            y = f(*leaves)
        with tilefuse.level(1), launches.counting() as bwd:
            grads = torch.autograd.grad(y, leaves, i["dy"])
        assert fwd["grouped_mlp_fwd"] == 1 and bwd["grouped_mlp_bwd"] == 1
        return [y, *grads], fwd["quant_fp8_block"], bwd["quant_fp8_block"]

    _pair_rows_cols(monkeypatch, True)
    paired, paired_fwd, paired_bwd = step()
    _pair_rows_cols(monkeypatch, False)
    separate, separate_fwd, separate_bwd = step()
    dz_rows = 0 if interleave else 1
    assert (paired_fwd, paired_bwd) == (4, 2)
    assert separate_fwd + separate_bwd == 9 + dz_rows
    for name, a, b in zip(("y", *names), paired, separate):
        assert same_bits(a, b), name      # NaNs included
    assert torch.isnan(paired[0]).any()   # the NaN reached y: the comparison covered it


def test_launch_keeps_x_and_h_column_copies_for_fp8_block_only(device):
    """launch.forward(keep_cols=True): fp8_block returns x's and h's column-wise copies,
    bitwise quantize_cols of x and of the h it returns, and launch.backward given them
    launches no quantizer for them (its gradients bitwise those of a backward without them);
    mxfp8 keeps none (the backward quantizes), and neither does T == 0."""
    H, F = SHAPE["fp8_block"]
    i = make([70, 0, 60], H, F, torch.bfloat16, False, device, seed=4)
    args = [i[k] for k in ("x", "counts", "probs", "w1", "w2", "b1", "b2")]
    y, z, h, cols = launch.forward(*args, "swiglu", 32, config=SMALL["fp8_block"], recipe="fp8_block", keep_cols=True)
    for got, t in zip(cols, (i["x"], h)):
        want = recipes.quantize_cols("fp8_block", t, i["counts"])
        assert torch.equal(got.data, want.data) and torch.equal(got.scales, want.scales)
        assert got.scale_ld == want.scale_ld
    bwd = dict(config=SMALL["fp8_block"], wgrad_config=SMALL["fp8_block"], recipe="fp8_block")
    with launches.counting() as kept:
        with_cols = launch.backward(i["dy"], *args, z, h, "swiglu", 32, saved_cols=cols, **bwd)
    with launches.counting() as alone:
        without = launch.backward(i["dy"], *args, z, h, "swiglu", 32, **bwd)
    # dy's two copies, dz's two (SMALL's dGLU tile does not write dz's row-wise copy) and the
    # weights' dgrad copies (not kept here) in both; x's and h's column-wise copies without cols
    assert kept["quant_fp8_block"] == 6 and alone["quant_fp8_block"] == 8
    for a, b in zip(with_cols, without):
        assert (a is None and b is None) or torch.equal(a, b)
    H, F = SHAPE["mxfp8"]
    m = make([20, 13], H, F, torch.bfloat16, False, device)
    margs = [m[k] for k in ("x", "counts", "probs", "w1", "w2", "b1", "b2")]
    assert launch.forward(*margs, "swiglu", 8, config=SMALL["mxfp8"], recipe="mxfp8", keep_cols=True)[3] is None
    H, F = SHAPE["fp8_block"]
    e = make([0, 0], H, F, torch.bfloat16, False, device)
    eargs = [e[k] for k in ("x", "counts", "probs", "w1", "w2", "b1", "b2")]
    assert launch.forward(*eargs, "swiglu", 32, recipe="fp8_block", keep_dgrad_weights=True, keep_cols=True)[3:] \
        == (None, None)



def _held_tensors(obj) -> list:
    """The tensors ``obj`` holds: itself, or inside tuples, lists and dataclass fields."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _held_tensors(o)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [t for f in dataclasses.fields(obj) for t in _held_tensors(getattr(obj, f.name))]
    return []


def test_fp8_backward_copies_are_saved_tensors_that_hooks_and_checkpointing_see(device):
    """The op's forward (the autograd.Function) saves the copies its backward reads, W1's and
    W2's dgrad copies and x's and h's column-wise copies, data and scales, as the node's saved
    tensors and holds none as its attributes: saved_tensors_hooks pack every one of them
    (torch.autograd.graph.save_on_cpu offloads them), non-reentrant activation checkpointing
    drops them after the forward and recomputes them, and the gradients are the plain call's,
    bit for bit."""
    H, F = SHAPE["fp8_block"]
    i = make([40, 0, 25], H, F, torch.bfloat16, False, device, seed=3)
    names = ("x", "probs", "w1", "w2")

    def f(x, p, w1, w2):
        return grouped_glu_mlp(x, i["counts"], p, w1, w2, glu_interleave=32, recipe="fp8_block")

    def step(call):
        leaves = [i[k].clone().requires_grad_(True) for k in names]
        y = call(*leaves)
        assert _held_tensors(list(vars(y.grad_fn).values())) == []
        return torch.autograd.grad(y, leaves, i["dy"])

    packed = []
    with tilefuse.level(1):
        want = step(f)
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
            hooked = step(f)
        with torch.autograd.graph.save_on_cpu():
            offloaded = step(f)
        checkpointed = step(lambda *a: checkpoint(f, *a, use_reentrant=False))
    E, Tp = 3, recipes.grouped_rows("fp8_block", 65, 3)
    copies = [(E, H, 2 * F), (E, F, H), (H, Tp), (F, Tp)]   # W1's, W2's dgrad copies; x's, h's column-wise
    assert sorted(tuple(t.shape) for t in packed if t.dtype == torch.uint8) == sorted(copies)
    assert sum(t.dtype == torch.float32 and t.dim() >= 2 for t in packed) == 4   # their scales
    for got in (hooked, offloaded, checkpointed):
        for name, a, b in zip(names, got, want):
            assert torch.equal(a, b), name

@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_fp8_op_with_no_tokens(compiled, device):
    """T == 0 through the op (nothing quantized, no dgrad copies kept; the custom op returns
    placeholders of the copies' shapes): empty outputs, zero weight gradients."""
    H, F = SHAPE["fp8_block"]
    i = make([0, 0], H, F, torch.bfloat16, False, device)
    leaves = [i[k].clone().requires_grad_(True) for k in ("x", "probs", "w1", "w2")]

    def f(x, p, w1, w2):
        return grouped_glu_mlp(x, i["counts"], p, w1, w2, glu_interleave=32, recipe="fp8_block")
    if compiled:
        f = torch.compile(f, fullgraph=True, backend="inductor" if device == "cuda" else "aot_eager")
    with tilefuse.level(1), launches.counting() as launched:
        y = f(*leaves)
        dx, dp, dw1, dw2 = torch.autograd.grad(y.sum(), leaves)
    assert launched["quant_fp8_block"] == 0 and y.shape == (0, H) and dx.shape == (0, H) and dp.shape == (0,)
    assert torch.count_nonzero(dw1) == 0 and torch.count_nonzero(dw2) == 0


def test_module_with_recipe(device):
    m = tilefuse.nn.GroupedGLUMLP(2, 64, 32, recipe="mxfp8", bias=True).to(device)
    x = torch.randn(40, 64, device=device, requires_grad=True)
    counts = torch.tensor([25, 15], device=device)
    with tilefuse.level(1), launches.counting() as launched:
        m(x, counts, torch.rand(40, device=device)).sum().backward()
    assert launched["grouped_mlp_fwd"] == 1 and m.fc1_weight.grad is not None and x.grad is not None
    assert "recipe='mxfp8'" in repr(m)


def test_tuning_key_includes_the_recipe():
    x, w2 = torch.empty(300, 256), torch.empty(8, 256, 128)
    plain, fp8 = problem_for(x, w2, "swiglu", 32, False), problem_for(x, w2, "swiglu", 32, False, "fp8_block")
    assert FAMILY.key(plain) != FAMILY.key(fp8) and FAMILY.key(fp8).endswith("-fp8_block")
    assert FAMILY.problem_for_key(FAMILY.key(fp8)) == fp8
    assert FAMILY.baseline(fp8) == launch.heuristic("fwd", 4, "fp8_block")
    assert all(c.block_k == 128 for c in FAMILY.candidates(fp8))


@pytest.mark.parametrize("recipe", ["fp8_block", "mxfp8", "nvfp4"])
def test_tuner_comparison_of_two_tilings_rejects_wrong_outputs(recipe):
    """GroupedFamily.compare for a recipe key: an output scaled by 0.8 or 1.2, or all zeros,
    fails (a bound of whole quantization steps let nvfp4 pass zeros: normwise error 1.0); one
    element in 64 of each output moved by a quantization step, or every element by an ulp of
    bf16, passes."""
    g = torch.Generator().manual_seed(3)
    p = FAMILY.problem_for_key(f"H2048-F1408-E64-x2-T32768-swiglu-s32-{recipe}")
    want = {n: torch.randn(4096, 64, generator=g).bfloat16() for n in ("y", "dx", "dprobs", "dw1", "dw2")}

    def moved(scale=None, zero=False, step_every=None, ulp=False):
        out = {}
        for n, t in want.items():
            v = t.float()
            if scale is not None:
                v = v * scale
            if zero:
                v = torch.zeros_like(v)
            if step_every:
                v.view(-1)[::step_every] *= 1 + tune._QUANT_STEP[recipe]
            if ulp:
                v = v * (1 + torch.finfo(torch.bfloat16).eps)
            out[n] = v.bfloat16()
        return out

    assert FAMILY.compare(p, None, want, want) == []
    assert FAMILY.compare(p, None, moved(step_every=64), want) == []
    assert FAMILY.compare(p, None, moved(ulp=True), want) == []
    for bad in (moved(scale=0.8), moved(scale=1.2), moved(zero=True)):
        assert len(FAMILY.compare(p, None, bad, want)) == 5


@pytest.mark.parametrize("recipe,H,F,match", [
    ("fp8_block", 128, 64, "recipe 'fp8_block' needs .* multiples of 128.*got H = 128, F = 64"),
    ("mxfp8", 48, 32, "recipe 'mxfp8' needs .* multiples of 32.*got H = 48, F = 32"),
    ("nvfp4", 40, 32, "recipe 'nvfp4' needs .* multiples of 16.*got H = 40, F = 32"),
])
def test_shapes_off_the_scaling_block_are_rejected(recipe, H, F, match, device):
    i = make([3, 4], H, F, torch.bfloat16, False, device)
    with pytest.raises(ValueError, match=match):
        grouped_glu_mlp(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], glu_interleave=None, recipe=recipe)
    with pytest.raises(ValueError, match=match):
        tilefuse.nn.GroupedGLUMLP(2, H, F, recipe=recipe)


def test_bad_recipe_values_and_fp8_tiles_are_rejected(device):
    i = make([3, 4], 128, 128, torch.bfloat16, False, device)
    args = (i["x"], i["counts"], i["probs"], i["w1"], i["w2"])
    with pytest.raises(ValueError, match="recipe must be None or one of"):
        grouped_glu_mlp(*args, recipe="fp8")
    with pytest.raises(TypeError, match="recipe must be None or a str"):
        grouped_glu_mlp(*args, recipe=1)
    with pytest.raises(ValueError, match="BLOCK_K must be 128"):
        launch.forward(*args, None, None, "swiglu", 32, config=GemmConfig(32, 32, 64), recipe="fp8_block")


@pytest.mark.parametrize("level", [0, 1])
def test_batched_gradients_of_a_recipe_raise_not_implemented(level, device):
    """is_grads_batched and jacobian(vectorize=True) hand the backward a batched dy: the
    recipe's rendering (level 0) raises the kernels' (level 1) NotImplementedError."""
    i = make([3, 0, 5], 32, 32, torch.float32, False, device, seed=8)
    leaves = [i[k].clone().requires_grad_(True) for k in ("x", "probs")]

    def op(x, probs):
        return grouped_glu_mlp(x, i["counts"], probs, i["w1"], i["w2"], glu_interleave=16, recipe="mxfp8")
    match = "recipe 'mxfp8' with batched gradients"
    with tilefuse.level(level):
        y = op(*leaves)
        with pytest.raises(NotImplementedError, match=match):
            torch.autograd.grad(y, leaves, torch.stack([i["dy"], -i["dy"]]), is_grads_batched=True)
        with pytest.raises(NotImplementedError, match=match):
            torch.autograd.functional.jacobian(lambda x: op(x, leaves[1]).sum(0), leaves[0], vectorize=True)


def test_recipe_rendering_ignores_autocast(device):
    """Level 0's plain-PyTorch recipe under a bfloat16 autocast region (the backward outside
    it, as torch's autocast documents) gives the bits it gives without one: its GEMMs stay
    IEEE float32 (a GEMM autocast ran in bfloat16 would change them)."""
    i = make([20, 0, 31], 48, 32, torch.float32, True, device, seed=9)
    out = []
    for autocast in (False, True):
        leaves = [i[k].clone().requires_grad_(True) for k in ("x", "probs", "w1", "w2", "b1", "b2")]
        with tilefuse.level(0), torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=autocast):
            y = grouped_glu_mlp(leaves[0], i["counts"], *leaves[1:4], fc1_bias=leaves[4], fc2_bias=leaves[5],
                                glu_interleave=16, recipe="nvfp4")
        out.append((y, *torch.autograd.grad(y, leaves, i["dy"])))
    for name, plain, cast in zip(("y", "dx", "dprobs", "dw1", "dw2", "db1", "db2"), *out):
        assert cast.dtype == plain.dtype == torch.float32 and torch.equal(cast, plain), name


@pytest.mark.parametrize("level", [0, 1])
@pytest.mark.parametrize("recipe", ["nvfp4", "mxfp8"])
def test_recipe_has_no_double_backward(level, recipe, device):
    """The same op-named RuntimeError on the kernels' path (level 1) and the plain-PyTorch
    rendering (level 0), where the first backward under create_graph=True used to pass and a
    gradient penalty's second grad came back None (once_differentiable)."""
    i = make([5, 6], 64, 32, torch.float32, False, device)
    x, w1 = i["x"].requires_grad_(True), i["w1"].requires_grad_(True)
    with tilefuse.level(level):
        y = grouped_glu_mlp(x, i["counts"], i["probs"], w1, i["w2"], glu_interleave=16, recipe=recipe)
        with pytest.raises(RuntimeError, match=f"grouped_glu_mlp: recipe '{recipe}' has no double backward"):
            torch.autograd.grad(y.square().sum(), x, create_graph=True)
        (dx,) = torch.autograd.grad(y.square().sum(), x)     # a first-order backward still runs
        assert dx.shape == x.shape and torch.isfinite(dx).all()


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", (None, *recipes.RECIPES))
def test_forward_and_backward_capture_in_a_cuda_graph(recipe, device):
    """The whole step (quantizers with a recipe, GEMMs, backward) replays from a CUDA graph
    with the eager results: no host sync and no pageable host-to-device copy anywhere in it
    (such a copy of a scalar constant makes capture fail). Without a recipe: the bf16 kernels,
    ragged counts with an empty expert."""
    i = make([300, 0, 211, 17], 128, 128, torch.bfloat16, False, device)

    def step():
        y, z, h = launch.forward(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], None, None, "swiglu", 32,
                                 recipe=recipe)
        grads = launch.backward(i["dy"], i["x"], i["counts"], i["probs"], i["w1"], i["w2"], None, None, z, h,
                                "swiglu", 32, recipe=recipe)
        return (y, *grads[:4])

    assert_graph_replay_matches_eager(step)


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", (None, *recipes.RECIPES))
def test_the_side_stream_gives_one_streams_bits(recipe, device, monkeypatch):
    """launch.py on two streams (streams.py: a recipe's W2 quantizer beside FC1; the weight
    gradients with their column-wise quantizers beside the dgrads) gives the bits of the same
    step on one stream (streams.BESIDE off), and forks three times with a recipe, twice without."""
    from gpu_helpers import one_and_two_streams
    i = make([300, 0, 211, 17], 128, 128, torch.bfloat16, False, device, seed=21)

    def step():
        y, z, h = launch.forward(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], None, None, "swiglu", 32,
                                 recipe=recipe)
        grads = launch.backward(i["dy"], i["x"], i["counts"], i["probs"], i["w1"], i["w2"], None, None, z, h,
                                "swiglu", 32, recipe=recipe)
        return (y, z, h, *grads[:4])

    want, got, sides = one_and_two_streams(monkeypatch, step)
    assert len(sides) == (3 if recipe else 2) and all(s is not None and s != torch.cuda.current_stream()
                                                      for s in sides)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


@pytest.mark.parametrize("recipe", ["fp8_block", "mxfp8", "nvfp4"])
def test_an_expert_without_tokens_gets_zero_weight_gradients_whatever_the_others_hold(recipe, device):
    """The spec's rule (zero weight gradients for an expert without tokens) holds when another
    expert's rows hold a NaN: nvfp4's per-tensor decode scale is then NaN, and the weight
    gradient kernel multiplied the empty expert's zeros by it (0 * NaN), where level 0 gives 0."""
    block = 128 if recipe == "fp8_block" else 32
    i = make([3, 0, 2], block, block, torch.bfloat16, False, device)
    x = i["x"].clone()
    x[0, 0] = float("nan")
    with launches.counting() as launched:
        y, z, h = launch.forward(x, i["counts"], i["probs"], i["w1"], i["w2"], None, None, "swiglu", 8,
                                 recipe=recipe)
        _, _, dw1, dw2, _, _ = launch.backward(i["dy"], x, i["counts"], i["probs"], i["w1"], i["w2"], None, None, z,
                                               h, "swiglu", 8, recipe=recipe)
    assert launched["grouped_mlp_bwd"] == 1
    assert torch.count_nonzero(dw1[1]) == 0 and torch.count_nonzero(dw2[1]) == 0
    assert not torch.isnan(dw1[1]).any() and not torch.isnan(dw2[1]).any()


def test_recipe_rendering_holds_its_tensors_only_as_saved_tensors():
    """The recipes' plain-PyTorch rendering (level 0) keeps every tensor it needs for the
    backward through save_for_backward: saved-tensor hooks (``save_on_cpu``) see the biases
    too, and per-call biases are freed by the backward while the output lives on. Before, it
    also held the biases on ``ctx``, which neither the hooks nor the backward's release saw."""
    import gc
    import weakref
    torch.manual_seed(0)
    E, H, F, T = 2, 64, 32, 5
    counts, probs = torch.tensor([3, 2]), torch.rand(T)
    x = torch.randn(T, H, requires_grad=True)
    w1, w2 = torch.randn(E, 2 * F, H, requires_grad=True), torch.randn(E, H, F, requires_grad=True)
    b1, b2 = torch.randn(E, 2 * F, requires_grad=True), torch.randn(E, H, requires_grad=True)
    packed = []
    with tilefuse.level(0), torch.autograd.graph.saved_tensors_hooks(lambda t: (packed.append(t), t)[1],
                                                                     lambda t: t):
        y = grouped_glu_mlp(x, counts, probs, w1, w2, fc1_bias=b1, fc2_bias=b2, recipe="mxfp8", glu_interleave=32)
    assert type(y.grad_fn).__name__ == "RecipeReferenceFunctionBackward"
    assert any(t is b1 for t in packed) and any(t is b2 for t in packed)
    del packed
    with tilefuse.level(0):
        cast1, cast2 = b1 * 1.0, b2 * 1.0          # per-call biases (a cast made each call)
        alive = weakref.ref(cast1), weakref.ref(cast2)
        y = grouped_glu_mlp(x, counts, probs, w1, w2, fc1_bias=cast1, fc2_bias=cast2, recipe="mxfp8",
                            glu_interleave=32)
        y.sum().backward()
    del cast1, cast2
    gc.collect()
    assert alive[0]() is None and alive[1]() is None
    assert b1.grad is not None and b2.grad is not None


# ---------------------------------------------------------------------------------------------
# tilefuse.reuse_quantized_weights
def _fp8_step(i, leaves, recipe="fp8_block"):
    """One forward + backward with ``recipe`` as users call the op (level 1): (y and the
    gradients, the quantizer launches)."""
    with tilefuse.level(1), launches.counting() as launched:
        y = grouped_glu_mlp(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"], glu_interleave=32,
                            recipe=recipe)
        grads = torch.autograd.grad(y, list(leaves.values()), i["dy"])
    return [y, *grads], sum(n for k, n in launched.items() if k.startswith("quant_"))


def _leaves(i):
    return {k: i[k].clone().requires_grad_(True) for k in ("x", "probs", "w1", "w2")}


@pytest.mark.parametrize("recipe", ["fp8_block", "mxfp8"])
def test_reused_quantized_weights_give_the_same_bits_with_fewer_launches(recipe, device):
    """Inside tilefuse.reuse_quantized_weights the second call with the same weights reuses
    their quantized copies: the same outputs and gradients, bit for bit, as without the block,
    and no weight quantizer launch (fp8_block: its W1 and W2 pairs, two launches fewer; mxfp8:
    its forward's W1 and W2 copies). Outside the block nothing is reused."""
    H, F = SHAPE[recipe]
    i = make([40, 0, 25], H, F, torch.bfloat16, False, device, seed=21)
    leaves = _leaves(i)

    def step():
        return _fp8_step(i, leaves, recipe)

    want, plain = step()
    assert step()[1] == plain                      # outside a block: every call quantizes its weights
    with tilefuse.reuse_quantized_weights():
        first, first_n = step()
        second, second_n = step()
    assert first_n == plain and second_n == plain - 2
    for a, b, c in zip(want, first, second):
        assert same_bits(a, b) and same_bits(a, c)
    assert step()[1] == plain                      # the block's copies are gone with it
    assert recipes._REUSE.get() is None


@pytest.mark.parametrize("recipe", ["fp8_block", "mxfp8"])
def test_reuse_holds_one_entry_a_weight_across_calls_with_and_without_gradients(recipe, device):
    """Calls without gradients (evaluation, or the no-grad forward of reentrant activation
    checkpointing) and training calls in one block share one cache entry a weight: a training
    call after a no-grad one reuses its forward copies (fp8_block, whose no-grad call made no
    dgrad copy, quantizes its pairs once more and keeps them), later calls of either kind
    launch no weight quantizer, and every call gives the bits of a call outside any block.
    Before, the entries were keyed by whether the call made a dgrad copy: the weights were
    quantized again for the first training call and their copies held twice."""
    H, F = SHAPE[recipe]
    i = make([40, 0, 25], H, F, torch.bfloat16, False, device, seed=24)
    leaves = _leaves(i)

    def no_grad_call():
        with tilefuse.level(1), torch.no_grad(), launches.counting() as launched:
            y = grouped_glu_mlp(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"],
                                glu_interleave=32, recipe=recipe)
        return y, sum(n for k, n in launched.items() if k.startswith("quant_"))

    want_eval, plain_eval = no_grad_call()
    want, plain = _fp8_step(i, leaves, recipe)
    with tilefuse.reuse_quantized_weights():
        cache = recipes._REUSE.get()
        eval0, n0 = no_grad_call()
        first, n1 = _fp8_step(i, leaves, recipe)
        second, n2 = _fp8_step(i, leaves, recipe)
        eval3, n3 = no_grad_call()
        assert len(cache) == 2                     # W1 and W2, one entry each
    assert n0 == plain_eval and n2 == plain - 2 and n3 == plain_eval - 2
    assert n1 == (plain if recipe == "fp8_block" else plain - 2)
    assert same_bits(eval0, want_eval) and same_bits(eval3, want_eval)
    for a, b, c in zip(want, first, second):
        assert same_bits(a, b) and same_bits(a, c)


def test_a_weight_changed_in_place_is_quantized_again(device):
    """An in-place change of a weight inside the block (an optimizer's step under no_grad) bumps
    its version: the next call quantizes it again and gives the bits of a call outside any
    block; the unchanged weight's copies are still reused. A weight of the same shape in
    another tensor is not taken for it."""
    H, F = SHAPE["fp8_block"]
    i = make([40, 0, 25], H, F, torch.bfloat16, False, device, seed=22)
    leaves = _leaves(i)
    with tilefuse.reuse_quantized_weights():
        _, n0 = _fp8_step(i, leaves)
        with torch.no_grad():
            leaves["w1"].mul_(1.5)
        got, n1 = _fp8_step(i, leaves)
        other = dict(leaves, w2=leaves["w2"].detach().clone().mul_(0.5).requires_grad_(True))
        got_other, n2 = _fp8_step(i, other)
    assert n1 == n0 - 1 and n2 == n0 - 1           # W1 again, W2 reused; then W2's new tensor, W1 reused
    want, _ = _fp8_step(i, leaves)
    want_other, _ = _fp8_step(i, other)
    for a, b in zip(want + want_other, got + got_other):
        assert same_bits(a, b)


def test_reuse_blocks_nest_and_share_the_outer_copies(device):
    H, F = SHAPE["fp8_block"]
    i = make([40, 0, 25], H, F, torch.bfloat16, False, device, seed=23)
    leaves = _leaves(i)
    with tilefuse.reuse_quantized_weights():
        _, n0 = _fp8_step(i, leaves)
        with tilefuse.reuse_quantized_weights():
            _, n1 = _fp8_step(i, leaves)
        _, n2 = _fp8_step(i, leaves)               # the inner block's exit dropped nothing
    assert n1 == n2 == n0 - 2
    assert recipes._REUSE.get() is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA streams")
def test_copies_made_on_one_stream_are_waited_for_on_another():
    """Micro-batches on two streams in one block: the call on stream b reuses the copies stream
    a's quantizers write (held back behind a long sleep on a), so b must wait for them, and
    gives the bits of a call outside any block."""
    H, F = SHAPE["fp8_block"]
    i = make([40, 0, 25], H, F, torch.bfloat16, False, "cuda", seed=27)
    leaves = _leaves(i)
    want, plain = _fp8_step(i, leaves)             # compiles everything first: the host is quick below
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    with tilefuse.reuse_quantized_weights():
        with torch.cuda.stream(a):
            torch.cuda._sleep(200_000_000)          # about 0.1 s: a's quantizers run after b's call is queued
            _fp8_step(i, leaves)
        with torch.cuda.stream(b):
            got, n = _fp8_step(i, leaves)
        torch.cuda.synchronize()
    assert n == plain - 2
    for x, y in zip(want, got):
        assert same_bits(x, y)


def test_a_weight_made_per_call_is_not_kept(device):
    """A weight passed as a new tensor each call (a per-call cast) is quantized each call, and
    the block keeps nothing of it once the tensor is gone: the cache does not grow."""
    H, F = SHAPE["fp8_block"]
    i = make([40, 0, 25], H, F, torch.bfloat16, False, device, seed=24)
    master = {k: i[k].float().requires_grad_(True) for k in ("w1", "w2")}
    ns = []
    with tilefuse.reuse_quantized_weights():
        for _ in range(3):
            leaves = {"x": i["x"].clone().requires_grad_(True), "probs": i["probs"].clone().requires_grad_(True),
                      "w1": master["w1"].to(torch.bfloat16), "w2": master["w2"].to(torch.bfloat16)}
            _, n = _fp8_step(i, leaves)
            ns.append(n)
            del leaves
            assert len(recipes._REUSE.get()) == 0
    assert ns[0] == ns[1] == ns[2]


def test_an_optimizer_step_or_a_new_layout_drops_the_copies(device):
    """Inside the block: any torch.optim step drops every copy (a step may write the weights
    without their version counters: FSDP2's unsharded copies), and a weight whose ``.data`` now
    holds another layout at the same address (its transpose) is not served its old copies.
    Each call then gives the bits of a call outside any block."""
    H, F = 256, 128   # W1 (E, 2F, H) square: its transpose has its shape
    i = make([40, 0, 25], H, F, torch.bfloat16, False, device, seed=25)
    leaves = _leaves(i)
    opt = torch.optim.SGD([leaves["w2"]], lr=0.1)   # no gradient: the step writes nothing
    with tilefuse.reuse_quantized_weights():
        _, n0 = _fp8_step(i, leaves)
        opt.step()
        _, n1 = _fp8_step(i, leaves)               # both weights quantized again
        _, n2 = _fp8_step(i, leaves)               # and reused after that
        w1 = leaves["w1"]
        address, version = w1.data_ptr(), w1._version
        w1.data = w1.data.mT
        assert (w1.data_ptr(), w1._version) == (address, version)
        got, n3 = _fp8_step(i, leaves)             # W1 quantized again, W2 reused
    assert n1 == n0 and n2 == n0 - 2 and n3 == n0 - 1
    want, _ = _fp8_step(i, leaves)
    for a, b in zip(want, got):
        assert same_bits(a, b)
    assert recipes._REUSE.get() is None


def test_the_copies_go_when_the_block_exits_and_inference_weights_are_not_kept(device):
    """The block's copies are freed on exit, not left to the cycle collector (its cache and
    the entries' weakref callbacks form a cycle); an inference tensor (no version counter) is
    quantized on each call inside the block, as outside."""
    import gc
    H, F = SHAPE["fp8_block"]
    i = make([40, 0, 25], H, F, torch.bfloat16, False, device, seed=26)
    leaves = _leaves(i)
    gc.disable()
    try:
        with tilefuse.reuse_quantized_weights():
            cache = recipes._REUSE.get()
            _fp8_step(i, leaves)
            assert len(cache) == 2
        assert len(cache) == 0
    finally:
        gc.enable()
    with torch.inference_mode():
        w1, w2 = i["w1"].clone(), i["w2"].clone()

    def forward_quantizers():
        with tilefuse.level(1), launches.counting() as launched:
            grouped_glu_mlp(i["x"], i["counts"], i["probs"], w1, w2, glu_interleave=32, recipe="fp8_block")
        return sum(n for k, n in launched.items() if k.startswith("quant_"))
    plain = forward_quantizers()
    with tilefuse.reuse_quantized_weights():
        assert [forward_quantizers(), forward_quantizers()] == [plain, plain]
        assert len(recipes._REUSE.get()) == 0


def test_a_recipe_without_a_backward_quantizes_only_what_the_forward_reads(device):
    """Under torch.no_grad (trainable parameters, an eval pass) no backward will run: the
    forward makes no dgrad weight copies and no column-wise copies (fp8_block: the four
    forward quantizations, as with frozen parameters, not six plus two block tables), and y is
    the grad-mode call's, bit for bit."""
    import tilefuse
    from tilefuse import launches
    from tilefuse.nn import GroupedGLUMLP
    torch.manual_seed(0)
    mlp = GroupedGLUMLP(2, 128, 128, recipe="fp8_block").to(device, torch.bfloat16)
    counts, x, probs = torch.tensor([20, 13]), torch.randn(33, 128, dtype=torch.bfloat16), torch.rand(33)
    counts, x, probs = counts.to(device), x.to(device), probs.to(device)
    with tilefuse.level(1):
        with launches.counting() as inference, torch.no_grad():
            y0 = mlp(x, counts, probs)
        with launches.counting() as training:
            y1 = mlp(x, counts, probs)
    assert inference["quant_fp8_block"] == 4 and inference["quant_group_table"] == 0
    assert training["quant_fp8_block"] == 6 and training["quant_group_table"] == 2
    assert torch.equal(y0, y1.detach())


def _frozen_weights_case(recipe, device, monkeypatch):
    """(inputs, the list each weight-gradient GEMM's output shape is appended to) of the frozen
    weight tests: without a recipe the fused kernels through a table entry (the compose route
    is the baseline)."""
    H, F = SHAPE["fp8_block"]
    i = make([40, 0, 25], H, F, torch.bfloat16, False, device, seed=5)
    if recipe is None:
        problem = problem_for(i["x"], i["w2"], "swiglu", 32, False)
        tuning.register("grouped_glu_mlp", {problem: [c for c in tune.candidates_for(problem) if not c.compose][-1]})
    wgrads = []
    run_wgrad = launch._wgrad
    monkeypatch.setattr(launch, "_wgrad", lambda a, b, c, *rest: wgrads.append(c.shape) or run_wgrad(a, b, c, *rest))
    return i, wgrads


@pytest.mark.parametrize("recipe", [None, "fp8_block"], ids=["plain", "fp8_block"])
def test_frozen_weights_run_no_weight_gradient_work(recipe, tuning_table, device, monkeypatch):
    """Expert weights that ask for no gradient (frozen experts, only x and probs trained): the
    kernels' backward launches no weight-gradient GEMM for them, and with fp8_block the forward
    keeps no column-wise copies of x and h and the backward makes none of dy and dz (both
    frozen: the forward's four quantizations and dy's row-wise copy, the dGLU epilogue writing
    dz's at interleave 32; no block table). The gradients asked for are the all-trainable
    call's, bit for bit; with one weight frozen only the other's GEMM runs. Without a recipe
    the fused kernels through a table entry (the compose route is the baseline)."""
    i, wgrads = _frozen_weights_case(recipe, device, monkeypatch)

    def step(trainable):
        wgrads.clear()
        leaves = {k: i[k].clone().requires_grad_(k in trainable) for k in ("x", "probs", "w1", "w2")}
        with tilefuse.level(2), launches.counting() as launched:
            y = grouped_glu_mlp(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"],
                                glu_interleave=32, recipe=recipe)
            grads = torch.autograd.grad(y, [leaves[k] for k in trainable], i["dy"])
        assert launched["grouped_mlp_bwd"] == 1
        return dict(zip(trainable, grads)), launched, list(wgrads)

    full, _, ran = step(("x", "probs", "w1", "w2"))
    assert ran == [i["w2"].shape, i["w1"].shape]
    frozen, launched, ran = step(("x", "probs"))
    assert ran == []
    if recipe:
        assert launched["quant_fp8_block"] == 5 and launched["quant_group_table"] == 0
    one, _, ran_one = step(("x", "probs", "w1"))
    assert ran_one == [i["w1"].shape]
    for got in (frozen, one):
        for name, g in got.items():
            assert torch.equal(g, full[name]), name


@pytest.mark.parametrize("recipe", [None, "fp8_block"], ids=["plain", "fp8_block"])
def test_compiled_frozen_weights_run_no_weight_gradient_work(recipe, tuning_table, device, monkeypatch):
    """The same through the custom ops (torch.compile, aot_eager): the forward op, traced with
    frozen weights, keeps no column-wise copies of x and h, and the backward op (its need_dw1 /
    need_dw2 from the node's needs_input_grad) launches no weight-gradient GEMM and makes no
    column-wise copies of dy and dz: the compiled call's quantizer launches are the eager frozen
    call's, and so are its gradients, bit for bit. With one weight frozen only the other's GEMM
    runs."""
    i, wgrads = _frozen_weights_case(recipe, device, monkeypatch)

    def f(x, p, w1, w2):
        return grouped_glu_mlp(x, i["counts"], p, w1, w2, glu_interleave=32, recipe=recipe)
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")

    def step(fn, trainable):
        wgrads.clear()
        leaves = {k: i[k].clone().requires_grad_(k in trainable) for k in ("x", "probs", "w1", "w2")}
        with tilefuse.level(2), launches.counting() as launched:
            y = fn(leaves["x"], leaves["probs"], leaves["w1"], leaves["w2"])
            grads = torch.autograd.grad(y, [leaves[k] for k in trainable], i["dy"])
        assert launched["grouped_mlp_bwd"] == 1
        quantizers = {k: n for k, n in launched.items() if k.startswith("quant_")}
        return dict(zip(trainable, grads)), quantizers, list(wgrads)

    for trainable, ran in ((("x", "probs"), []), (("x", "probs", "w1"), [i["w1"].shape])):
        want, want_quantizers, _ = step(f, trainable)
        got, got_quantizers, got_ran = step(compiled, trainable)
        assert got_ran == ran, trainable
        assert got_quantizers == want_quantizers, trainable
        if recipe and trainable == ("x", "probs"):
            assert got_quantizers == {"quant_fp8_block": 5}
        for name, g in got.items():
            assert torch.equal(g, want[name]), (trainable, name)


def test_a_compiled_recipe_call_without_a_backward_makes_no_backward_copies(device):
    """torch.compile'd under torch.no_grad (trainable parameters, an eval pass): the forward op
    is traced without the backward's copies (its ``keep`` argument, set when traced: Dynamo
    guards on the grad mode), so it makes the eager no-grad call's four quantizations and no
    block table, and y is the eager call's bit for bit. The same function in grad mode is
    traced again with the copies, and its output and gradients are the eager call's."""
    H, F = SHAPE["fp8_block"]
    i = make([20, 13], H, F, torch.bfloat16, False, device, seed=6)
    leaves = [i[k].clone().requires_grad_(True) for k in ("x", "probs", "w1", "w2")]

    def f(x, p, w1, w2):
        return grouped_glu_mlp(x, i["counts"], p, w1, w2, glu_interleave=32, recipe="fp8_block")
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, backend="inductor" if device == "cuda" else "aot_eager")

    def quantizers(launched):
        return {k: n for k, n in launched.items() if k.startswith("quant_")}
    with tilefuse.level(1), torch.no_grad():
        with launches.counting() as eager:
            y_eager = f(*leaves)
        with launches.counting() as traced:
            y = compiled(*leaves)
    assert quantizers(traced) == quantizers(eager) == {"quant_fp8_block": 4}
    assert torch.equal(y, y_eager)
    with tilefuse.level(1):
        with launches.counting() as training:
            y = compiled(*leaves)
            got = torch.autograd.grad(y, leaves, i["dy"])
        y_eager = f(*leaves)
        want = torch.autograd.grad(y_eager, leaves, i["dy"])
    assert training["quant_fp8_block"] == 9 and training["quant_group_table"] == 4
    assert torch.equal(y, y_eager)
    for a, b in zip(got, want):
        assert torch.equal(a, b)


def test_a_backward_on_a_level_0_thread_keeps_the_forward_s_quantizer_kernels(device):
    """The kernels route's backward follows its forward's level, its quantizers included: a
    forward inside level(1), its backward on a thread at level 0 (as autograd's CUDA device
    thread is where set_level / TILEFUSE_LEVEL say 0 and a block chose the forward) runs the
    same quantizer kernels as a backward at level 1 (they fell back to the plain-PyTorch
    quantizers: the same bits, slower), with the same gradients."""
    i = random_inputs([5, 0, 17, 9], 128, 128, torch.bfloat16, bias=False, device=device,
                      generator=torch.Generator().manual_seed(0))

    def run(backward_level):
        leaves = {k: i[k].detach().requires_grad_() for k in ("x", "probs", "w1", "w2")}
        tilefuse.set_level(backward_level)
        try:
            with tilefuse.level(1):
                y = grouped_glu_mlp(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"],
                                    glu_interleave=32, recipe="fp8_block")
            out = {}

            def backward():   # a thread of its own: the level block above is not seen there
                assert policy.get_level() == backward_level
                with launches.counting() as launched:
                    out["grads"] = torch.autograd.grad(y, list(leaves.values()), i["dy"])
                out["quant"] = {k: n for k, n in launched.items() if k.startswith("quant_") and n}

            worker = threading.Thread(target=backward)
            worker.start()
            worker.join()
        finally:
            tilefuse.set_level(None)
        return out["grads"], out["quant"]

    grads1, quant1 = run(1)
    grads0, quant0 = run(0)
    assert quant1 and quant0 == quant1
    for a, b in zip(grads0, grads1):
        assert torch.equal(a, b)
