"""The public functional API of so2_mixing_stack."""

from __future__ import annotations

import torch

from ...device import on_tensor_device
from ...policy import differentiating, wraps_tensors
from ...utils import FxProxy, fx_node, gemms_in_dtype
from .op import So2StackFunction, so2_stack_fwd_op
from .reference import so2_stack_reference
from .validate import validate



@on_tensor_device
def so2_mixing_stack(u0: torch.Tensor, alpha: torch.Tensor, w0_all: torch.Tensor, w1_all: torch.Tensor,
                     gw_all: torch.Tensor, *, lmax: int, focus_dim: int, apply_alpha: bool = True) -> torch.Tensor:
    """SO(2) gated mixing stack (SeZM layout; docs/specs/so2_mixing_stack.md).

    Args:
        u0: (F, E, ROW) focus-major activations, ROW = (3 lmax + 1) focus_dim.
        alpha: (E, F) positive per-edge focus weights (used when ``apply_alpha``).
        w0_all: (NL, F, M0, M0) m=0 weights, M0 = (lmax + 1) focus_dim; applied as u @ W.
        w1_all: (NL, F, M1, M1) |m|=1 weights, M1 = 2 lmax focus_dim.
        gw_all: (NL - 1, F, focus_dim, lmax focus_dim) gate projections.

    Every tensor may have any strides (views, expanded weights, the expanded gradient of
    ``out.sum().backward()``): the launchers copy what the kernels cannot read as it is, and
    nothing when it is already contiguous. The output is contiguous on every path; the
    gradients are where the kernels run (the reference's follow its ops' layouts).

    Returns:
        x_local (E, F, ROW), differentiable in every tensor argument: eagerly to any order (a
        ``create_graph`` backward runs the differentiable reference), a torch.compile'd call
        to first order only (torch raises that it "does not currently support double
        backward"). Without ``apply_alpha`` alpha's gradient is zero (None for float64 and
        under torch.func, where autograd differentiates the reference, which does not use
        alpha).

    Paths: fp32, bf16 and fp16 run the Triton kernels (fp32 dots in IEEE precision; 16-bit
    inputs accumulate in fp32), float64 the reference in float64 at every level (so
    ``torch.autograd.gradcheck`` and ``.double()`` models get float64 results). Level 0 runs
    the reference, the plain semantics, exactly: its torch ops in the inputs' dtype with IEEE
    float32 matmuls and autocast off (utils.ieee_matmul), whatever matmul precision or
    autocast region the caller set, in the forward and in the backward (its formulas,
    reference.so2_stack_backward_reference), wherever the backward is called; so does every
    other reference path (float64, no kernels, a ``create_graph`` backward's first-order
    gradients). Gradients autograd takes of the reference's own ops (float64, torch.func, the
    second order of a ``create_graph`` backward) run at the matmul precision and in the
    autocast region in force where that backward runs.
    The kernels' backward is the relay, the composition route (the relay's pointwise kernels
    with cuBLAS GEMMs in IEEE fp32) at level >= 2 where the tuning table chose it for (lmax,
    focus_dim, the dtype's size: float16 calls take bfloat16's entry, swept on bfloat16), or the
    fused per-layer kernel at level >= 2 when the table holds a fused winner for (lmax,
    focus_dim, fp32) on this GPU and no weight requires grad (the route is chosen at the
    forward: weights that require grad get the relay and their gradients, even where a later
    ``autograd.grad`` asks for u0's alone). At level 3 with fp32 inputs, where the table's
    level-3 key (``L{lmax}-C{focus_dim}-x4-l3``) holds a split-precision variant (3xtf32 or
    3xfp16) whose accuracy validation passed (normwise error of x_local, grad u0, grad alpha and
    the weight gradients dw0, dw1, dgw against float64 within 1.5x of the exact path's, at the
    sweep's edge count (2**19, fewer where it does not fit; see docs/tuning.md), finite on
    range-limit inputs; ``tilefuse tune --op so2_mixing_stack --shape 3x32 --pass level3``), the
    forward and backward layer GEMMs run with three tensor-core products per dot (TF32, or
    float16 of power-of-two-scaled operands) instead of the IEEE FMA dots (a backward with
    weight gradients only where that validation covered them too); nowhere else, and never below
    level 3. ``alpha`` must be positive (grad_alpha divides by it).
    Under ``torch.func`` transforms (``grad``, ``vmap``, ``jacrev``, ``jvp``, ...) and
    forward-mode AD (``torch.autograd.forward_ad``) the reference runs (as at level 0), which
    they differentiate and batch; inside torch.compile too (``fullgraph=True`` included), where
    it is traced with autocast off but at the process's float32 matmul precision (Dynamo
    cannot enter ieee_matmul). Eager calls decide kernels vs reference per call; any other
    torch.compile'd call goes through the custom ops ``tilefuse::so2_stack_fwd`` /
    ``so2_stack_bwd``, which decide when they run, each at the level in force on its thread (on
    CUDA the backward's is autograd's device thread, which sees ``set_level`` and
    ``TILEFUSE_LEVEL`` but not a ``tilefuse.level`` block; an eager call's backward follows the
    choice its forward made). An eager call with a wrapper tensor subclass among its tensors (a
    DTensor, say) runs the reference at every level, whose torch ops give a result of its class
    with ordinary autograd (the kernels read memory, which such a wrapper does not own).
    ``tilefuse.tune(model, inputs)`` sees this op's keys whether or not the stack's weights
    require grad; a fused winner serves only the backward of weights that do not (force
    evaluation).

    Example:
        >>> F, E, L, Cf, NL = 2, 100, 3, 32, 3
        >>> ROW, M0, M1 = (3 * L + 1) * Cf, (L + 1) * Cf, 2 * L * Cf
        >>> x = so2_mixing_stack(torch.randn(F, E, ROW), torch.rand(E, F) + 0.1,
        ...                      torch.randn(NL, F, M0, M0) * 0.05, torch.randn(NL, F, M1, M1) * 0.05,
        ...                      torch.randn(NL - 1, F, Cf, L * Cf) * 0.1, lmax=L, focus_dim=Cf)
    """
    if type(u0) is FxProxy:   # torch.fx.symbolic_trace: one node (utils.fx_node)
        return fx_node(so2_mixing_stack, u0, alpha, w0_all, w1_all, gw_all, lmax=lmax, focus_dim=focus_dim,
                       apply_alpha=apply_alpha)
    validate(u0, alpha, w0_all, w1_all, gw_all, lmax=lmax, focus_dim=focus_dim, apply_alpha=apply_alpha)
    differentiated = differentiating()
    compiling = torch.compiler.is_compiling()
    if differentiated or (u0.dtype == torch.float64 and not compiling) \
            or wraps_tensors(u0, alpha, w0_all, w1_all, gw_all):
        # torch.func transforms (grad, vmap, jacrev, ...) or forward-mode AD, which neither the
        # kernels' autograd.Function nor the custom op implements (through the op a jvp's
        # tangent would be zeros), float64 eagerly (gradcheck: autograd's formulas of the
        # reference), or a wrapper subclass (DTensor, ...: policy.wraps_tensors, eagerly), whose
        # memory the kernels cannot read and whose own torch ops give a result of its class:
        # the reference's torch ops, which they differentiate, contiguous as the
        # kernels' output is (the reference's is a transposed view); exact, as the kernels are,
        # whatever matmul precision or autocast region the caller set around the call, except
        # under torch.compile, where only autocast is turned off (utils.gemms_in_dtype)
        with gemms_in_dtype(u0, ieee=True):
            return so2_stack_reference(u0, alpha, w0_all, w1_all, gw_all, lmax=lmax, focus_dim=focus_dim,
                                       apply_alpha=apply_alpha).contiguous()
    if compiling:
        return so2_stack_fwd_op(u0, alpha, w0_all, w1_all, gw_all, lmax, focus_dim, apply_alpha)[0]
    # the kernels, or where they cannot run (level 0, no GPU and no interpreter, fake tensors)
    # the reference's forward and backward formulas (So2StackFunction)
    return So2StackFunction.apply(u0, alpha, w0_all, w1_all, gw_all, lmax, focus_dim, apply_alpha)
