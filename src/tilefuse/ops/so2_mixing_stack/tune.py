"""so2_mixing_stack's tuning family: the backward route per (lmax, focus_dim, dtype), the
forward's tiles per (lmax, focus_dim, dtype), and the level-3 variant per (lmax, focus_dim).

Exact keys (``L3-C32-x4``): the baseline is the relay (three kernels per gated layer,
heuristic tiles). Candidates are other relay tiles (a tile change, 1% margin; BLOCK_K
unchanged), the composition route (the relay's pointwise kernels with cuBLAS GEMMs, compose.py;
a route change, 3% margin) and, where the guards allow fusion (fp32, focus_dim a power of two
in [16, 64]), fused configs (BLOCK_M, BLOCK_N, warps, stages; BLOCK_K = focus_dim; a route
change; each with sigma recomputed per program and with the relay's sigma pass). A route is
measured against the best unfused one (``route_rank``): the composition must beat the best
relay tiling too by the 3% margin, a fused config the best relay tiling and the best
composition, so fusion that does not win by the margin records the unfused route. Relay tiles
and fused configs must be bitwise equal to the heuristic relay (the fused
kernel's contract; for relay tiles the same K order); the composition orders its sums as cuBLAS
does, so it must agree within the fp32 chain's tolerance (``compose_tolerance``). Every
candidate must launch its route's kernels; a sweep where a guard or the policy routed a
candidate to the relay fails. Only the backward is timed.

Forward keys (``L3-C32-x4-fwd``): the forward's GEMM and gate-kernel tiles, and for float32
keys its composition route (compose.gated_layer / compose.final: the layer GEMMs on cuBLAS, a
route change, 3% margin). The baseline is the heuristic tiles, the candidates the relay tilings
above (a tile change, 1% margin; BLOCK_K unchanged, so every output element keeps its K order)
and that route, and the forward alone is timed. A tiling's x_local and saved z and u_final
must be bitwise equal to the baseline's; the composition's within ``compose_tolerance``, as
the backward's. Either way the backward routes, whose fused == relay contract is stated on the
saved forward, see the same inputs as each other whichever forward ran.

Level-3 keys (``L3-C32-x4-l3``, fp32 only): forward + force backward is timed, the baseline is
the exact heuristic relay, the candidates are split-precision relay configs (3xfp16, also
with the forward gate's scalar block split, and 3xtf32) and, where the fused guards allow it,
the fused route in 3xfp16 with the relay's sigma pass (configs.level3_candidates; a route
change). A candidate is validated, not compared bitwise (``validate``):
- at the sweep's production-size inputs (2**19 edges, fewer where the device's memory needs it,
  never fewer than ``LEVEL3_MIN_EDGES``: ``sweep_problem`` raises a model's smaller edge count to
  it), the normwise error of each output
  (x_local, grad_u0, grad_alpha, and the training backward's weight gradients dw0, dw1, dgw,
  ``run_training``: the variant runs there too) against a float64 reference is at most
  ``LEVEL3_ERROR_RATIO`` times the exact path's error on the same inputs;
- on range-limit inputs (grad_out scaled to within a few binades of float32's largest finite
  value, u0 scaled far up, grad_out scaled down to the subnormal boundary) every output element,
  the weight gradients' included, is finite wherever the exact path's is, and each output's
  error within the same ratio of the exact path's where that error is at most
  RANGE_EXACT_CEILING (the record's ``range_errors``): a split whose tails fall into float32's
  subnormals (3xtf32 on the last set) loses accuracy the Gaussian inputs do not show.
The numbers are recorded in the entry's ``measured["validation"]`` with the key and the config
they were measured for; ``check_entry`` refuses a level-3 entry choosing a split-precision config
unless its record is a passed validation of that config at that key whose numbers hold (every
output's error ratio within the limit, all range-limit sets, at least LEVEL3_MIN_EDGES edges):
a record copied from another key or variant, or one without those numbers, does not engage
anything. The record is not authenticated: a table file edited by hand to hold such numbers
is believed (``tuning.register`` takes no records, so no API call installs one). So a
variant never runs on a key where it was not validated (and never below level 3: op.py looks
level-3 keys up at level 3 only). A record without ``"weight_grads": true`` (entries validated before the
weight gradients were) engages the variant for the forward and the force backward only: a
training backward then runs the exact path (op.backward_config).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from pathlib import Path

import torch

from ...tuning.family import MARGINS, ROUTE, TILE, TuningFamily, cli_itemsize
from ...tuning.table import _device_index, generation, get_measured
from ...utils import normwise_rel_error
from . import configs, launch
from .configs import (EXACT, So2Config, compose_candidates, fused_candidates, fused_supported, level3_candidates,
                      relay_candidates)
from .reference import So2Dims, so2_stack_backward_reference, so2_stack_forward_saving

_HERE = Path(__file__).resolve().parent
# The training backward's outputs the level-3 validation also checks (run_training).
WEIGHT_GRADS = ("dw0", "dw1", "dgw")
_KEY = re.compile(r"L(\d+)-C(\d+)-x(\d+)(-l3|-fwd)?")
LEVEL3_SUFFIX = "-l3"
FORWARD_SUFFIX = "-fwd"
# A level-3 variant's normwise error against float64 may be at most this multiple of the exact
# path's error on the same inputs (issue 15).
LEVEL3_ERROR_RATIO = 1.5
# The float64 reference of a level-3 validation is computed this many edges at a time (the
# op is edge-wise independent), so its memory stays a few GB at the sweep's 2**19 edges.
REFERENCE_CHUNK = 2 ** 16
_SWEEP_DTYPE = {4: torch.float32, 2: torch.bfloat16}

# `tilefuse tune --all-defaults`: the spec's shapes, F 2, three layers, 2**19 edges (about the
# production edge count's power of two below; E only sets the grid, not the key): issue 15's
# three, the rest of the spec's grid ((1, 32), (2, 32), (3, 64), (6, 96), (6, 128); the last
# two have no fused route, Cf off the powers of two in [16, 64], and were added after the H200
# table's sweeps: not in it yet).
DEFAULT_SHAPES = ((3, 32), (6, 32), (2, 64), (1, 32), (2, 32), (3, 64), (6, 96), (6, 128))
DEFAULT_EDGES = 2 ** 19
# A sweep's peak device memory at DEFAULT_LAYERS layers, in (F, E, ROW) surfaces of the
# problem's dtype: the checks' inputs and the outputs compared, the timing inputs, the
# forward's temporaries. At the out-of-memory errors of -ak run 3 (an 80 GB H100, E 2^19,
# three layers) the sweeps held 10.3 surfaces with the next allocation at the (6, 96) forward
# key and 7.3 at the (6, 128) backward key; 12 leaves room. sweep_problem halves E (the key
# does not depend on it) until sweep_peak_surfaces of the problem take at most
# SWEEP_MEMORY_SHARE of the device's memory, down to MIN_SWEEP_EDGES; on an H200 every
# default key keeps E 2^19.
SWEEP_PEAK_SURFACES = 12
# A level-3 key's sweep holds more: the validation's float64 reference outputs, both paths'
# training outputs and the range-limit input sets. On an 80 GB H100 (-at run 3) the (6, 96)
# level-3 sweep at E 2^18 ran out of memory holding 22.1 surfaces and asking for 0.6 more,
# while the (3, 64) one ran at E 2^19 within 31.7 surfaces of the card: 28 lies between, and
# halves E for (6, 96) and (6, 128) only (to 2^17 on the H100; on an H200 2^18 and 2^17).
SWEEP_PEAK_SURFACES_LEVEL3 = 28
# Surfaces each layer beyond DEFAULT_LAYERS adds to a check's peak: z_all holds NL - 1 of
# them. A forward key's check holds the baseline's saved z_all while the candidate's forward
# writes its own (2 per layer); a backward key's holds the inputs' z_all (1); a level-3 key's
# peak is its validation's range-limit runs (the three scaled input sets, the float64
# reference and both paths' outputs alive), one forward's z_all at a time (1). The float64
# reference holds its chunk's z_all before that (2 per layer at E = REFERENCE_CHUNK, the
# floor, 1 at twice that), below the range-limit runs' peak. Measured on the CPU at 3 and 6
# layers (lmax 1, 256 edges): a forward key's check 10.4 -> 16.8 surfaces at validate, a
# backward key's 7.5 -> 10.9 (the weights' fraction of a surface included), a level-3 key's
# range-limit runs 27.1 -> 30.1 and its reference 18.1 -> 24.1 at E = REFERENCE_CHUNK.
SWEEP_SURFACES_PER_LAYER = {"fwd": 2, "bwd": 1, "l3": 1}
SWEEP_MEMORY_SHARE = 0.9
MIN_SWEEP_EDGES = 2 ** 16
# The fewest edges a level-3 validation runs on: the spec's "production-size inputs" at their
# floor, the size memory lets the largest keys sweep (a level-3 sweep halves E no further; the
# shipped tables' records hold 2^17 to 2^19). A level-3 problem of fewer edges (tilefuse.tune of a
# model on a small example) is swept at this many, and check_entry refuses a record of fewer: an
# error ratio or a range-limit run on a few hundred edges says little about a 647k-edge system.
LEVEL3_MIN_EDGES = MIN_SWEEP_EDGES
DEFAULT_FOCUS = 2
DEFAULT_LAYERS = 3


@dataclasses.dataclass(frozen=True)
class So2Problem:
    """What the dispatch knows: the stack's shape and dtype, and which key (the backward's, the
    forward's or the level-3 one)."""

    lmax: int
    focus_dim: int
    itemsize: int
    n_edges: int = DEFAULT_EDGES
    n_focus: int = DEFAULT_FOCUS
    n_layers: int = DEFAULT_LAYERS
    level3: bool = False   # the level-3 key: which variant (if any) level 3 runs, fwd + bwd
    forward: bool = False  # the forward key: the forward's tiles

    def __post_init__(self):
        if self.level3 and self.forward:
            raise ValueError("So2Problem: the level-3 key and the forward key are two keys; set one")


