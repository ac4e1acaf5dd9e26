"""`tilefuse check` section for so2_mixing_stack: verification of the forward, the relay and
fused backward (the fused path through a forced table entry), training (weight gradients) and
double backward; on a GPU, backward timing fused vs relay vs eager vs torch.compile."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from pathlib import Path
from typing import Callable

import torch

from .. import launches, policy, tuning
from ..ops.so2_mixing_stack import configs, launch, op
from ..ops.so2_mixing_stack.api import so2_mixing_stack
from ..utils import ieee_matmul
from ..ops.so2_mixing_stack.reference import So2Dims, so2_stack_backward_reference, so2_stack_reference
from ..ops.so2_mixing_stack.tune import So2Problem
from ..tuning import timing
from ..tuning.sweep import poisoned_allocations
from . import bench
from .report import cell, verification_row

NL = 3
# Normwise relative error bounds against float64. fp32: a chain of NL GEMMs with K <= M1 terms
# (~sqrt(K) eps32 each in practice) stays far below 1e-5. 16-bit inputs: each layer's output and
# z are rounded to the dtype (u = 2**-8 bf16, 2**-11 fp16), about 2 NL roundings on the longest
# path: 2 NL u.
TOL = {torch.float32: 1e-5, torch.bfloat16: 2 * NL * 2.0 ** -8, torch.float16: 2 * NL * 2.0 ** -11}


def _inputs(lmax, n_focus, focus_dim, n_edges, device, dtype=torch.float32, grad_weights=False):
    d = So2Dims(lmax, focus_dim)

    def randn(*shape, scale=1.0, grad=False):
        return (torch.randn(shape, device=device) * scale).to(dtype).requires_grad_(grad)

    u0 = randn(n_focus, n_edges, d.row, scale=0.5, grad=True)
    alpha = (torch.rand((n_edges, n_focus), device=device) + 0.2).to(dtype).requires_grad_(True)
    w0 = randn(NL, n_focus, d.m0, d.m0, scale=d.m0 ** -0.5, grad=grad_weights)
    w1 = randn(NL, n_focus, d.m1, d.m1, scale=d.m1 ** -0.5, grad=grad_weights)
    gw = randn(NL - 1, n_focus, focus_dim, d.lg, scale=focus_dim ** -0.5, grad=grad_weights)
    return d, [u0, alpha, w0, w1, gw]


def _rel(got, want) -> float:
    want = want.detach().double().cpu()
    denom = float(want.norm())
    err = float((got.detach().double().cpu() - want).norm())
    return err / denom if denom else err


def _row(path, case, errors: dict, tol: float, engaged=True, not_engaged="kernels did not launch", **why) -> dict:
    """report.verification_row for so2_mixing_stack."""
    return verification_row("so2_mixing_stack", path, case, errors, tol, engaged, not_engaged, **why)


def _check_case(lmax, n_focus, focus_dim, n_edges, device, dtype, apply_alpha, weights) -> dict:
    d, ins = _inputs(lmax, n_focus, focus_dim, n_edges, device, dtype, grad_weights=weights)
    diff = ins if weights else ins[:2]
    with launches.counting() as launched:
        x = so2_mixing_stack(*ins, lmax=lmax, focus_dim=focus_dim, apply_alpha=apply_alpha)
        grad_out = torch.randn_like(x)
        grads = torch.autograd.grad(x, diff, grad_out)
    ref_in = [t.detach().double().requires_grad_(True) for t in ins]
    ref = so2_stack_reference(*ref_in, lmax=lmax, focus_dim=focus_dim, apply_alpha=apply_alpha)
    ref_grads = torch.autograd.grad(ref, ref_in[:len(diff)], grad_out.double(), allow_unused=True)
    names = ["u0", "alpha", "w0", "w1", "gw"]
    errors = {"x": _rel(x, ref)}
    for name, g, r in zip(names, grads, ref_grads):
        errors["d" + name] = _rel(g, r) if r is not None else float(g.abs().max())
    route = op.backward_config(d, dtype, n_edges, n_focus, NL, weights).route     # what the table picks
    engaged = launched["so2_fwd_layer"] == NL - 1 and launched[f"so2_bwd_{route}_layer"] == NL - 1
    path = "training (weight grads)" if weights else f"forward + {route} backward"
    case = (f"L{lmax}-F{n_focus}-C{focus_dim}-E{n_edges}-{str(dtype).split('.')[-1]}"
            f"-{'alpha' if apply_alpha else 'noalpha'}")
    return _row(path, case, errors, TOL[dtype], engaged, f"kernels did not launch as expected: {dict(launched)}")


def _check_fused(lmax, n_focus, focus_dim, n_edges, device, sigma_pass=False) -> dict:
    """Fused vs relay with the same tiles, each forced by a runtime table entry (the device's
    table may pick either route for this key): bitwise, and each route's kernels must launch."""
    _, ins = _inputs(lmax, n_focus, focus_dim, n_edges, device)
    problem = So2Problem(lmax, focus_dim, 4)
    # a relay tile of the sweep's space and the fused route on the same tiles (BLOCK_K = Cf)
    relay_cfg = configs.So2Config(64, 64, focus_dim, 4, 2)
    cfg = dataclasses.replace(relay_cfg, num_stages=1, fused=True, sigma_pass=sigma_pass)

    def force_grads(entry):
        with tuning.registered("so2_mixing_stack", {problem: entry}):
            x = so2_mixing_stack(*ins, lmax=lmax, focus_dim=focus_dim)
            return torch.autograd.grad(x, ins[:2], torch.ones_like(x))

    with policy.level(2):
        with launches.counting() as relay_launches:
            relay = force_grads(relay_cfg)
        with launches.counting() as fused_launches:
            fused = force_grads(cfg)
    engaged = (fused_launches["so2_bwd_fused_layer"] == NL - 1 and relay_launches["so2_bwd_fused_layer"] == 0
               and fused_launches["so2_bwd_sigma_pass"] == (NL - 1 if sigma_pass else 0))
    # bitwise: bound 0 on the largest difference, a NaN anywhere kept (torch's max propagates it)
    errors = {"max|fused-relay|": float(torch.stack([(r - f).abs().max() for r, f in zip(relay, fused)]).max())}
    path = "fused backward, sigma pass (forced entry)" if sigma_pass else "fused backward (forced entry)"
    return _row(path, f"L{lmax}-F{n_focus}-C{focus_dim}-E{n_edges}", errors, 0.0, engaged,
                f"relay launches {dict(relay_launches)}, fused launches {dict(fused_launches)}",
                over_bound="fused differs from relay")


