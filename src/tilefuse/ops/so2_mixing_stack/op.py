"""Autograd wiring of so2_mixing_stack: Triton forward, Triton backward (relay or fused).

Double backward (``create_graph=True``, force-loss training) goes through the differentiable
reference: the backward recomputes the forward with autograd and differentiates it, so second
derivatives are exact; no kernel runs there. The reference's forward and backward formulas
(where kernels cannot run) and that recomputation run in IEEE precision with autocast off
(utils.ieee_matmul), as the kernels compute; the second-order backward autograd then runs
at the precision in force where it is called.
"""

from __future__ import annotations

import functools

import torch

from ... import policy
from ...device import custom_op_on_tensor_device
from ...tuning import lookup_config
from ...tuning.table import get_measured
from ...utils import ieee_matmul, next_power_of_2, readable
from ..autograd_common import create_graph_grads, is_batched
from . import configs, launch, tune
from .reference import So2Dims, so2_stack_backward_reference, so2_stack_forward_saving, so2_stack_reference
from .tune import So2Problem


def level3_config(d: So2Dims, dtype: torch.dtype, n_edges: int, n_focus: int, n_layers: int
                  ) -> configs.So2Config | None:
    """At level 3, fp32: the level-3 key's winner (a split-precision config, relay or fused,
    whose entry records its passed accuracy validation; tune.py), which then runs the forward
    and the backward, where its speedup beats level 2's exact choices by the route margin
    (tune.level3_beats_exact).
    None otherwise (below level 3, another dtype, the key never swept, the exact path won, or
    the variant is not faster than level 2 by the margin): the exact configs run, the forward
    and backward keys' winners. An exact winner (the heuristic relay, the sweep's baseline,
    registered or edited in as a config) says what "baseline" says, that the exact path won,
    and runs those winners too, as an exact key's baseline-equal entry runs what no entry
    would."""
    if policy.get_level() < 3 or dtype != torch.float32:
        return None
    return _level3_choice(d, n_edges, n_focus, n_layers)[0]


def _level3_problem(d: So2Dims, n_edges: int, n_focus: int, n_layers: int) -> So2Problem:
    return So2Problem(d.lmax, d.focus_dim, 4, next_power_of_2(n_edges), n_focus, n_layers, level3=True)


def _level3_choice(d: So2Dims, n_edges: int, n_focus: int, n_layers: int) -> tuple[configs.So2Config | None, str]:
    """(the level-3 key's variant, its name), or (None, why the exact path runs instead)."""
    problem = _level3_problem(d, n_edges, n_focus, n_layers)
    variant = lookup_config("so2_mixing_stack", problem)
    if variant is None:
        return None, "no validated level-3 entry for the key"
    if variant.precision == configs.EXACT:
        return None, "the exact path won the key's level-3 sweep"
    if not tune.level3_beats_exact(problem):
        return None, f"the validated variant {variant.name} does not beat level 2 by the route margin"
    return variant, variant.name


def level3_trains(d: So2Dims, n_edges: int, n_focus: int, n_layers: int) -> bool:
    """Whether the level-3 key's entry validated its variant on the training backward too (its
    record's ``"weight_grads": true``, tune.So2Family.validate); entries validated before the
    weight gradients were run the variant for the forward and the force backward only."""
    measured = get_measured("so2_mixing_stack", _level3_problem(d, n_edges, n_focus, n_layers))
    validation = measured.get("validation") if isinstance(measured, dict) else None
    return isinstance(validation, dict) and validation.get("weight_grads") is True


def level3_summary(d: So2Dims, n_edges: int, n_focus: int, n_layers: int, training: bool = False) -> str:
    """What a level-3 fp32 call runs at this key, in words (tilefuse check's rows): the
    variant's name, or why the exact path runs (level3_config's None has several reasons);
    with ``training``, whether the variant also runs the training backward (level3_trains)."""
    variant, name = _level3_choice(d, n_edges, n_focus, n_layers)
    if variant is None:
        return f"exact: {name}"
    if training and not level3_trains(d, n_edges, n_focus, n_layers):
        return f"{variant.name} forward; the training backward exact (its record does not cover the weight gradients)"
    return variant.name


def forward_config(d: So2Dims, dtype: torch.dtype, n_edges: int, n_focus: int, n_layers: int
                   ) -> configs.So2Config | None:
    """The forward's tiles (and precision). At level 3 the level-3 key's winner when it has one
    (``level3_config``); else at level >= 2 the forward key's winner (tune.py: relay tilings
    whose forward is bitwise the heuristic's, or for float32 the composition route); else None:
    launch.forward's heuristic tiles."""
    if policy.get_level() < 2:
        return None
    variant = level3_config(d, dtype, n_edges, n_focus, n_layers)
    if variant is not None:
        return variant
    return lookup_config("so2_mixing_stack", So2Problem(d.lmax, d.focus_dim, dtype.itemsize,
                                                        next_power_of_2(n_edges), n_focus, n_layers, forward=True))