@functools.lru_cache(maxsize=1024)
def key_of(p: So2Problem) -> str:
    """``L{lmax}-C{focus_dim}-x{itemsize}`` (``-l3`` for the level-3 key, ``-fwd`` for the
    forward's): the kernels' registers and spills depend on these alone; edge and focus counts
    only size the grid."""
    suffix = LEVEL3_SUFFIX if p.level3 else FORWARD_SUFFIX if p.forward else ""
    return f"L{p.lmax}-C{p.focus_dim}-x{p.itemsize}" + suffix


def level3_beats_exact(problem: So2Problem) -> bool:
    """Whether the level-3 key's variant beats, by the route margin, what level 2 runs at the
    shape: the forward key's and the backward key's winners. A level-3 sweep times its variants
    against the exact heuristic relay (forward + force backward), the exact keys theirs against
    the heuristic's forward or backward, each in its own rounds; the records' speedups then give
    level 2's speedup over the level-3 baseline, ``(Bf + Bb) / (Bf / Sf + Bb / Sb)``, with each
    exact key's baseline time per edge B and speedup S (1 where the key has no entry; a missing B
    is what the level-3 baseline leaves). True where the records cannot say (a level-3 entry
    registered without ``baseline_us`` and ``speedup``). Memoised per table generation and
    device."""
    key = key_of(problem if problem.level3 else dataclasses.replace(problem, level3=True))
    return _level3_beats_exact(generation(), _device_index(), key)


