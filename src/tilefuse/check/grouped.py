"""`tilefuse check` section for grouped_glu_mlp.

Verification: every activation x interleave x bias combination (float32; a bfloat16 and a
float16 case) of the fused kernels against the float64 reference and against the unfused
composition, of the compose route (the path wherever no fused winner is selected) and of the
op as called against the float64 reference; each quantized recipe's kernels (forward and
backward) against the recipe's float64 rendering. Where Gluon's Hopper kernels run, also the
compose route at a tuned config's Gluon tiles (ws_rows, ws_wgrad) and fp8_block's
warp-specialised GEMMs (GemmConfig.ws), each row passing only if those kernels launched.

Benchmark (GPU): forward+backward throughput against the per-expert loop, torch._grouped_mm
(the unfused composition) and its torch.compile (interleave 32, and the halves layout as
called against its own compiled composition), plus host overhead, and the recipes' kernels
(fp8_block: target >= 1.4x tilefuse bf16; mxfp8 / nvfp4 emulated, reported without a speed
claim), and each fused GEMM role against the torch._grouped_mm GEMM doing the same work
(``gemm_roles``, also behind benchmarks/grouped_profile.py)."""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable

import torch

from .. import launches, policy, tuning
from ..ops import gluon_hopper
from ..ops.grouped_glu_mlp import compose, configs, launch, recipes, ws_kernels, ws_rows, ws_wgrad
from ..ops.grouped_glu_mlp.api import grouped_glu_mlp, problem_for
from ..ops.grouped_glu_mlp.configs import GemmConfig
from ..ops.grouped_glu_mlp.op import compose_apply
from ..ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
from ..ops.grouped_glu_mlp.reference import grouped_glu_mlp_reference, grouped_glu_mlp_unfused, random_inputs
from ..utils import normwise_rel_error
from ..tuning import timing
from ..tuning.sweep import poisoned_allocations
from . import bench
from .report import cell, verification_row

# Normwise relative error bounds against float64 (derivation in tests/test_grouped_mlp_kernels.py):
# fp32 IEEE dots 1e-5; bf16 about three roundings to bf16 on the longest path, 1.6e-2; fp16
# the same three roundings at its unit roundoff (2**-11), 2e-3.
TOL = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2, torch.float16: 2e-3}
SMALL = GemmConfig(32, 32, 32, 4, 2, 2)


_LEAVES = ("x", "probs", "w1", "w2", "b1", "b2")   # the differentiable inputs


def _inputs(counts, H, F, dtype, bias, device, grad=True):
    """reference.random_inputs, the differentiable inputs requiring grad with ``grad``."""
    i = random_inputs(counts, H, F, dtype, bias=bias, device=device)
    if grad:
        for name in _LEAVES:
            if i[name] is not None:
                i[name].requires_grad_(True)
    return i


def _fused(i, activation, interleave, cfg, dy, recipe=None, wgrad_cfg=None):
    """The kernels' forward + backward as the op runs them (the forward keeps fp8_block's dgrad
    weight copies for the backward)."""
    y, z, h, kept = launch.forward(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["b1"], i["b2"], activation,
                                   interleave, config=cfg, recipe=recipe, keep_dgrad_weights=True)
    dx, dp, dw1, dw2, db1, db2 = launch.backward(dy, i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["b1"],
                                                 i["b2"], z, h, activation, interleave, config=cfg,
                                                 wgrad_config=wgrad_cfg, recipe=recipe, dgrad_weights=kept)
    return [y, dx, dp, dw1, dw2] + ([db1, db2] if i["b1"] is not None else [])


def _autograd(fn, i, activation, interleave, dy, **kw):
    leaves = [t for t in (i["x"], i["probs"], i["w1"], i["w2"], i["b1"], i["b2"]) if t is not None]
    y = fn(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], activation=activation, glu_interleave=interleave,
           fc1_bias=i["b1"], fc2_bias=i["b2"], **kw)
    return [y] + list(torch.autograd.grad(y, leaves, dy.to(y.dtype)))


# The launches that show which route a public call took (op.route).
ROUTE_LAUNCHES = (("grouped_mlp_compose", "compose route"), ("grouped_mlp_fwd", "fused kernels"),
                  ("grouped_mlp_unfused", "unfused composition"))


def _as_called(i, activation, interleave, dy, recipe=None):
    """(results, the route that ran or None) of ``tilefuse.grouped_glu_mlp`` as users call it
    (level 2: the table's choice, through the call plans and the autograd.Functions)."""
    with policy.level(2), launches.counting() as launched:
        got = _autograd(grouped_glu_mlp, i, activation, interleave, dy, recipe=recipe)
    ran = next((name for kernel, name in ROUTE_LAUNCHES if launched[kernel]), None)
    return got, ran


def _compose(x, counts, probs, w1, w2, *, activation, glu_interleave, fc1_bias, fc2_bias, tuned=None):
    """The compose route with the public API's keywords (``_autograd``'s ``fn``); ``tuned``: a
    GemmConfig.compose config whose Gluon tiles run its GEMMs."""
    return compose_apply(x, counts, probs, w1, w2, fc1_bias, fc2_bias, activation, glu_interleave, tuned)


def _float64_reference(i, activation, interleave) -> list:
    """The float64 reference's outputs and gradients (in _NAMES order) for inputs ``i``."""
    ref_in = {k: (v.detach().double().requires_grad_(True) if v is not None and v.is_floating_point() else v)
              for k, v in i.items()}
    return _autograd(grouped_glu_mlp_reference, ref_in, activation, interleave, i["dy"].double(),
                     compute_dtype=torch.float64)


