"""The public functional API of grouped_glu_mlp."""

from __future__ import annotations

import dataclasses

import torch

from ...device import on_tensor_device
from ...policy import differentiating, eager_tracing, is_eager_fake
from ...utils import FxProxy, fx_node
from ..autograd_common import batched_at_any_level
from . import plan as plans
from .configs import GemmConfig
from .op import COMPOSE, compose_apply, fused_apply, route, route_reads_tokens, traced_unfused
from .recipes import RecipeReferenceFunction
from .reference import (assert_counts_on_device, gemms_in_dtype, glu_activation, glu_index, grouped_glu_mlp_reference,
                        grouped_glu_mlp_unfused, uses_grouped_mm)
from .tune import GroupedProblem
from .validate import validate




def problem_for(x, fc2_weight, activation, glu_interleave, has_bias, recipe=None):
    return GroupedProblem.of(x.shape[0], x.shape[1], fc2_weight.shape[2], fc2_weight.shape[0], x.element_size(),
                             activation, glu_interleave or 0, has_bias, recipe=recipe or "")


@torch.compiler.assume_constant_result
def _traced_route(device_type: str, n_tokens: int, hidden: int, ffn: int, n_experts: int, itemsize: int,
                  activation: str, interleave: int, has_bias: bool, recipe: str):
    """op.route for torch.compile: evaluated once while tracing (the level and the table lookup
    are plain Python state, not traceable), its result baked into the graph as a constant: a
    GemmConfig's fields as a tuple, COMPOSE or None."""
    found = route(GroupedProblem.of(n_tokens, hidden, ffn, n_experts, itemsize, activation, interleave, has_bias,
                                    recipe=recipe), torch.device(device_type))
    return dataclasses.astuple(found) if isinstance(found, GemmConfig) else found


@torch.compiler.assume_constant_result
def _traced_reads_tokens(device_type: str, hidden: int, ffn: int, n_experts: int, itemsize: int, activation: str,
                         interleave: int, has_bias: bool, recipe: str) -> bool:
    """op.route_reads_tokens for torch.compile, evaluated once while tracing as _traced_route
    is: whether the route lookup needs the token count's bucket."""
    return route_reads_tokens(GroupedProblem.of(1, hidden, ffn, n_experts, itemsize, activation, interleave, has_bias,
                                                recipe=recipe), torch.device(device_type))


def _token_bucket(n_tokens) -> int:
    """GroupedProblem.of's token bucket (the next power of two, at least 1) as a plain int, for
    a token count that is dynamic under torch.compile (a SymInt, which _traced_route cannot
    take): each comparison guards the graph on the bucket, so a count of another bucket
    traces again and looks its route up (counts over more buckets than Dynamo's
    recompile_limit, 8 by default, need it raised: docs/design.md). Taken only where the
    route can depend on it (_traced_reads_tokens)."""
    bucket = 1
    while bucket < n_tokens:
        bucket *= 2
    return bucket


def _static_size(size) -> int:
    """A model size (H, F, E) as a plain int where torch.compile(dynamic=True) made it a SymInt:
    found bit by bit, each comparison a guard, so the graph holds for this size alone (the
    route is looked up for it)."""
    value, bit = 0, 1 << 62
    while bit:
        if size >= value + bit:
            value += bit
        bit >>= 1
    return value