def _level3_variants(lmax: int, focus_dim: int) -> list[configs.So2Config]:
    """One config of each split precision level 3 can run (configs.level3_candidates: 3xfp16,
    its gate variant, 3xtf32; the fused 3xfp16 route where its guards allow it), on the
    pointer kernels (a Gluon config's products are bitwise the Triton kernel's)."""
    picked = {}
    for cfg in configs.level3_candidates(lmax, focus_dim):
        if not cfg.wgmma:
            picked.setdefault((cfg.precision, cfg.fused), cfg)
    return list(picked.values())


def _check_level3(lmax, n_focus, focus_dim, n_edges, device) -> list[dict]:
    """Level 3 against float64 with the fp32 bound: each split-precision variant forced
    (launch.forward / backward with its config), and the public call at level 3 (the table's
    validated variant for the key where it holds one, else the exact path)."""
    d, ins = _inputs(lmax, n_focus, focus_dim, n_edges, device)
    ref_in = [t.detach().double().requires_grad_(True) for t in ins]
    ref = so2_stack_reference(*ref_in, lmax=lmax, focus_dim=focus_dim)
    grad_out = torch.randn(ref.shape, device=device)
    ref_grads = torch.autograd.grad(ref, ref_in[:2], grad_out.double())
    case = f"L{lmax}-F{n_focus}-C{focus_dim}-E{n_edges}-float32"
    rows = []
    plain = [t.detach() for t in ins]
    for cfg in _level3_variants(lmax, focus_dim):
        x_local, z_all, u_final = launch.forward(*plain, d, True, config=cfg)
        gu, ga, _ = launch.backward(grad_out, x_local, z_all, u_final, *plain[1:], d, True, False, config=cfg)
        errors = {"x": _rel(x_local, ref), "du0": _rel(gu, ref_grads[0]), "dalpha": _rel(ga, ref_grads[1])}
        rows.append(_row(f"level-3 variant {cfg.name} (forced)", case, errors, TOL[torch.float32]))
    with policy.level(3):
        x = so2_mixing_stack(*ins, lmax=lmax, focus_dim=focus_dim)
        grads = torch.autograd.grad(x, ins[:2], grad_out)
    errors = {"x": _rel(x, ref), "du0": _rel(grads[0], ref_grads[0]), "dalpha": _rel(grads[1], ref_grads[1])}
    runs = op.level3_summary(d, n_edges, n_focus, NL)
    rows.append(_row(f"as called at level 3 ({runs})", case, errors, TOL[torch.float32]))
    return rows