def backward_config(d: So2Dims, dtype: torch.dtype, n_edges: int, n_focus: int, n_layers: int,
                    weight_grads: bool) -> configs.So2Config:
    """The backward route and tiles. At level 3 the level-3 key's winner when it has one
    (``level3_config``; a fused winner where the fused guards fail: its relay, So2Config.relay),
    with weight gradients only where its validation covered them (``level3_trains``; else the
    exact choice below).
    At level >= 2 the tuning table's winner for (lmax, focus_dim, dtype)
    on this GPU: relay tiles apply everywhere; a fused winner only when every guard holds
    (fp32, focus_dim a power of two in [16, 64], no weight gradients: they need gz/gq in
    memory), else the heuristic relay. Double backward never gets here (see
    So2StackFunction.backward). No entry, or level < 2: the heuristic relay."""
    relay = configs.heuristic(d.lmax, d.focus_dim)
    if policy.get_level() < 2:
        return relay
    variant = level3_config(d, dtype, n_edges, n_focus, n_layers)
    if variant is not None and weight_grads and not level3_trains(d, n_edges, n_focus, n_layers):
        variant = None
    if variant is not None:
        # A fused variant where the fused guards fail (weight gradients): the relay with its
        # tiles and precision, bitwise the fused route's result (the fused kernel's contract),
        # so the arithmetic the validation measured.
        if variant.fused and not configs.fused_applies(variant, d.focus_dim, dtype == torch.float32, weight_grads):
            return variant.relay()
        return variant
    # The edge count varies per call: bucketed (the key ignores it; the problem sizes a sweep's
    # inputs), so the lookup memo holds one entry per power of two, not one per edge count.
    tuned = lookup_config("so2_mixing_stack",
                          So2Problem(d.lmax, d.focus_dim, dtype.itemsize, next_power_of_2(n_edges), n_focus, n_layers))
    if tuned is None:
        return relay
    if tuned.fused and not configs.fused_applies(tuned, d.focus_dim, dtype == torch.float32, weight_grads):
        return relay
    return tuned


def _reference_grads(ctx, grad_out):
    """The gradients of all eight forward arguments by differentiating the reference (no kernel
    runs) where the kernels cannot give them: under create_graph (a higher-order graph is being
    built: second derivatives exact), and for a batched grad_out (the older vmap's, from
    ``autograd.grad(is_grads_batched=True)`` or ``jacobian(vectorize=True)``: the kernels take
    plain tensors). None otherwise."""
    if not (torch.is_grad_enabled() or is_batched(grad_out)):
        return None
    d, apply_alpha = ctx.dims, ctx.apply_alpha

    def forward(*args):
        return so2_stack_reference(*args, lmax=d.lmax, focus_dim=d.focus_dim, apply_alpha=apply_alpha)
    with ieee_matmul(grad_out.device.type):   # the reference's forward and its gradients, exact
        return (*create_graph_grads(ctx, forward, ctx.saved_tensors[:5], grad_out), None, None, None)


def _kernel_grads(ctx, grad_out, run_backward):
    """The eight forward arguments' gradients from a saved forward: the reference's under
    create_graph or for a batched grad_out (``_reference_grads``), else ``run_backward(grad_out,
    x_local, z_all, u_final, alpha, w0_all, w1_all, gw_all, dims, apply_alpha, weight_grads,
    alpha_grad=...) -> (grad_u0, grad_alpha, weight grads)`` (grad_alpha None where alpha needs
    none: launch.backward then skips the head kernel that sums it, where it can)."""
    grads = _reference_grads(ctx, grad_out)
    if grads is not None:
        return grads
    u0, alpha, w0_all, w1_all, gw_all, x_local, z_all, u_final = ctx.saved_tensors
    weight_grads = any(ctx.needs_input_grad[2:5])
    alpha_grad = ctx.needs_input_grad[1]
    grad_u0, grad_alpha, dws = run_backward(readable(grad_out), x_local, z_all, u_final, alpha, w0_all, w1_all,
                                            gw_all, ctx.dims, ctx.apply_alpha, weight_grads, alpha_grad=alpha_grad)
    dw0, dw1, dgw = dws if weight_grads else (None, None, None)
    return grad_u0, grad_alpha if alpha_grad else None, dw0, dw1, dgw, None, None, None


