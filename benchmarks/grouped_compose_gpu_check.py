"""Is grouped_glu_mlp's compose route correct on this GPU, and is its forward + backward at least as fast as torch._grouped_mm + torch.compile at the spec's shapes?

The compose route (``src/tilefuse/ops/grouped_glu_mlp/compose.py``) runs every GEMM on
``torch._grouped_mm`` and the glue (GLU, dGLU and dprobs, bias terms) as tilefuse's Triton
kernels, one pass each. This program:

1. checks it against the float64 per-expert reference at a small shape (bf16, ragged counts
   with an empty expert, both activations, interleave 32 and None, with and without biases):
   y and every gradient, normwise relative error against the bf16 bound of the tests (1.6e-2),
   fresh allocations NaN-poisoned (``tilefuse.tuning.sweep.poisoned_allocations``: an output
   element left unwritten is NaN, not what a freed block of an earlier call still holds);
2. times one forward + backward (``torch.autograd.grad`` of y, every input a leaf) at the
   spec's three shapes (``ops.grouped_glu_mlp.tune.DEFAULT_SHAPES``; bf16, balanced counts),
   for glu_interleave 32 and None, SwiGLU without biases (``--activations``, ``--bias``: the
   other epilogue keys of the tuning grid), of (``--providers``: a subset):
   (a) ``compose``: the compose route (``op.compose_apply``, its autograd.Function),
   (b) ``eager composition``: ``reference.grouped_glu_mlp_unfused`` (``torch._grouped_mm`` +
       the activation as torch ops, differentiated by autograd),
   (c) ``compiled composition``: (b) under ``torch.compile(fullgraph=True)`` (inductor),
   (d) ``tilefuse``: ``tilefuse.grouped_glu_mlp`` as users call it (default level, the
       built-in tuning table of this GPU; the path it took is printed),
   (e) ``fused kernels``: the fused Triton path at its heuristic tiles (``op.fused_apply``,
       ``configs.heuristic``), whether or not the table picks it,
   (f) ``fp8_block``: ``tilefuse.grouped_glu_mlp(recipe="fp8_block")`` as users call it,
   and with ``--one-stream`` (d) and (f) again on one stream (``... one stream``: the op's
   second stream off, ops/grouped_glu_mlp/streams.py: does it still pay?).
   Before a key is timed, every provider to be timed is checked at that key (``check_key``):
   the same E, T, H, F, interleave, activation and bias, so the same tuning-table entry, route
   and tiles (T too: the key holds a power-of-two bucket of it), on fresh inputs with ragged
   counts and an empty expert, allocations NaN-poisoned; y and every gradient against the
   float64 reference (bound 1.6e-2; fp8_block against its recipe's float64 rendering, bound
   2 eps_bf16, as ``tilefuse check``), and each must run the route it is timed on (tilefuse:
   the route printed for the timed inputs). One that fails is printed with why and not timed.
   Timing uses the one harness (``tilefuse.tuning.timing.interleaved``: warm-up, CUDA-graph replay,
   providers interleaved in rotating rounds, medians); a provider that fails to capture is
   timed eagerly instead, one that fails outright is printed with its error; with
   ``--sustained`` the same providers are then timed again in rounds whose samples are 2 s
   blocks (0.5 s untimed, then 1.5 s timed), so that each runs at its own clock under the
   power limit (benchmarks/README.md, "The power cap"; about 2 s a provider a round: use few
   rounds), and both tables are printed;
3. profiles (d) and (c) at shape 1 with torch.profiler (``--profile``, ``--profile-shapes``): GPU
   time per kernel per step, our op's kernels beside the peer's.

    PYTHONPATH=src python3 benchmarks/grouped_compose_gpu_check.py [--shapes 1,2,3] [--interleaves 32,none] [--rounds 5]
    PYTHONPATH=src python3 benchmarks/grouped_compose_gpu_check.py --shapes none --profile-shapes 1,2,3   # profiles only
    PYTHONPATH=src python3 benchmarks/grouped_compose_gpu_check.py --activations swiglu,geglu --bias off,on \
        --providers "compiled composition,tilefuse" --profile none   # the op against compile at every grid key
    PYTHONPATH=src python3 benchmarks/grouped_compose_gpu_check.py --tiny   # no GPU: CPU smoke test (interpreter, ~45 s)
    PYTHONPATH=src python3 benchmarks/grouped_compose_gpu_check.py --providers "tilefuse,fp8_block" --interleaves 32 \
        --sustained --rounds 3 --profile none   # fp8_block against bf16 in alternating 2 s blocks

Prints the check's errors (PASS / FAIL per case), then per shape and interleave each provider's
check at the key (PASS / FAIL, its worst error) and one line per provider timed: median ms
[min - max over rounds], TFLOP/s (3x the forward FLOPs, the forward being 2 T H 2F + 2 T F H),
and its speed relative to (c) (the median of the per-round ratios, timing.ratio); then the
profile table (kernel, calls per step, ms per step, share). Time on the H200: about 3-4
minutes before the checks at the keys (results/2026-12-01-h200-h runs 4-5: about 2 min for the
three shapes), most of it inductor compiling (c) once per shape and interleave; those checks
add a float64 reference per key (an estimated 20 GiB at shape 3) and a second compile of (c)
(Dynamo guards on the deterministic mode the poisoning turns on). With them, shapes 1-3 at
interleave 32, 3 rounds, providers (a), (c), (d) and (f), ``--profile none``, took 77 s on an
H100 (benchmarks/results/2026-12-06-h200-ay run 4); the default run with them is not yet
measured. Exits 1 when a check fails (the first, or a provider's at a key) or a shape stops
with an error.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import traceback

import torch

TINY = "--tiny" in sys.argv
if TINY and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")   # before tilefuse imports triton.language

import tilefuse  # noqa: E402
from tilefuse import launches  # noqa: E402
from tilefuse.check import bench, env  # noqa: E402
from tilefuse.check.grouped import _NAMES, RECIPE_TOL, TOL, _float64_reference, _rendering  # noqa: E402
from tilefuse.ops.grouped_glu_mlp import streams  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.configs import heuristic  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.op import compose_apply, fused_apply  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.reference import (grouped_glu_mlp_reference, grouped_glu_mlp_unfused,  # noqa: E402
                                                    random_inputs)
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES  # noqa: E402
from tilefuse.tuning import timing  # noqa: E402
from tilefuse.tuning.sweep import poisoned_allocations  # noqa: E402
from tilefuse.utils import normwise_rel_error  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
SHAPES = dict(enumerate(DEFAULT_SHAPES, start=1))
# H and F multiples of fp8_block's 128-wide scaling block, so that its provider runs (and is
# checked) in the smoke test too; four experts, so that the check's ragged counts vary.
TINY_SHAPE = (4, 64, 128, 128)
BF16_TOL = TOL[torch.bfloat16]   # the check's bound: three bf16 roundings on the longest path
NAMES = ("x", "probs", "w1", "w2", "b1", "b2")
PROVIDERS = ("compose", "eager composition", "compiled composition", "tilefuse", "fused kernels", "fp8_block")


def error_text(exc: BaseException, limit: int = 160) -> str:
    return bench.error_text(exc, limit)


def leaves_of(i):
    return {k: i[k].detach().requires_grad_(True) for k in NAMES if i[k] is not None}


def run_op(fn, i, interleave, leaves):
    y = fn(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"], interleave, leaves.get("b1"),
           leaves.get("b2"))
    return y, torch.autograd.grad(y, list(leaves.values()), i["dy"])


def compose_fn(activation):
    def fn(x, counts, probs, w1, w2, interleave, b1=None, b2=None):
        return compose_apply(x, counts, probs, w1, w2, b1, b2, activation, interleave)
    return fn


def tilefuse_fn(activation):
    def fn(x, counts, probs, w1, w2, interleave, b1=None, b2=None):
        return tilefuse.grouped_glu_mlp(x, counts, probs, w1, w2, activation=activation, glu_interleave=interleave,
                                        fc1_bias=b1, fc2_bias=b2)
    return fn


def fused_fn(activation):
    def fn(x, counts, probs, w1, w2, interleave, b1=None, b2=None):
        return fused_apply(x, counts, probs, w1, w2, b1, b2, activation, interleave, heuristic("fwd", x.element_size()))
    return fn


def fp8_fn(activation):
    def fn(x, counts, probs, w1, w2, interleave, b1=None, b2=None):
        return tilefuse.grouped_glu_mlp(x, counts, probs, w1, w2, activation=activation, glu_interleave=interleave,
                                        fc1_bias=b1, fc2_bias=b2, recipe="fp8_block")
    return fn


def unfused_fn(activation):
    def fn(x, counts, probs, w1, w2, interleave, b1=None, b2=None):
        return grouped_glu_mlp_unfused(x, counts, probs, w1, w2, activation=activation, glu_interleave=interleave,
                                       fc1_bias=b1, fc2_bias=b2)
    return fn


# --- 1. correctness -----------------------------------------------------------------------

def check() -> bool:
    counts = [3, 0, 5, 9] if TINY else [300, 0, 211, 17, 1000, 5]
    H, F = (32, 32) if TINY else (256, 192)
    print(f"check: compose route vs float64 reference, bf16, counts {counts}, H {H} F {F} "
          f"(normwise relative error, bound {BF16_TOL:.1e}; allocations NaN-poisoned)", flush=True)
    ok = True
    for activation in ("swiglu", "geglu"):
        for interleave in (32, None):
            for bias in (False, True):
                case = f"{activation} s{interleave} {'bias' if bias else 'nobias'}"
                try:
                    i = random_inputs(counts, H, F, torch.bfloat16, bias=bias, device=DEVICE,
                                      generator=torch.Generator().manual_seed(0))
                    # Fresh allocations NaN-filled: an output element the route leaves unwritten
                    # cannot pass on values a freed block still holds.
                    with poisoned_allocations(), launches.counting() as launched:
                        y, grads = run_op(compose_fn(activation), i, interleave, leaves_of(i))
                    ref_leaves = {k: i[k].detach().double().requires_grad_(True) for k in NAMES if i[k] is not None}
                    y_ref = grouped_glu_mlp_reference(
                        ref_leaves["x"], i["counts"], ref_leaves["probs"], ref_leaves["w1"], ref_leaves["w2"],
                        activation=activation, glu_interleave=interleave, fc1_bias=ref_leaves.get("b1"),
                        fc2_bias=ref_leaves.get("b2"), compute_dtype=torch.float64)
                    ref = torch.autograd.grad(y_ref, list(ref_leaves.values()), i["dy"].double())
                    errors = {"y": normwise_rel_error(y, y_ref)}
                    errors.update({f"d{k}": normwise_rel_error(g, r) for k, g, r in zip(ref_leaves, grads, ref)})
                    engaged = launched["grouped_mlp_compose"] == 1 and launched["grouped_mlp_compose_bwd"] == 1
                    passed = engaged and all(e < BF16_TOL for e in errors.values())
                    worst = max(errors, key=errors.get)
                    print(f"  {'PASS' if passed else 'FAIL'} {case:22s} worst {worst} {errors[worst]:.2e}"
                          + ("" if engaged else f"  (the route did not run: {dict(launched)})"), flush=True)
                except Exception as exc:  # noqa: BLE001 - reported, the check fails
                    passed = False
                    print(f"  FAIL {case:22s} {error_text(exc)}", flush=True)
                    traceback.print_exc()
                ok = ok and passed
    return ok


# --- 2. timing ----------------------------------------------------------------------------

def step_flop(T, H, F) -> float:
    return 3 * (2 * T * H * 2 * F + 2 * T * F * H)


def one_stream(step):
    """``step`` with grouped_glu_mlp's second stream off while it runs (and is captured)."""
    def run():
        streams.BESIDE = False
        try:
            return step()
        finally:
            streams.BESIDE = True
    return run