def _case(counts, H, F, activation, interleave, bias, dtype, device, cfg) -> list[dict]:
    i = _inputs(counts, H, F, dtype, bias, device)
    dy = i["dy"]
    with launches.counting() as launched:
        fused = _fused(i, activation, interleave, cfg, dy)
    ref = _float64_reference(i, activation, interleave)
    unfused = _autograd(grouped_glu_mlp_unfused, i, activation, interleave, dy)
    fused_ran = launched["grouped_mlp_fwd"] == 1 and launched["grouped_mlp_bwd"] == 1
    case = (f"E{len(counts)}-T{sum(counts)}-H{H}-F{F}-{activation}-s{interleave}-{'bias' if bias else 'nobias'}"
            f"-{str(dtype).split('.')[-1]}")
    # (path, result, whether its launches ran, the result compared with, tolerance)
    checks = [("fused vs float64 reference", fused, fused_ran, ref, TOL[dtype]),
              ("fused vs unfused composition", fused, fused_ran, unfused,
               2 * TOL[dtype])]   # the composition carries its own roundings
    if compose.takes(i["x"].element_size(), H, F):
        with launches.counting() as launched:
            composed = _autograd(_compose, i, activation, interleave, dy)
        composed_ran = launched["grouped_mlp_compose"] == 1 and launched["grouped_mlp_compose_bwd"] == 1
        checks.append(("compose route vs float64 reference", composed, composed_ran, ref, TOL[dtype]))
    if (dtype in (torch.bfloat16, torch.float16) and compose.takes(i["x"].element_size(), H, F)
            and gluon_hopper.available(i["x"].device) and _gluon_widths(H, F)):   # 16-bit operands only
        # The compose route at a tuned config's Gluon tiles (the H200 table's winners run them):
        # every GEMM on ws_rows / ws_wgrad, fc1's GLU in ws_rows' epilogue where it takes the
        # layout (interleave 8 here; the halves layout takes the GLU kernel at these widths).
        with launches.counting() as launched:
            gluon = _autograd(_compose, i, activation, interleave, dy, tuned=GLUON_TILE)
        gluon_ran = (launched["grouped_mlp_compose"] == 1 and launched["grouped_ws_rows"] == 4
                     and launched["grouped_ws_wgrad"] == 2)
        checks.append(("compose route, Gluon GEMMs vs float64 reference", gluon, gluon_ran, ref, TOL[dtype]))
    called, route = _as_called(i, activation, interleave, dy)
    checks.append((f"as called ({route or 'no kernel launched'}) vs float64 reference", called,
                   route is not None, ref, TOL[dtype]))
    return [_row(path, case, got, other, ran, tol) for path, got, ran, other, tol in checks]


def _gluon_widths(H: int, F: int) -> bool:
    """Whether every GEMM of the compose route can take the Gluon kernels at H and F: ws_wgrad
    writes whole BLOCK_N-row tiles of dW1 (E, 2F, H) and dW2 (E, H, F), and ws_rows reads the
    dgrads' weights by columns in BLOCK_K chunks (K = 2F and H). At other widths those GEMMs
    run torch._grouped_mm, and a row asking for the Gluon launches could only fail."""
    return all(n % ws_wgrad.BLOCK_N == 0 and n % ws_rows.BLOCK_K == 0 for n in (H, 2 * F))


_NAMES = ["y", "dx", "dprobs", "dw1", "dw2", "db1", "db2"]


def _row(path, case, got, want, ran, tol) -> dict:
    """One verification row: ``got`` against ``want`` output by output (_NAMES), normwise."""
    errors = {n: normwise_rel_error(a, b) for n, a, b in zip(_NAMES, got, want)}
    return verification_row("grouped_glu_mlp", path, case, errors, tol, ran)


# Recipes vs their float64 rendering (derivation in tests/test_grouped_mlp_recipes.py): the
# same quantized bits, roundings to x.dtype at the same places; 2 eps_bf16 normwise.
RECIPE_TOL = 2 * torch.finfo(torch.bfloat16).eps
# Interpreter tiles per recipe (fp8_block: BLOCK_K is its 128-wide scaling block).
SMALL_RECIPE = {"fp8_block": GemmConfig(32, 32, 128, 4, 2, 2), "mxfp8": SMALL, "nvfp4": SMALL}


def _rendering(i, activation, interleave, recipe) -> list:
    """The recipe's float64 rendering of inputs ``i`` (its outputs in _NAMES order). It runs at
    level 0, so that none of the kernels it checks (the nvfp4 per-expert amax) computes part
    of it."""
    kw = dict(activation=activation, glu_interleave=interleave, fc1_bias=i["b1"], fc2_bias=i["b2"], recipe=recipe)
    with policy.level(0):
        y, z, h = recipes.recipe_forward(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], **kw)
        g = recipes.recipe_backward(i["dy"], i["x"], i["counts"], i["probs"], i["w1"], i["w2"], z, h, **kw)
    return [y, g["dx"], g["dprobs"], g["dfc1_weight"], g["dfc2_weight"]] + (
        [g["dfc1_bias"], g["dfc2_bias"]] if i["b1"] is not None else [])


def _leaves(i):
    """A copy of inputs ``i`` whose differentiable tensors are fresh leaves requiring grad."""
    return {k: v.detach().clone().requires_grad_(True) if k in _LEAVES and v is not None else v
            for k, v in i.items()}


def _recipe_case(counts, H, F, activation, interleave, bias, recipe, device, cfg) -> list[dict]:
    """The recipe's kernels at ``cfg`` and the public op with the recipe (as users call it)
    against the recipe's float64 rendering (_rendering)."""
    i = _inputs(counts, H, F, torch.bfloat16, bias, device, grad=False)
    dy = i["dy"]
    with launches.counting() as launched:
        got = _fused(i, activation, interleave, cfg, dy, recipe=recipe, wgrad_cfg=cfg)
    engaged = launched["grouped_mlp_fwd"] == 1 and launched["grouped_mlp_bwd"] == 1
    want = _rendering(i, activation, interleave, recipe)
    called, route = _as_called(_leaves(i), activation, interleave, dy, recipe=recipe)
    case = (f"{recipe}-E{len(counts)}-T{sum(counts)}-H{H}-F{F}-{activation}-s{interleave}-"
            f"{'bias' if bias else 'nobias'}-bfloat16")
    rows = [_row(f"recipe {recipe} vs its float64 rendering", case, got, want, engaged, RECIPE_TOL),
            _row(f"recipe {recipe} as called vs its float64 rendering", case, called, want, route == "fused kernels",
                 RECIPE_TOL)]
    if recipe == "fp8_block" and gluon_hopper.available(i["x"].device):
        # The warp-specialised Gluon GEMMs (GemmConfig.ws; the H200 table's fp8 winners): fc2
        # and the fc1 dgrad, and fc1 + GLU and the fc2 dgrad + dGLU where a tile holds whole
        # gate / up groups or the halves layout's two halves.
        ws = dataclasses.replace(configs.heuristic("fwd", 2, recipe), ws=True, rows_glu=True)
        with launches.counting() as launched:
            got_ws = _fused(i, activation, interleave, ws, dy, recipe=recipe)
        glu = 1 if ws_kernels.glu_layout_ok(interleave) else 0
        ws_ran = (launched["grouped_mlp_fwd"] == 1 and launched["grouped_fp8_ws_gemm"] == 2
                  and launched["grouped_fp8_ws_glu"] == glu and launched["grouped_fp8_ws_dglu"] == glu)
        rows.append(_row(f"recipe {recipe}, warp-specialised GEMMs vs its float64 rendering", case, got_ws, want,
                         ws_ran, RECIPE_TOL))
    return rows


