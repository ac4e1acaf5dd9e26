"""Autograd wiring of grouped_glu_mlp's kernel paths, and the choice between the paths (``route``).

Each kernel path has an autograd.Function for eager calls (dispatch through torch.library costs
host time per call) and torch.library custom ops with fake impls for traced ones:
- the fused path runs launch.forward / launch.backward
  (``tilefuse::grouped_mlp_fwd`` / ``tilefuse::grouped_mlp_bwd``);
- the compose route (compose.py: ``torch._grouped_mm`` GEMMs and Triton glue) runs
  compose.forward / compose.backward (``tilefuse::grouped_mlp_compose_fwd`` /
  ``tilefuse::grouped_mlp_compose_bwd``).

Double backward (create_graph) differentiates the unfused composition on the saved inputs
(recipe None only: a quantized recipe's backward is not differentiable, as quantization is not).

Under torch.compile the unfused composition is traced as it is where it runs
``torch._grouped_mm`` (bf16 with 16-byte rows); elsewhere (fp32 / fp16, whose
``torch._grouped_mm`` has no meta kernel, or rows off 16 bytes) it reads the counts on the
host, which Dynamo cannot trace, and runs as the opaque custom op ``tilefuse::grouped_mlp_unfused``
(``traced_unfused``).

``recipe`` travels as a str through the custom ops ("" for None).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch

from ... import policy
from ...device import custom_op_on_tensor_device
from ...tuning import BASELINE, entries, lookup_config
from ...tuning.table import collecting_any
from ...utils import readable
from ..autograd_common import create_graph_grads, is_batched
from . import compose, configs, launch, recipes
from .reference import grouped_glu_mlp_backward_reference, grouped_glu_mlp_reference, grouped_glu_mlp_unfused


COMPOSE = compose.NAME   # route's answer for the compose route


def route(problem, device: torch.device, level: int | None = None) -> configs.GemmConfig | str | None:
    """The path the op runs for ``problem`` (tune.GroupedProblem) on ``device``. Nothing but the
    unfused composition where kernels may not run there (level 0, no Triton, a CPU without the
    interpreter); else:

    - recipe None: the tuning table's winner for the problem's key on this GPU at level >= 2
      (a GemmConfig: the fused kernels' tiles, or with ``compose`` the compose route with its
      weight gradients in Gluon); otherwise the baseline (what a key never swept runs too):
      ``COMPOSE``, the compose route, where ``torch._grouped_mm`` takes the dtype and row sizes
      (``compose.takes``), else the fused kernels at their heuristic tiles (rows off 16 bytes,
      or a torch without ``_grouped_mm``: no per-expert loop reading the counts on the host);
    - a quantized recipe (no unfused composition on Hopper): its kernels, with the table's
      winner at level >= 2 or else the heuristic config.
    None with a recipe runs the recipe's plain-PyTorch rendering (recipes.RecipeReferenceFunction)."""
    level = policy.get_level() if level is None else level   # read once (a call plan passes its own)
    if not policy.kernels_enabled(device, level) or policy.eager_tracing():
        return None
    tuned = lookup_config("grouped_glu_mlp", problem) if level >= 2 else None
    if problem.recipe:
        return tuned or configs.heuristic("fwd", problem.itemsize, problem.recipe)
    if tuned is not None:
        return tuned
    return COMPOSE if compose.takes(problem.itemsize, problem.hidden, problem.ffn) else \
        configs.heuristic("fwd", problem.itemsize)


def route_reads_tokens(problem, device: torch.device, level: int | None = None) -> bool:
    """Whether ``route``'s answer for ``problem`` can change with its token bucket. Only the
    tuning table's lookup reads the bucket (level >= 2, where kernels run), and it answers
    differently for another bucket only where the table holds a winner other than the
    baseline for the problem's key at some bucket, or where a ``collecting()`` block records
    the lookups (``tilefuse.tune(model)`` learns the key with its bucket). Under torch.compile
    (api.py) a dynamic token count guards the graph on its bucket only where this holds, so
    elsewhere one graph serves every count, as it does for plain PyTorch code."""
    level = policy.get_level() if level is None else level
    if level < 2 or not policy.kernels_enabled(device, level) or policy.eager_tracing():
        return False
    if collecting_any():
        return True
    from .tune import FAMILY
    for family, key, _, entry in entries():
        if family != FAMILY.name or entry.winner == BASELINE:
            continue
        try:
            swept = FAMILY.problem_for_key(key)
        except ValueError:   # not a key of this family's form: it cannot match the problem
            continue
        if dataclasses.replace(swept, n_tokens=problem.n_tokens) == problem:
            return True
    return False