def provider_runs(activation="swiglu", names=PROVIDERS, one_stream_too=False):
    """{name: run(i, interleave, leaves)}: one forward + backward of each provider in ``names``
    (PROVIDERS' order) on inputs ``i``; with ``one_stream_too``, tilefuse's and fp8_block's also
    on one stream (``one_stream``). The check before timing (check_key) and the timed steps
    (providers_for) call the same functions: the compiled composition is compiled for both."""
    makers = {"compose": compose_fn, "eager composition": unfused_fn, "compiled composition": None,
              "tilefuse": tilefuse_fn, "fused kernels": fused_fn, "fp8_block": fp8_fn}
    assert tuple(makers) == PROVIDERS
    runs = {}
    for name in (n for n in PROVIDERS if n in names):
        if makers[name] is None:
            # A fresh Dynamo state and static shapes per shape and key: otherwise the third
            # compile of the same function turns on automatic dynamic shapes, under which
            # inductor failed to compile _grouped_mm (H200, torch 2.11: BackendCompilerFailed at
            # shapes 2-3 of benchmarks/results/2026-12-01-h200-h run 4). Static shapes are the
            # peer's best case.
            torch._dynamo.reset()
            fn = torch.compile(unfused_fn(activation), fullgraph=True, dynamic=False,
                               backend="inductor" if DEVICE == "cuda" else "aot_eager")
        else:
            fn = makers[name](activation)
        runs[name] = lambda i, interleave, leaves, fn=fn: run_op(fn, i, interleave, leaves)
    for name in ("tilefuse", "fp8_block") if one_stream_too else ():
        if name in runs:
            runs[f"{name} one stream"] = (lambda i, interleave, leaves, run=runs[name]:
                                          one_stream(lambda: run(i, interleave, leaves))())
    return runs