def table_picks(quick: bool = False) -> list[tuple[str, GemmConfig, object]]:
    """(key, winner, problem) for the grouped_glu_mlp entries of the current device's tuning
    table whose winner is a config, once per (winner, activation, interleave, bias, recipe):
    every config the table hands out, with what decides which of its kernels run. ``quick``:
    the first of each (recipe, compose) kind."""
    from ..ops.grouped_glu_mlp.tune import FAMILY
    seen, out = set(), []
    for family, key, _source, entry in tuning.table.entries():
        if family != "grouped_glu_mlp" or not isinstance(entry.winner, GemmConfig):
            continue
        try:
            p = FAMILY.problem_for_key(key)
        except ValueError:   # not a key of this family's form: the table loader reports those
            continue
        kind = (p.recipe, entry.winner.compose) if quick else \
            (entry.winner, p.activation, p.interleave, p.has_bias, p.recipe)
        if kind not in seen:
            seen.add(kind)
            out.append((key, entry.winner, p))
    return out


def _table_pick_case(counts, key: str, winner: GemmConfig, p, device) -> dict:
    """The public op as called with ``winner`` registered for this case's key (the tuning
    table's config at the check's size: its kernels, plans and autograd path), at the table
    key's activation, interleave, bias and recipe, against the float64 reference (the
    recipe's float64 rendering with a recipe). Passes only on the route the config names."""
    recipe, interleave = p.recipe or None, p.interleave or None
    H, F = (256, 256) if recipe else (256, 192)   # recipes: multiples of the scaling blocks
    i = _inputs(counts, H, F, torch.bfloat16, p.has_bias, device, grad=recipe is None)
    dy = i["dy"]
    if recipe:
        want, tol, leaves = _rendering(i, p.activation, interleave, recipe), RECIPE_TOL, _leaves(i)
    else:
        want, tol, leaves = _float64_reference(i, p.activation, interleave), TOL[torch.bfloat16], i
    small = problem_for(i["x"], i["w2"], p.activation, interleave, p.has_bias, recipe)
    with tuning.registered("grouped_glu_mlp", {small: winner}):
        got, route = _as_called(leaves, p.activation, interleave, dy, recipe=recipe)
    case = f"{key}: {winner.name} at E{len(counts)}-T{sum(counts)}-H{H}-F{F}-bfloat16"
    return _row("tuning table's pick as called vs " + ("its float64 rendering" if recipe else "float64 reference"),
                case, got, want, route == ("compose route" if winner.compose else "fused kernels"), tol)


def verify(quick: bool, device: str, progress: Callable) -> list[dict]:
    """Every row, with allocations NaN-poisoned (tuning.sweep.poisoned_allocations): an output
    element a kernel leaves unwritten is NaN, which never passes."""
    with poisoned_allocations():
        return _verify(quick, device, progress)


def _verify(quick: bool, device: str, progress: Callable) -> list[dict]:
    gpu = device == "cuda"
    counts = [300, 0, 211, 17] if gpu else [13, 0, 37, 3]
    H, F = (256, 192) if gpu else (48, 40)
    cfg = GemmConfig() if gpu else SMALL
    combos = [(a, s, b) for a in ("swiglu", "geglu") for s in (8, None) for b in (True, False)]
    if quick:
        combos = combos[:2]
    cases = [(counts, H, F, a, s, b, torch.float32) for a, s, b in combos]
    cases.append((counts, H, F, "swiglu", 8, False, torch.bfloat16))
    cases.append((counts, H, F, "geglu", None, True, torch.float16))
    out = []
    for c in progress(cases, desc="grouped verify"):
        out += _case(*c, device, cfg)
    # Recipes: H and F multiples of the scaling block (128 / 32 / 16).
    recipe_shapes = {"fp8_block": (256, 256), "mxfp8": (256, 256), "nvfp4": (256, 256)} if gpu else \
        {"fp8_block": (128, 128), "mxfp8": (64, 32), "nvfp4": (48, 32)}
    recipe_cases = [("fp8_block", "swiglu", 32, True), ("mxfp8", "geglu", 8, False), ("nvfp4", "swiglu", None, True)]
    if gpu:   # fp8_block in the halves layout too: its warp-specialised GLU / dGLU path (ws_kernels) on Hopper
        recipe_cases.append(("fp8_block", "geglu", None, False))
    for recipe, activation, interleave, bias in progress(recipe_cases, desc="grouped recipes verify"):
        H, F = recipe_shapes[recipe]
        rcfg = None if gpu else SMALL_RECIPE[recipe]
        out += _recipe_case(counts, H, F, activation, interleave, bias, recipe, device, rcfg)
    out += _quantizer_rows(device, quick)
    if gpu:   # the table's configs, where a GPU has one (the CPU's holds no grouped entries)
        for key, winner, p in progress(table_picks(quick), desc="grouped table picks verify"):
            out.append(_table_pick_case(counts, key, winner, p, device))
    return out