def _bias_out(x, db):
    """A bias gradient as a custom op returns it: an empty tensor for a missing bias."""
    return x.new_empty(0) if db is None else db


def _grads_fake(x, probs, w1, w2, b1, b2):
    """The backward custom ops' fake results: (dx, dprobs, dw1, dw2, db1, db2) of the right
    shapes, an empty tensor for a missing bias."""
    return (x.new_empty(x.shape), probs.new_empty(probs.shape), w1.new_empty(w1.shape), w2.new_empty(w2.shape),
            x.new_empty(0) if b1 is None else b1.new_empty(b1.shape),
            x.new_empty(0) if b2 is None else b2.new_empty(b2.shape))


def _no_double_backward(recipe) -> None:
    if recipe:
        raise recipes.double_backward_error(recipe)


def _unfused_grads(ctx, inputs, dy, activation, interleave):
    """create_graph: differentiate the unfused composition; no fused kernel runs."""
    def forward(x, counts, probs, w1, w2, b1, b2):
        return grouped_glu_mlp_unfused(x, counts, probs, w1, w2, activation=activation, glu_interleave=interleave,
                                       fc1_bias=b1, fc2_bias=b2)
    # A second backward's incoming gradients (g.sum().backward() gives expanded ones) are laid
    # out by the composition's inputs before torch._grouped_mm's backward reads them
    # (reference._LaidOutGradient).
    return create_graph_grads(ctx, forward, inputs, dy)


def _batched_grads(ctx, inputs, dy, activation, interleave, recipe):
    """A batched dy (the older vmap's: ``autograd.grad(is_grads_batched=True)``,
    ``jacobian(vectorize=True)``), whose memory neither the kernels nor torch._grouped_mm can
    read: differentiate the per-expert reference."""
    if recipe:
        raise recipes.batched_gradients_error(recipe)

    def forward(x, counts, probs, w1, w2, b1, b2):
        return grouped_glu_mlp_reference(x, counts, probs, w1, w2, activation=activation, glu_interleave=interleave,
                                         fc1_bias=b1, fc2_bias=b2)
    return create_graph_grads(ctx, forward, inputs, dy)


def _kernel_grads(ctx, dy, run_backward, n_trailing):
    """Gradients of (x, counts, probs, w1, w2, b1, b2) and ``n_trailing`` non-tensor arguments:
    the unfused composition's under create_graph, the reference's for a batched dy, else
    ``run_backward(dy, *saved tensors) -> (dx, dprobs, dw1, dw2, db1, db2)`` (the saved (x, ...,
    z, h), then the caller's). The saved tensors are unpacked once: a saved_tensors_hooks
    unpack (save_on_cpu's copy back to the device) runs on each read."""
    saved = ctx.saved_tensors
    x, counts, probs, w1, w2, b1, b2, z, h = saved[:9]
    if is_batched(dy):
        return (*_batched_grads(ctx, (x, counts, probs, w1, w2, b1, b2), dy, ctx.activation, ctx.interleave or None,
                                ctx.recipe), *(None,) * n_trailing)
    if torch.is_grad_enabled():
        _no_double_backward(ctx.recipe)
        return (*_unfused_grads(ctx, (x, counts, probs, w1, w2, b1, b2), dy, ctx.activation,
                                ctx.interleave or None), *(None,) * n_trailing)
    dx, dprobs, dw1, dw2, db1, db2 = run_backward(readable(dy), *saved)
    return (dx, None, dprobs, dw1, dw2, db1 if b1 is not None else None, db2 if b2 is not None else None,
            *(None,) * n_trailing)


def _flat(pair) -> tuple:
    """(data, scales, data, scales) of a pair of launch.forward's copies (recipes.QuantWeight,
    recipes.QuantRows), four Nones for a pair not made."""
    return (None,) * 4 if pair is None else (pair[0].data, pair[0].scales, pair[1].data, pair[1].scales)


def _copy_pairs(x, h, w1_data, w1_scales, w2_data, w2_scales, x_cols_data, x_cols_scales, h_cols_data,
                h_cols_scales):
    """(dgrad_weights, saved_cols) for launch.backward from the eight copy tensors (fp8_block's
    only: no other recipe keeps copies); None for a pair not made (None, or the forward op's
    placeholders)."""
    kept = cols = None
    if w1_data is not None and w1_data.dim() == 3:
        kept = (recipes.QuantWeight(w1_data, w1_scales, 0, 0, None),
                recipes.QuantWeight(w2_data, w2_scales, 0, 0, None))
    if x_cols_data is not None and x_cols_data.dim() == 2:
        cols = (recipes.QuantRows(x_cols_data, x_cols_scales, x.shape[1], None),
                recipes.QuantRows(h_cols_data, h_cols_scales, h.shape[1], None))
    return kept, cols


class GroupedMLPFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, counts, probs, w1, w2, b1, b2, activation, interleave, config, recipe):
        # fp8_block: the forward's weight quantizers also write the backward's dgrad copies, and
        # x's and h's quantizers their column-wise copies where a weight's gradient will be asked
        # for (the weight gradients' operands). Saved with the inputs, not held on ctx, so that
        # saved_tensors_hooks (save_on_cpu) and activation checkpointing handle them too.
        grads = ctx.needs_input_grad
        keep_dgrad, keep_cols = any(grads), grads[3] or grads[4]
        y, z, h, *kept = launch.forward(x, counts, probs, w1, w2, b1, b2, activation, interleave, config=config,
                                        recipe=recipe, keep_dgrad_weights=keep_dgrad, keep_cols=keep_cols)
        dgrad_weights = kept[0] if keep_dgrad else None   # launch.forward: the pairs asked for, in order
        cols = kept[-1] if keep_cols else None
        ctx.save_for_backward(x, counts, probs, w1, w2, b1, b2, z, h, *_flat(dgrad_weights), *_flat(cols))
        ctx.activation, ctx.interleave, ctx.config, ctx.recipe = activation, interleave, config, recipe
        return y

    @staticmethod
    def backward(ctx, dy):
        def run(dy, x, counts, probs, w1, w2, b1, b2, z, h, *copies):
            dgrad_weights, saved_cols = _copy_pairs(x, h, *copies)
            return launch.backward(dy, x, counts, probs, w1, w2, b1, b2, z, h, ctx.activation, ctx.interleave,
                                   config=ctx.config, recipe=ctx.recipe, dgrad_weights=dgrad_weights,
                                   saved_cols=saved_cols, weight_grads=ctx.needs_input_grad[3:5])
        return _kernel_grads(ctx, dy, run, 4)   # activation, interleave, config, recipe


# --- custom ops (torch.compile) -------------------------------------------------------------

def _interleave_arg(glu_interleave):
    return 0 if glu_interleave is None else int(glu_interleave)


# fp8_block's dgrad weight copies and x's and h's column-wise copies travel from the forward op
# to the backward op as eight extra outputs (W1 and W2 dgrad data and scales,
# recipes.QuantWeight; x's and h's column-wise data and scales, recipes.QuantRows); empty for
# the other recipes, and where the call keeps none (``keep`` off: no backward will run;
# ``keep_cols`` off: no weight gradient will be asked for, the column-wise copies' only reader).
_NO_COPY = (0,)