def providers_for(i, interleave, activation="swiglu", names=PROVIDERS, one_stream_too=False, runs=None):
    """The step of each provider in ``names`` (PROVIDERS' order) on inputs ``i``; with
    ``one_stream_too``, tilefuse's and fp8_block's also on one stream (``one_stream``).
    ``runs``: provider_runs' functions to use instead (then ``names`` and ``one_stream_too``
    are theirs)."""
    leaves = leaves_of(i)
    runs = provider_runs(activation, names, one_stream_too) if runs is None else runs
    return {name: (lambda run=run: run(i, interleave, leaves)) for name, run in runs.items()}


def route_of(launched) -> str:
    """The route a call took, from its launch record (launches.counting)."""
    if launched["grouped_mlp_fwd"]:
        return "fused kernels"
    if launched["grouped_mlp_compose"]:
        gluon = [name for name, launch in (("wgrads", "grouped_ws_wgrad"), ("row GEMMs", "grouped_ws_rows"))
                 if launched[launch]]
        return "compose route" + (f" with its {' and '.join(gluon)} in Gluon (a compose config)" if gluon else "")
    return f"other ({dict(launched) or 'no tilefuse kernel'})"


def path_taken(i, interleave, activation="swiglu") -> str:
    with launches.counting() as launched:
        run_op(tilefuse_fn(activation), i, interleave, leaves_of(i))
    return route_of(launched)