@functools.lru_cache(maxsize=256)
def _level3_beats_exact(_generation: int, _device: int, key: str) -> bool:
    exact = key.removesuffix(LEVEL3_SUFFIX)
    (b3, s3), (bf, sf), (bb, sb) = (_per_edge_us_and_speedup(get_measured("so2_mixing_stack", k))
                                    for k in (key, exact + FORWARD_SUFFIX, exact))
    if b3 is None or s3 is None:
        return True
    if bf is None and bb is None:
        bf = bb = b3 / 2
    elif bf is None:
        bf = max(b3 - bb, 0.0)
    elif bb is None:
        bb = max(b3 - bf, 0.0)
    level2 = (bf + bb) / (bf / (sf or 1.0) + bb / (sb or 1.0))
    return s3 >= level2 * (1.0 + MARGINS[ROUTE])


def _per_edge_us_and_speedup(measured) -> tuple[float | None, float | None]:
    """A key's record's baseline time per edge, focus and layer (the work scales with their
    product; the record's ``sweep_problem`` gives them where the problem swept was not the
    key's own, else the defaults) and its winner's speedup; None for what it lacks."""
    if not isinstance(measured, dict):
        return None, None
    us, speedup = (v if not isinstance(v, bool) and isinstance(v, (int, float)) and v > 0 else None
                   for v in (measured.get("baseline_us"), measured.get("speedup")))
    swept = str(measured.get("sweep_problem", ""))
    size = 1
    for name, default in (("n_edges", DEFAULT_EDGES), ("n_focus", DEFAULT_FOCUS), ("n_layers", DEFAULT_LAYERS)):
        found = re.search(rf"{name}=(\d+)", swept)
        size *= int(found[1]) if found else default
    return (None if us is None else us / size), speedup


def sweep_peak_surfaces(problem: So2Problem) -> int:
    """The (F, E, ROW) surfaces a sweep of ``problem`` holds at its peak: SWEEP_PEAK_SURFACES
    (SWEEP_PEAK_SURFACES_LEVEL3 for a level-3 key), measured at DEFAULT_LAYERS layers, plus
    SWEEP_SURFACES_PER_LAYER of its pass for each layer beyond those (a model's stack swept by
    ``tilefuse.tune(model)``). Fewer layers keep the measured count."""
    which = "l3" if problem.level3 else "fwd" if problem.forward else "bwd"
    base = SWEEP_PEAK_SURFACES_LEVEL3 if problem.level3 else SWEEP_PEAK_SURFACES
    return base + SWEEP_SURFACES_PER_LAYER[which] * max(0, problem.n_layers - DEFAULT_LAYERS)


@dataclasses.dataclass(frozen=True)
class So2Inputs:
    """One input set. Exact keys time the backward on a saved forward (x_local, z_all,
    u_final); level-3 keys run forward and backward from u0, forward keys the forward (the
    saved forward is None)."""

    grad_out: torch.Tensor
    x_local: torch.Tensor | None
    z_all: torch.Tensor | None
    u_final: torch.Tensor | None
    alpha: torch.Tensor
    w0_all: torch.Tensor
    w1_all: torch.Tensor
    gw_all: torch.Tensor
    u0: torch.Tensor | None = None
    # the float64 reference of a level-3 validation, computed once per input set
    reference: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)


