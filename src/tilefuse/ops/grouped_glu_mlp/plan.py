"""grouped_glu_mlp call plans: what a call decides from its arguments' metadata, decided once
per metadata (as ops/dyt/plan.py does for DyT).

A call's checks (validate.validate), its route (op.route: the policy level and the tuning
table), the layouts its kernels read (compose.lay_out) and, on the compose route, its forward's
and backward's launches (compose.ForwardPlan, and per dy layout compose.BackwardPlan) depend
only on the arguments' types, shapes, strides, dtypes and devices, on activation,
glu_interleave and recipe, on the level, the tuning table and the current CUDA device (on the
CPU: whether Triton's interpreter runs kernels), and on x, w1 and w2 being 16-byte aligned
(checked per call). A ``Plan`` holds them: building one runs the checks (validate's, and the
refusal of wrapper subclasses: refuse_wrapped), so a cached plan is a passed check. Per call
what remains is the key (a tuple of that metadata), the alignment, the allocations and the
launches (the per-call Python of the checks, layouts, route and descriptors measured on the
H200 host: benchmarks/results/2026-12-03-h200-ac runs 3-6; the backward's,
2026-12-04-h200-ad runs 1-2: a forward + backward 0.80-0.97x a bare composition's host time,
1.14-1.35x without the backward plan).

Plans run the compose route only (the table's route for 16-bit inputs wherever
``torch._grouped_mm`` takes them), with the tensors as they are (``lay_out`` copying nothing),
T > 0 and the offsets kernel's expert bound; every other call takes api's unplanned path, and
so does every call under torch.compile. ``ENABLED`` False sends every call there (tests
compare the two).

The cache is a dict of at most MAX_PLANS plans; when full the oldest goes first. The key holds
the level and the tuning table's generation (tuning.table.generation), so a plan is only found
under the level and table it was built for, as dyt's.
"""

from __future__ import annotations

from ... import policy
from ...device import plan_cuda_device
from ...tuning import table
from ..plan_cache import PlanCache
from . import compose
from .configs import GemmConfig
from .op import COMPOSE, ComposeFunction, needs_grad, route
from .validate import validate

ENABLED = True
MAX_PLANS = 64

_plans = PlanCache(lambda: MAX_PLANS)


def _meta(t):
    # the layout: a sparse or mkldnn tensor never shares a dense tensor's plan (validate names it)
    return None if t is None else (t.__class__, t.layout, t.shape, t.stride(), t.dtype, t.device)


def _aux(x):
    """What besides metadata decides a plan (dyt's rule): the current CUDA device
    (device.plan_cuda_device), or on the CPU whether the interpreter runs kernels."""
    if x.is_cuda:
        return plan_cuda_device(x)
    return "interpreter" if policy.interpreter_enabled() else "no interpreter"


class Plan:
    """The decisions for one key: ``forward`` a compose.ForwardPlan (the compose route's
    forward and backward with their launches fixed) and ``tile`` its Gluon tiles, or
    ``forward`` None (api's path)."""

    __slots__ = ("forward", "tile", "activation", "interleave")

    def __init__(self, forward, tile, activation, interleave):
        self.forward, self.tile, self.activation, self.interleave = forward, tile, activation, interleave

    def apply(self, x, counts, probs, w1, w2, b1, b2):
        """y for tensors of this plan's metadata, or None where x, w1 or w2 is not 16-byte
        aligned (``lay_out`` would copy it: api's path runs)."""
        if (x.data_ptr() | w1.data_ptr() | w2.data_ptr()) & 15:
            return None
        if needs_grad(x, probs, w1, w2, b1, b2):
            return ComposeFunction.apply(x, counts, probs, w1, w2, b1, b2, self.activation, self.interleave,
                                         *self.tile, self.forward)
        return self.forward.run(x, counts, probs, w1, w2, b1, b2)[0]


_ARG_NAMES = ("x", "tokens_per_expert", "probs", "fc1_weight", "fc2_weight", "fc1_bias", "fc2_bias")