# --- check before timing ------------------------------------------------------------------

def check_counts(E, T, seed) -> torch.Tensor:
    """The check's tokens per expert: all T of the timed key, split raggedly over the experts
    with expert E // 2 empty (tune.GroupedFamily.make_inputs' split). Not fewer tokens: the
    table key holds a power-of-two bucket of T (tune.GroupedProblem.of), the spec's T are
    powers of two, so only T / 2 + 1 to T tokens hit the timed key and its tiles, and the
    float64 reference with its gradients at T fits (an estimated 20 GiB at the spec's shape 3,
    beside the timed inputs' 2 GiB)."""
    gen = torch.Generator().manual_seed(seed)
    weights = torch.rand(E, generator=gen)
    weights[E // 2] = 0
    return torch.bincount(torch.multinomial(weights, T, replacement=True, generator=gen), minlength=E)


def check_key(E, T, H, F, interleave, activation, bias, runs, seed, timed_route) -> dict[str, str]:
    """Each provider of ``runs`` (provider_runs) once, before it is timed, at the timed key (E,
    T, H, F, interleave, activation, bias: the same table entry and tiles) on fresh inputs with
    ragged counts (check_counts), allocations NaN-poisoned (tuning.sweep.poisoned_allocations:
    an output element a provider leaves unwritten is NaN, never a value a freed block still
    holds): y and every gradient against the float64 reference, normwise, bound BF16_TOL;
    fp8_block against its recipe's float64 rendering (the same quantized bits, check.grouped's
    bound RECIPE_TOL). The routes are checked too: compose and fused kernels must launch their
    kernels, fp8_block its recipe's kernels, tilefuse the route it takes on the timed inputs
    (``timed_route``: path_taken's). Prints a line per provider; returns {name: why} of those
    that failed."""
    counts = check_counts(E, T, seed)
    i = random_inputs(counts, H, F, torch.bfloat16, bias=bias, device=DEVICE,
                      generator=torch.Generator(device=DEVICE).manual_seed(seed))
    wants = {}

    def want(recipe):   # computed once, when a provider first needs it; an exception is its failure
        if recipe not in wants:
            try:
                wants[recipe] = (_rendering(i, activation, interleave, recipe) if recipe
                                 else _float64_reference(i, activation, interleave))
            except Exception as exc:  # noqa: BLE001 - each provider compared with it fails
                wants[recipe] = exc
        if isinstance(wants[recipe], Exception):
            raise wants[recipe]
        return wants[recipe]

    print(f"  check: fresh inputs at this key, counts ragged (min {int(counts.min())}, max {int(counts.max())}), "
          f"against the float64 reference (bound {BF16_TOL:.1e}; fp8_block: its float64 rendering, bound "
          f"{RECIPE_TOL:.1e}), allocations NaN-poisoned", flush=True)
    failed = {}
    # The bf16 providers first: the float64 reference's outputs (an estimated 7 GiB at shape 3)
    # are then freed before fp8_block's rendering makes its float64 temporaries.
    for name in sorted(runs, key=lambda n: n.startswith("fp8_block")):
        run, recipe = runs[name], "fp8_block" if name.startswith("fp8_block") else None
        tol = RECIPE_TOL if recipe else BF16_TOL
        if recipe:
            wants.pop(None, None)
        try:
            ref = want(recipe)
            with poisoned_allocations(), launches.counting() as launched:
                y, grads = run(i, interleave, leaves_of(i))
            errors = {n: normwise_rel_error(g, r) for n, g, r in zip(_NAMES, (y, *grads), ref)}
            del y, grads, ref
        except Exception as exc:  # noqa: BLE001 - reported, the provider is not timed
            failed[name] = error_text(exc)
            print(f"    FAIL {name:22s} {failed[name]}", flush=True)
            continue
        # What each provider is timed on: the same route here, or the check did not check it.
        route = route_of(launched)
        expected = {"compose": ("the compose route", launched["grouped_mlp_compose"] == 1
                                and launched["grouped_mlp_compose_bwd"] == 1),
                    "fused kernels": ("the fused kernels", launched["grouped_mlp_fwd"] == 1
                                      and launched["grouped_mlp_bwd"] == 1),
                    "fp8_block": ("the recipe's kernels", route == "fused kernels"),
                    "tilefuse": (f"the timed inputs' route, {timed_route}", route == timed_route)}
        what, engaged = expected.get(name.removesuffix(" one stream"), ("", True))
        worst = max(errors, key=lambda n: errors[n] if errors[n] == errors[n] else math.inf)
        if not all(e <= tol for e in errors.values()):   # NaN fails
            failed[name] = f"{worst} error {errors[worst]:.2e} > {tol:.1e}"
        elif not engaged:
            failed[name] = f"did not run {what} (ran {route}: {dict(launched)})"
        print(f"    {'FAIL' if name in failed else 'PASS'} {name:22s} worst {worst} {errors[worst]:.2e}"
              + (f"  ({failed[name]})" if name in failed else ""), flush=True)
    del i, wants
    return failed


def time_shape(index, E, T, H, F, interleaves, rounds, activations=("swiglu",), biases=(False,), names=PROVIDERS,
               one_stream_too=False, sustained=False) -> bool:
    """Every key of one shape (time_key); False where a provider failed its check."""
    ok = True
    for bias in biases:
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=bias, device=DEVICE,
                          generator=torch.Generator().manual_seed(index))
        for activation in activations:
            for interleave in interleaves:
                ok = time_key(index, E, T, H, F, i, interleave, activation, bias, rounds, names, one_stream_too,
                              sustained) and ok
        del i
    return ok