def _bits_differing(got: torch.Tensor, want: torch.Tensor) -> float:
    """The fraction of ``want``'s bytes ``got`` differs in (1 for another shape or dtype)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return 1.0
    a, b = (t.contiguous().reshape(-1).view(torch.uint8) for t in (got, want))
    return float((a != b).float().mean()) if a.numel() else 0.0


def _quantizer_rows(device: str, quick: bool) -> list[dict]:
    """The recipes' quantizers (tilefuse.quant) on their kernels against their plain-PyTorch
    reference (level 0), bit for bit: the data, scales and amax of each. The recipe rows above
    compare GEMM outputs normwise, which a quantizer's wrong scale (still a valid encoding,
    as accurate) can pass. Rows and K leave partial tiles."""
    from .. import quant
    rows, k = (1037, 2304) if device == "cuda" else (53, 256)
    variants = [("fp8_block", quant.quantize_fp8_block, dict(block=(1, 128))),
                ("fp8_block", quant.quantize_fp8_block, dict(block=(128, 128), pow2_scales=True)),
                ("mxfp8", quant.quantize_mxfp8, dict(swizzle=True)),
                ("nvfp4", quant.quantize_nvfp4, dict(block_2d=True, swizzle=True)),
                ("nvfp4", quant.quantize_nvfp4, dict(rht=True))]
    if not quick:
        variants += [("fp8_block", quant.quantize_fp8_block, dict(block=(1, 128), pow2_scales=True)),
                     ("mxfp8", quant.quantize_mxfp8, dict()),
                     ("nvfp4", quant.quantize_nvfp4, dict())]
    gen = torch.Generator(device=device).manual_seed(11)
    x = (torch.randn(rows, k, generator=gen, device=device) *
         torch.exp(4 * torch.randn(rows, 1, generator=gen, device=device))).to(torch.bfloat16)
    out = []
    for name, fn, kw in variants:
        with policy.level(1), launches.counting() as launched:
            got = fn(x, **kw)
        with policy.level(0):
            want = fn(x, **kw)
        errors = {f: _bits_differing(getattr(got, f), getattr(want, f))
                  for f in ("data", "scales", "amax") if hasattr(want, f)}
        engaged = any(n.startswith("quant_") and c for n, c in launched.items())
        case = f"{name}-{rows}x{k}-bfloat16-" + ("-".join(f"{a}={v}" for a, v in kw.items()) or "defaults")
        out.append(verification_row("grouped_glu_mlp", f"quantizer {name} kernels vs its reference (bitwise)",
                                    case, errors, 0.0, engaged, over_bound="bits differ"))
    return out


# --------------------------------------------------------------------------- benchmark

def _balanced_counts(E, T):
    base = torch.full((E,), T // E, dtype=torch.int32)
    base[: T % E] += 1
    return base


def _host_p50_us(fn, n=300) -> float:
    """Host submission time per call: warm, synchronise before each call, time the call only."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(times) * 1e6


# The public op at level 2 (the table's choice), bf16: the row the recipes' 'vs tilefuse bf16' is over.
AS_CALLED = "tilefuse (as called)"
# The bench's provider that runs only the step's six torch._grouped_mm GEMMs (benchmark).
GEMMS_ONLY = "torch._grouped_mm GEMMs only (no glue)"
# The halves layout's pair (glu_interleave=None; every other row runs interleave 32, the API's
# default): its 'vs compile' is over the compiled composition of the same layout.
HALVES = "tilefuse (as called, halves layout)"
HALVES_COMPILED = "torch._grouped_mm + compile (halves layout)"
# Timed eagerly in an interleaved call of their own (each reads device values on the host,
# which a CUDA graph cannot capture: the per-expert loop the counts, Liger-Kernel's fused MoE
# its tile count, `.item()` in every forward), beside the op as called, eagerly: no ratio to a
# provider of the graph-replayed call is from the same rounds, so their 'vs tilefuse bf16' is
# over EAGER_AS_CALLED and they have no 'vs compile'.
PER_EXPERT_LOOP = "per-expert loop"
LIGER_MOE = "Liger-Kernel fused MoE (top-1)"
EAGER_AS_CALLED = "tilefuse (as called, eager)"
EAGER_ROWS = (PER_EXPERT_LOOP, LIGER_MOE)

DENSE_SHAPE = (16384, 4096, 7168)   # M, K, N: the first spec shape's fc1 as one dense GEMM


# The compose route's GEMMs in Gluon as roles of their own: the weight gradients (ws_wgrad.py)
# at the tile the H200 table took at the spec's shapes 2-3 in results/2026-12-03-h200-aa run 6,
# the four row-ragged GEMMs (ws_rows.py) at 256 columns on 3 slots (the fastest of run 1's tiles
# at every shape but one, results/2026-12-03-h200-ab).
GLUON_WGRADS = "Gluon wgrads (dW1 + dW2)"
GLUON_ROWS = "Gluon row GEMMs (fc1, fc2, fc2 dgrad, fc1 dgrad)"
GLUON_TILE = configs.GemmConfig(128, 128, 64, 4, 5, 1, compose=True, rows_block_n=256, rows_stages=3)
# Each Gluon role's launch record: where it is missing, torch._grouped_mm ran instead.
_GLUON_LAUNCH = {GLUON_WGRADS: "grouped_ws_wgrad", GLUON_ROWS: "grouped_ws_rows"}


def step_cutlass_gemms(roles: dict) -> list:
    """The torch._grouped_mm calls of ``gemm_roles``' roles that make one step's six GEMMs: the
    Gluon roles (_GLUON_LAUNCH) repeat the same GEMMs and are left out."""
    return [theirs for role, (_, theirs, _) in roles.items() if role not in _GLUON_LAUNCH]