def _traced_reference(x, tokens_per_expert, probs, fc1_weight, fc2_weight, activation, glu_interleave, fc1_bias,
                      fc2_bias):
    """grouped_glu_mlp_reference's function (float32 compute, y in x.dtype, GEMMs outside any
    autocast region) for torch.compile under torch.func transforms or forward-mode AD, where
    its per-expert loop cannot be traced: it slices rows at counts read on the host. Here each
    expert's GEMMs run on every row and torch.where keeps that expert's rows (o_e <= t < o_e +
    m_e, from the counts' cumulative sum on the device), so nothing is read on the host and
    ``fullgraph=True`` holds; E times the loop's GEMM work. Each row's values are the loop's
    products (selected, never summed with other experts'); each GEMM reads its expert's rows
    and zeros elsewhere, so an inf in one expert's rows reaches no other expert's gradients
    (0 * inf). The counts are checked on the device (assert_counts_on_device), where the
    loop raises ValueError on the host."""
    cd = torch.float32
    n_tokens, hidden = x.shape[0], fc2_weight.shape[1]
    assert_counts_on_device(tokens_per_expert, n_tokens)
    ends = torch.cumsum(tokens_per_expert, 0)
    row = torch.arange(n_tokens, device=x.device)
    gate_idx, up_idx = glu_index(fc2_weight.shape[-1], glu_interleave, device=x.device)
    xc, pc = x.to(cd), probs.to(cd)[:, None]
    rows_of = []
    with gemms_in_dtype(x):
        z = xc.new_zeros((n_tokens, fc1_weight.shape[1]))
        for e in range(fc1_weight.shape[0]):
            mine = ((row >= ends[e] - tokens_per_expert[e]) & (row < ends[e]))[:, None]
            rows_of.append(mine)
            ze = torch.where(mine, xc, 0) @ fc1_weight[e].to(cd).t()
            if fc1_bias is not None:
                ze = ze + fc1_bias[e].to(cd)
            z = torch.where(mine, ze, z)
        h = pc * glu_activation(z[:, gate_idx], z[:, up_idx], activation)
        y = xc.new_zeros((n_tokens, hidden))
        for e, mine in enumerate(rows_of):
            ye = torch.where(mine, h, 0) @ fc2_weight[e].to(cd).t()
            if fc2_bias is not None:
                ye = ye + pc * fc2_bias[e].to(cd)
            y = torch.where(mine, ye, y)
    return y.to(x.dtype)