def time_key(index, E, T, H, F, i, interleave, activation, bias, rounds, names, one_stream_too=False,
             sustained=False) -> bool:
    """One epilogue key of one shape: every provider in ``names`` (and with ``one_stream_too``
    tilefuse's and fp8_block's on one stream) checked at the key (check_key), then those that
    passed timed in interleaved rounds; with ``sustained`` then again in rounds of 2 s blocks
    (timing.SUSTAINED), both tables printed. False where a provider failed its check (it is
    not timed)."""
    flop = step_flop(T, H, F)
    key = "" if (activation, bias) == ("swiglu", False) else f", {activation}{', bias' if bias else ''}"
    timed_route = path_taken(i, interleave, activation)
    print(f"\nshape {index}: E {E} T {T} H {H} F {F}, glu_interleave {interleave}{key}; tilefuse ran: "
          f"{timed_route}", flush=True)
    runs = provider_runs(activation, names, one_stream_too)
    failed = check_key(E, T, H, F, interleave, activation, bias, runs, 1000 + index, timed_route)
    if DEVICE == "cuda":
        torch.cuda.empty_cache()   # the float64 reference's blocks, before the timed runs allocate
    for name, why in failed.items():
        print(f"  {name:22s} FAILED its check, not timed: {why}", flush=True)
    providers = providers_for(i, interleave, runs={n: r for n, r in runs.items() if n not in failed})
    protocols = [("", {})]
    if sustained:
        protocols = [("interleaved (~25 ms samples):", {}), ("sustained (2 s blocks):", timing.SUSTAINED)]
    for label, blocks in protocols:
        if label:
            print(f"  {label}", flush=True)
        if providers:
            time_providers(providers, rounds, flop, blocks)
    del providers, runs
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    return not failed