def gemm_roles(counts, x, probs, w1, w2, dy, interleave: int = 32) -> dict:
    """{role: (fused(cfg), cutlass(), flop)} for each GEMM launch of a bf16 step (SwiGLU, no
    bias; z, h and dz random, of the shapes the step has): fused(cfg) runs the role's fused
    launch with GemmConfig ``cfg`` (the dGLU at configs.dglu_config of it; the weight
    gradients take cfg as their wgrad config), cutlass() the torch._grouped_mm GEMM(s) of the
    same work. Both return what they computed (the fused store GEMMs and weight gradients the
    same products as their CUTLASS GEMMs; the GLU and dGLU launches their epilogues' outputs)."""
    from ..ops.grouped_glu_mlp.kernels import EPI_DGLU, EPI_GLU, EPI_STORE
    T, H = x.shape
    F = w2.shape[2]
    offs = counts.cumsum(0).to(torch.int32)
    z = torch.randn(T, 2 * F, device=x.device, dtype=x.dtype)
    h, dz = torch.randn(T, F, device=x.device, dtype=x.dtype), torch.randn_like(z)
    h_out, dz_out, y, dx = torch.empty_like(h), torch.empty_like(z), torch.empty_like(x), torch.empty_like(x)
    dw1, dw2 = torch.empty_like(w1), torch.empty_like(w2)
    rows_of = (w1.stride(0), w1.stride(2), w1.stride(1)), (w2.stride(0), w2.stride(2), w2.stride(1))
    cols_of = (w1.stride(0), w1.stride(1), w1.stride(2)), (w2.stride(0), w2.stride(1), w2.stride(2))

    # The dprob partials of any dGLU tile (at least 32 columns wide: two halves of BLOCK_N >= 16),
    # allocated once, outside the timed calls; a tile writes the first 2 cdiv(F, its width).
    part = torch.empty((T, 2 * -(-F // 32)), device=x.device)

    def dglu(cfg):
        dcfg = configs.dglu_config(cfg)
        launch._gemm(EPI_DGLU, dy, w2, dz_out, counts, dcfg, K=H, N=F, b_strides=cols_of[1], ldc=dz_out.stride(0),
                     F=F, probs=probs, z=z, part=part, act=0, interleave=interleave)
        return dz_out

    def gemm(epilogue, a, w, out, cfg, K, N, strides, **kw):
        launch._gemm(epilogue, a, w, out, counts, cfg, K=K, N=N, b_strides=strides, ldc=out.stride(0), **kw)
        return out

    def wgrads(cfg):
        launch._wgrad(dz, x, dw1, counts, T, cfg)
        launch._wgrad(dy, h, dw2, counts, T, cfg)
        return dw1, dw2

    def gluon_wgrads(cfg):   # a GemmConfig.compose config's tile; ws_wgrad's default for any other
        tile = (cfg.block_m, cfg.num_stages) if cfg.compose else (256, 3)
        return (compose._wgrad(dz, x, counts, offs, counts.shape[0], *tile),
                compose._wgrad(dy, h, counts, offs, counts.shape[0], *tile))

    def gluon_rows(cfg):   # a compose config's rows tile; 256 columns on 3 slots for any other
        tile = dict(block_n=cfg.rows_block_n, stages=cfg.rows_stages) if cfg.rows_block_n else dict(block_n=256,
                                                                                                   stages=3)
        return (compose._rows_gemm(x, w1, by_rows=True, counts=counts, ends=offs, **tile),
                compose._rows_gemm(h, w2, by_rows=True, counts=counts, ends=offs, **tile),
                compose._rows_gemm(dy, w2, by_rows=False, counts=counts, ends=offs, **tile),
                compose._rows_gemm(dz, w1, by_rows=False, counts=counts, ends=offs, **tile))

    def flop(m, n, k):
        return 2 * m * n * k
    return {
        "fc1 + GLU": (lambda cfg: gemm(EPI_GLU, x, w1, h_out, cfg, H, F, rows_of[0], F=F, probs=probs, z=z, act=0,
                                       interleave=interleave),
                      lambda: torch._grouped_mm(x, w1.transpose(-2, -1), offs=offs), flop(T, 2 * F, H)),
        "fc2": (lambda cfg: gemm(EPI_STORE, h, w2, y, cfg, F, H, rows_of[1]),
                lambda: torch._grouped_mm(h, w2.transpose(-2, -1), offs=offs), flop(T, H, F)),
        "fc2 dgrad + dGLU": (dglu, lambda: torch._grouped_mm(dy, w2, offs=offs), flop(T, F, H)),
        "fc1 dgrad": (lambda cfg: gemm(EPI_STORE, dz, w1, dx, cfg, 2 * F, H, cols_of[0]),
                      lambda: torch._grouped_mm(dz, w1, offs=offs), flop(T, H, 2 * F)),
        "wgrads (dW1 + dW2)": (wgrads, lambda: (torch._grouped_mm(dz.t(), x, offs=offs),
                                                torch._grouped_mm(dy.t(), h, offs=offs)),
                               flop(T, 2 * F, H) + flop(T, H, F)),
        # The compose route's wgrads on ws_wgrad's warp-specialised Gluon kernel (where it runs;
        # elsewhere torch._grouped_mm itself): what a GemmConfig.compose table entry runs.
        GLUON_WGRADS: (gluon_wgrads, lambda: (torch._grouped_mm(dz.t(), x, offs=offs),
                                              torch._grouped_mm(dy.t(), h, offs=offs)),
                       flop(T, 2 * F, H) + flop(T, H, F)),
        # Its fc1, fc2 and dgrads on ws_rows' kernel: what a table entry with a rows tile runs.
        GLUON_ROWS: (gluon_rows, lambda: (torch._grouped_mm(x, w1.transpose(-2, -1), offs=offs),
                                          torch._grouped_mm(h, w2.transpose(-2, -1), offs=offs),
                                          torch._grouped_mm(dy, w2, offs=offs), torch._grouped_mm(dz, w1, offs=offs)),
                     2 * (flop(T, 2 * F, H) + flop(T, H, F))),
    }


# The roles whose fused launch returns its epilogue's output, not the GEMM's product that their
# torch._grouped_mm GEMM returns: role_mismatch cannot compare them (the whole op's rows check
# those epilogues against float64).
EPILOGUE_ROLES = ("fc1 + GLU", "fc2 dgrad + dGLU")
ROLE_TOL = 2 * torch.finfo(torch.bfloat16).eps   # two 16-bit roundings of the same product, normwise


def role_mismatch(role: str, ours, theirs, cfg) -> str | None:
    """Why ``role``'s fused launch at ``cfg`` (gemm_roles' ``ours``) does not compute its
    torch._grouped_mm GEMMs' products (``theirs``), or None where it does: checked before a
    role is timed. Its outputs are NaN-poisoned before the checked launch, so an output it
    leaves unwritten stays NaN and fails: the buffers an earlier launch wrote (gemm_roles'
    launches write into buffers made once, which an earlier tile or role filled) are filled
    with NaN first, fresh allocations are poisoned. Every output is compared; a NaN error
    fails. The EPILOGUE_ROLES are not compared (None)."""
    if role in EPILOGUE_ROLES:
        return None

    def outputs(out):
        return out if isinstance(out, tuple) else (out,)
    for t in outputs(ours(cfg)):   # the buffers the checked launch writes, poisoned
        t.fill_(float("nan"))
    with poisoned_allocations():
        got, want = outputs(ours(cfg)), outputs(theirs())
    errors = [normwise_rel_error(a, b) for a, b in zip(got, want, strict=True)]
    if not all(e <= ROLE_TOL for e in errors):   # NaN fails: NaN <= x is False
        worst = max(e if e == e else float("inf") for e in errors)
        return f"differs from torch._grouped_mm by {worst:.1e} normwise (bound {ROLE_TOL:.1e})"
    return None


def _role_rows(E, T, H, F, roles: dict) -> list[dict]:
    """Each GEMM role of ``roles`` (gemm_roles) at the heuristic tiles (wgrads: the wgrad
    heuristic; the Gluon roles: GLUON_TILE) against its torch._grouped_mm GEMM(s), checked
    first (role_mismatch: a role that fails is a failed row, not timed), interleaved per role:
    ms, TFLOP/s and the time ratio. A Gluon role that cannot run here
    (it then runs torch._grouped_mm) says so in its config cell."""
    fwd, wgrad = configs.heuristic("fwd", 2), configs.heuristic("wgrad", 2)
    rows = []
    for role, (ours, theirs, flop) in roles.items():
        cfg = GLUON_TILE if role in _GLUON_LAUNCH else wgrad if role.startswith("wgrads") else fwd
        name = cfg.name
        if role in _GLUON_LAUNCH:
            with launches.counting() as launched:
                ours(cfg)
            if not launched[_GLUON_LAUNCH[role]]:
                name += " (not on this device: torch._grouped_mm ran)"
        row = {"experts": E, "tokens": T, "hidden": H, "ffn": F, "role": role, "config": name}
        why = role_mismatch(role, ours, theirs, cfg)
        if why is not None:   # a wrong launch is not timed: its row says so (a failed tilefuse row)
            rows.append({**row, "tilefuse_ms": None, "tilefuse_error": f"check failed: {why}",
                         "grouped_mm_ms": None, "grouped_mm_error": "not timed: tilefuse's check failed"})
            continue
        t = timing.interleaved({"tilefuse": lambda ours=ours, cfg=cfg: ours(cfg), "torch._grouped_mm": theirs},
                               graphs=True, rounds=5)
        for name, key in (("tilefuse", "tilefuse"), ("torch._grouped_mm", "grouped_mm")):
            fields = bench.timing_fields(t[name])
            row[f"{key}_ms"] = fields.get("ms")
            row[f"{key}_error"] = fields.get("error")
            if fields["status"] == "ok":
                row[f"{key}_tflops"] = flop / (fields["ms"] * 1e-3) / 1e12
        if row["tilefuse_ms"] and row["grouped_mm_ms"]:
            row["time_vs_grouped_mm"] = timing.ratio(t["tilefuse"], t["torch._grouped_mm"])   # > 1: slower
        rows.append(row)
    return rows


def _dense_ceilings() -> dict:
    """TFLOP/s of one dense cuBLAS GEMM of DENSE_SHAPE, bf16 (matmul) and fp8 E4M3
    (torch._scaled_mm, per-tensor scales), measured now: the compute ceilings the grouped
    GEMMs are read against (an error text where one cannot run)."""
    M, K, N = DENSE_SHAPE
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda")
    providers = {"bf16 matmul": lambda: a @ b.t(),
                 "fp8 _scaled_mm": lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one,
                                                            out_dtype=torch.bfloat16)}
    out = {}
    for name, t in timing.interleaved(providers, graphs=True, rounds=5).items():
        out[name] = (bench.error_text(t) if isinstance(t, Exception)
                     else 2 * M * N * K / (t.median_ms * 1e-3) / 1e12)
    return out


def _liger_moe_step(i, dy, leaves):
    """Liger-Kernel's fused MoE (``LigerFusedMoEFunction``: gather + GEMM + SwiGLU, down GEMM,
    scatter) on the same tokens, weights and probabilities, top-1 routing (each token to the
    expert that owns its row, weight = its prob), so it does the same work; forward + backward
    of every input. Its weights take tilefuse's layouts ((E, 2F, H) and (E, H, F)) as they are;
    its gate/up split is by halves. Raises ImportError without Liger-Kernel. Its first call
    runs Liger's own Triton autotuning (minutes on an H200)."""
    from liger_kernel.ops.fused_moe import LigerFusedMoEFunction
    ends = torch.cumsum(i["counts"], 0)
    rows = torch.arange(i["x"].shape[0], device=ends.device)
    expert = torch.searchsorted(ends, rows, right=True).to(torch.int32)[:, None]

    def step():
        y = LigerFusedMoEFunction.apply(i["x"], i["w1"], i["w2"], expert, i["probs"][:, None])
        return torch.autograd.grad(y, leaves, dy)
    return step


@bench.compile_limits()
def benchmark(quick: bool, progress: Callable) -> dict:
    """bf16 forward+backward TFLOP/s (3x forward FLOPs) of tilefuse as called (level 2, the
    table's choice), its compose route (torch._grouped_mm GEMMs + its glue kernels), the fused
    kernels (heuristic tiles), the recipes as called on the same bf16 inputs (level 2, each
    recipe key's table choice; quantization included in the timed step; speedup_vs_tilefuse_bf16
    over the bf16 op as called, from the same rounds), the unfused composition
    (torch._grouped_mm + separate activation), its torch.compile, the step's six
    torch._grouped_mm GEMMs alone (GEMMS_ONLY: the bound of any route on them) and the
    per-expert loop, by CUDA-graph replay interleaved, each row's speedup over the compiled
    composition from the same rounds; Liger-Kernel's fused MoE at the first shape (full bench only);
    host p50 per forward call; the dense bf16 and fp8 cuBLAS ceilings measured in the same run."""
    rows, roles = [], []
    dense = _dense_ceilings()
    for E, T, H, F in progress(DEFAULT_SHAPES[1:2] if quick else DEFAULT_SHAPES, desc="grouped bench"):
        i = _inputs(_balanced_counts(E, T), H, F, torch.bfloat16, False, "cuda")
        dy = i["dy"]
        flops = 3 * (2 * T * H * 2 * F + 2 * T * F * H)
        leaves = (i["x"], i["probs"], i["w1"], i["w2"])

        def fused_step():
            return _fused(i, "swiglu", 32, None, dy)

        def unfused_fwd(interleave=32):
            return grouped_glu_mlp_unfused(i["x"], i["counts"], i["probs"], i["w1"], i["w2"],
                                           glu_interleave=interleave)

        # dynamic=False: each shape compiles its own static graph. With automatic dynamic
        # shapes the second shape recompiles with symbolic sizes, where inductor fails on
        # _grouped_mm (torch 2.11).
        compiled_fwd = torch.compile(unfused_fwd, dynamic=False)
        compiled_halves = torch.compile(lambda: unfused_fwd(None), dynamic=False)

        def loop_fwd():
            return grouped_glu_mlp_reference(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], glu_interleave=32,
                                             compute_dtype=torch.bfloat16)

        def recipe_step(recipe):   # the public op at level 2, as users call a recipe: the table's choice
            def step():
                with policy.level(2):
                    return torch.autograd.grad(grouped_glu_mlp(i["x"], i["counts"], i["probs"], i["w1"], i["w2"],
                                                               glu_interleave=32, recipe=recipe), leaves, dy)
            return step

        def compose_step():
            y = compose_apply(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], None, None, "swiglu", 32)
            return torch.autograd.grad(y, leaves, dy)

        def as_called_step(interleave=32):   # the public op at level 2: the table's choice for this key
            with policy.level(2):
                return torch.autograd.grad(grouped_glu_mlp(i["x"], i["counts"], i["probs"], i["w1"], i["w2"],
                                                           glu_interleave=interleave), leaves, dy)

        # The six CUTLASS GEMMs of one step on ready operands and nothing else: the least time
        # any route that keeps torch._grouped_mm's GEMMs can take (its ratio to the compiled
        # composition bounds what such a route can reach: results/2026-12-02-h200-o run 2).
        step_roles = gemm_roles(i["counts"], i["x"].detach(), i["probs"].detach(), i["w1"].detach(),
                                i["w2"].detach(), dy)   # also timed role by role below (_role_rows)

        step_gemms = step_cutlass_gemms(step_roles)

        def gemms_only():
            return [theirs() for theirs in step_gemms]

        providers = {AS_CALLED: as_called_step,
                     "tilefuse compose route": compose_step,
                     "tilefuse fused": fused_step,
                     "tilefuse fp8_block": recipe_step("fp8_block"),
                     "tilefuse mxfp8 (emulated)": recipe_step("mxfp8"),
                     "tilefuse nvfp4 (emulated)": recipe_step("nvfp4"),
                     "torch._grouped_mm": lambda: torch.autograd.grad(unfused_fwd(), leaves, dy),
                     "torch._grouped_mm + compile": lambda: torch.autograd.grad(compiled_fwd(), leaves, dy),
                     GEMMS_ONLY: gemms_only,
                     # the halves layout (glu_interleave=None), as called and against its own compiled peer
                     HALVES: lambda: as_called_step(None),
                     HALVES_COMPILED: lambda: torch.autograd.grad(compiled_halves(), leaves, dy)}
        timings = timing.interleaved(providers, graphs=True, rounds=5)
        # The providers a CUDA graph cannot capture (EAGER_ROWS), timed eagerly beside the op as
        # called, eagerly.
        eager = {EAGER_AS_CALLED: as_called_step,
                 PER_EXPERT_LOOP: lambda: torch.autograd.grad(loop_fwd(), leaves, dy)}
        if not quick and (E, T, H, F) == DEFAULT_SHAPES[0]:
            # Liger-Kernel's fused MoE where it imports, at the first shape only: its first call
            # autotunes for minutes. Skipped where Liger-Kernel does not import; shown failed
            # (with its error) where it imports but fails.
            try:
                eager[LIGER_MOE] = _liger_moe_step(i, dy, leaves)
            except ImportError:
                pass
        timings.update(timing.interleaved(eager, rounds=3))
        # Host time per call through the public API (validation, dispatch, autograd Function)
        # with the fused kernels engaged by a runtime table entry at level 2, against the
        # composition called directly: a forward on detached inputs (inference), and a forward
        # plus backward (autograd.grad of every input).
        xd, pd, w1d, w2d = (t.detach() for t in leaves)
        problem = problem_for(xd, w2d, "swiglu", 32, False)
        with tuning.registered("grouped_glu_mlp", {problem: configs.heuristic("fwd", 2)}), policy.level(2), \
                launches.counting() as launched:
            host_fused = (_host_p50_us(lambda: grouped_glu_mlp(xd, i["counts"], pd, w1d, w2d)),
                          _host_p50_us(lambda: torch.autograd.grad(
                              grouped_glu_mlp(i["x"], i["counts"], i["probs"], i["w1"], i["w2"]), leaves, dy)))
        if launched["grouped_mlp_fwd"] == 0 or launched["grouped_mlp_bwd"] == 0:
            raise RuntimeError("grouped_glu_mlp host timing: the fused kernels did not run")
        with policy.level(2):   # the table's choice, as users call it
            host_called = (_host_p50_us(lambda: grouped_glu_mlp(xd, i["counts"], pd, w1d, w2d)),
                           _host_p50_us(as_called_step))
        host = {"tilefuse fused": host_fused, AS_CALLED: host_called,
                "torch._grouped_mm": (_host_p50_us(lambda: grouped_glu_mlp_unfused(xd, i["counts"], pd, w1d, w2d,
                                                                                   glu_interleave=32)),
                                      _host_p50_us(lambda: torch.autograd.grad(unfused_fwd(), leaves, dy)))}
        rows += provider_rows(E, T, H, F, flops, timings, host)
        roles += _role_rows(E, T, H, F, step_roles)
    return {"rows": rows, "roles": roles, "dense_tflops": dense, "dense_shape": list(DENSE_SHAPE)}