def _reference64(problem: "So2Problem", i: So2Inputs) -> dict[str, torch.Tensor]:
    """x_local, grad_u0, grad_alpha and the weight gradients dw0, dw1, dgw of the float64
    reference (the spec's forward and explicit backward) on ``i``, REFERENCE_CHUNK edges at a
    time (the weight gradients summed over the chunks); cached on ``i``."""
    if i.reference:
        return i.reference
    d = So2Dims(problem.lmax, problem.focus_dim)
    w0, w1, gw = (w.double() for w in (i.w0_all, i.w1_all, i.gw_all))
    parts = {"x_local": [], "grad_u0": [], "grad_alpha": []}
    dws = None
    for e0 in range(0, i.u0.shape[1], REFERENCE_CHUNK):
        sl = slice(e0, e0 + REFERENCE_CHUNK)
        alpha = i.alpha[sl].double()
        x_local, z_all, u_final = so2_stack_forward_saving(i.u0[:, sl].double(), alpha, w0, w1, gw, lmax=d.lmax,
                                                           focus_dim=d.focus_dim, apply_alpha=True)
        grad_u0, grad_alpha, chunk_dws = so2_stack_backward_reference(
            i.grad_out[sl].double(), x_local, z_all, u_final, alpha, w0, w1, gw, lmax=d.lmax,
            focus_dim=d.focus_dim, weight_grads=True)
        dws = list(chunk_dws) if dws is None else [a + b for a, b in zip(dws, chunk_dws)]
        for name, t in (("x_local", x_local), ("grad_u0", grad_u0), ("grad_alpha", grad_alpha)):
            parts[name].append(t)
    i.reference.update(x_local=torch.cat(parts["x_local"], 0), grad_u0=torch.cat(parts["grad_u0"], 1),
                       grad_alpha=torch.cat(parts["grad_alpha"], 0), **dict(zip(WEIGHT_GRADS, dws)))
    return i.reference


def compose_tolerance(problem: "So2Problem") -> float:
    """Normwise relative difference allowed between the composition route and the relay on the
    same inputs. Both are float32 GEMM chains over the same products in other summation orders:
    two orders of a K-term sum differ by ~sqrt(K) eps32 normwise, per layer GEMM, NL of them, so
    4 NL sqrt(K) eps32 with K the longest contraction (M1, or M0 at lmax 1); 16-bit inputs also
    round each layer's output to their dtype, where the two orders can land on either side of a
    rounding boundary: up to one ulp per element and layer, 2 NL eps_x normwise."""
    d = So2Dims(problem.lmax, problem.focus_dim)
    eps32 = torch.finfo(torch.float32).eps
    tol = 4 * problem.n_layers * math.sqrt(max(d.m0, d.m1)) * eps32
    if problem.itemsize != 4:
        tol += 2 * problem.n_layers * torch.finfo(_SWEEP_DTYPE[problem.itemsize]).eps
    return tol


def compose_mismatches(problem: "So2Problem", got: dict, want: dict) -> list[str]:
    """The composition route against the relay (``compose_tolerance``), one message per output:
    the backward's gradients, or a forward key's x_local, z and u_final."""
    tol, out = compose_tolerance(problem), []
    for name in (("x_local", "z_all", "u_final") if problem.forward else ("grad_u0", "grad_alpha")):
        err = normwise_rel_error(got[name], want[name])
        if not err <= tol:
            out.append(f"{name}: normwise difference from the relay {err:.2e} > {tol:.2e} (the composition's "
                       f"fp32 tolerance)")
    return out


def _scaled(i: So2Inputs, grad_scale: float = 1.0, u_scale: float = 1.0) -> So2Inputs:
    """``i`` with grad_out and u0 multiplied by powers of two (exact), no reference."""
    return dataclasses.replace(i, grad_out=i.grad_out * grad_scale, u0=i.u0 * u_scale, reference={})


RANGE_SETS = ("grad_out near the largest float32", "u0 large", "grad_out near the smallest normal")
# On a range set the variant's error is held to LEVEL3_ERROR_RATIO of the exact path's where
# that error is at most this (the exact path at float32's accuracy there; elsewhere only
# finiteness is checked).
RANGE_EXACT_CEILING = 1e-5


def _error_entry(what: str, err: float, exact: float, messages: list[str]) -> dict:
    """A validation record's entry for one output (its error against float64, the exact path's,
    their ratio, rounded as recorded); a message naming ``what`` appended to ``messages``
    where the ratio passes LEVEL3_ERROR_RATIO (NaN does)."""
    ratio = err / exact if exact > 0 else (1.0 if err == 0 else math.inf)
    if not ratio <= LEVEL3_ERROR_RATIO:
        messages.append(f"{what}: normwise error vs float64 {err:.3e} is {ratio:.2f}x the exact path's "
                        f"{exact:.3e} (limit {LEVEL3_ERROR_RATIO}x)")
    return {"error": float(f"{err:.4g}"), "exact_error": float(f"{exact:.4g}"), "ratio": round(ratio, 3)}