def time_providers(providers, rounds, flop, blocks):
    """Time ``providers`` in one interleaved run (``blocks``: interleaved's target_ms /
    settle_ms) and print one line each, with its speed relative to the compiled composition."""
    timer = timing.WallTimer() if DEVICE != "cuda" else None
    results = timing.interleaved(providers, rounds=rounds, graphs=True, timer=timer, **blocks)
    failed = {n: r for n, r in results.items() if isinstance(r, Exception)}
    if failed and DEVICE == "cuda":   # time what would not capture eagerly (host costs included)
        torch.cuda.synchronize()
        retry = timing.interleaved({n: providers[n] for n in failed}, rounds=rounds, graphs=False, **blocks)
        for name, r in retry.items():
            results[name] = r
            if not isinstance(r, Exception):
                print(f"  ({name}: the CUDA-graph run failed (capture or a timed replay), "
                      f"{error_text(failed[name], 100)}; timed eagerly)")
    base = results.get("compiled composition")
    for name, r in results.items():
        if isinstance(r, Exception):
            print(f"  {name:22s} FAILED {error_text(r)}", flush=True)
            print("    " + "\n    ".join(str(r).splitlines()[:12]), flush=True)
            continue
        vs = ""
        if isinstance(base, timing.Timing):
            # The median of the per-round ratios (timing.ratio) where both ran in the same
            # interleaved call; one timed eagerly in the retry and the other not share no rounds:
            # the medians' ratio, marked.
            if (name in failed) != ("compiled composition" in failed):
                vs = f"  {base.median_ms / r.median_ms:5.2f}x compiled (medians: timed in separate runs)"
            else:
                vs = f"  {timing.ratio(base, r):5.2f}x compiled"
        print(f"  {name:22s} {r.median_ms:9.3f} ms [{r.min_ms:.3f} - {r.max_ms:.3f}]"
              f" {flop / (r.median_ms * 1e-3) / 1e12:7.1f} TFLOP/s{vs}", flush=True)


# --- 3. profile ---------------------------------------------------------------------------

