"""grouped_glu_mlp launchers: tensors in, tensors out; no host synchronisation.

tokens_per_expert is only ever read by kernels (and by one device-side assert that it is
non-negative and sums to T). The row-tile schedule is found in-kernel from the counts; grids
are sized by the static bound cdiv(T, BLOCK_M) + E and a persistent program count, so a call
is CUDA-graph capturable and T may change between calls.

Inputs may have any strides: each launcher copies what its kernels cannot read as laid out
(kernel_layouts, summed_rows), a no-op for contiguous inputs; outputs and gradients are
allocated contiguous.
"""

from __future__ import annotations

import functools

import torch

from ... import launches, policy
from ...device import capability_major, num_sms
from ...utils import cdiv
from . import recipes, streams
from .configs import GemmConfig, dglu_config, dglu_tile_n, glu_config, heuristic
from .reference import glu_index

ACTIVATIONS = {"swiglu": 0, "geglu": 1}


def unit_rows(t: torch.Tensor | None) -> torch.Tensor | None:
    """t, or a contiguous copy where its last dimension is not unit-stride: the kernels read a
    (rows, cols) operand at ``ptr + row * stride(0) + col``, any row stride (0 included: an
    expanded row, or an expert-broadcast bias), and write their outputs row-major."""
    if t is None or t.shape[-1] <= 1 or t.stride(-1) == 1:
        return t
    return t.contiguous()


def summed_rows(t: torch.Tensor) -> torch.Tensor:
    """t, or a contiguous copy unless it is contiguous and 16-byte aligned: for an operand a
    kernel reduces with tl.sum (dy, in the bias-gradient column sums). On a GPU a launch is
    specialized on its pointers' 16-byte alignment and its strides' divisibility by 16, and
    the load layout compiled from that decides how a tl.sum's terms are split between
    threads: another order of additions, other roundings (H200: db2 from a dy one element
    into a wider buffer differed in the last bit). So laid out, it compiles as the
    contiguous call does. (Dots and elementwise epilogues do not depend on the load layout.)"""
    if t.is_contiguous() and t.data_ptr() % 16 == 0:
        return t
    return t.clone(memory_format=torch.contiguous_format)


def check_counts(counts: torch.Tensor, n_tokens: int) -> None:
    """tokens_per_expert checked on the device (each in [0, T], summing to T), in the one
    launch of compose's offsets kernel where E allows it (reference.assert_counts_on_device's
    rule in torch ops otherwise); the offsets it makes are not needed here."""
    from .compose import _ends   # compose imports this module
    _ends(counts, n_tokens)


def kernel_layouts(x, counts, probs, b1, b2):
    """(x, counts, probs, b1, b2) as the kernels read them, each a copy only where it is not
    already so laid out: tokens_per_expert and probs are read at ``ptr + i`` (contiguous), x
    and the biases through their row stride (``unit_rows``). The weights' three strides are
    kernel arguments (recipe None: see ``addressable``), or the quantizers read any strides."""
    return unit_rows(x), counts.contiguous(), probs.contiguous(), unit_rows(b1), unit_rows(b2)


# grouped_gemm_kernel reads an unquantized weight at expert_base + k * stride + n * stride: the
# expert's base in 64 bits, the offset inside one expert in 32 (kernels.mma_step).
INT32_OFFSETS = 2 ** 31


def addressable(w: torch.Tensor, name: str, recipe=None) -> torch.Tensor:
    """An (E, R, C) weight as the fused kernels can address it: ValueError naming the argument
    where one expert's R x C matrix alone has 2**31 elements (no layout addresses it: every
    recipe's offsets inside an expert, the weight gradients' stores included, are 32-bit);
    without a recipe (grouped_gemm_kernel reads w through its strides) w, or its contiguous copy
    where an element of one expert lies 2**31 or more elements past that expert's first (a
    layout with the experts not outermost, e.g. a permuted (R, E, C) tensor: at E = 256,
    R = 4096, C = 7168 its rows lie E * C apart). A recipe's quantized copies are contiguous."""
    if w.shape[1] * w.shape[2] >= INT32_OFFSETS:
        raise ValueError(f"grouped_glu_mlp: {name} has {w.shape[1] * w.shape[2]} elements an expert; the fused "
                         f"kernels address fewer than 2**31")
    if recipe is not None or (w.shape[1] - 1) * w.stride(1) + (w.shape[2] - 1) * w.stride(2) < INT32_OFFSETS:
        return w
    return w.contiguous()


def _ieee(t: torch.Tensor) -> bool:
    return t.dtype == torch.float32