def refuse_wrapped(x, counts, probs, w1, w2, b1, b2) -> None:
    """TypeError naming a wrapper subclass (DTensor, ...: policy.wraps_tensors) among the
    arguments; a type lookup each for plain tensors. Such a tensor owns no memory the kernels
    can read, and level 0's paths do not run on DTensors either (torch 2.13): its
    torch._grouped_mm rule takes bfloat16 only and no plain tensor (the offsets from plain
    counts), torch._assert_async (the counts' check) has no rule, and a recipe's reference
    reads the counts with .tolist(), which DTensor refuses. Called after validate, whose
    errors come first (a nested tensor, also a wrapper subclass, is named there as not dense):
    by _build, so a cached plan is a passed refusal too, and by api's unplanned path."""
    policy.refuse_wrapped("grouped_glu_mlp", "the kernels read memory it does not own, and DTensor has no rules "
                                             "for the reference's grouped GEMMs and count checks",
                          _ARG_NAMES, (x, counts, probs, w1, w2, b1, b2))


def _build(x, counts, probs, w1, w2, b1, b2, activation, glu_interleave, recipe, level=None) -> Plan:
    from .api import problem_for   # api imports this module
    validate(x, counts, probs, w1, w2, activation=activation, glu_interleave=glu_interleave, fc1_bias=b1,
             fc2_bias=b2, recipe=recipe)
    refuse_wrapped(x, counts, probs, w1, w2, b1, b2)
    path = None if x.device.type == "meta" else route(
        problem_for(x, w2, activation, glu_interleave, b1 is not None or b2 is not None, recipe), x.device, level)
    compose_path = recipe is None and (path == COMPOSE or (isinstance(path, GemmConfig) and path.compose))
    if not compose_path:
        return Plan(None, None, activation, glu_interleave)
    tile = compose.gluon_tiles(path)
    laid = compose.lay_out(x, counts, probs, w1, w2, b1, b2)
    if not (all(a is b for a, b in zip(laid, (x, counts, probs, w1, w2, b1, b2)))
            and compose.ForwardPlan.applies(x, counts)):
        return Plan(None, None, activation, glu_interleave)
    return Plan(compose.ForwardPlan(x, counts, probs, w1, w2, b1, b2, activation, glu_interleave, *tile[2:]),
                tile, activation, glu_interleave)


def lookup(x, counts, probs, w1, w2, b1, b2, activation, glu_interleave, recipe) -> Plan:
    """The plan for these arguments (built, checked and cached on first sight). Raises what
    validate raises for bad arguments."""
    try:
        # the Python values with their types: True, 1.0 or numpy's 1 equal 1 but are refused by
        # validate, which a plan cached for 1 would skip
        level = policy.get_level()   # read once: the key's level is the one the plan is built for
        key = (_meta(x), _meta(counts), _meta(probs), _meta(w1), _meta(w2), _meta(b1), _meta(b2), activation,
               activation.__class__, glu_interleave, glu_interleave.__class__, recipe, recipe.__class__,
               level, table.generation(), _aux(x))
        plan = _plans.get(key)
    except Exception:   # noqa: BLE001  not describable by a key (unhashable arguments, ...): checked below
        key = plan = level = None
    if plan is not None and not table.collecting_any():
        return plan
    plan = _build(x, counts, probs, w1, w2, b1, b2, activation, glu_interleave, recipe, level)
    # A plan built on an x, w1 or w2 off 16 bytes has no forward (lay_out copies such a tensor):
    # the key does not hold the addresses, so it is not cached, or aligned calls of the same
    # metadata would keep taking the unplanned path (Plan.apply checks alignment per call).
    if key is not None and not (x.data_ptr() | w1.data_ptr() | w2.data_ptr()) & 15:
        _plans.store(key, plan)
    return plan


cache_size = _plans.__len__   # plans held
clear = _plans.clear          # drop every plan (tests; nothing needs it for correctness)