@on_tensor_device
def grouped_glu_mlp(x: torch.Tensor, tokens_per_expert: torch.Tensor, probs: torch.Tensor,
                    fc1_weight: torch.Tensor, fc2_weight: torch.Tensor, *, activation: str = "swiglu",
                    glu_interleave: int | None = 32, fc1_bias: torch.Tensor | None = None,
                    fc2_bias: torch.Tensor | None = None, recipe: str | None = None) -> torch.Tensor:
    """Mixture-of-experts expert MLP: per expert e (rows [o_e, o_e + m_e) of x),
    ``y = (p * act(x W1_e^T + b1_e)) W2_e^T + p b2_e`` (docs/specs/grouped_glu_mlp.md).

    Args:
        x: (T, H) tokens permuted by expert; float32, bfloat16 or float16.
        tokens_per_expert: (E,) int32 or int64 tensor on x's device; never read on the host by
            the kernel paths and the compose route (the fallbacks below that read it say so).
        probs: (T,) router probabilities, float32 or x.dtype.
        fc1_weight: (E, 2F, H); fc2_weight: (E, H, F), in x.dtype (out, in like nn.Linear).
        activation: "swiglu" or "geglu" (the spec's clamped quick-gelu form).
        glu_interleave: s (gate/up columns in blocks of s) or None (halves).
        fc1_bias: (E, 2F) or None; fc2_bias: (E, H) or None (scaled by p).
        recipe: None (GEMMs in x.dtype, float32 accumulation), or "fp8_block", "mxfp8",
            "nvfp4": each GEMM, forward and backward, quantizes both operands along its K
            dimension (recipes.py has the table) with the formats of the spec: fp8_block
            1x128 activations/gradients and 128x128 weights, E4M3 with float32 scales, FP8
            tensor-core GEMMs; mxfp8 1x32 E4M3 with E8M0 scales; nvfp4 packed E2M1 with E4M3
            scales per 1x16 (activations, gradients) or 16x16 (weights) and one float32 scale
            per expert (weights) or per tensor (activations, gradients). mxfp8 and nvfp4 are
            emulated on Hopper (decoded to bfloat16 inside the GEMM; for recipe parity, not
            speed). H and F must be multiples of 128 / 32 / 16. z, h and the outputs are
            stored in x.dtype. No double backward. A NaN or inf in a quantized block makes
            its scale NaN, so it reaches every element of that block; under nvfp4 the
            activations' and gradients' per-tensor scale then makes every token's output
            NaN, not only that token's. The GEMMs multiply each K chunk's product by the
            product of its two scales (fp8_block: ``acc += dot * (sa * sb)``, the spec's
            formula; nvfp4: the two decode scales' product in the epilogue): where that
            product overflows float32 (the two operands' block maxima multiplying to more
            than about 6.8e43 for fp8_block, 2.5e45 for nvfp4's per-tensor maxima) a zero dot
            becomes NaN (0 * inf) where level 0's dequantized GEMMs give 0.

    Returns:
        y (T, H) in x.dtype; differentiable in x, probs, weights and biases.

    Paths (recipe None), chosen by op.route:
    - the fused Triton kernels, at level >= 2 where the tuning table holds a fused winner for
      this shape key on this GPU (``tilefuse tune``);
    - the compose route with its GEMMs on warp-specialised Gluon kernels (the weight gradients
      on ws_wgrad.py; fc1, fc2 and the dgrads on ws_rows.py where the config has a rows tile),
      at level >= 2 where the table's winner is a ``GemmConfig.compose`` config (Hopper);
    - else, at level >= 1 wherever kernels run (CUDA; a CPU under Triton's interpreter) and
      ``torch._grouped_mm`` takes the inputs (bf16 / fp16 / fp32 with H and F multiples of
      16 bytes): the compose route (compose.py), every GEMM on ``torch._grouped_mm`` and the
      GLU, its backward and the bias terms as Triton kernels, one pass each. With bf16 on
      sm90 / sm100 it reads nothing on the host and is CUDA-graph capturable; with fp16 / fp32
      on CUDA ``torch._grouped_mm`` itself falls back to a loop over the groups that copies the
      offsets to the host (a synchronization, as in the plain composition);
    - where kernels run but ``torch._grouped_mm`` does not take the rows (H or F off 16
      bytes, or a torch without it): the fused kernels at their heuristic tiles (no host
      read of the counts);
    - everywhere else (level 0, no GPU and no interpreter) the unfused composition
      (reference.grouped_glu_mlp_unfused: ``torch._grouped_mm`` + separate torch ops for the
      activation, or a per-expert loop that reads the counts on the host).
    A quantized recipe runs its kernels at level >= 1 wherever kernels run (the table's tiles
    at level >= 2 when its key was swept, else heuristic ones); at level 0 or without kernels
    its plain-PyTorch rendering runs (recipes.RecipeReferenceFunction: float32 GEMMs of the
    dequantized operands; it reads tokens_per_expert on the host).
    The kernel paths assert sum(tokens_per_expert) == T on the device (no host sync; a
    violation surfaces as a device-side assertion). Under torch.compile the path is chosen
    when tracing (level and table as they are then; a dynamic token count traces one graph,
    or one per power-of-two bucket of T on a key the table holds a winner for:
    docs/design.md) and ``fullgraph=True`` works on every path with recipe None: the fused
    kernels and the compose route run as custom ops
    (``tilefuse::grouped_mlp_fwd``, ``tilefuse::grouped_mlp_compose_fwd`` and their
    backward ops), on every dtype; the unfused composition is traced as it is with bf16
    inputs whose rows are 16-byte multiples; elsewhere (fp32 / fp16, whose
    ``torch._grouped_mm`` has no meta kernel, or other row sizes) it reads the counts on the
    host, so it runs as the opaque custom op ``tilefuse::grouped_mlp_unfused`` (a host
    synchronization on CUDA when the graph runs; its backward evaluates the explicit backward
    formulas in float32). Double backward (create_graph=True) differentiates the unfused
    composition on every path (no quantized recipe), whose inputs lay out the gradient a
    second backward brings to theirs (an expanded one from ``g.sum().backward()``, which
    ``torch._grouped_mm``'s own backward refuses: reference._LaidOutGradient).

    Wrapper tensor subclasses (DTensor, ...) are refused by name (TypeError): the kernels
    cannot read them, nor do DTensor's rules cover the plain-PyTorch paths' ops; pass plain
    tensors (``ExpertParallelGLUMLP`` distributes experts over ranks).

    Layouts: every tensor argument may have any strides (views: transposed, sliced, expanded);
    each path copies only what it cannot read as laid out, and results do not depend on the
    layout. y and the gradients are returned contiguous. Meta tensors give meta results (and
    gradients) of the right shapes and dtypes, on every recipe, without running anything; so
    do fake tensors (FakeTensorMode outside torch.compile, as memory estimators use it).

    Under ``torch.func`` transforms (``grad``, ``vmap``, ``jacrev``, ``jvp``, ...) and
    forward-mode AD the per-expert reference runs (reference.grouped_glu_mlp_reference, float32
    compute; it reads tokens_per_expert on the host), which they differentiate and batch; a
    quantized recipe raises NotImplementedError there. Its forward GEMMs run in IEEE float32
    with autocast off; the gradients the transforms take of its ops run at the matmul
    precision and in the autocast region in force (a CPU bfloat16 autocast region around
    ``torch.func.grad`` gives bfloat16-GEMM gradients, as it does for any torch code); so do
    the gradients autograd takes of the composition's own ops wherever it runs (level 0, the
    per-expert loop where ``torch._grouped_mm`` does not take the rows, a ``create_graph``
    backward): a backward called inside an autocast region runs their ``torch.mm`` GEMMs in its
    dtype (PyTorch advises calling backward outside autocast). Inside
    torch.compile (``fullgraph=True`` included) the same function is traced without host
    reads: every expert's GEMMs over all rows, each row's result selected (``_traced_reference``; E times the work). Batched
    gradients of the older vmap (``autograd.grad(is_grads_batched=True)``,
    ``jacobian(vectorize=True)``) take the same reference in the backward.
    """
    if type(x) is FxProxy:   # torch.fx.symbolic_trace: one node (utils.fx_node)
        return fx_node(grouped_glu_mlp, x, tokens_per_expert, probs, fc1_weight, fc2_weight, activation=activation,
                       glu_interleave=glu_interleave, fc1_bias=fc1_bias, fc2_bias=fc2_bias, recipe=recipe)
    if differentiating():
        # torch.func transforms (grad, vmap, jacrev, ...) or forward-mode AD: their wrapped
        # tensors own no memory the kernels (or torch._grouped_mm) could read, so the per-expert
        # reference runs (float32 compute), which they differentiate and batch. Traced by
        # Dynamo (both read while tracing, and guarded) the custom ops would be no better: they
        # have backward rules only (a jvp through them is a zero tangent)
        validate(x, tokens_per_expert, probs, fc1_weight, fc2_weight, activation=activation,
                 glu_interleave=glu_interleave, fc1_bias=fc1_bias, fc2_bias=fc2_bias, recipe=recipe)
        if recipe is not None:
            raise NotImplementedError(f"grouped_glu_mlp: recipe {recipe!r} under torch.func transforms or "
                                      f"forward-mode AD (only recipe=None runs there)")
        if not torch.compiler.is_compiling() and batched_at_any_level(tokens_per_expert):
            # the per-expert loop slices rows at counts read on the host; a vmapped count
            # tensor has one set of counts per batch entry and no host values to read
            raise NotImplementedError("grouped_glu_mlp: tokens_per_expert batched by torch.vmap (one routing "
                                      "per batch entry) is not supported; vmap over x and probs, or call once "
                                      "per routing")
        if torch.compiler.is_compiling():
            return _traced_reference(x, tokens_per_expert, probs, fc1_weight, fc2_weight, activation, glu_interleave,
                                     fc1_bias, fc2_bias)
        return grouped_glu_mlp_reference(x, tokens_per_expert, probs, fc1_weight, fc2_weight, activation=activation,
                                         glu_interleave=glu_interleave, fc1_bias=fc1_bias, fc2_bias=fc2_bias)
    fake = is_eager_fake(x)   # FakeTensorMode outside torch.compile: no memory, as meta tensors
    # make_fx / torch.jit.trace record torch ops, not kernels' writes: no plan, and route's
    # path without kernels (policy.eager_tracing)
    if plans.ENABLED and not torch.compiler.is_compiling() and not fake and not eager_tracing():
        # the call's decisions from its metadata, made once (plan.py): building a plan raises
        # validate's errors and refuses wrapper subclasses (plan.refuse_wrapped; the key holds
        # each tensor's class, so a plan built for plain tensors is never found for a DTensor)
        plan = plans.lookup(x, tokens_per_expert, probs, fc1_weight, fc2_weight, fc1_bias, fc2_bias, activation,
                            glu_interleave, recipe)
        if plan.forward is not None:
            y = plan.apply(x, tokens_per_expert, probs, fc1_weight, fc2_weight, fc1_bias, fc2_bias)
            if y is not None:
                return y
    else:
        validate(x, tokens_per_expert, probs, fc1_weight, fc2_weight, activation=activation,
                 glu_interleave=glu_interleave, fc1_bias=fc1_bias, fc2_bias=fc2_bias, recipe=recipe)
        if not fake:   # a DTensor of fake tensors takes the fake path below, as a FakeTensor
            plans.refuse_wrapped(x, tokens_per_expert, probs, fc1_weight, fc2_weight, fc1_bias, fc2_bias)
    if x.device.type == "meta" or fake:
        # Shapes and dtypes only (no kernel runs, no count is read): the unfused composition
        # on meta or fake tensors, differentiable; a recipe changes no shape or dtype.
        return grouped_glu_mlp_unfused(x, tokens_per_expert, probs, fc1_weight, fc2_weight, activation=activation,
                                       glu_interleave=glu_interleave, fc1_bias=fc1_bias, fc2_bias=fc2_bias)
    has_bias = fc1_bias is not None or fc2_bias is not None
    if torch.compiler.is_compiling():
        key = (_static_size(x.shape[1]), _static_size(fc2_weight.shape[2]), _static_size(fc2_weight.shape[0]),
               x.element_size(), activation, glu_interleave or 0, has_bias, recipe or "")
        # T's bucket (a guard on it) only where the route can depend on it: one graph for every
        # token count at level 1, or at level 2 on a key the table holds no winner for
        tokens = _token_bucket(x.shape[0]) if _traced_reads_tokens(x.device.type, *key) else 1
        found = _traced_route(x.device.type, tokens, *key)
        path = GemmConfig(*found) if isinstance(found, tuple) else found
    elif eager_tracing():   # route's answer there (no kernels); the key is not built: under
        path = None         # torch.jit.trace x.shape[0] is a traced Tensor, not an int
    else:
        path = route(problem_for(x, fc2_weight, activation, glu_interleave, has_bias, recipe), x.device)
    if isinstance(path, GemmConfig) and path.compose:
        return compose_apply(x, tokens_per_expert, probs, fc1_weight, fc2_weight, fc1_bias, fc2_bias, activation,
                             glu_interleave, tuned=path)
    if isinstance(path, GemmConfig):
        return fused_apply(x, tokens_per_expert, probs, fc1_weight, fc2_weight, fc1_bias, fc2_bias, activation,
                           glu_interleave, path, recipe)
    if path == COMPOSE:
        return compose_apply(x, tokens_per_expert, probs, fc1_weight, fc2_weight, fc1_bias, fc2_bias, activation,
                             glu_interleave)
    if recipe is not None:
        return RecipeReferenceFunction.apply(x, tokens_per_expert, probs, fc1_weight, fc2_weight, fc1_bias, fc2_bias,
                                             activation, glu_interleave, recipe)
    if torch.compiler.is_compiling() and not uses_grouped_mm(x, fc2_weight.shape[2]):
        return traced_unfused(x, tokens_per_expert, probs, fc1_weight, fc2_weight, fc1_bias, fc2_bias, activation,
                              glu_interleave)
    return grouped_glu_mlp_unfused(x, tokens_per_expert, probs, fc1_weight, fc2_weight, activation=activation,
                                   glu_interleave=glu_interleave, fc1_bias=fc1_bias, fc2_bias=fc2_bias)