@functools.lru_cache(maxsize=256)
def glu_scale_uniform(ffn: int, interleave: int, block_n: int) -> bool:
    """Whether every BLOCK_N tile of activation columns has its gate columns in one 128-wide
    block of FC1 columns and its up columns in one (kernels.fp8_b_scale). True for the halves
    layout (F a multiple of 128) and for interleaves dividing BLOCK_N <= 64."""
    for cols in glu_index(ffn, interleave or None):
        blocks = (cols // 128).tolist()
        for j0 in range(0, ffn, block_n):
            if len(set(blocks[j0:j0 + block_n])) > 1:
                return False
    return True


# --- TMA (GemmConfig.tma) -------------------------------------------------------------------

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:   # a Triton without host-side tensor descriptors: the pointer loads only
    TensorDescriptor = None

def _tma_device(t: torch.Tensor) -> bool:
    """Whether ``t``'s device runs descriptor loads: Hopper or newer, or the interpreter."""
    if TensorDescriptor is None:
        return False
    if t.device.type != "cuda":
        return True   # kernels run here only in Triton's interpreter
    return capability_major(t.device) >= 9


def _glu_runs(interleave: int, block_n: int) -> bool | None:
    """How a BLOCK_N tile of activation columns finds its gate and up columns in a GLU layout
    with ``interleave``: False as contiguous columns (halves, interleaves that are multiples of
    BLOCK_N), True as runs (power-of-two interleaves dividing BLOCK_N), None when neither
    (the pointer loads)."""
    if not interleave or interleave % block_n == 0:
        return False
    if block_n % interleave or interleave & (interleave - 1):
        return None
    return True


# Recipes whose operands the descriptors read: none (16-bit x), and fp8_block's float8 data
# (its scales stay pointer loads). mxfp8 / nvfp4 decode in their loaders.
TMA_RECIPES = (None, "fp8_block")


def _tma_rows(t: torch.Tensor) -> bool:
    """Whether the 2-D operand ``t`` (16-bit, or fp8_block's float8 bits) can be read through a
    descriptor as laid out: unit column stride, 16-byte aligned base and row stride, no empty
    dimension."""
    return (t.dim() == 2 and t.element_size() in (1, 2) and t.stride(1) == 1
            and t.stride(0) * t.element_size() % 16 == 0 and t.data_ptr() % 16 == 0 and t.numel() > 0)


def _float8(t: torch.Tensor) -> torch.Tensor:
    """fp8_block's E4M3 bits (uint8) as float8_e4m3fn, the element type the dots take."""
    return t.view(torch.float8_e4m3fn) if t.dtype == torch.uint8 else t


def _descriptor(t: torch.Tensor, shape, strides, block) -> "TensorDescriptor":
    return TensorDescriptor(t, list(shape), list(strides), list(block))


def _tma_weight(w: torch.Tensor, cfg: GemmConfig, epilogue: int, b_strides, K: int, interleave: int, F: int):
    """(descriptor, B mode, weight rows per expert) for reading weight ``w`` (E, R, C) as the
    GEMM's B through TMA, or None where its layout or the tile do not allow it. B_e(k, n) is
    w[e, n, k] (TMA_B_ROWS: rows n, K along C) or w[e, k, n] (TMA_B_COLS: the (E * K, N)
    matrix; K must be a multiple of BLOCK_K so that no K tile reaches the next expert); the
    GLU reads gate and up rows: halves and interleaves that are multiples of BLOCK_N as
    contiguous rows, power-of-two interleaves dividing BLOCK_N as runs (TMA_B_RUNS)."""
    from .kernels import EPI_GLU, TMA_B_COLS, TMA_B_ROWS, TMA_B_RUNS
    E, R, C = w.shape
    if not (w.element_size() in (1, 2) and w.stride(2) == 1 and w.stride(1) * w.element_size() % 16 == 0
            and w.stride(0) == R * w.stride(1) and w.data_ptr() % 16 == 0 and w.numel() > 0):
        return None
    ld = w.stride(1)
    flat = (E * R, C), (ld, 1)
    if tuple(b_strides) == (w.stride(0), w.stride(2), w.stride(1)):          # B_e(k, n) = w[e, n, k]
        runs = _glu_runs(interleave, cfg.block_n) if epilogue == EPI_GLU else False
        if runs is None:
            return None
        if runs:
            s = interleave
            desc = _descriptor(w, (E * (F // s), 2, s, C), (2 * s * ld, s * ld, ld, 1),
                               (cfg.block_n // s, 1, s, cfg.block_k))
            return desc, TMA_B_RUNS, R
        return _descriptor(w, *flat, (cfg.block_n, cfg.block_k)), TMA_B_ROWS, R
    if tuple(b_strides) == (w.stride(0), w.stride(1), w.stride(2)) and K % cfg.block_k == 0:   # w[e, k, n]
        return _descriptor(w, *flat, (cfg.block_k, cfg.block_n)), TMA_B_COLS, R
    return None


def tma_plan(epilogue, a, b, cfg: GemmConfig, K: int, b_strides, interleave: int, F: int, recipe=None):
    """(a descriptor, b descriptor, B mode, weight rows per expert) for a grouped_gemm_kernel
    launch with ``cfg``, or None: the pointer loads. TMA is used where cfg.tma asks for it, the
    operands are 16-bit without a recipe or fp8_block's float8 data (TMA_RECIPES), the device
    has the copy engine (sm_90+; any device under the interpreter) and both operands' layouts
    allow descriptors (``_tma_rows``, ``_tma_weight``). fp8_block's fc1 + GLU keeps its pointer
    loads: through descriptors its sm_90 compile spilled 176 bytes against 64 (triton 3.8, the
    heuristic 128x64x128 tile on 4 warps; not timed). Elsewhere the launch reads the same tiles
    through pointers. The results are the same but for the dGLU's dprob partials, whose per-row
    sums follow the layout z is loaded in (dglu_z_plan): summed in another order, equal to
    rounding."""
    from .kernels import EPI_GLU
    if not cfg.tma or recipe not in TMA_RECIPES or (recipe is not None and epilogue == EPI_GLU):
        return None
    if recipe is not None:   # recipes.QuantRows / QuantWeight: their float8 data
        a, b = _float8(a.data), _float8(b.data)
    if not _tma_device(a) or not _tma_rows(a):
        return None
    weight = _tma_weight(b, cfg, epilogue, b_strides, K, interleave, F)
    if weight is None:
        return None
    a_desc = _descriptor(a, a.shape, a.stride(), (cfg.block_m, cfg.block_k))
    return (a_desc, *weight)


def dglu_z_plan(z: torch.Tensor, cfg: GemmConfig, interleave: int, F: int):
    """(descriptor, kernels.load_z_pair mode) for the dGLU epilogue's reads of the saved z
    (T, 2F) in a launch whose operands go through TMA: its gate and up columns of a BLOCK_N
    tile of activation columns as contiguous columns (halves, interleaves that are multiples of
    BLOCK_N) or as runs (power-of-two interleaves dividing BLOCK_N); (None, Z_POINTERS) where
    neither fits z's layout, or where a run is narrower than the 16 bytes a descriptor's strides
    and inner box take (interleave 1, 2 or 4 of 16-bit z: Triton's TensorDescriptor refuses it)."""
    from .kernels import Z_CONTIGUOUS, Z_POINTERS, Z_RUNS
    runs = _glu_runs(interleave, cfg.block_n)
    if not _tma_rows(z) or runs is None or (runs and interleave * z.element_size() % 16):
        return None, Z_POINTERS
    if runs:
        s = interleave
        view = (z.shape[0], F // s, 2, s), (z.stride(0), 2 * s, s, 1)
        return _descriptor(z, *view, (cfg.block_m, cfg.block_n // s, 1, s)), Z_RUNS
    return _descriptor(z, z.shape, z.stride(), (cfg.block_m, cfg.block_n)), Z_CONTIGUOUS


def wgrad_tma_plan(a, b, wcfg: GemmConfig, recipe=None):
    """(a descriptor, b descriptor) for grouped_wgrad_kernel's K steps (16-bit: those inside an
    expert's rows; fp8_block: every block), or None: the pointer loads. a (T, N), b (T, M):
    tiles [BLOCK_K, BLOCK_N] and [BLOCK_K, BLOCK_M]; fp8_block: the column-wise copies' float8
    data a (N, Tp), b (M, Tp) (grouped by expert), tiles [BLOCK_N, BLOCK_K] and [BLOCK_M,
    BLOCK_K]. The same conditions as tma_plan."""
    if not wcfg.tma or recipe not in TMA_RECIPES:
        return None
    a, b = _float8(a), _float8(b)
    if not _tma_device(a) or not (_tma_rows(a) and _tma_rows(b)):
        return None
    if recipe is not None:
        return (_descriptor(a, a.shape, a.stride(), (wcfg.block_n, wcfg.block_k)),
                _descriptor(b, b.shape, b.stride(), (wcfg.block_m, wcfg.block_k)))
    return (_descriptor(a, a.shape, a.stride(), (wcfg.block_k, wcfg.block_n)),
            _descriptor(b, b.shape, b.stride(), (wcfg.block_k, wcfg.block_m)))


def _gemm(epilogue, a, b, c, counts, cfg: GemmConfig, *, K, N, b_strides, ldc, F=1, probs=None, bias=None,
          z=None, part=None, act=0, interleave=0, recipe=None, dz_rows=None, ws=None):
    """One grouped_gemm_kernel launch. a: (T, K) tensor, or a recipes.QuantRows with recipe;
    b: the (E, ., .) weight with b_strides (e, k, n) giving element (k, n) of B_e, or a
    recipes.QuantWeight with recipe (strides then follow from its layout). dz_rows (EPI_DGLU,
    where dglu_quantizes_dz): an empty recipes.QuantRows the epilogue fills with dz's fp8_block
    row-wise copy. A ``cfg.ws`` config runs fp8_block's store GEMMs through
    ws_kernels.fp8_ws_gemm_kernel where it applies (the same bits); ``ws`` (the config's ws and
    rows_glu, for the fc1 + GLU and dGLU launches, whose glu_config and dglu_config drop them)
    its fc1 + GLU where ws_kernels.glu_applies and ws_kernels.TAKES_GLU, and its fc2 dgrad +
    dGLU where ws_kernels.dglu_applies and ws_kernels.TAKES_DGLU (the same bits but for the
    dprob partials, summed in another order: equal to rounding)."""
    from ..triton_common import specializing_launcher
    from .kernels import EPI_DGLU, EPI_GLU, EPI_STORE, TMA_B_ROWS, Z_POINTERS, grouped_gemm_kernel
    T = c.shape[0]
    E = counts.shape[0]
    if T == 0 or N == 0:
        return
    if cfg.ws and recipe == "fp8_block" and epilogue == EPI_STORE:
        from . import ws_kernels
        if ws_kernels.launch(a, b, c, counts, N=N, probs=probs, bias=bias):   # its ring: ws_kernels.MAX_STAGES
            launches.record("grouped_fp8_ws_gemm")
            return
    if ws and recipe == "fp8_block" and epilogue == EPI_GLU:
        from . import ws_kernels
        if ws_kernels.TAKES_GLU and ws_kernels.launch(a, b, z, counts, N=2 * F, probs=probs, bias=bias,
                                                      glu=(c, act, interleave)):
            launches.record("grouped_fp8_ws_glu")
            return
    if ws and recipe == "fp8_block" and epilogue == EPI_DGLU:
        from . import ws_kernels
        if ws_kernels.TAKES_DGLU and ws_kernels.launch(a, b, c, counts, N=F, probs=probs,
                                                       dglu=(z, part, act, interleave, dz_rows)):
            launches.record("grouped_fp8_ws_dglu")
            return
    bound = cdiv(T, cfg.block_m) + E
    total = bound * cdiv(N, dglu_tile_n(cfg) if epilogue == EPI_DGLU else cfg.block_n)
    programs = max(1, min(total, cfg.programs_per_sm * num_sms(c.device)))
    dummy = c
    a_data, a_scales, a_scale_ld, gscale = a, dummy, 0, dummy
    b_data, b_scales = b, dummy
    b_scale_strides, b_scale_rows, b_scale_cols = (0, 0, 0), 0, 0
    if recipe is not None:
        if recipe == "fp8_block" and cfg.block_k != 128:
            raise ValueError(f"grouped_glu_mlp fp8_block: BLOCK_K must be 128 (the scaling block), got {cfg.block_k}")
        a_data, a_scales, a_scale_ld = a.data, a.scales, a.scale_ld
        b_data, b_scales = b.data, b.scales
        rows, cols = b.data.shape[1], b.data.shape[2]
        b_strides = (rows * cols, 1, cols)   # quantized weights are K-contiguous
        if recipe == "fp8_block":
            blocks = b.scales.stride()
            b_scale_strides = (blocks[0], blocks[2], blocks[1])
        else:
            b_scale_rows, b_scale_cols = b.scale_rows, b.scale_cols
        if recipe == "nvfp4":
            gscale = (a.decode * b.decode).contiguous()
    plan = tma_plan(epilogue, a, b, cfg, K, b_strides, interleave, F, recipe)
    a_desc, b_desc, b_mode, b_rows = plan if plan is not None else (None, None, TMA_B_ROWS, 0)
    z_desc, z_mode = None, Z_POINTERS
    if plan is not None and epilogue == EPI_DGLU:
        z_desc, z_mode = dglu_z_plan(z, cfg, interleave, F)
    # Through a SpecializingLauncher: the JIT's binding and specialization once per argument
    # specialization, the compiled kernel directly after that (triton_common; the constexprs in
    # the kernel's order: EPILOGUE ... BLOCK_K).
    specializing_launcher(grouped_gemm_kernel, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
                          maxnreg=cfg.maxnreg if plan is not None else None)((programs,), (
        a_data, b_data, c, counts, probs if probs is not None else dummy, bias if bias is not None else dummy,
        z if z is not None else dummy, part if part is not None else dummy,
        dz_rows.data if dz_rows is not None else dummy, dz_rows.scales if dz_rows is not None else dummy,
        a_scales, b_scales, gscale, a_desc, b_desc, z_desc,
        T, K, N, E, F, bound,
        a_data.stride(0), b_strides[0], b_strides[1], b_strides[2], ldc, z.stride(0) if z is not None else 0,
        bias.stride(0) if bias is not None else 0, part.stride(0) if part is not None else 0,
        a_scale_ld, *b_scale_strides, b_scale_rows, b_scale_cols, b_rows,
    ), (
        epilogue, act, interleave, bias is not None, _ieee(c), recipes.RECIPE_IDS[recipe],
        recipe == "fp8_block" and glu_scale_uniform(F, interleave, cfg.block_n),
        dz_rows is not None, plan is not None, b_mode, z_mode, cfg.block_m, cfg.block_n, cfg.block_k,
    ))


def dglu_quantizes_dz(recipe, interleave: int, dcfg: GemmConfig) -> bool:
    """Whether the dGLU epilogue writes dz's fp8_block row-wise copy (kernels.dglu_quantize_dz): each
    64-wide half's gate and up columns are then one 1x128 block of dz (interleave dividing 64).
    Otherwise (the halves layout, other tiles) the quantizer kernel copies dz."""
    return recipe == "fp8_block" and dcfg.block_n == 64 and interleave > 0 and 64 % interleave == 0


# Row tiles per group of the wgrad's program order (kernels.wgrad_tile). On the H200 the fp8
# wgrads ran within 2% of each other at GROUP_N 1, 4, 8, 16 and 64 at the spec's first two
# shapes (results/2026-11-29-h200-d/run2): L2 held the operands either way. The order stays a
# parameter, not a measured gain.
WGRAD_GROUP_N = 8


def _wgrad(a, b, c, counts, T, wcfg: GemmConfig, recipe=None):
    """c[e] (N, M) = a[rows of e]^T @ b[rows of e]: a (T, N), b (T, M) tensors, or with a recipe
    their column-wise copies (recipes.QuantRows of shapes (N, Tp) and (M, Tp))."""
    from ..triton_common import specializing_launcher
    from .kernels import grouped_wgrad_kernel
    E, n_dim, m_dim = c.shape
    dummy = c
    a_data, b_data, a_scales, b_scales, a_ld, b_ld, gscale = a, b, dummy, dummy, 0, 0, dummy
    if recipe is not None:
        if recipe == "fp8_block" and wcfg.block_k != 128:
            raise ValueError(f"grouped_glu_mlp fp8_block: wgrad BLOCK_K must be 128, got {wcfg.block_k}")
        a_data, b_data, a_scales, b_scales, a_ld, b_ld = a.data, b.data, a.scales, b.scales, a.scale_ld, b.scale_ld
        if recipe == "nvfp4":
            gscale = (a.decode * b.decode).reshape(1)
    plan = wgrad_tma_plan(a_data, b_data, wcfg, recipe)
    a_desc, b_desc = plan if plan is not None else (None, None)
    # constexprs in the kernel's order: IEEE, RECIPE, TMA, BLOCK_N, BLOCK_M, BLOCK_K, GROUP_N
    specializing_launcher(grouped_wgrad_kernel, num_warps=wcfg.num_warps, num_stages=wcfg.num_stages,
                          maxnreg=wcfg.maxnreg if plan is not None else None)(
        (E * cdiv(n_dim, wcfg.block_n) * cdiv(m_dim, wcfg.block_m),),
        (a_data, b_data, c, counts, a_scales, b_scales, gscale, a_desc, b_desc, T, n_dim, m_dim,
         a_data.stride(0), b_data.stride(0), a_ld, b_ld),
        (_ieee(c), recipes.RECIPE_IDS[recipe], plan is not None, wcfg.block_n, wcfg.block_m, wcfg.block_k,
         WGRAD_GROUP_N))


def forward(x, counts, probs, w1, w2, b1, b2, activation: str, glu_interleave, config=None, recipe=None,
            keep_dgrad_weights: bool = False, keep_cols: bool = False):
    """Returns (y (T, H), z (T, 2F), h (T, F)); z and h in x.dtype, saved for the backward.

    recipe (recipes.py): x and W1 are quantized before FC1, h after it (by the quantizer
    kernels, quant/launch.py: a 1x128 block of h spans two of fp8_block's 64-wide GLU tiles,
    and a 128-wide one spills, so h is not quantized in that epilogue), W2 before FC2; inside
    tilefuse.reuse_quantized_weights the weights' copies come from an earlier call while the
    caller's weight tensors are unchanged (recipes.weight_pair).

    With a recipe on CUDA, W2's quantizer runs on a high-priority second stream beside x's
    and W1's quantizers and FC1 (streams.py), joined before FC2; with the config's
    ``side_stream`` off, in order on the caller's stream.

    keep_dgrad_weights: returns (y, z, h, dgrad_weights), dgrad_weights the (W1, W2) dgrad
    copies (recipes.QuantWeight) for ``backward``, written by the forward's weight quantizers
    (fp8_block), or None (other recipes, or T == 0: the backward quantizes).

    keep_cols: returns cols after them, the (x, h) column-wise copies (recipes.QuantRows) for
    ``backward``'s weight gradients, made with x's and h's row-wise copies (fp8_block;
    recipes.quantize_rows_cols: two launches each, one with its PAIR_ROWS_COLS), or None
    (other recipes, or T == 0: the backward quantizes). Kept, they hold H + F bytes a token
    (and their scales) until the backward."""
    from .kernels import EPI_GLU, EPI_STORE
    cfg = config or heuristic("fwd", x.element_size(), recipe)
    T, H = x.shape
    F = w2.shape[2]
    x, counts, probs, b1, b2 = kernel_layouts(x, counts, probs, b1, b2)
    w1_source, w2_source = w1, w2   # the callers' weights: reuse_quantized_weights' keys
    w1, w2 = addressable(w1, "fc1_weight", recipe), addressable(w2, "fc2_weight", recipe)
    z = torch.empty((T, 2 * F), dtype=x.dtype, device=x.device)
    h = torch.empty((T, F), dtype=x.dtype, device=x.device)
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    check_counts(counts, T)
    act, inter = ACTIVATIONS[activation], glu_interleave or 0
    fc1_a, fc1_b = x, w1
    w1_dgrad = w2_dgrad = x_cols = h_cols = None
    quantized = recipe is not None and T > 0
    side = streams.side_stream(x, streams.HIGH) if quantized and cfg.side_stream else None
    with streams.joined(side, x.device):   # the fork below is joined however this ends
        if quantized:
            # W2's quantizer on the side stream, beside x's and W1's and FC1 (streams.py)
            w2_pair = streams.on_side(side, x.device,
                                      lambda: recipes.weight_pair(recipe, w2, keep_dgrad_weights, w2_source))
            fc1_a, x_cols = recipes.quantize_rows_cols(recipe, x, counts, cols=keep_cols)
            fc1_b, w1_dgrad = recipes.weight_pair(recipe, w1, keep_dgrad_weights, w1_source)
        # FC1 + GLU: B_e(k, n) = W1[e, n, k].
        _gemm(EPI_GLU, fc1_a, fc1_b, h, counts, glu_config(cfg, recipe), K=H, N=F,
              b_strides=(w1.stride(0), w1.stride(2), w1.stride(1)),
              ldc=h.stride(0), F=F, probs=probs, bias=b1, z=z, act=act, interleave=inter, recipe=recipe,
              ws=cfg.ws and cfg.rows_glu)
        fc2_a, fc2_b = h, w2
        if quantized:
            fc2_a, h_cols = recipes.quantize_rows_cols(recipe, h, counts, cols=keep_cols)
    if quantized:
        fc2_b, w2_dgrad = w2_pair
        streams.caller_uses(side, x.device,
                            *(t for q in w2_pair if q is not None for t in (q.data, q.scales, q.decode)))
    # FC2 (+ p * b2): B_e(k, n) = W2[e, n, k].
    _gemm(EPI_STORE, fc2_a, fc2_b, y, counts, cfg, K=F, N=H, b_strides=(w2.stride(0), w2.stride(2), w2.stride(1)),
          ldc=y.stride(0), probs=probs, bias=b2, recipe=recipe)
    launches.record("grouped_mlp_fwd")
    kept = ((w1_dgrad, w2_dgrad) if w1_dgrad is not None else None,) if keep_dgrad_weights else ()
    if keep_cols:
        kept += ((x_cols, h_cols) if x_cols is not None else None,)
    return (y, z, h, *kept) if kept else (y, z, h)


def bias_grads(dz, dy, probs, counts, b1, b2):
    """(db1 or None, db2 or None): the per-expert column sums of dz (T, 2F) and of p * dy (T, H),
    in fixed order (grouped_colsum_kernel), each in its bias's dtype; dz and dy row-major with
    unit column stride."""
    from ..triton_common import specializing_launcher
    from .kernels import grouped_colsum_kernel
    colsum = specializing_launcher(grouped_colsum_kernel, num_warps=4)
    T, E = dz.shape[0], counts.shape[0]
    db1 = db2 = None
    if b1 is not None:
        db1 = torch.empty_like(b1, memory_format=torch.contiguous_format)
        colsum((E, cdiv(dz.shape[1], 64)), (dz, dz, db1, counts, T, dz.shape[1], dz.stride(0)), (False, 32, 64))
    if b2 is not None:
        db2 = torch.empty_like(b2, memory_format=torch.contiguous_format)
        colsum((E, cdiv(dy.shape[1], 64)), (dy, probs, db2, counts, T, dy.shape[1], dy.stride(0)), (True, 32, 64))
    return db1, db2


def _on_the_forward_s_route(fn):
    """``fn`` (a backward of this route) with the recipes' quantizers on kernels wherever it is
    called: they decide kernels or reference from the level in force (policy.kernels_enabled),
    and this route was decided by the forward, so a backward on a thread at level 0
    (autograd's CUDA device thread, which does not see a ``level`` block around the forward)
    runs them at level 1, as the forward did (the same bits either way, the reference slower)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        if policy.get_level() != 0:
            return fn(*args, **kwargs)
        with policy.level(1):
            return fn(*args, **kwargs)
    return run


@_on_the_forward_s_route
def backward(dy, x, counts, probs, w1, w2, b1, b2, z, h, activation: str, glu_interleave, config=None,
             wgrad_config=None, recipe=None, dgrad_weights=None, saved_cols=None, weight_grads=(True, True)):
    """(dx, dprobs, dw1 or None, dw2 or None, db1 or None, db2 or None).

    weight_grads: whether dW1 and dW2 are asked for; one that is not (a frozen weight) is None,
    and neither its weight-gradient GEMM nor the column-wise copies of its operands run.

    recipe (recipes.py): dy and dz are quantized row-wise for the dgrad GEMMs (dz by the dGLU
    epilogue where dglu_quantizes_dz, bitwise the quantizer kernel's copy), the weights
    along their dgrad K (``dgrad_weights`` from ``forward(keep_dgrad_weights=True)``, else
    quantized here, bitwise the same), and dy, h, dz, x column-wise for the weight gradients;
    all by the quantizer kernels. fp8_block makes dy's row-wise and column-wise copies together
    (recipes.quantize_rows_cols), dz's too where the dGLU epilogue does not write its
    row-wise copy (then before dW1's fork, else dz's column-wise copy on the side stream), and
    takes x's and h's column-wise copies from
    ``saved_cols`` (the forward's, ``forward(keep_cols=True)``) where given, else quantizes
    them here, bitwise the same. On CUDA each weight gradient (with a recipe, the column-wise
    quantizers of its operands not already made first) runs on a second stream beside the
    dgrads (streams.py; high priority with a recipe): dW2 from the start, dW1 once the dGLU has
    made dz, joined before the bias gradients; with the config's ``side_stream`` off, in that
    order on the caller's stream. dy's pair is launched on the caller's stream before the fork,
    which orders dW2's read of its column-wise copy after it."""
    from .kernels import EPI_DGLU, EPI_STORE
    cfg = config or heuristic("bwd", x.element_size(), recipe)
    wcfg = wgrad_config or heuristic("wgrad", x.element_size(), recipe)
    T, H = x.shape
    E, F = w2.shape[0], w2.shape[2]
    x, counts, probs, b1, b2 = kernel_layouts(x, counts, probs, b1, b2)
    w1, w2 = addressable(w1, "fc1_weight", recipe), addressable(w2, "fc2_weight", recipe)
    # dy of any layout (y.sum().backward() gives an expanded (0, 0) one); z and h as saved.
    dy, z, h = summed_rows(dy), unit_rows(z), unit_rows(h)
    act, inter = ACTIVATIONS[activation], glu_interleave or 0
    dz = torch.empty((T, 2 * F), dtype=x.dtype, device=x.device)
    dcfg = dglu_config(cfg, recipe)
    part = torch.empty((T, 2 * cdiv(F, dglu_tile_n(dcfg))), dtype=torch.float32, device=x.device)
    quantized = recipe is not None and T > 0
    dz_rows = None
    if quantized and dglu_quantizes_dz(recipe, inter, dcfg):
        dz_rows = recipes.empty_fp8_rows(T, 2 * F, x.device)
    # Ragged-K weight gradients, written in full (zeros for experts without tokens), each with
    # the column-wise quantizers of its operands not already made on the side stream beside the
    # dgrads (streams.py): dW2 from the start, dW1 once the dGLU has made dz.
    need_dw1, need_dw2 = weight_grads
    dw1 = torch.empty_like(w1, memory_format=torch.contiguous_format) if need_dw1 else None
    dw2 = torch.empty_like(w2, memory_format=torch.contiguous_format) if need_dw2 else None
    side = None
    if cfg.side_stream and (need_dw1 or need_dw2):
        side = streams.side_stream(x, streams.HIGH if quantized else 0)

    def cols(t, kept):
        """t's column-wise copy: ``kept`` (made before), or quantized here."""
        return kept if kept is not None else recipes.quantize_cols(recipe, t, counts)

    def wgrad(a, b, c, a_cols=None, b_cols=None):
        if quantized:
            a, b = cols(a, a_cols), cols(b, b_cols)
        _wgrad(a, b, c, counts, T, wcfg, recipe if quantized else None)

    x_cols, h_cols = saved_cols if quantized and saved_cols is not None else (None, None)
    dy_rows = dy_cols = None
    with streams.joined(side, x.device):   # dW2, dW1 beside the dgrads; joined however it ends
        if quantized:   # before the fork: the side stream's dW2 waits for dy's column-wise copy
            dy_rows, dy_cols = recipes.quantize_rows_cols(recipe, dy, counts, cols=need_dw2)
        if need_dw2:
            streams.on_side(side, x.device, lambda: wgrad(dy, h, dw2, dy_cols, h_cols))
        dgrad2_a, dgrad2_b = dy, w2
        if quantized:
            dgrad2_a = dy_rows
            dgrad2_b = dgrad_weights[1] if dgrad_weights else recipes.quantize_weight(recipe, w2, transpose=True)
        # FC2 dgrad + dGLU: dh = dy @ W2_e, B_e(k, n) = W2[e, k, n].
        _gemm(EPI_DGLU, dgrad2_a, dgrad2_b, dz, counts, dcfg, K=H, N=F,
              b_strides=(w2.stride(0), w2.stride(1), w2.stride(2)), ldc=dz.stride(0), F=F, probs=probs, z=z, part=part,
              act=act, interleave=inter, recipe=recipe, dz_rows=dz_rows, ws=cfg.ws and cfg.rows_glu)
        dprobs = part.sum(dim=1)   # fixed-order reduction over column tiles: deterministic
        if b2 is not None:
            expert_of_row = torch.repeat_interleave(torch.arange(E, device=x.device), counts, output_size=T)
            dprobs = dprobs + (dy.float() * b2.float()[expert_of_row]).sum(dim=1)
        dz_cols = None
        if quantized and dz_rows is None and recipe == "fp8_block":
            # dz's copies (its column-wise one for dW1 only) before the fork: the side stream's
            # dW1 waits for them.
            dz_rows, dz_cols = recipes.quantize_rows_cols(recipe, dz, counts, cols=need_dw1)
        if need_dw1:
            streams.on_side(side, x.device, lambda: wgrad(dz, x, dw1, dz_cols, x_cols))
        dgrad1_a, dgrad1_b = dz, w1
        if quantized:
            dgrad1_a = dz_rows if dz_rows is not None else recipes.quantize_rows(recipe, dz)
            dgrad1_b = dgrad_weights[0] if dgrad_weights else recipes.quantize_weight(recipe, w1, transpose=True)
        # FC1 dgrad: dx = dz @ W1_e, B_e(k, n) = W1[e, k, n].
        dx = torch.empty((T, H), dtype=x.dtype, device=x.device)   # row-major, whatever x's strides
        _gemm(EPI_STORE, dgrad1_a, dgrad1_b, dx, counts, cfg, K=2 * F, N=H,
              b_strides=(w1.stride(0), w1.stride(1), w1.stride(2)), ldc=dx.stride(0), recipe=recipe)
    db1, db2 = bias_grads(dz, dy, probs, counts, b1, b2)
    launches.record("grouped_mlp_bwd")
    return dx, dprobs.to(probs.dtype), dw1, dw2, db1, db2