def runs_kernels(t: torch.Tensor) -> bool:
    """Whether a call on ``t``'s dtype and device runs the Triton kernels: where kernels may run
    (policy.kernels_run_on: not on fake tensors) and not for float64, which runs the reference
    in float64 at every level (gradcheck, ``.double()`` models: the kernels compute in float32)."""
    return t.dtype != torch.float64 and policy.kernels_run_on(t)


def _reference_forward(u0, alpha, w0_all, w1_all, gw_all, d: So2Dims, apply_alpha: bool):
    """(x_local, z_all, u_final) of the reference, in IEEE precision with autocast off (the
    exact semantics, as the kernels compute), contiguous as the kernels' are (the reference's
    x_local is a transposed view); u_final never aliases u0."""
    with ieee_matmul(u0.device.type):
        x_local, z_all, u_final = (t.contiguous() for t in so2_stack_forward_saving(
            u0, alpha, w0_all, w1_all, gw_all, lmax=d.lmax, focus_dim=d.focus_dim, apply_alpha=apply_alpha))
    return x_local, z_all, u_final.clone() if u_final is u0 else u_final


def _reference_backward(grad_out, x_local, z_all, u_final, alpha, w0_all, w1_all, gw_all, d: So2Dims,
                        apply_alpha: bool, weight_grads: bool, alpha_grad: bool = True):
    """launch.backward's results from the reference's backward formulas, in IEEE precision
    with autocast off, contiguous as the kernels' are (the reference's follow its inputs'
    strides)."""
    with ieee_matmul(grad_out.device.type):
        grad_u0, grad_alpha, dws = so2_stack_backward_reference(
            grad_out, x_local, z_all, u_final, alpha, w0_all, w1_all, gw_all, lmax=d.lmax, focus_dim=d.focus_dim,
            apply_alpha=apply_alpha, weight_grads=weight_grads)
    return grad_u0.contiguous(), grad_alpha.contiguous(), None if dws is None else tuple(w.contiguous() for w in dws)


class So2StackFunction(torch.autograd.Function):
    """The eager entry point (plain autograd.Function: no torch.library dispatch cost); traced
    calls take the custom ops below. Both run launch.forward / launch.backward where kernels run
    (runs_kernels), else the reference's forward and backward formulas (``_reference_forward``,
    ``_reference_backward``: exact whatever autocast region or matmul precision is in force
    where the backward runs). Kernels or reference, and the backward's route, are decided at the
    forward."""

    @staticmethod
    def forward(ctx, u0, alpha, w0_all, w1_all, gw_all, lmax, focus_dim, apply_alpha):
        d = So2Dims(lmax, focus_dim)
        ctx.dims, ctx.apply_alpha = d, apply_alpha
        if runs_kernels(u0):
            x_local, z_all, u_final = launch.forward(u0, alpha, w0_all, w1_all, gw_all, d, apply_alpha,
                                                     config=forward_config(d, u0.dtype, u0.shape[1], u0.shape[0],
                                                                          w0_all.shape[0]))
            # The route is decided now (a lookup here is also how tilefuse.tune(model) sees the key).
            ctx.config = backward_config(d, u0.dtype, u0.shape[1], u0.shape[0], w0_all.shape[0],
                                         any(ctx.needs_input_grad[2:5]))
        else:
            x_local, z_all, u_final = _reference_forward(u0, alpha, w0_all, w1_all, gw_all, d, apply_alpha)
            ctx.config = None
        ctx.save_for_backward(u0, alpha, w0_all, w1_all, gw_all, x_local, z_all, u_final)
        return x_local

    @staticmethod
    def backward(ctx, grad_out):
        run = _reference_backward if ctx.config is None else functools.partial(launch.backward, config=ctx.config)
        return _kernel_grads(ctx, grad_out, run)


# --- custom ops: what torch.compile sees (opaque, with fake impls) ---------------------------
#
# Each op decides kernels or reference, and the backward its route, when it runs, at the level
# in force on the thread that runs it: on CUDA a backward runs on autograd's device thread,
# which sees set_level and TILEFUSE_LEVEL but not a ``tilefuse.level`` block around the forward
# (the eager path decides the backward's route at the forward). The ops' outputs stay on the
# tensors' device, so a compiled graph can be captured in a CUDA graph.