def provider_rows(E, T, H, F, flops, timings: dict, host: dict) -> list[dict]:
    """The bench's rows of one shape: each provider's timing (timing.Timing, or the exception it
    raised) with its TFLOP/s, host times (``host``: provider -> (fwd us, fwd+bwd us)) and, from
    the same rounds, each tilefuse row's speedup over AS_CALLED, the bf16 op as users call it
    (what a recipe is weighed against: what they run without one), and each row's over
    the compiled composition of its GLU layout (HALVES over HALVES_COMPILED, every other row
    over the interleave-32 one). The eagerly timed EAGER_ROWS have no 'vs compile' (timed in
    other rounds) and their 'vs tilefuse bf16' over EAGER_AS_CALLED, from their own rounds."""
    rows = []
    compiled = timings.get("torch._grouped_mm + compile")
    for name, t in timings.items():
        eager = name in EAGER_ROWS or name == EAGER_AS_CALLED
        peer = None if eager else timings.get(HALVES_COMPILED) if name == HALVES else compiled
        bf16 = timings.get(EAGER_AS_CALLED if eager else AS_CALLED)
        fwd_us, fwd_bwd_us = host.get(name, (None, None))
        row = {"experts": E, "tokens": T, "hidden": H, "ffn": F, "provider": name,
               "host_p50_us_fwd": fwd_us, "host_p50_us_fwd_bwd": fwd_bwd_us}
        row.update(bench.timing_fields(t))
        if row["status"] == "ok":
            row["tflops"] = flops / (t.median_ms * 1e-3) / 1e12
            if ((name.startswith("tilefuse ") or name in EAGER_ROWS) and name not in (AS_CALLED, EAGER_AS_CALLED)
                    and isinstance(bf16, timing.Timing)):
                # Within the same rounds (fp8_block target: >= 1.4).
                row["speedup_vs_tilefuse_bf16"] = timing.ratio(bf16, t)
            if isinstance(peer, timing.Timing) and name != HALVES_COMPILED:
                # issue 16's targets are speedups over the compiled composition (of the same
                # GLU layout), same rounds
                row["speedup_vs_compiled"] = timing.ratio(peer, t)
        rows.append(row)
    return rows