def _range_sets(i: So2Inputs) -> dict[str, So2Inputs]:
    """The range-limit input sets of a level-3 validation (module docstring): grad_out with its
    largest element at 2**125 (float32's largest binade is 2**127), u0 with its largest at
    2**100, and grad_out with its median magnitude at 2**-120 (float32's smallest normal is
    2**-126, so the tf32x3 tails are subnormal)."""
    g_max = float(i.grad_out.abs().max())
    g_med = float(i.grad_out.abs().median())
    u_max = float(i.u0.abs().max())
    pow2 = lambda target, have: 2.0 ** (target - math.ceil(math.log2(have)))   # noqa: E731
    scales = ({"grad_scale": pow2(125, g_max)}, {"u_scale": pow2(100, u_max)}, {"grad_scale": pow2(-120, g_med)})
    return {name: _scaled(i, **scale) for name, scale in zip(RANGE_SETS, scales)}


# The outputs a validation record's errors must hold: the timed forward + force backward's always,
# the training backward's where the record says it validated them ("weight_grads": true; without
# it op.level3_trains runs the exact path for training).
LEVEL3_OUTPUTS = ("x_local", "grad_u0", "grad_alpha")
# A record's errors are rounded to 4 significant digits (validate), so error / exact_error from
# the record may exceed the ratio measured before rounding by up to about this fraction.
_RECORD_ROUNDING = 1e-3