def profile(E, T, H, F, interleave, names, steps=5):
    """GPU kernel time per forward + backward of each provider in ``names`` (providers_for's
    names), one table each: our op's kernels beside the peer's at the same shape and inputs."""
    i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device=DEVICE,
                      generator=torch.Generator().manual_seed(0))
    providers = providers_for(i, interleave, names=names)
    for name in names:
        step = providers[name]
        step()
        rows, _ = bench.kernel_times(step, DEVICE, steps)
        total = sum(r["us"] for r in rows) / 1e3
        print(f"\nprofile: {name}, E {E} T {T} H {H} F {F}, glu_interleave {interleave}; "
              f"{'GPU kernel' if DEVICE == 'cuda' else 'CPU (no GPU)'} time per forward + backward, {steps} steps: "
              f"{total:.3f} ms", flush=True)
        for r in rows[:20]:
            ms = r["us"] / 1e3
            print(f"  {ms:8.3f} ms {r['calls']:5.1f}x {100 * ms / total if total else 0:5.1f}%  {r['kernel'][:110]}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="1,2,3", help="spec shapes to time (1-3; 'none' to time none)")
    p.add_argument("--interleaves", default="32,none", help="glu_interleave values to time (an int, or none)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--activations", default="swiglu", help="activations to time, comma-separated (swiglu, geglu)")
    p.add_argument("--bias", default="off", help="fc1 / fc2 biases to time: off, on or off,on (default off)")
    p.add_argument("--providers", default=",".join(PROVIDERS),
                   help=f"providers to time, comma-separated (default all: {', '.join(PROVIDERS)})")
    p.add_argument("--profile", default="tilefuse,compiled composition",
                   help="providers to profile at --profile-shapes, comma-separated (default: tilefuse,"
                        "compiled composition; 'none' for no profile)")
    p.add_argument("--profile-shapes", default="1", help="spec shapes to profile (1-3; default 1)")
    p.add_argument("--one-stream", action="store_true",
                   help="also time tilefuse and fp8_block (where timed) with the op's second stream off")
    p.add_argument("--tiny", action="store_true", help="one tiny shape on the CPU (interpreter): a smoke test")
    p.add_argument("--sustained", action="store_true",
                   help="then time the providers again in 2 s blocks (0.5 s untimed first): each at its own "
                        "clock under the power limit; both tables are printed")
    args = p.parse_args(argv)
    names = [] if args.profile.strip().lower() == "none" else [n.strip() for n in args.profile.split(",")]
    timed = [n.strip() for n in args.providers.split(",")]
    for flag, given in (("--profile", names), ("--providers", timed)):
        if unknown := [n for n in given if n not in PROVIDERS]:
            p.error(f"{flag}: unknown provider(s) {unknown}; choose from {', '.join(PROVIDERS)}")
    activations = [a.strip() for a in args.activations.split(",")]
    if bad := [a for a in activations if a not in ("swiglu", "geglu")]:
        p.error(f"--activations: unknown {bad}; choose from swiglu, geglu")
    bias_names = {"off": False, "on": True}
    if bad := [b for b in args.bias.split(",") if b.strip() not in bias_names]:
        p.error(f"--bias: unknown {bad}; choose from off, on")
    biases = [bias_names[b.strip()] for b in args.bias.split(",")]
    interleaves = [None if s.strip().lower() == "none" else int(s) for s in args.interleaves.split(",")]
    print(f"torch {torch.__version__}, device {torch.cuda.get_device_name() if DEVICE == 'cuda' else 'cpu'}, "
          f"tilefuse level {tilefuse.policy.get_level()}, ptxas {env.ptxas()}", flush=True)
    ok = check()
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
    shapes = ({1: TINY_SHAPE} if args.tiny else {} if args.shapes.strip().lower() == "none"
              else {int(s): SHAPES[int(s)] for s in args.shapes.split(",")})
    for index, shape in shapes.items():
        try:
            ok = time_shape(index, *shape, interleaves, 2 if args.tiny else args.rounds, activations, biases, timed,
                            args.one_stream, args.sustained) and ok
        except Exception as exc:  # noqa: BLE001 - one shape's failure is printed, the rest still run
            ok = False   # its providers went unchecked
            print(f"shape {index} {shape}: FAILED {error_text(exc)}", flush=True)
            traceback.print_exc()
    profile_shapes = {1: TINY_SHAPE} if args.tiny else {int(s): SHAPES[int(s)] for s in args.profile_shapes.split(",")}
    for index, shape in profile_shapes.items() if names else ():
        try:
            profile(*shape, interleaves[0], names, steps=2 if args.tiny else 5)
        except Exception as exc:  # noqa: BLE001
            print(f"profile: shape {index} FAILED {error_text(exc)}", flush=True)
            traceback.print_exc()
    # The compiled composition's warm-up switches Triton to torch's ptxas (docs/design.md, "Which
    # ptxas"): tilefuse's kernels compiled after it were assembled by that one.
    print(f"\nptxas at the end: {env.ptxas()}")
    print(f"check: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