def _check_double_backward(device) -> dict:
    lmax, focus_dim = 1, 32
    _, ins = _inputs(lmax, 1, focus_dim, 9, device, grad_weights=True)
    x = so2_mixing_stack(*ins, lmax=lmax, focus_dim=focus_dim)
    (gu,) = torch.autograd.grad(x.square().sum(), ins[0], create_graph=True)
    second = torch.autograd.grad(gu.square().sum(), ins[2:])
    ref_in = [t.detach().double().requires_grad_(True) for t in ins]
    xr = so2_stack_reference(*ref_in, lmax=lmax, focus_dim=focus_dim)
    (gur,) = torch.autograd.grad(xr.square().sum(), ref_in[0], create_graph=True)
    second_ref = torch.autograd.grad(gur.square().sum(), ref_in[2:])
    errors = {f"d2/d{n}": _rel(g, r) for n, g, r in zip(("w0", "w1", "gw"), second, second_ref)}
    return _row("double backward (create_graph)", "L1-F1-C32-E9", errors, TOL[torch.float32])


def verify(quick: bool, device: str, progress: Callable) -> list[dict]:
    """Every row, with allocations NaN-poisoned (tuning.sweep.poisoned_allocations): an output
    element a kernel leaves unwritten is NaN, which never passes."""
    with poisoned_allocations():
        return _verify(quick, device, progress)


def _verify(quick: bool, device: str, progress: Callable) -> list[dict]:
    gpu = device == "cuda"
    # (1, 1, 80, 33): the gate kernels' chunked dots (configs.GATE_REGISTER_MAX), a partial chunk
    shapes = [(1, 1, 32, 37), (2, 2, 32, 129), (2, 1, 48, 37), (1, 1, 80, 33)]
    if gpu:
        shapes += [(3, 2, 32, 4099), (6, 2, 32, 1025), (2, 2, 64, 2049), (6, 3, 128, 257)]
    if quick:
        shapes = shapes[:2]
    cases = [(s, torch.float32, True, False) for s in shapes] + [(shapes[0], torch.float32, False, False),
                                                                 (shapes[1], torch.float32, True, True),
                                                                 (shapes[1], torch.bfloat16, True, False)]
    out = [_check_case(*s, device, dt, aa, w) for s, dt, aa, w in progress(cases, desc="so2 verify")]
    fused_shapes = [s for s in shapes if configs.fused_supported(s[2], True)]
    out += [_check_fused(*s, device, sigma_pass) for s in fused_shapes for sigma_pass in (False, True)]
    out += _check_level3(*shapes[0], device)
    out.append(_check_double_backward(device))
    return out


# --------------------------------------------------------------------------- benchmark

SHAPES = [(3, 32), (6, 32), (2, 64)]   # (lmax, focus_dim); production shape first
# The whole op's edge counts at those shapes (issue 15's table: Neo's 647,000 and the two others').
STEP_EDGES = {(3, 32): 647_000, (6, 32): 300_000, (2, 64): 400_000}
# FP32 FMA lanes per SM by compute capability (major, minor); others 128 (sm_86 and later).
FP32_LANES = {(7, 0): 64, (7, 5): 64, (8, 0): 64}


def _fused_bench_configs(focus_dim: int, table_pick: configs.So2Config) -> list[configs.So2Config]:
    """A few fused configs from the tuning space (sigma recomputed, and two with the relay's
    sigma pass), plus the table's pick when it is fused."""
    picks = [configs.So2Config(32, 64, focus_dim, 4, 1, True), configs.So2Config(64, 64, focus_dim, 8, 1, True),
             configs.So2Config(32, 128, focus_dim, 8, 1, True), configs.So2Config(16, 128, focus_dim, 4, 1, True),
             configs.So2Config(32, 64, focus_dim, 4, 1, True, sigma_pass=True),
             configs.So2Config(64, 64, focus_dim, 8, 1, True, sigma_pass=True)]
    if table_pick.fused and table_pick not in picks:
        picks.append(table_pick)
    return picks