def _dgrad_copy_shapes(w1, w2, recipe: str):
    """[(shape, dtype)] of the four dgrad-copy tensors the forward op returns."""
    if recipe != "fp8_block":
        return [(_NO_COPY, torch.uint8), (_NO_COPY, torch.float32)] * 2
    E, two_f, H = w1.shape
    F = w2.shape[2]
    return [((E, H, two_f), torch.uint8), ((E, H // 128, two_f // 128), torch.float32),
            ((E, F, H), torch.uint8), ((E, F // 128, H // 128), torch.float32)]


def _cols_copy_shapes(x, w2, recipe: str):
    """[(shape, dtype)] of the four column-wise-copy tensors the forward op returns (x's and h's,
    recipes.quantize_rows_cols: data (N, Tp), scales (Tp / 128, N), Tp = recipes.grouped_rows)."""
    if recipe != "fp8_block":
        return [(_NO_COPY, torch.uint8), (_NO_COPY, torch.float32)] * 2
    T, H = x.shape
    F = w2.shape[2]
    Tp = recipes.grouped_rows(recipe, T, w2.shape[0])
    return [((H, Tp), torch.uint8), ((Tp // 128, H), torch.float32),
            ((F, Tp), torch.uint8), ((Tp // 128, F), torch.float32)]


def _copy_shapes(x, w1, w2, recipe: str, keep: bool, keep_cols: bool):
    """[(shape, dtype)] of the eight copy tensors the forward op returns (placeholders for the
    dgrad copies without ``keep``, for the column-wise ones without ``keep_cols``)."""
    return _dgrad_copy_shapes(w1, w2, recipe if keep else "") + _cols_copy_shapes(x, w2, recipe if keep_cols else "")


def _op_config_args(config: configs.GemmConfig, recipe: str | None) -> tuple:
    """The custom ops' config arguments for a kernels-route ``config`` (every field but the
    compose route's) and ``recipe``: the six tile fields, tma, the recipe ("" for none),
    maxnreg (0 for None), ws, rows_glu, side_stream; ``_op_config`` reads them back."""
    return (config.block_m, config.block_n, config.block_k, config.num_warps, config.num_stages,
            config.programs_per_sm, config.tma, recipe or "", config.maxnreg or 0, config.ws, config.rows_glu,
            config.side_stream)


def _op_config(block_m, block_n, block_k, num_warps, num_stages, programs_per_sm, tma, maxnreg, ws, rows_glu,
               side_stream) -> configs.GemmConfig:
    return configs.GemmConfig(block_m, block_n, block_k, num_warps, num_stages, programs_per_sm, tma,
                              maxnreg or None, ws, rows_glu=rows_glu, side_stream=side_stream)


@torch.library.custom_op("tilefuse::grouped_mlp_fwd", mutates_args=())
@custom_op_on_tensor_device
def grouped_mlp_fwd_op(x: torch.Tensor, counts: torch.Tensor, probs: torch.Tensor, w1: torch.Tensor,
                       w2: torch.Tensor, b1: Optional[torch.Tensor], b2: Optional[torch.Tensor], activation: str,
                       interleave: int, block_m: int, block_n: int, block_k: int, num_warps: int, num_stages: int,
                       programs_per_sm: int, tma: bool = False, recipe: str = "", maxnreg: int = 0,
                       ws: bool = False, rows_glu: bool = True, side_stream: bool = True, keep: bool = True,
                       keep_cols: bool = True
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                  torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, z, h, W1 dgrad data, W1 dgrad scales, W2 dgrad data, W2 dgrad scales, x column-wise
    data, x column-wise scales, h column-wise data, h column-wise scales); the config arguments
    are ``_op_config_args``'. keep: whether a backward can run, hence the dgrad copies are made;
    keep_cols: whether a weight gradient will be asked for, hence x's and h's column-wise
    copies are made (placeholders otherwise; GroupedMLPFunction's rule)."""
    cfg = _op_config(block_m, block_n, block_k, num_warps, num_stages, programs_per_sm, tma, maxnreg, ws, rows_glu,
                     side_stream)
    y, z, h, *pairs = launch.forward(x, counts, probs, w1, w2, b1, b2, activation, interleave or None, config=cfg,
                                     recipe=recipe or None, keep_dgrad_weights=keep, keep_cols=keep_cols)
    # launch.forward: the pairs asked for, in order
    pairs = (pairs[0] if keep else None, pairs[-1] if keep_cols else None)
    shapes = _copy_shapes(x, w1, w2, recipe, keep, keep_cols)
    copies = []
    for n, pair in enumerate(pairs):
        if pair is not None:
            copies += _flat(pair)
        else:   # another recipe (empty), fp8_block at T == 0 (never read: nothing is quantized), or not kept
            copies += [torch.zeros(shape, dtype=dtype, device=x.device) for shape, dtype in shapes[4 * n:4 * n + 4]]
    return y, z, h, *copies


@grouped_mlp_fwd_op.register_fake
def _fwd_fake(x, counts, probs, w1, w2, b1, b2, activation, interleave, block_m, block_n, block_k, num_warps,
              num_stages, programs_per_sm, tma=False, recipe="", maxnreg=0, ws=False, rows_glu=True,
              side_stream=True, keep=True, keep_cols=True):
    T, F = x.shape[0], w2.shape[2]
    copies = [x.new_empty(shape, dtype=dtype) for shape, dtype in _copy_shapes(x, w1, w2, recipe, keep, keep_cols)]
    return x.new_empty(x.shape), x.new_empty((T, 2 * F)), x.new_empty((T, F)), *copies


@torch.library.custom_op("tilefuse::grouped_mlp_bwd", mutates_args=())
@custom_op_on_tensor_device
def grouped_mlp_bwd_op(dy: torch.Tensor, x: torch.Tensor, counts: torch.Tensor, probs: torch.Tensor,
                       w1: torch.Tensor, w2: torch.Tensor, b1: Optional[torch.Tensor], b2: Optional[torch.Tensor],
                       z: torch.Tensor, h: torch.Tensor, w1_data: torch.Tensor, w1_scales: torch.Tensor,
                       w2_data: torch.Tensor, w2_scales: torch.Tensor, x_cols_data: torch.Tensor,
                       x_cols_scales: torch.Tensor, h_cols_data: torch.Tensor, h_cols_scales: torch.Tensor,
                       activation: str, interleave: int, block_m: int, block_n: int, block_k: int, num_warps: int,
                       num_stages: int, programs_per_sm: int, tma: bool = False, recipe: str = "", maxnreg: int = 0,
                       ws: bool = False, rows_glu: bool = True, side_stream: bool = True, need_dw1: bool = True,
                       need_dw2: bool = True
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dprobs, dw1, dw2, db1, db2); a missing bias's gradient, and a weight gradient not
    asked for (need_dw1 / need_dw2 off: neither its GEMM nor its operands' column-wise
    quantizers run), is an empty tensor. The dgrad copies and the column-wise copies are the
    forward op's (empty: quantized here, where a weight gradient needs them)."""
    cfg = _op_config(block_m, block_n, block_k, num_warps, num_stages, programs_per_sm, tma, maxnreg, ws, rows_glu,
                     side_stream)
    kept, cols = _copy_pairs(x, h, w1_data, w1_scales, w2_data, w2_scales, x_cols_data, x_cols_scales, h_cols_data,
                             h_cols_scales)
    dx, dprobs, dw1, dw2, db1, db2 = launch.backward(dy, x, counts, probs, w1, w2, b1, b2, z, h, activation,
                                                     interleave or None, config=cfg, recipe=recipe or None,
                                                     dgrad_weights=kept, saved_cols=cols,
                                                     weight_grads=(need_dw1, need_dw2))
    dw1, dw2 = (x.new_empty(0) if dw is None else dw for dw in (dw1, dw2))
    return dx, dprobs, dw1, dw2, _bias_out(x, db1), _bias_out(x, db2)


@grouped_mlp_bwd_op.register_fake
def _bwd_fake(dy, x, counts, probs, w1, w2, b1, b2, z, h, w1_data, w1_scales, w2_data, w2_scales, x_cols_data,
              x_cols_scales, h_cols_data, h_cols_scales, activation, interleave, block_m, block_n, block_k, num_warps,
              num_stages, programs_per_sm, tma=False, recipe="", maxnreg=0, ws=False, rows_glu=True,
              side_stream=True, need_dw1=True, need_dw2=True):
    dx, dprobs, dw1, dw2, db1, db2 = _grads_fake(x, probs, w1, w2, b1, b2)
    return dx, dprobs, dw1 if need_dw1 else x.new_empty(0), dw2 if need_dw2 else x.new_empty(0), db1, db2


def _setup_context(ctx, inputs, output):
    # keep and keep_cols are on where a backward runs and where it asks for a weight gradient
    x, counts, probs, w1, w2, b1, b2, activation, interleave, *cfg, _keep, _keep_cols = inputs
    y, z, h, *copies = output
    ctx.save_for_backward(x, counts, probs, w1, w2, b1, b2, z, h, *copies)
    ctx.activation, ctx.interleave, ctx.cfg = activation, interleave, cfg
    ctx.recipe = cfg[7]   # _op_config_args' order
    ctx.mark_non_differentiable(z, h, *copies)


def _backward(ctx, dy, *_unused):
    # a weight that needs no gradient (frozen experts) gets None, and no weight-gradient GEMM
    # or column-wise quantizers: the inputs' order puts fc1's and fc2's weights fourth and fifth
    need_dw1, need_dw2 = ctx.needs_input_grad[3:5]

    def run(*tensors):   # dy, the saved (x, ..., z, h) and the eight copies: the backward op's order
        dx, dprobs, dw1, dw2, db1, db2 = grouped_mlp_bwd_op(*tensors, ctx.activation, ctx.interleave, *ctx.cfg,
                                                            need_dw1, need_dw2)
        # the op's placeholder for a gradient not computed is an empty tensor
        return dx, dprobs, dw1 if need_dw1 else None, dw2 if need_dw2 else None, db1, db2
    # activation, interleave, _op_config_args, keep, keep_cols
    return _kernel_grads(ctx, dy, run, 4 + len(ctx.cfg))


torch.library.register_autograd("tilefuse::grouped_mlp_fwd", _backward, setup_context=_setup_context)


def fused_apply(x, counts, probs, w1, w2, b1, b2, activation, glu_interleave, config: configs.GemmConfig,
                recipe: str | None = None):
    """y of the kernels' path for inputs of any strides. Inputs the kernels cannot read as they
    are laid out are copied here, once, before the forward (a differentiable copy: gradients
    flow back to the view), so the backward reads the saved copies without copying again;
    the launchers bring them to that layout themselves too, for their other callers."""
    x, counts, probs, b1, b2 = launch.kernel_layouts(x, counts, probs, b1, b2)
    if torch.compiler.is_compiling():
        # keep the backward's copies only where a backward can run, and x's and h's column-wise
        # ones only where it asks for a weight gradient, decided when traced (Dynamo guards on
        # the grad mode and on requires_grad): a torch.no_grad graph makes none, frozen experts
        # no column-wise copies (GroupedMLPFunction's rule)
        keep = needs_grad(x, probs, w1, w2, b1, b2)
        return grouped_mlp_fwd_op(x, counts, probs, w1, w2, b1, b2, activation, _interleave_arg(glu_interleave),
                                  *_op_config_args(config, recipe), keep,
                                  keep and (w1.requires_grad or w2.requires_grad))[0]
    if not needs_grad(x, probs, w1, w2, b1, b2):
        # no backward will run (torch.no_grad, inference_mode, nothing requiring grad): the
        # forward alone, without the copies a recipe's backward would read (the Function's
        # needs_input_grad says requires_grad whatever the grad mode)
        return launch.forward(x, counts, probs, w1, w2, b1, b2, activation, glu_interleave, config=config,
                              recipe=recipe)[0]
    return GroupedMLPFunction.apply(x, counts, probs, w1, w2, b1, b2, activation, glu_interleave, config, recipe)


# --- the unfused composition as an opaque op (torch.compile, where it reads counts on the host) --

@torch.library.custom_op("tilefuse::grouped_mlp_unfused", mutates_args=())
@custom_op_on_tensor_device
def grouped_mlp_unfused_op(x: torch.Tensor, counts: torch.Tensor, probs: torch.Tensor, w1: torch.Tensor,
                           w2: torch.Tensor, b1: Optional[torch.Tensor], b2: Optional[torch.Tensor], activation: str,
                           interleave: int) -> torch.Tensor:
    """y of ``grouped_glu_mlp_unfused``, run eagerly when the graph runs: its per-expert loop or
    ``torch._grouped_mm`` fallback reads the counts on the host there (a synchronization on
    CUDA), which tracing cannot."""
    return grouped_glu_mlp_unfused(x, counts, probs, w1, w2, activation=activation, glu_interleave=interleave or None,
                                   fc1_bias=b1, fc2_bias=b2).contiguous()


@grouped_mlp_unfused_op.register_fake
def _unfused_fake(x, counts, probs, w1, w2, b1, b2, activation, interleave):
    return x.new_empty(x.shape)


@torch.library.custom_op("tilefuse::grouped_mlp_unfused_bwd", mutates_args=())
@custom_op_on_tensor_device
def grouped_mlp_unfused_bwd_op(dy: torch.Tensor, x: torch.Tensor, counts: torch.Tensor, probs: torch.Tensor,
                               w1: torch.Tensor, w2: torch.Tensor, b1: Optional[torch.Tensor],
                               b2: Optional[torch.Tensor], activation: str, interleave: int
                               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                          torch.Tensor]:
    """(dx, dprobs, dw1, dw2, db1, db2) by the spec's explicit backward formulas, per expert in
    float32 (reference.grouped_glu_mlp_backward_reference: z recomputed, counts read on the
    host); a missing bias's gradient is an empty tensor."""
    g = grouped_glu_mlp_backward_reference(dy, x, counts, probs, w1, w2, activation=activation,
                                           glu_interleave=interleave or None, fc1_bias=b1, fc2_bias=b2)
    return (g["dx"], g["dprobs"], g["dfc1_weight"], g["dfc2_weight"], _bias_out(x, g["dfc1_bias"]),
            _bias_out(x, g["dfc2_bias"]))


@grouped_mlp_unfused_bwd_op.register_fake
def _unfused_bwd_fake(dy, x, counts, probs, w1, w2, b1, b2, activation, interleave):
    return _grads_fake(x, probs, w1, w2, b1, b2)


def _unfused_setup_context(ctx, inputs, output):
    x, counts, probs, w1, w2, b1, b2, activation, interleave = inputs
    ctx.save_for_backward(x, counts, probs, w1, w2, b1, b2)
    ctx.activation, ctx.interleave = activation, interleave


def _unfused_backward(ctx, dy):
    x, counts, probs, w1, w2, b1, b2 = ctx.saved_tensors
    if is_batched(dy):
        return (*_batched_grads(ctx, (x, counts, probs, w1, w2, b1, b2), dy, ctx.activation, ctx.interleave or None,
                                None), None, None)
    if torch.is_grad_enabled():
        return (*_unfused_grads(ctx, (x, counts, probs, w1, w2, b1, b2), dy, ctx.activation, ctx.interleave or None),
                None, None)
    dx, dprobs, dw1, dw2, db1, db2 = grouped_mlp_unfused_bwd_op(dy, x, counts, probs, w1, w2, b1, b2, ctx.activation,
                                                                ctx.interleave)
    return (dx, None, dprobs, dw1, dw2, db1 if b1 is not None else None, db2 if b2 is not None else None,
            None, None)


torch.library.register_autograd("tilefuse::grouped_mlp_unfused", _unfused_backward,
                                setup_context=_unfused_setup_context)


def traced_unfused(x, counts, probs, w1, w2, b1, b2, activation, glu_interleave):
    """The unfused composition for torch.compile where it cannot be traced (module docstring)."""
    return grouped_mlp_unfused_op(x, counts, probs, w1, w2, b1, b2, activation, _interleave_arg(glu_interleave))


# --- the compose route (compose.py) ----------------------------------------------------------

def _save_compose(ctx, inputs, z, h, ends):
    """What the compose route's backward reads: the forward's inputs, z, h, the offsets and
    the backward's Gluon tiles (compose.gluon_tiles' first four; compose.VENDOR:
    torch._grouped_mm)."""
    x, counts, probs, w1, w2, b1, b2, activation, interleave, *tiles = inputs
    ctx.save_for_backward(x, counts, probs, w1, w2, b1, b2, z, h, ends)
    ctx.activation, ctx.interleave, ctx.recipe = activation, interleave, None
    ctx.tiles = tuple(tiles[:4])


def _compose_grads(ctx, dy, backward):
    """The gradients of the fourteen forward arguments from ``backward`` (compose.backward or its
    custom op, which share a signature), or of the unfused composition under create_graph. A
    weight that needs no gradient (frozen experts) gets None and no weight-gradient GEMM: the
    inputs' order puts fc1's and fc2's weights fourth and fifth."""
    need_dw1, need_dw2 = ctx.needs_input_grad[3:5]

    def run(dy, x, counts, probs, w1, w2, b1, b2, z, h, ends):
        dx, dprobs, dw1, dw2, db1, db2 = backward(dy, x, counts, ends, probs, w1, w2, b1, b2, z, h, ctx.activation,
                                                  ctx.interleave, *ctx.tiles, need_dw1=need_dw1, need_dw2=need_dw2)
        # the custom op's placeholder for a gradient not computed is an empty tensor
        return dx, dprobs, dw1 if need_dw1 else None, dw2 if need_dw2 else None, db1, db2
    return _kernel_grads(ctx, dy, run, 7)   # activation, interleave, the four tile ints, rows_glu


class ComposeFunction(torch.autograd.Function):
    """The compose route for tensors compose.lay_out has laid out; ``plan``: a compose.
    ForwardPlan for their metadata (plan.py), whose run is the forward's launches decided
    once and whose backward the backward's, or None."""

    @staticmethod
    def forward(ctx, x, counts, probs, w1, w2, b1, b2, activation, interleave, wgrad_block_m, wgrad_stages,
                rows_block_n, rows_stages, rows_glu, plan):
        if plan is not None:
            y, z, h, ends = plan.run(x, counts, probs, w1, w2, b1, b2)
        else:
            y, z, h, ends = compose.forward(x, counts, probs, w1, w2, b1, b2, activation, interleave, rows_block_n,
                                            rows_stages, rows_glu, laid_out=True)
        _save_compose(ctx, (x, counts, probs, w1, w2, b1, b2, activation, interleave, wgrad_block_m, wgrad_stages,
                            rows_block_n, rows_stages, rows_glu), z, h, ends)
        ctx.plan = plan
        return y

    @staticmethod
    def backward(ctx, dy):
        # a plan's backward: its launches decided once too (compose.BackwardPlan)
        run = compose.backward if ctx.plan is None else ctx.plan.backward
        return (*_compose_grads(ctx, dy, run), None)   # and the plan


@torch.library.custom_op("tilefuse::grouped_mlp_compose_fwd", mutates_args=())
@custom_op_on_tensor_device
def grouped_mlp_compose_fwd_op(x: torch.Tensor, counts: torch.Tensor, probs: torch.Tensor, w1: torch.Tensor,
                               w2: torch.Tensor, b1: Optional[torch.Tensor], b2: Optional[torch.Tensor],
                               activation: str, interleave: int, wgrad_block_m: int, wgrad_stages: int,
                               rows_block_n: int, rows_stages: int, rows_glu: bool
                               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, z, h, ends) of compose.forward (interleave 0: halves) at the rows tile (and
    rows_glu); the wgrad tile is the backward's (setup_context keeps the backward's four)."""
    return compose.forward(x, counts, probs, w1, w2, b1, b2, activation, interleave, rows_block_n, rows_stages,
                           rows_glu)


@grouped_mlp_compose_fwd_op.register_fake
def _compose_fwd_fake(x, counts, probs, w1, w2, b1, b2, activation, interleave, wgrad_block_m, wgrad_stages,
                      rows_block_n, rows_stages, rows_glu):
    T, F = x.shape[0], w2.shape[2]
    return (x.new_empty(x.shape), x.new_empty((T, 2 * F)), x.new_empty((T, F)),
            counts.new_empty(counts.shape, dtype=torch.int32))


@torch.library.custom_op("tilefuse::grouped_mlp_compose_bwd", mutates_args=())
@custom_op_on_tensor_device
def grouped_mlp_compose_bwd_op(dy: torch.Tensor, x: torch.Tensor, counts: torch.Tensor, ends: torch.Tensor,
                               probs: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, b1: Optional[torch.Tensor],
                               b2: Optional[torch.Tensor], z: torch.Tensor, h: torch.Tensor, activation: str,
                               interleave: int, wgrad_block_m: int, wgrad_stages: int, rows_block_n: int,
                               rows_stages: int, need_dw1: bool = True, need_dw2: bool = True
                               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                          torch.Tensor]:
    """(dx, dprobs, dw1, dw2, db1, db2) of compose.backward; a missing bias's gradient, and a
    weight gradient not asked for (need_dw1 / need_dw2 off: its GEMM does not run), is an
    empty tensor."""
    dx, dprobs, dw1, dw2, db1, db2 = compose.backward(dy, x, counts, ends, probs, w1, w2, b1, b2, z, h, activation,
                                                      interleave, wgrad_block_m, wgrad_stages, rows_block_n,
                                                      rows_stages, need_dw1, need_dw2)
    dw1, dw2 = (x.new_empty(0) if dw is None else dw for dw in (dw1, dw2))
    return dx, dprobs, dw1, dw2, _bias_out(x, db1), _bias_out(x, db2)


@grouped_mlp_compose_bwd_op.register_fake
def _compose_bwd_fake(dy, x, counts, ends, probs, w1, w2, b1, b2, z, h, activation, interleave, wgrad_block_m,
                      wgrad_stages, rows_block_n, rows_stages, need_dw1=True, need_dw2=True):
    dx, dprobs, dw1, dw2, db1, db2 = _grads_fake(x, probs, w1, w2, b1, b2)
    return dx, dprobs, dw1 if need_dw1 else x.new_empty(0), dw2 if need_dw2 else x.new_empty(0), db1, db2


def _compose_setup_context(ctx, inputs, output):
    _, z, h, ends = output
    _save_compose(ctx, inputs, z, h, ends)
    ctx.mark_non_differentiable(z, h, ends)


def _compose_backward(ctx, dy, *_unused):
    return _compose_grads(ctx, dy, grouped_mlp_compose_bwd_op)


torch.library.register_autograd("tilefuse::grouped_mlp_compose_fwd", _compose_backward,
                                setup_context=_compose_setup_context)


def needs_grad(x, probs, w1, w2, b1, b2) -> bool:
    """Whether the op's result needs an autograd node: grad mode on and a float input that
    requires grad."""
    return torch.is_grad_enabled() and (x.requires_grad or probs.requires_grad or w1.requires_grad
                                        or w2.requires_grad or (b1 is not None and b1.requires_grad)
                                        or (b2 is not None and b2.requires_grad))


def compose_apply(x, counts, probs, w1, w2, b1, b2, activation, glu_interleave,
                  tuned: configs.GemmConfig | None = None):
    """y of the compose route for inputs of any strides. What its GEMMs and glue cannot read as
    laid out is copied here, once, before the forward (differentiable copies: gradients flow
    back to the views), so the backward reads the saved copies as they are. ``tuned``: a
    ``GemmConfig.compose`` config, whose tiles run the weight gradients and the row GEMMs
    (compose.gluon_tiles)."""
    tile = compose.gluon_tiles(tuned)
    x, counts, probs, w1, w2, b1, b2 = compose.lay_out(x, counts, probs, w1, w2, b1, b2)
    if torch.compiler.is_compiling():
        return grouped_mlp_compose_fwd_op(x, counts, probs, w1, w2, b1, b2, activation,
                                          _interleave_arg(glu_interleave), *tile)[0]
    if not needs_grad(x, probs, w1, w2, b1, b2):
        # nothing to differentiate: the forward alone, as a native op records no autograd node
        return compose.forward(x, counts, probs, w1, w2, b1, b2, activation, glu_interleave, *tile[2:],
                               laid_out=True)[0]
    return ComposeFunction.apply(x, counts, probs, w1, w2, b1, b2, activation, glu_interleave, *tile, None)