def _real(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v >= 0


def validation_problems(key: str, config: So2Config, validation: dict) -> list[str]:
    """Why ``validation`` (an entry's ``measured["validation"]``) does not validate ``config``
    at ``key`` under the running code; empty where it does. The record must name that key and
    that config (``validate`` writes both), hold every output's error, the exact path's and
    their ratio with the ratio (as recorded, and as its errors give it) within
    LEVEL3_ERROR_RATIO, the training backward's outputs too where it says ``weight_grads``,
    every range-limit set of RANGE_SETS, and at least LEVEL3_MIN_EDGES edges."""
    out = []
    if validation.get("key") != key:
        out.append(f"it names the key {validation.get('key')!r}, not {key!r}")
    if validation.get("config") != config.name:
        out.append(f"it names the config {validation.get('config')!r}, not {config.name!r}")
    edges = validation.get("edges")
    if isinstance(edges, bool) or not isinstance(edges, int) or edges < LEVEL3_MIN_EDGES:
        out.append(f"its edges {edges!r} are not a production size (at least {LEVEL3_MIN_EDGES})")
    range_sets = validation.get("range_sets")
    if not (isinstance(range_sets, list) and all(isinstance(r, str) for r in range_sets)
            and sorted(range_sets) == sorted(RANGE_SETS)):
        out.append(f"its range_sets {range_sets!r} are not the validation's {sorted(RANGE_SETS)}")
    errors = validation.get("errors")
    errors = errors if isinstance(errors, dict) else {}
    outputs = LEVEL3_OUTPUTS + (WEIGHT_GRADS if validation.get("weight_grads") is True else ())
    for name in outputs:
        e = errors.get(name)
        numbers = e if isinstance(e, dict) else {}
        err, exact, ratio = (numbers.get(k) for k in ("error", "exact_error", "ratio"))
        if not all(map(_real, (err, exact, ratio))):
            out.append(f"{name}: no error, exact_error and ratio recorded (got {e!r})")
        elif not (ratio <= LEVEL3_ERROR_RATIO
                  and (err <= LEVEL3_ERROR_RATIO * exact * (1 + _RECORD_ROUNDING) if exact > 0 else err == 0)):
            out.append(f"{name}: error {err:.3e} against the exact path's {exact:.3e} (ratio {ratio}) is over "
                       f"the limit {LEVEL3_ERROR_RATIO}x")
    return out


def _wgmma_runs_here() -> bool:
    """Whether a wgmma config's layer GEMMs run in Gluon where sweeps run (the current CUDA
    device; the CPU never): there its sweep must see them launch. Elsewhere the config runs
    so2_gemm_kernel, the same bits, and is timed as that."""
    from .. import gluon_hopper   # imports Triton: only where a sweep asks
    return gluon_hopper.available_here()


class So2Family(TuningFamily):
    name = "so2_mixing_stack"
    config_class = So2Config
    # What a measurement depends on (the cache file's fingerprint, store.kernel_source_hash):
    # the kernels and their launch, the composition route, the candidates, tolerances and
    # level-3 validation, and the reference it validates against.
    source_files = (_HERE / "kernels.py", _HERE / "wgmma_kernels.py", _HERE / "configs.py", _HERE / "launch.py",
                    _HERE / "compose.py", _HERE / "tune.py", _HERE / "reference.py", _HERE / "op.py",
                    _HERE.parent / "triton_common.py", _HERE.parent / "gluon_hopper.py")

    def key(self, problem: So2Problem) -> str:
        return key_of(problem)

    def problem_for_key(self, key: str) -> So2Problem:
        m = _KEY.fullmatch(key) if isinstance(key, str) else None
        if (m is None or int(m[1]) < 1 or int(m[2]) < 1 or int(m[3]) not in _SWEEP_DTYPE
                or (m[4] == LEVEL3_SUFFIX and int(m[3]) != 4)):
            raise ValueError(f"not a so2_mixing_stack key: {key!r} (expected e.g. 'L3-C32-x4', "
                             f"'L3-C32-x4-fwd' for the forward's tiles, or 'L3-C32-x4-l3' for the fp32 "
                             f"level-3 key)")
        return So2Problem(int(m[1]), int(m[2]), int(m[3]), level3=m[4] == LEVEL3_SUFFIX,
                          forward=m[4] == FORWARD_SUFFIX)

    def is_valid(self, key: str, config) -> bool:
        problem = self.problem_for_key(key)
        return config == self.baseline(problem) or config in self.candidates(problem)

    def baseline(self, problem: So2Problem) -> So2Config:
        return configs.heuristic(problem.lmax, problem.focus_dim)

    def candidates(self, problem: So2Problem) -> list[So2Config]:
        if problem.level3:
            return level3_candidates(problem.lmax, problem.focus_dim)
        if problem.forward:
            composed = compose_candidates(problem.lmax, problem.focus_dim) if problem.itemsize == 4 else []
            return relay_candidates(problem.lmax, problem.focus_dim) + composed
        out = relay_candidates(problem.lmax, problem.focus_dim) + compose_candidates(problem.lmax, problem.focus_dim)
        if fused_supported(problem.focus_dim, problem.itemsize == 4):
            out += fused_candidates(problem.lmax, problem.focus_dim)
        return out

    def change(self, config: So2Config) -> str:
        return ROUTE if config.route != "relay" or config.precision != EXACT else TILE

    def route_rank(self, config: So2Config) -> int:
        """The spec's ladder: relay tilings 0, the composition (cuBLAS GEMMs around the relay's
        pointwise kernels) 1, the fused kernel 2. A fused config wins only by the route margin
        over the best relay tiling and the best composition timed, the composition only over
        the best relay tiling. On a level-3 key the relay splits (any precision, their GEMMs in
        Triton or Gluon) rank 0 and the fused 3xfp16 route 2: fusion must beat the best split
        relay by the margin; each variant's own comparison with the exact path is the route
        margin over the baseline here and ``level3_beats_exact`` at dispatch."""
        return 2 if config.fused else 1 if config.compose else 0

    def complexity(self, config: So2Config) -> tuple:
        return (config.fused, config.compose, config.sigma_pass, config.wgmma, config.num_warps, config.num_stages,
                config.block_m * config.block_n)

    def check_entry(self, key: str, config, measured) -> None:
        """A level-3 entry choosing a reduced-precision config must carry the passed validation
        of that config at that key (``validate``), and its numbers must hold under the running
        code: ``validation_problems``. One registered, or edited or copied without it, is refused
        (the record's numbers are checked, not authenticated: module docstring)."""
        if config.precision == EXACT:
            return
        validation = measured.get("validation") if isinstance(measured, dict) else None
        if not (isinstance(validation, dict) and validation.get("passed") is True):
            raise ValueError(f"{config.name} is a reduced-precision variant: its entry needs "
                             f"measured['validation'] with 'passed': true (a level-3 sweep records it)")
        problems = validation_problems(key, config, validation)
        if problems:
            raise ValueError(f"{config.name} at {key}: its validation record does not validate it: "
                             + "; ".join(problems))

    def make_inputs(self, problem: So2Problem, device, seed: int) -> So2Inputs:
        gen = torch.Generator(device=device).manual_seed(seed)
        d = So2Dims(problem.lmax, problem.focus_dim)
        dtype = _SWEEP_DTYPE[problem.itemsize]
        F, E, NL = problem.n_focus, problem.n_edges, problem.n_layers

        def randn(*size, scale=1.0):
            return (torch.randn(size, generator=gen, device=device) * scale).to(dtype)

        u0 = randn(F, E, d.row, scale=0.5)
        alpha = (0.2 + torch.rand((E, F), generator=gen, device=device)).to(dtype)
        w0 = randn(NL, F, d.m0, d.m0, scale=d.m0 ** -0.5)
        w1 = randn(NL, F, d.m1, d.m1, scale=d.m1 ** -0.5)
        gw = randn(NL - 1, F, d.focus_dim, d.lg, scale=d.focus_dim ** -0.5)
        grad_out = randn(E, F, d.row)
        if problem.level3 or problem.forward:
            return So2Inputs(grad_out, None, None, None, alpha, w0, w1, gw, u0=u0)
        x_local, z_all, u_final = launch.forward(u0, alpha, w0, w1, gw, d, True)
        return So2Inputs(grad_out, x_local, z_all, u_final, alpha, w0, w1, gw)

    def input_bytes(self, problem: So2Problem) -> int:
        d = So2Dims(problem.lmax, problem.focus_dim)
        # grad_out, x_local, z per gated layer (level 3: grad_out, u0; forward: u0, x_local, z)
        surfaces = 2 if problem.level3 else 2 + (problem.n_layers - 1)
        return surfaces * problem.n_edges * problem.n_focus * d.row * problem.itemsize

    def sweep_problem(self, problem: So2Problem, device) -> So2Problem:
        """``problem`` with E halved while ``sweep_peak_surfaces(problem)`` surfaces of it
        would take more than SWEEP_MEMORY_SHARE of a CUDA device's memory (not below
        MIN_SWEEP_EDGES). A level-3 key's E is first raised to LEVEL3_MIN_EDGES, on every
        device, and not halved below it: its validation runs at production size or not at all
        (check_entry refuses a smaller record). Other problems that fit, and other devices'
        exact keys, unchanged."""
        floor = LEVEL3_MIN_EDGES if problem.level3 else MIN_SWEEP_EDGES
        edges = max(problem.n_edges, floor) if problem.level3 else problem.n_edges
        device = torch.device(device)
        if device.type == "cuda":
            budget = SWEEP_MEMORY_SHARE * torch.cuda.get_device_properties(device).total_memory
            surface = problem.n_focus * So2Dims(problem.lmax, problem.focus_dim).row * problem.itemsize
            peak = sweep_peak_surfaces(problem)
            while edges > floor and peak * surface * edges > budget:
                edges = max(floor, edges // 2)
        return problem if edges == problem.n_edges else dataclasses.replace(problem, n_edges=edges)

    def check_problem(self, problem: So2Problem) -> So2Problem:
        """One edge more where the edge count is even (a sweep's power of two): E is not part
        of the key, and an odd E leaves a partial last row block for every tile."""
        if problem.n_edges % 2 == 0:
            return dataclasses.replace(problem, n_edges=problem.n_edges + 1)
        return problem

    def run(self, problem: So2Problem, choice: So2Config, inputs: So2Inputs) -> dict:
        i, d = inputs, So2Dims(problem.lmax, problem.focus_dim)
        if problem.forward or problem.level3:     # the forward runs from u0 with the choice's tiles
            x_local, z_all, u_final = launch.forward(i.u0, i.alpha, i.w0_all, i.w1_all, i.gw_all, d, True,
                                                     config=choice)
            if problem.forward:
                return {"x_local": x_local, "z_all": z_all, "u_final": u_final}
        else:
            x_local, z_all, u_final = i.x_local, i.z_all, i.u_final
        grad_u0, grad_alpha, _ = launch.backward(
            i.grad_out, x_local, z_all, u_final, i.alpha, i.w0_all, i.w1_all, i.gw_all, d, True, False,
            config=choice)
        out = {"grad_u0": grad_u0, "grad_alpha": grad_alpha}
        return {"x_local": x_local, **out} if problem.level3 else out

    def run_training(self, problem: So2Problem, choice: So2Config, inputs: So2Inputs) -> dict:
        """A level-3 key's training backward with ``choice`` (dw0, dw1, dgw): the forward from u0,
        then the backward with weight gradients, on the relay form of a fused choice (what
        op.backward_config runs when weight gradients are wanted). For the validation only."""
        i, d = inputs, So2Dims(problem.lmax, problem.focus_dim)
        x_local, z_all, u_final = launch.forward(i.u0, i.alpha, i.w0_all, i.w1_all, i.gw_all, d, True, config=choice)
        _, _, dws = launch.backward(i.grad_out, x_local, z_all, u_final, i.alpha, i.w0_all, i.w1_all, i.gw_all, d,
                                    True, True, config=choice.relay() if choice.fused else choice)
        return dict(zip(WEIGHT_GRADS, dws))

    def expected_launches(self, problem: So2Problem, choice: So2Config) -> tuple[str, ...]:
        if problem.forward:
            return ("so2_fwd_layer", "so2_fwd_final") + (("so2_fwd_compose_gemm",) if choice.compose else ())
        bwd = (f"so2_bwd_{choice.route}_layer",) + (("so2_bwd_compose_gemm",) if choice.compose else ())
        if choice.wgmma and _wgmma_runs_here():   # its layer GEMMs in Gluon, proven; elsewhere so2_gemm_kernel
            bwd += ("so2_gemm3x_wgmma",)
        return ("so2_fwd_layer", *bwd) if problem.level3 else bwd

    def compare(self, problem: So2Problem, inputs: So2Inputs, got: dict, want: dict) -> list[str]:
        """Bitwise: the fused kernel's contract is equality with the relay in fp32; a forward
        key's tiles must keep the forward's every output (module docstring). (Level-3 keys are
        validated against float64 instead: ``validate``.)"""
        out = []
        names = ("x_local", "z_all", "u_final") if problem.forward else ("grad_u0", "grad_alpha")
        why = ("the forward's tiles keep its K order" if problem.forward
               else "the fused contract is bitwise")
        for name in names:
            if not torch.equal(got[name], want[name]):
                diff = (got[name].double() - want[name].double()).abs()
                out.append(f"{name}: {int((diff != 0).sum())} of {diff.numel()} elements differ from the "
                           f"baseline (max |diff| {diff.max().item():.3g}); {why}")
        return out

    def validate(self, problem: So2Problem, choice, inputs: So2Inputs, got: dict, want: dict):
        """Exact keys: ``compare``. Level-3 keys: the accuracy validation of the module
        docstring; the record holds each output's error and the exact path's, their ratio, and
        the range-limit sets checked."""
        if not problem.level3:
            if choice.compose:
                return compose_mismatches(problem, got, want), None
            return self.compare(problem, inputs, got, want), None
        ref = _reference64(problem, inputs)
        messages, errors = [], {}
        baseline = self.baseline(problem)
        got = {**got, **self.run_training(problem, choice, inputs)}
        want = {**want, **self.run_training(problem, baseline, inputs)}
        for name in (*LEVEL3_OUTPUTS, *WEIGHT_GRADS):
            err, exact = normwise_rel_error(got[name], ref[name]), normwise_rel_error(want[name], ref[name])
            errors[name] = _error_entry(name, err, exact, messages)
        range_errors = {}
        for what, scaled in _range_sets(inputs).items():
            exact_out = {**self.run(problem, baseline, scaled), **self.run_training(problem, baseline, scaled)}
            variant_out = {**self.run(problem, choice, scaled), **self.run_training(problem, choice, scaled)}
            ref, range_errors[what] = _reference64(problem, scaled), {}
            for name, t in variant_out.items():
                bad = torch.isfinite(exact_out[name]) & ~torch.isfinite(t)
                if bool(bad.any()):
                    messages.append(f"{name} on {what}: {int(bad.sum())} elements not finite where the exact "
                                    f"path's are")
                    continue
                # Accuracy too, where the exact path keeps float32's (its error at most
                # RANGE_EXACT_CEILING): a split whose tails fall into float32's subnormals loses bits
                # there that the Gaussian set does not show.
                err, exact = normwise_rel_error(t, ref[name]), normwise_rel_error(exact_out[name], ref[name])
                if exact <= RANGE_EXACT_CEILING:
                    range_errors[what][name] = _error_entry(f"{name} on {what}", err, exact, messages)
        record = {"passed": not messages, "key": key_of(problem), "config": choice.name,
                  "edges": int(inputs.grad_out.shape[0]), "limit_ratio": LEVEL3_ERROR_RATIO, "errors": errors,
                  "range_sets": sorted(RANGE_SETS), "range_errors": range_errors, "weight_grads": True}
        return messages, record

    def default_problems(self) -> list[So2Problem]:
        """Each default shape's exact key, then its forward key, then its level-3 key."""
        return [So2Problem(lmax, cf, 4, level3=which == "l3", forward=which == "fwd")
                for which in ("bwd", "fwd", "l3") for lmax, cf in DEFAULT_SHAPES]

    def problems_from_cli(self, shape: str, dtype: str | None, pass_: str | None) -> list[So2Problem]:
        m = re.fullmatch(r"(\d+)x(\d+)(?:x(\d+))?(?:x(\d+))?", shape or "")
        if m is None or int(m[1]) < 1 or int(m[2]) < 1:
            raise ValueError("so2_mixing_stack: --shape is LMAXxFOCUS_DIM[xEDGES[xFOCUS]], e.g. 3x32x647000x2; "
                             f"got {shape!r}")
        itemsize = cli_itemsize("so2_mixing_stack", dtype or "fp32")
        if pass_ not in (None, "bwd", "fwd", "level3"):
            raise ValueError("so2_mixing_stack: --pass is bwd (the exact key: the backward route), fwd (the "
                             "forward's tiles) or level3 (the fp32 level-3 key: forward + backward, "
                             "reduced-precision variants)")
        if pass_ == "level3" and itemsize != 4:
            raise ValueError("so2_mixing_stack: the level-3 key is fp32 only (--dtype fp32)")
        edges = int(m[3]) if m[3] else DEFAULT_EDGES
        focus = int(m[4]) if m[4] else DEFAULT_FOCUS
        if edges < 1 or focus < 1:
            raise ValueError(f"so2_mixing_stack: --shape {shape!r} has no edges or no focus streams (EDGES and "
                             f"FOCUS are at least 1)")
        passes = ("bwd", "fwd") if pass_ is None else (pass_,)   # default: the exact keys of both passes
        return [So2Problem(int(m[1]), int(m[2]), itemsize, edges, focus, level3=which == "level3",
                           forward=which == "fwd") for which in passes]


FAMILY = So2Family()