def _bench_row(scope, lmax, focus_dim, n_edges, name, t, extra, ours=True) -> dict:
    """``ours``: the row times tilefuse's kernels (its failure fails the check), not a peer's."""
    return {"scope": scope, "lmax": lmax, "focus_dim": focus_dim, "edges": n_edges, "provider": name, "ours": ours,
            **extra, **bench.timing_fields(t)}


def _bench_shape(lmax: int, focus_dim: int, n_edges: int, copy_gbs: float) -> list[dict]:
    """The benchmark rows of one (lmax, focus_dim); its tensors and graphs die on return."""
    rows = []
    d, ins = _inputs(lmax, 2, focus_dim, n_edges, "cuda")
    u0, alpha, w0, w1, gw = (t.detach() for t in ins)
    x, z_all, u_final = launch.forward(u0, alpha, w0, w1, gw, d, True)
    grad_out = torch.randn_like(x)
    relay_cfg = configs.heuristic(lmax, focus_dim)
    chosen = op.backward_config(d, torch.float32, n_edges, 2, NL, False)
    fused_cfgs = _fused_bench_configs(focus_dim, chosen) if configs.fused_supported(focus_dim, True) else []
    surface = 2 * n_edges * d.row * 4          # one (F, E, ROW) fp32 surface
    sigma_bytes = 2 * n_edges * d.lg * 4
    relay_bytes = 6 * surface + 2 * sigma_bytes   # sigma w+r; pointwise g,z r + gz w; GEMM gz,g r + out w
    fused_bytes = 3 * surface                                    # g, z read; g_next written
    common = {"table_picks": chosen.name, "relay_layer_bytes": relay_bytes, "fused_layer_bytes": fused_bytes,
              "copy_ceiling_gbs": copy_gbs}

    # One gated layer (layer 0) of each route, on the same upstream gradient.
    g_cur = torch.randn_like(u0)
    g_next = torch.empty_like(g_cur)
    z = z_all[0]
    w0t, w1t, gwc = launch.transposed(w0[0]), launch.transposed(w1[0]), gw[0].contiguous()
    sig = torch.empty((2, n_edges, d.lg), dtype=torch.float32, device="cuda")
    gz = torch.empty_like(g_cur)

    layer = {"relay layer": lambda: launch.relay_layer(g_cur, z, gwc, w0t, w1t, g_next, sig, gz, None, d, relay_cfg)}
    floors = {}   # the fused floor of each fused layer; a sigma pass also writes and reads sigma
    for cfg in fused_cfgs:
        layer["fused layer " + cfg.name] = (
            lambda cfg=cfg: launch.fused_layer(g_cur, z, gwc, w0t, w1t, g_next, d, cfg, sig))
        floors["fused layer " + cfg.name] = fused_bytes + (2 * sigma_bytes if cfg.sigma_pass else 0)
    for name, t in timing.interleaved(layer, graphs=True, rounds=7).items():
        row = _bench_row("layer", lmax, focus_dim, n_edges, name, t, common)
        if row["status"] == "ok":
            row["fused_floor_fraction_of_copy"] = floors.get(name, fused_bytes) / (row["ms"] * 1e-3) / 1e9 / copy_gbs
        rows.append(row)

    # The whole force backward.
    def run(cfg):
        return lambda: launch.backward(grad_out, x, z_all, u_final, alpha, w0, w1, gw, d, True, False, config=cfg)

    def eager():
        return so2_stack_backward_reference(grad_out, x, z_all, u_final, alpha, w0, w1, gw, lmax=lmax,
                                            focus_dim=focus_dim)

    providers = {"relay": run(relay_cfg)}
    for cfg in fused_cfgs:   # the table's pick among them when it is fused
        providers["fused " + cfg.name] = run(cfg)
    if chosen != relay_cfg and chosen not in fused_cfgs:   # a tuned relay tiling
        providers["table pick"] = run(chosen)
    for name, t in timing.interleaved(providers, graphs=True, rounds=5).items():
        rows.append(_bench_row("backward", lmax, focus_dim, n_edges, name, t, common))
    # The eager explicit backward and torch.compile of it without CUDA graphs: their calls
    # are long enough (tens of ms) for host time not to matter.
    # torch.compile at the production shape only: compiling costs about a minute a shape.
    peers = {"eager": eager}
    if (lmax, focus_dim) == SHAPES[0]:
        peers["torch.compile"] = torch.compile(eager)
    for name, t in timing.interleaved(peers, rounds=3).items():
        rows.append(_bench_row("backward", lmax, focus_dim, n_edges, name + " (no graph)", t, common, ours=False))
    return rows