def benchmark_markdown(b: dict) -> list[str]:
    lines = ["bf16 forward+backward (3x forward FLOPs), CUDA-graph replay interleaved (the per-expert loop "
             f"and Liger-Kernel's fused MoE eagerly, beside '{EAGER_AS_CALLED}': they read device values on "
             "the host; their 'vs tilefuse bf16' is over it); host p50 per forward call (synchronised, "
             "submission only, 300 calls) and per forward+backward call. 'vs tilefuse bf16': a row's "
             f"speedup over '{AS_CALLED}', the bf16 op as users call it (median of the per-round ratios; "
             "the recipe rows are the op as called with that recipe; fp8_block's target is "
             "1.4x). 'vs compile': the speedup over torch._grouped_mm + torch.compile in the same rounds "
             f"(interleave 32; '{HALVES}' over '{HALVES_COMPILED}', both glu_interleave=None); "
             f"'{GEMMS_ONLY}' runs the step's six CUTLASS GEMMs and nothing else, so its 'vs compile' is "
             "the most any route keeping those GEMMs can reach.", "",
             "| experts | tokens | H | F | provider | ms | spread | TFLOP/s | host p50 fwd (us) "
             "| host p50 fwd+bwd (us) | vs tilefuse bf16 | vs compile |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    if b.get("dense_tflops"):
        M, K, N = b["dense_shape"]
        ceil = ", ".join(f"{k} {v:.0f} TFLOP/s" if isinstance(v, float) else f"{k} failed ({v})"
                         for k, v in b["dense_tflops"].items())
        lines[1:1] = ["", f"Dense cuBLAS ceilings measured in this run ({M}x{K}x{N}): {ceil}."]
    for r in b["rows"]:
        t = (f"{r['ms']:.3f} | {r['spread']:.1%} | {r['tflops']:.0f}" if r["status"] == "ok"
             else f"failed | | {cell(r['error'])}")
        host = " | ".join("" if r.get(k) is None else f"{r[k]:.0f}"
                          for k in ("host_p50_us_fwd", "host_p50_us_fwd_bwd"))
        vs = " | ".join("" if r.get(k) is None else f"{r[k]:.2f}x"
                        for k in ("speedup_vs_tilefuse_bf16", "speedup_vs_compiled"))
        lines.append(f"| {r['experts']} | {r['tokens']} | {r['hidden']} | {r['ffn']} | {r['provider']} | "
                     f"{t} | {host} | {vs} |")
    if b.get("roles"):
        lines += ["", "Each fused GEMM role (heuristic tiles) and the compose route's Gluon wgrads (a compose "
                  "config's tile) against the torch._grouped_mm GEMM doing the same work, "
                  "interleaved per role (CUDA-graph replay). 'time vs _grouped_mm': tilefuse's time over CUTLASS's "
                  "(issue 16's target: within 1.05x).", "",
                  "| experts | tokens | H | F | role | config | tilefuse ms | TFLOP/s | _grouped_mm ms | TFLOP/s "
                  "| time vs _grouped_mm |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in b["roles"]:
            cells = []
            for key in ("tilefuse", "grouped_mm"):
                ok = r.get(f"{key}_ms") is not None
                cells += [f"{r[f'{key}_ms']:.3f}" if ok else cell(f"failed ({r.get(f'{key}_error')})"),
                          f"{r[f'{key}_tflops']:.0f}" if ok else ""]
            ratio = "" if r.get("time_vs_grouped_mm") is None else f"{r['time_vs_grouped_mm']:.2f}x"
            lines.append(f"| {r['experts']} | {r['tokens']} | {r['hidden']} | {r['ffn']} | {r['role']} | "
                         f"{r['config']} | {' | '.join(cells)} | {ratio} |")
    return lines


def benchmark_summary(b: dict) -> list[str]:
    return ([f"grouped E{r['experts']} T{r['tokens']} {r['provider']}: {r['tflops']:.0f} TFLOP/s"
             for r in b["rows"] if r["status"] == "ok"]
            + [f"grouped E{r['experts']} T{r['tokens']} {r['role']}: {r['time_vs_grouped_mm']:.2f}x the time of "
               f"torch._grouped_mm" for r in b.get("roles", ()) if r.get("time_vs_grouped_mm") is not None])