@torch.library.custom_op("tilefuse::so2_stack_fwd", mutates_args=())
@custom_op_on_tensor_device
def so2_stack_fwd_op(u0: torch.Tensor, alpha: torch.Tensor, w0_all: torch.Tensor, w1_all: torch.Tensor,
                     gw_all: torch.Tensor, lmax: int, focus_dim: int, apply_alpha: bool
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x_local (E, F, ROW), z_all (NG, F, E, ROW), u_final (F, E, ROW)). Kernels or reference
    are chosen when the op runs (runs_kernels), not when it is traced."""
    d = So2Dims(lmax, focus_dim)
    if runs_kernels(u0):
        x_local, z_all, u_final = launch.forward(u0, alpha, w0_all, w1_all, gw_all, d, apply_alpha,
                                                 config=forward_config(d, u0.dtype, u0.shape[1], u0.shape[0],
                                                                      w0_all.shape[0]))
        return x_local, z_all, u_final.clone() if u_final is u0 else u_final
    return _reference_forward(u0, alpha, w0_all, w1_all, gw_all, d, apply_alpha)


@so2_stack_fwd_op.register_fake
def _so2_stack_fwd_fake(u0, alpha, w0_all, w1_all, gw_all, lmax, focus_dim, apply_alpha):
    F, E, row = u0.shape
    return (u0.new_empty((E, F, row)), u0.new_empty((gw_all.shape[0], F, E, row)), u0.new_empty((F, E, row)))


@torch.library.custom_op("tilefuse::so2_stack_bwd", mutates_args=())
@custom_op_on_tensor_device
def so2_stack_bwd_op(grad_out: torch.Tensor, x_local: torch.Tensor, z_all: torch.Tensor, u_final: torch.Tensor,
                     alpha: torch.Tensor, w0_all: torch.Tensor, w1_all: torch.Tensor, gw_all: torch.Tensor,
                     lmax: int, focus_dim: int, apply_alpha: bool, weight_grads: bool, alpha_grad: bool = True
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(grad_u0, grad_alpha, dw0_all, dw1_all, dgw_all); the weight gradients are empty
    tensors without ``weight_grads``, grad_alpha zeros or the reference's without
    ``alpha_grad`` (launch.backward). Kernels or reference, and the route (relay or fused),
    are decided when it runs."""
    d = So2Dims(lmax, focus_dim)
    if runs_kernels(grad_out):
        cfg = backward_config(d, grad_out.dtype, x_local.shape[0], x_local.shape[1], w0_all.shape[0], weight_grads)
        grad_u0, grad_alpha, dws = launch.backward(grad_out, x_local, z_all, u_final, alpha, w0_all, w1_all,
                                                   gw_all, d, apply_alpha, weight_grads, config=cfg,
                                                   alpha_grad=alpha_grad)
    else:
        grad_u0, grad_alpha, dws = _reference_backward(grad_out, x_local, z_all, u_final, alpha, w0_all, w1_all,
                                                       gw_all, d, apply_alpha, weight_grads)
    if dws is None:
        dws = tuple(w.new_empty(0) for w in (w0_all, w1_all, gw_all))
    return grad_u0, grad_alpha, *dws


@so2_stack_bwd_op.register_fake
def _so2_stack_bwd_fake(grad_out, x_local, z_all, u_final, alpha, w0_all, w1_all, gw_all, lmax, focus_dim,
                        apply_alpha, weight_grads, alpha_grad=True):
    E, F, row = x_local.shape
    dws = [w.new_empty(w.shape if weight_grads else (0,)) for w in (w0_all, w1_all, gw_all)]
    return (grad_out.new_empty((F, E, row)), alpha.new_empty(alpha.shape), *dws)


def _setup_context(ctx, inputs, output):
    u0, alpha, w0_all, w1_all, gw_all, lmax, focus_dim, apply_alpha = inputs
    x_local, z_all, u_final = output
    ctx.save_for_backward(u0, alpha, w0_all, w1_all, gw_all, x_local, z_all, u_final)
    ctx.dims, ctx.apply_alpha = So2Dims(lmax, focus_dim), apply_alpha
    ctx.mark_non_differentiable(z_all, u_final)


def _backward_op(grad_out, x_local, z_all, u_final, alpha, w0_all, w1_all, gw_all, d, apply_alpha, weight_grads,
                 alpha_grad=True):
    grad_u0, grad_alpha, *dws = so2_stack_bwd_op(grad_out, x_local, z_all, u_final, alpha, w0_all, w1_all, gw_all,
                                                 d.lmax, d.focus_dim, apply_alpha, weight_grads, alpha_grad)
    return grad_u0, grad_alpha, dws


def _backward(ctx, grad_out, _grad_z, _grad_u):
    return _kernel_grads(ctx, grad_out, _backward_op)


torch.library.register_autograd("tilefuse::so2_stack_fwd", _backward, setup_context=_setup_context)