# The whole op per pass: what differentiates and the FLOPs (the layer GEMMs: the forward's NL,
# the force backward's NL transposed ones, the training backward's NL weight-gradient ones more).
PASSES = (("forward", 1), ("fwd + force bwd", 2), ("fwd + training bwd", 3))


def layer_gemm_flops(d: So2Dims, n_edges: int, n_focus: int = 2) -> float:
    """FLOPs of one pass over the stack's NL layer GEMMs (the gate dots are left out)."""
    return 2.0 * n_focus * n_edges * (d.m0 ** 2 + d.m1 ** 2) * NL


def fp32_gemm_ceiling_tflops() -> float:
    """TFLOP/s of one large cuBLAS fp32 GEMM without TF32, measured now: the cuBLAS ceiling the
    stack's IEEE GEMMs are read against (the H200's FP32 peak is 67 TFLOP/s by its spec)."""
    n = 8192
    a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    with ieee_matmul():
        t = timing.interleaved({"sgemm": lambda: a @ b}, graphs=True, rounds=3)["sgemm"]
    if isinstance(t, Exception):
        raise t
    return 2 * n ** 3 / (t.median_ms * 1e-3) / 1e12


def fma_peak_tflops() -> float | None:
    """The current GPU's FP32 FMA peak, SMs x FP32 lanes x 2 FLOPs x its maximum SM clock (the
    device properties' clock_rate; H200: 132 x 128 x 2 x 1.98 GHz = 66.9 TFLOP/s), or None
    where torch does not report the clock."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    clock_khz = getattr(props, "clock_rate", None)
    if not clock_khz:
        return None
    lanes = FP32_LANES.get((props.major, props.minor), 128)
    return props.multi_processor_count * lanes * 2 * clock_khz * 1e3 / 1e12


def step_providers(lmax: int, focus_dim: int, n_edges: int, with_compile: bool, device="cuda") -> tuple[dict, dict]:
    """{pass: {provider: zero-argument step}} of the whole op (plain calls), and what ran
    (the exact pick and the level-3 pick, or why none)."""
    d, training = _inputs(lmax, 2, focus_dim, n_edges, device, grad_weights=True)
    grad_out = torch.randn((n_edges, 2, d.row), device=device)
    # Force evaluation: the weights do not require grad (so no weight gradient is formed).
    force = training[:2] + [w.detach() for w in training[2:]]

    def tf(*args):
        return so2_mixing_stack(*args, lmax=lmax, focus_dim=focus_dim)

    def ref(*args):
        return so2_stack_reference(*args, lmax=lmax, focus_dim=focus_dim)
    fns = {"tilefuse": (tf, lambda: policy.level(2)), "eager reference": (ref, contextlib.nullcontext)}
    with policy.level(3):
        variant = op.level3_config(d, torch.float32, n_edges, 2, NL)
    forward = op.forward_config(d, torch.float32, n_edges, 2, NL) or configs.heuristic(lmax, focus_dim)
    facts = {"exact": op.backward_config(d, torch.float32, n_edges, 2, NL, False).name,
             "forward": forward.name.removeprefix("relay-"),
             "level3": op.level3_summary(d, n_edges, 2, NL),
             "level3 training": op.level3_summary(d, n_edges, 2, NL, training=True)}
    if variant is not None:
        fns["tilefuse level 3"] = (tf, lambda: policy.level(3))
    if with_compile:
        fns["torch.compile"] = (torch.compile(ref, dynamic=False), contextlib.nullcontext)
    steps = {}
    for pass_name, _ in PASSES:
        ins = training if "training" in pass_name else force
        leaves = None if pass_name == "forward" else (ins if "training" in pass_name else ins[:2])
        per = {}
        for name, (fn, ctx) in fns.items():
            def step(fn=fn, ctx=ctx, ins=ins, leaves=leaves):
                with ctx(), torch.set_grad_enabled(leaves is not None):
                    x = fn(*ins)
                    return x if leaves is None else torch.autograd.grad(x, leaves, grad_out)
            per[name] = step
        steps[pass_name] = per
    return steps, facts


def _bench_steps(lmax: int, focus_dim: int, n_edges: int, ceiling: float, peak: float | None,
                 with_compile: bool) -> list[dict]:
    d = So2Dims(lmax, focus_dim)
    steps, facts = step_providers(lmax, focus_dim, n_edges, with_compile)
    rows = []
    for pass_name, mult in PASSES:
        flops = mult * layer_gemm_flops(d, n_edges)
        timed = timing.interleaved(steps[pass_name], rounds=3)
        base = timed.get("tilefuse")
        for name, t in timed.items():
            row = {"scope": "step", "pass": pass_name, "lmax": lmax, "focus_dim": focus_dim, "edges": n_edges,
                   "provider": name, "table_picks": f"fwd {facts['forward']}; bwd {facts['exact']}",
                   "level3": facts["level3 training" if "training" in pass_name else "level3"],
                   "gemm_ceiling_tflops": ceiling, "fma_peak_tflops": peak, **bench.timing_fields(t)}
            if row["status"] == "ok":
                row["tflops"] = flops / (t.median_ms * 1e-3) / 1e12
                row["fraction_of_gemm_ceiling"] = row["tflops"] / ceiling
                row["fraction_of_fma_peak"] = row["tflops"] / peak if peak else None
                if isinstance(base, timing.Timing):
                    row["vs_tilefuse"] = timing.ratio(t, base)   # > 1: tilefuse is faster
            rows.append(row)
    return rows


@bench.compile_limits()
def benchmark(quick: bool, progress: Callable) -> dict:
    """On a GPU, F 2, fp32, CUDA-graph replay, interleaved:

    - one gated layer's backward: the relay (sigma, pointwise, transposed GEMM) against the
      fused kernel (both column passes) at a few configs, with the bytes each moves and the
      fused floor (read g and z, write g_next) as a fraction of the copy ceiling measured here;
    - the whole force backward (grad of u0 and alpha, three layers): relay, fused, what the
      tuning table picks, the eager explicit backward and (production shape only)
      torch.compile of it;
    - the whole op ("step", plain calls) at issue 15's edge counts (STEP_EDGES; ``quick``:
      2**17): forward, forward + force backward and forward + training backward (the
      weights' gradients too) of tilefuse as called (level 2), tilefuse at level 3 where a
      validated variant exists, the eager reference and torch.compile of it, with TFLOP/s of
      the layer GEMMs, their fraction of the GPU's FP32 FMA peak (fma_peak_tflops) and of the
      cuBLAS fp32 GEMM ceiling measured here.
    """
    n_edges = 2 ** 17 if quick else 647_168
    copy_gbs = bench.copy_ceiling_gbs(2 * n_edges * 64, torch.float32)
    ceiling, peak = fp32_gemm_ceiling_tflops(), fma_peak_tflops()
    rows = []
    for lmax, focus_dim in progress(SHAPES[:1] if quick else SHAPES, desc="so2 bench"):
        rows += _bench_shape(lmax, focus_dim, n_edges, copy_gbs)
        gc.collect()
        torch.cuda.empty_cache()
        step_edges = n_edges if quick else STEP_EDGES.get((lmax, focus_dim), n_edges)
        rows += _bench_steps(lmax, focus_dim, step_edges, ceiling, peak, with_compile=True)
        gc.collect()
        torch.cuda.empty_cache()
    return {"rows": rows, "copy_ceiling_gbs": copy_gbs, "gemm_ceiling_tflops": ceiling, "fma_peak_tflops": peak}


def benchmark_markdown(b: dict) -> list[str]:
    lines = ["fp32, F 2, CUDA-graph replay, interleaved. 'layer': one gated layer's backward (relay: "
             "sigma + pointwise + transposed GEMM; fused: both column passes); 'backward': the whole "
             "force backward (grad of u0 and alpha, three layers). 'vs relay' is the relay's time over "
             "the row's at the same scope (> 1: faster than the relay; none for the '(no graph)' peers, "
             "timed as plain calls in other rounds). 'floor/copy': the fused floor's "
             f"bytes (read g, z; write g_next; a sigma pass's configs also write and read sigma) at the "
             f"row's time, as a fraction of the copy ceiling "
             f"measured in this run ({b['copy_ceiling_gbs']:.0f} GB/s).", "",
             "| scope | lmax | Cf | edges | provider | ms | spread | vs relay | floor/copy | table picks |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    relay_ms = {(r["scope"], r["lmax"], r["focus_dim"]): r["ms"] for r in b["rows"]
                if r["status"] == "ok" and r["provider"] in ("relay", "relay layer")}
    for r in b["rows"]:
        if r["scope"] == "step":
            continue
        head = f"| {r['scope']} | {r['lmax']} | {r['focus_dim']} | {r['edges']} | {r['provider']} | "
        if r["status"] != "ok":
            lines.append(head + f"failed | | | | {cell(r['error'])} |")
            continue
        # (no ratio for the peers timed without graphs: relay's time is a graph replay's, from
        # other rounds)
        base = relay_ms.get((r["scope"], r["lmax"], r["focus_dim"])) if r.get("ours", True) else None
        vs = f"{base / r['ms']:.2f}" if base else ""
        floor = r.get("fused_floor_fraction_of_copy")
        lines.append(head + f"{r['ms']:.3f} | {r['spread']:.1%} | {vs} | "
                     f"{'' if floor is None else f'{floor:.0%}'} | {r['table_picks']} |")
    steps = [r for r in b["rows"] if r["scope"] == "step"]
    if steps:
        peak = b.get("fma_peak_tflops")
        lines += ["", "The whole op, plain calls (3 interleaved rounds): TFLOP/s of its layer GEMMs (forward NL, "
                  "force backward NL more, training backward NL more again), their fraction of the GPU's FP32 "
                  "FMA peak (" + (f"{peak:.1f} TFLOP/s: SMs x FP32 lanes x 2 x its maximum clock" if peak
                                  else "not known: no clock reported") + ") and of the cuBLAS fp32 GEMM "
                  f"ceiling measured in this run ({b.get('gemm_ceiling_tflops', float('nan')):.1f} TFLOP/s); "
                  "'vs tilefuse': the row's time over tilefuse's (> 1: tilefuse is faster).", "",
                  "| pass | lmax | Cf | edges | provider | ms | spread | TFLOP/s | of FMA peak | of cuBLAS fp32 | "
                  "vs tilefuse | tilefuse runs |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in steps:
            head = f"| {r['pass']} | {r['lmax']} | {r['focus_dim']} | {r['edges']} | {r['provider']} | "
            if r["status"] != "ok":
                lines.append(head + f"failed | | | | | | {cell(r['error'])} |")
                continue
            vs = f"{r['vs_tilefuse']:.2f}" if r.get("vs_tilefuse") is not None else ""
            runs = f"{r['table_picks']}; level 3: {r['level3']}" if r["provider"].startswith("tilefuse") else ""
            of_peak = r.get("fraction_of_fma_peak")
            lines.append(head + f"{r['ms']:.3f} | {r['spread']:.1%} | {r['tflops']:.1f} | "
                         f"{'' if of_peak is None else f'{of_peak:.0%}'} | {r['fraction_of_gemm_ceiling']:.0%} | "
                         f"{vs} | {runs} |")
    return lines


def benchmark_summary(b: dict) -> list[str]:
    return [f"so2 L{r['lmax']} C{r['focus_dim']} {r.get('pass', r['scope'])} {r['provider']}: {r['ms']:.3f} ms"
            + ("" if r["scope"] == "step" else f" (table picks {r['table_picks']})")
            for r in b["rows"] if r["status"] == "ok"]


def plots(out_dir, b: dict) -> list[str]:
    """so2_step.png: the whole op's time per pass and provider, one panel per shape (none
    without matplotlib or step rows)."""
    steps = [r for r in b["rows"] if r["scope"] == "step" and r["status"] == "ok"]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    shapes = sorted({(r["lmax"], r["focus_dim"], r["edges"]) for r in steps})
    if not shapes:
        return []
    providers = sorted({r["provider"] for r in steps})
    fig, axes = plt.subplots(1, len(shapes), figsize=(5 * len(shapes), 4), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        width = 0.8 / len(providers)
        for j, provider in enumerate(providers):
            ms = [next((r["ms"] for r in steps if (r["lmax"], r["focus_dim"], r["edges"]) == shape
                        and r["pass"] == p and r["provider"] == provider), 0.0) for p, _ in PASSES]
            ax.bar([i + j * width for i in range(len(PASSES))], ms, width, label=provider)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(PASSES))], [p for p, _ in PASSES], fontsize=8)
        ax.set_title(f"so2 E {shape[2]}, lmax {shape[0]}, Cf {shape[1]} (fp32, F 2)")
        ax.set_ylabel("ms per call")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7)
    fig.tight_layout()
    name = "so2_step.png"
    fig.savefig(Path(out_dir) / name, dpi=110)
    plt.close(fig)
    return [name]
