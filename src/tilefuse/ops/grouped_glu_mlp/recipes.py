"""Quantized recipes of grouped_glu_mlp: which tensors are quantized, how, and a plain-PyTorch
rendering of the whole recipe (docs/specs/grouped_glu_mlp.md, "Quantization recipes").

Every GEMM quantizes both of its operands along that GEMM's K dimension (Transformer Engine's
and DeepGEMM's rule), and accumulates in float32. Per row t of expert e:

    GEMM                  A (rows x K)              B (K x N)                    K
    fc1       z = x W1^T  Q_rows(x)                 Q_w(W1_e) along H            H
    fc2       y = h W2^T  Q_rows(h)                 Q_w(W2_e) along F            F
    fc2 dgrad dh = dy W2  Q_rows(dy)                Q_w(W2_e) along H            H
    fc1 dgrad dx = dz W1  Q_rows(dz)                Q_w(W1_e) along 2F           2F
    wgrad     dW2 = dy^T h  Q_cols(dy)              Q_cols(h)                    tokens of e
    wgrad     dW1 = dz^T x  Q_cols(dz)              Q_cols(x)                    tokens of e

- Q_rows: blocks along the row (K = H, F or 2F), row by row: 1x128 (fp8_block), 1x32 (mxfp8),
  1x16 (nvfp4). Rows of different experts never share a block.
- Q_cols (the "column-wise" wgrad copies): blocks of 128 / 32 / 16 consecutive tokens of one
  column and one expert, starting at the expert's first token, as Transformer Engine gets by
  splitting the tokens by expert on the host and quantizing each expert's rows alone. Here
  tokens_per_expert stays on the device: the copy is of the grouped layout (expert_padded,
  quant.kernels.group_rows), each expert's rows zero-padded to a multiple of the block and
  laid end to end, Tp = grouped_rows(T, E) tokens (the most any counts need; blocks past the
  last expert's are zeros), quantized along the token axis and stored transposed. No block
  holds two experts' tokens, so each expert's gradient reads whole blocks of its own
  (fp8_block: no masked K step), and no expert's scales depend on another's values. The
  bound costs memory: up to (E - 1) blocks of padding a copy, all of it zero blocks at the
  end when every count is a multiple of the block (the spec's shape 3, E 128, T 65536: 25%
  more bytes in each column-wise copy than T tokens, x's and h's kept from the forward to the
  backward among them).
- Q_w: per expert. fp8_block: 128x128 blocks (2F, H and F multiples of 128, so blocks never
  straddle experts); both usages have the same blocks, so the dgrad usage's copy holds the
  forward's codes and scales transposed, K-contiguous as Hopper's FP8 tensor-core dot wants
  its B operand. The forward's quantizer writes both copies from one read of W
  (quantize_weight_pair) and the op keeps the dgrad copy for its backward. mxfp8: 1x32 along the
  usage's K, so the dgrad usage is a second copy quantized along the other axis. nvfp4: 16x16
  2-D blocks with a per-expert amax; the dgrad usage quantizes W_e^T, which gives exactly the
  transposed codes and scales (2-D blocks and the amax are symmetric).
- fp8_block's launches: the weights' quantizer launches each read one weight and write both
  copies the step needs; an activation's or gradient's row-wise and column-wise copies come
  from two launches (quantize_rows_cols; PAIR_ROWS_COLS on: one launch, one read, measured
  slower). On CUDA the launches marked "side stream" run beside the others (streams.py):

      step      reads  writes                                    by
      forward   W2     Q_w(W2), its dgrad copy                   quantize_weight_pair (side stream)
      forward   x      Q_rows(x); Q_cols(x)                      quantize_rows_cols
      forward   W1     Q_w(W1), its dgrad copy                   quantize_weight_pair
      forward   h      Q_rows(h); Q_cols(h)                      quantize_rows_cols
      backward  dy     Q_rows(dy); Q_cols(dy)                    quantize_rows_cols
      backward  dz     Q_cols(dz) (side stream) where the dGLU   quantize_cols
                       epilogue writes Q_rows(dz)
                       (launch.dglu_quantizes_dz), else
                       Q_rows(dz); Q_cols(dz)                    quantize_rows_cols

  Nine launches, ten in the halves layout (PAIR_ROWS_COLS on: six). The op keeps the
  forward's dgrad copies and Q_cols(x), Q_cols(h) for its backward (launch.forward's
  keep_dgrad_weights and keep_cols); a backward without them quantizes them itself
  (quantize_weight, quantize_cols), bitwise the same. Q_rows and Q_cols written together are
  bitwise the copies of quantize_rows and quantize_cols.
- nvfp4 per-tensor scales: weights use one amax per expert. Activations and gradients use one
  amax per tensor (all experts' rows): a per-expert amax would need each expert's row range on
  the host. Optional RHT / stochastic rounding of the quantizers are not used by the op.
- Not quantized: z (saved in x.dtype for the backward), the GLU and its gradient (float32 in
  the epilogues), h and dz as stored (x.dtype; they are quantized for the next GEMM), biases,
  probs, the dy . b2 term of dprobs and both bias gradients (from the unquantized dy and dz).

Roundings of the recipe (what ``recipe_forward`` / ``recipe_backward`` reproduce in
``compute_dtype``): z, h, y, dz, dx, dW1, dW2 are rounded to x.dtype where the kernels store
them; the GEMMs and the GLU run in ``compute_dtype`` on the dequantized operands.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import weakref

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from ... import policy
from ...quant import launch as quant_launch
from ...quant import quantize_mxfp8, quantize_nvfp4
from ...quant import reference as qref
from ...quant.swizzle import padded_shape
from ...utils import cdiv
from ..autograd_common import is_batched
from .reference import expert_rows, gemms_in_dtype, glu_activation, glu_activation_backward, glu_index

RECIPES = ("fp8_block", "mxfp8", "nvfp4")
# Scaling-block width along K: H and F must be multiples of it.
BLOCK = {"fp8_block": 128, "mxfp8": 32, "nvfp4": 16}
# The kernels' RECIPE constexpr.
RECIPE_IDS = {None: 0, "fp8_block": 1, "mxfp8": 2, "nvfp4": 3}


# ---------------------------------------------------------------------------------------------
# Operands as the kernels read them
@dataclasses.dataclass(frozen=True)
class QuantRows:
    """A (rows, K) operand quantized along K (Q_rows, or a Q_cols copy of a transposed tensor).

    data: fp8_block / mxfp8 (rows, K) uint8 E4M3 bits; nvfp4 (rows, K/2) uint8 packed E2M1.
    scales: fp8_block float32 (K/128, rows), one K chunk's row scales contiguous (the GEMMs
    read them as one vector per K step); mxfp8 / nvfp4 the flat swizzled scale bytes (uint8)
    of the (rows, K/block) matrix. scale_ld: fp8_block the stride between K chunks (rows),
    else the swizzle's padded column count. decode: nvfp4 float32 scalar S_dec, else None.
    """
    data: torch.Tensor
    scales: torch.Tensor
    scale_ld: int
    decode: torch.Tensor | None


@dataclasses.dataclass(frozen=True)
class QuantWeight:
    """An (E, R, C) weight quantized per expert along C (the usage's K).

    data: fp8_block / mxfp8 (E, R, C) uint8 E4M3 bits; nvfp4 (E, R, C/2) uint8 packed E2M1.
    scales: fp8_block (E, R/128, C/128) float32 block scales; mxfp8 / nvfp4 flat swizzled
    bytes, expert e's row r at scale row e * scale_rows + r of scale_cols padded columns.
    decode: nvfp4 (E,) float32 S_dec per expert, else None.
    """
    data: torch.Tensor
    scales: torch.Tensor
    scale_rows: int
    scale_cols: int
    decode: torch.Tensor | None


def _nvfp4_decode(amax: torch.Tensor) -> torch.Tensor:
    return qref.nvfp4_global_scales(amax)[1]


def _fp8_operand(t: torch.Tensor, block: tuple[int, int], *, transpose: bool, scales_transposed: bool,
                 pad_rows: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """fp8_block quantization of t (rows, K) or of a batch (E, R, K) in ``block``s, in a GEMM
    operand layout: (data uint8, scales float32) as quant.launch.fp8_block writes them with
    ``transpose`` / ``scales_transposed`` (relative to t and its grid of blocks). The quantizer
    kernel, or where kernels cannot run the reference in the same layout."""
    if policy.kernels_enabled(t.device):
        data, scales = quant_launch.fp8_block(t, block, False, transpose=transpose,
                                              scales_transposed=scales_transposed, pad_rows=pad_rows)
        return data.view(torch.uint8), scales
    batch = _pad_rows(t, block[0])[None] if pad_rows else (t if t.dim() == 3 else t[None])
    if transpose:   # t's blocks are the blocks of t^T with the block shape swapped
        batch, block = batch.transpose(1, 2), block[::-1]
    parts = [qref.quantize_fp8_block(m, block, False) for m in batch]
    data = torch.stack([d for d, _ in parts]).view(torch.uint8)
    # The reference's scales are on the grid of the matrix it quantized (t's, or t^T's).
    scales = torch.stack([sc.t() if transpose != scales_transposed else sc for _, sc in parts]).contiguous()
    return (data, scales) if t.dim() == 3 else (data[0], scales[0])


def quantize_rows(recipe: str, t: torch.Tensor) -> QuantRows:
    """Q_rows of a (rows, K) activation or gradient (K a multiple of BLOCK[recipe])."""
    rows, cols = t.shape
    if recipe == "fp8_block":
        data, scales = _fp8_operand(t, (1, 128), transpose=False, scales_transposed=True)
        return QuantRows(data, scales, rows, None)
    if recipe == "mxfp8":
        q = quantize_mxfp8(t, swizzle=True)
        return QuantRows(q.data.view(torch.uint8), q.scales, padded_shape(rows, cols // 32)[1], None)
    q = quantize_nvfp4(t, swizzle=True)
    return QuantRows(q.data, q.scales.view(torch.uint8), padded_shape(rows, cols // 16)[1], _nvfp4_decode(q.amax))


def empty_fp8_rows(rows: int, cols: int, device) -> QuantRows:
    """An unfilled fp8_block Q_rows operand of a (rows, cols) tensor, in quantize_rows' layout
    (for a kernel epilogue to write)."""
    return QuantRows(torch.empty((rows, cols), dtype=torch.uint8, device=device),
                     torch.empty((cols // 128, rows), dtype=torch.float32, device=device), rows, None)


def _pad_rows(t: torch.Tensor, multiple: int) -> torch.Tensor:
    rows = t.shape[0]
    padded = cdiv(rows, multiple) * multiple
    if padded == rows:
        return t
    return torch.cat((t, t.new_zeros(padded - rows, t.shape[1])))


def grouped_rows(recipe: str, n_tokens: int, n_experts: int) -> int:
    """Tp: the tokens of a Q_cols copy (the grouped layout's rows; module docstring)."""
    return quant_launch.grouped_rows(n_tokens, n_experts, BLOCK[recipe])


def expert_padded(t: torch.Tensor, counts: torch.Tensor, block: int) -> torch.Tensor:
    """(grouped_rows, N): the rows of a (T, N) tensor by expert (``counts``, on t's device),
    each expert's padded with zeros to a multiple of ``block`` and laid end to end, then zero
    rows (quant.kernels.group_rows' layout), built with torch ops on the device without a host
    sync. The emulated recipes quantize its transpose; fp8_block's kernel reads t directly."""
    n_tokens, n_experts = t.shape[0], counts.shape[0]
    n_padded = quant_launch.grouped_rows(n_tokens, n_experts, block)
    if n_padded == 0:
        return t.new_zeros((0, t.shape[1]))
    c = counts.to(device=t.device, dtype=torch.int64).clamp_min(0)
    blocks = (c + block - 1) // block
    end = torch.cumsum(blocks, 0) * block          # each expert's end in the padded layout
    padded_start = end - blocks * block
    start = torch.cumsum(c, 0) - c                 # its first row of t
    p = torch.arange(n_padded, device=t.device)
    e = torch.searchsorted(end, p, right=True).clamp_max(n_experts - 1)
    local = p - padded_start[e]
    src = start[e] + local
    valid = (local < c[e]) & (src < n_tokens)
    return t.index_select(0, src.clamp(0, n_tokens - 1)).masked_fill(~valid[:, None], 0)


def quantize_cols(recipe: str, t: torch.Tensor, counts: torch.Tensor) -> QuantRows:
    """Q_cols: the (N, Tp) copy of a (T, N) tensor of experts' tokens (``counts``) quantized
    along the token axis in the grouped layout (module docstring; Tp = grouped_rows).
    fp8_block's kernel quantizes each 128-token block of one expert from t and writes it
    transposed (a coalesced read of t, no padded copy, no host sync); without kernels, and
    for the emulated recipes, the transpose of expert_padded(t) is quantized."""
    if recipe == "fp8_block" and policy.kernels_enabled(t.device):
        data, scales = quant_launch.fp8_block(t, (128, 1), False, transpose=True, counts=counts)
        return QuantRows(data.view(torch.uint8), scales, t.shape[1], None)
    padded = expert_padded(t, counts, BLOCK[recipe])
    if recipe == "fp8_block":
        data, scales = _fp8_operand(padded, (128, 1), transpose=True, scales_transposed=False)
        return QuantRows(data, scales, t.shape[1], None)
    return quantize_rows(recipe, padded.t())


# quantize_rows_cols' copies from one launch on the kernels (True) or from quantize_rows' and
# quantize_cols' launches (False; the same bits). Off: the paired launch reads the tensor once
# but is issue-bound (about 50 SASS instructions an element at one or two 8-warp programs an
# SM), 0.93-0.96x the two launches per copy pair and 0.96-0.98x in the whole fp8_block step at
# the spec's three shapes (benchmarks/results/2026-12-05-h200-ak run 2, H100). Tests and
# benchmarks set it True to check and time the paired form.
PAIR_ROWS_COLS = False


def quantize_rows_cols(recipe: str, t: torch.Tensor, counts: torch.Tensor, cols: bool = True
                       ) -> tuple[QuantRows, QuantRows | None]:
    """(Q_rows of a (T, N) activation or gradient, its Q_cols or None). With ``cols``, fp8_block
    gives both: from quantize_rows and quantize_cols, or with PAIR_ROWS_COLS on the kernels
    from one read of t (quant_launch.fp8_block_rows_cols, each program one expert's 128-token
    block: its row-wise copy at the tokens' own rows), bitwise the same. Otherwise, and for
    the other recipes, the second is None (the caller quantizes it where it needs it)."""
    if not cols or recipe != "fp8_block":
        return quantize_rows(recipe, t), None
    if not PAIR_ROWS_COLS or not policy.kernels_enabled(t.device):
        return quantize_rows(recipe, t), quantize_cols(recipe, t, counts)
    (data, scales), (data_t, scales_t) = quant_launch.fp8_block_rows_cols(t, False, counts)
    return (QuantRows(data.view(torch.uint8), scales, t.shape[0], None),
            QuantRows(data_t.view(torch.uint8), scales_t, t.shape[1], None))


def _per_expert_amax(w: torch.Tensor) -> torch.Tensor:
    """(E,) float32 amax(|W_e|), NaN for an expert holding a NaN or +-inf (the quantizers'
    rule); no host sync. The amax kernels where kernels run (two launches), else the
    reference."""
    if policy.kernels_enabled(w.device):
        return quant_launch.batch_amax(w)
    return _reference_amax(w)


def _reference_amax(w: torch.Tensor) -> torch.Tensor:
    """_per_expert_amax in plain PyTorch (the kernels' bits)."""
    return qref.block_amax(w.reshape(w.shape[0], -1), 1, w[0].numel()).reshape(-1)


def quantize_weight(recipe: str, w: torch.Tensor, *, transpose: bool = False) -> QuantWeight:
    """Q_w of an (E, R, C) weight along C, or with ``transpose`` along R (the weight's other
    GEMM usage). One quantizer launch (nvfp4: one amax per expert, read by the batched
    launch; without kernels one reference call per expert)."""
    n_experts = w.shape[0]
    src = w.transpose(1, 2) if transpose else w
    n_rows, n_cols = src.shape[1], src.shape[2]
    if recipe == "fp8_block":
        # 128x128 blocks: the dgrad usage holds the forward's codes transposed, written
        # transposed from a coalesced read of W.
        data, scales = _fp8_operand(w, (128, 128), transpose=transpose, scales_transposed=transpose)
        return QuantWeight(data, scales, 0, 0, None)
    if recipe == "mxfp8":
        q = quantize_mxfp8(src.reshape(n_experts * n_rows, n_cols), swizzle=True)
        return QuantWeight(q.data.view(torch.uint8).view(n_experts, n_rows, n_cols), q.scales, n_rows,
                           padded_shape(n_experts * n_rows, n_cols // 32)[1], None)
    amax = _per_expert_amax(w)
    scale_rows, scale_cols = padded_shape(n_rows, n_cols // 16)
    if policy.kernels_enabled(w.device):   # one launch, one amax per expert
        data, scales, _ = quant_launch.nvfp4(src, amax, True, False, None, True)
        return QuantWeight(data, scales.view(torch.uint8), scale_rows, scale_cols, _nvfp4_decode(amax))
    parts = [quantize_nvfp4(src[e], amax=amax[e], block_2d=True, swizzle=True) for e in range(n_experts)]
    return QuantWeight(torch.stack([p.data for p in parts]), torch.cat([p.scales.view(torch.uint8) for p in parts]),
                       scale_rows, scale_cols, _nvfp4_decode(amax))


def _makes_dgrad_copy(recipe: str, w: torch.Tensor, dgrad: bool) -> bool:
    """Whether quantize_weight_pair(recipe, w, dgrad) makes the dgrad copy: fp8_block on the
    kernels, where asked for."""
    return dgrad and recipe == "fp8_block" and policy.kernels_enabled(w.device)


def quantize_weight_pair(recipe: str, w: torch.Tensor, dgrad: bool = True
                         ) -> tuple[QuantWeight, QuantWeight | None]:
    """(Q_w of w along C, its dgrad usage or None). With ``dgrad``, fp8_block on the kernels
    writes both from one read of w (the dgrad copy holds the same codes and scales
    transposed), for the forward to keep for the backward; otherwise, and for the other
    recipes, the second is None (the backward quantizes)."""
    if not _makes_dgrad_copy(recipe, w, dgrad):
        return quantize_weight(recipe, w), None
    (data, scales), (data_t, scales_t) = quant_launch.fp8_block(w, (128, 128), False, with_transposed=True)
    return (QuantWeight(data.view(torch.uint8), scales, 0, 0, None),
            QuantWeight(data_t.view(torch.uint8), scales_t, 0, 0, None))


# ---------------------------------------------------------------------------------------------
# Quantized weights reused across calls (tilefuse.reuse_quantized_weights)

# The active scope's cache: (id of the weight, recipe) -> (a weak reference to the weight, its
# memory, layout and version counter then, the pair quantize_weight_pair gave, and on CUDA the
# stream that wrote the pair with an event after the writes); None outside a scope. One entry
# a weight: a call that needs no dgrad copy (no gradient) takes the forward's copy of a pair
# that has one, and a call that needs the dgrad copy where the entry was made without it
# quantizes the pair again and replaces the entry (the forward's copy is the same bits). An
# entry goes when its weight does (a per-call cast or copy, which no later call can pass
# again), so the id is never another tensor's while the entry exists.
_REUSE: contextvars.ContextVar[dict | None] = contextvars.ContextVar("tilefuse_reuse_quantized_weights",
                                                                     default=None)


@contextlib.contextmanager
def reuse_quantized_weights():
    """Within the block, grouped_glu_mlp quantizes each weight once per recipe and reuses its
    quantized copies on later calls (the forward's copy, and with fp8_block on the kernels the
    dgrad copy too; mxfp8's and nvfp4's backwards quantize their dgrad copies each call), for
    as long as the weight tensor is the same object with the same storage and is not modified
    in place. An in-place change autograd tracks (``param.add_(...)`` under
    ``torch.no_grad()``, an optimizer's step) bumps the tensor's version counter and the weight
    is quantized again, and any ``torch.optim`` step inside the block drops every copy. A
    change made through ``param.data``, or through another tensor sharing the weight's memory
    (a flat buffer the parameter views), is not tracked: do not make one inside the block. A
    weight passed as a new tensor each call (a cast or copy made per call) is quantized each
    call, and its copies go with it. Calls without gradients (evaluation, the no-grad forward
    of reentrant activation checkpointing) reuse the copies too; fp8_block's first call with
    gradients after them quantizes the weight's pair once more, to make its dgrad copy.
    Activation checkpointing's recompute in the backward reuses them only where it sees the
    block and the same weight tensors: the block is a context variable, which autograd's CUDA
    device thread (where a CUDA backward, and so the recompute, runs) does not see, and
    reentrant checkpointing hands the recompute detached aliases of the tensors passed to it as
    inputs (new tensors each micro-batch); there the recompute quantizes its weights each
    micro-batch, the same bits.

    For gradient accumulation: wrap the micro-batches of one optimizer step, so a recipe's
    forward weight quantizers (fp8_block's dgrad ones too) run once per step instead of once
    per micro-batch (Transformer Engine's ``is_first_microbatch``). The copies are held until
    the block exits: one byte an element of every weight used (fp8_block: two copies), with
    their scales. Not used while a CUDA graph is being captured (a copy made there lives in the
    graph's memory pool), nor for inference tensors. Nested blocks share the outermost block's
    copies. Calls on several CUDA streams (micro-batches overlapped on two) share them too: a
    call on another stream than the one that made a copy waits for it to be written."""
    if _REUSE.get() is not None:
        yield
        return
    cache = {}
    token = _REUSE.set(cache)
    # An optimizer step inside the block drops every copy: a step that writes the weights
    # without their version counters (FSDP2 copies the updated shard into the same storage
    # under torch's version-counter guard) would otherwise leave them stale.
    hook = register_optimizer_step_post_hook(lambda *args: cache.clear())
    try:
        yield
    finally:
        hook.remove()
        cache.clear()   # the copies go now (the entries' weakref callbacks keep the dict in a cycle)
        _REUSE.reset(token)


def _capturing(w: torch.Tensor) -> bool:
    return w.is_cuda and torch.cuda.is_current_stream_capturing()


def weight_pair(recipe: str, w: torch.Tensor, dgrad: bool, source: torch.Tensor
                ) -> tuple[QuantWeight, QuantWeight | None]:
    """quantize_weight_pair(recipe, w, dgrad), or inside reuse_quantized_weights the pair made
    for ``source`` (the caller's weight, of which ``w`` is the kernels' layout) by an earlier
    call, while ``source`` is unchanged (its memory, layout and version counter) and no
    optimizer step has run since."""
    cache = _REUSE.get()
    if cache is None or _capturing(w) or source.is_inference():   # an inference tensor has no version counter
        return quantize_weight_pair(recipe, w, dgrad)
    key = (id(source), recipe)
    # its memory as laid out (a ``.data`` assignment may keep the address) and its version
    state = (source.data_ptr(), source.dtype, source.shape, source.stride(), source.device, source._version)
    hit = cache.get(key)
    if hit is not None and hit[0]() is source and hit[1] == state and (
            hit[2][1] is not None or not _makes_dgrad_copy(recipe, w, dgrad)):
        _use_on_current_stream(hit[2], hit[3])
        return hit[2] if dgrad else (hit[2][0], None)
    pair = quantize_weight_pair(recipe, w, dgrad)
    made = None
    if w.is_cuda:   # where the copies were written, for a later call on another stream
        made = torch.cuda.current_stream(w.device)
        made = (made, made.record_event())
    cache[key] = (weakref.ref(source, lambda _, key=key: cache.pop(key, None)), state, pair, made)
    return pair


def _use_on_current_stream(pair, made) -> None:
    """A cached pair read on a stream other than the one whose quantizers wrote it (micro-batches
    on two streams in one block): that stream waits for the writes, and the copies' memory is
    recorded on it, so the allocator does not hand it out again (when the cache drops them)
    while that stream may still read it."""
    if made is None:
        return
    stream, written = made
    current = torch.cuda.current_stream(stream.device)
    if current == stream:
        return
    current.wait_event(written)
    for q in pair:
        if q is not None:
            for t in (q.data, q.scales, q.decode):
                if t is not None:
                    t.record_stream(current)


# ---------------------------------------------------------------------------------------------
# Plain-PyTorch rendering: dequantized operands (float32 values, exactly what the kernels decode)
def dequant_rows(recipe: str, t: torch.Tensor) -> torch.Tensor:
    """float32 (rows, K): Q_rows(t) dequantized, by the quantizers' reference formulas."""
    if recipe == "fp8_block":
        return qref.dequantize_fp8_block(*qref.quantize_fp8_block(t, (1, 128)), (1, 128))
    if recipe == "mxfp8":
        return qref.dequantize_mxfp8(*qref.quantize_mxfp8(t))
    data, scales, amax = qref.quantize_nvfp4(t)
    return qref.dequantize_nvfp4(data, scales, amax, False, False)


def dequant_cols(recipe: str, t: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """float32 (T, N): Q_cols(t) dequantized and transposed back: each expert's rows (read on
    the host) padded to the block alone, the padded experts quantized as one tensor (one
    nvfp4 amax), each expert's rows taken back."""
    block = BLOCK[recipe]
    rows = [(start, stop) for _, start, stop in expert_rows(counts, t.shape[0])]
    padded = torch.cat([_pad_rows(t[start:stop], block) for start, stop in rows] + [t[:0]])
    out = torch.zeros(t.shape, dtype=torch.float32, device=t.device)
    if padded.shape[0] == 0:
        return out
    values = dequant_rows(recipe, padded.t()).t()
    at = 0
    for start, stop in rows:
        out[start:stop] = values[at:at + stop - start]
        at += cdiv(stop - start, block) * block
    return out


def dequant_weight(recipe: str, w: torch.Tensor, *, transpose: bool = False) -> torch.Tensor:
    """float32 (E, R, C): Q_w(W) dequantized; with ``transpose`` the quantization along R (the
    dgrad usage), returned in W's layout."""
    n_experts, rows, cols = w.shape
    if recipe == "fp8_block":
        flat = w.reshape(n_experts * rows, cols)
        return qref.dequantize_fp8_block(*qref.quantize_fp8_block(flat, (128, 128)), (128, 128)).view(w.shape)
    if recipe == "mxfp8":
        src = w.transpose(1, 2) if transpose else w
        flat = src.reshape(-1, src.shape[2])
        out = qref.dequantize_mxfp8(*qref.quantize_mxfp8(flat)).view(src.shape)
        return out.transpose(1, 2) if transpose else out
    # nvfp4: 16x16 blocks, so both usages dequantize to the same values (the kernels' dgrad
    # copy quantizes W^T; the tests check that the two agree). Plain PyTorch throughout, amax
    # included: this rendering runs where kernels must not (an eager trace records torch ops
    # only, policy.eager_tracing: an amax kernel's writes would not be in it)
    amax = _reference_amax(w)
    out = []
    for e in range(n_experts):
        data, scales, a = qref.quantize_nvfp4(w[e], amax[e], True)
        out.append(qref.dequantize_nvfp4(data, scales, a, True, False))
    return torch.stack(out)


def _rounded(t: torch.Tensor, dtype: torch.dtype, compute_dtype: torch.dtype) -> torch.Tensor:
    """t rounded to ``dtype`` (where the kernels store it), back in compute_dtype."""
    return t.to(dtype).to(compute_dtype)


def recipe_forward(x, tokens_per_expert, probs, fc1_weight, fc2_weight, *, activation, glu_interleave,
                   fc1_bias=None, fc2_bias=None, recipe, compute_dtype=torch.float64):
    """The recipe's forward in plain PyTorch: (y, z, h), each in x.dtype (z and h as the kernels
    store them). GEMMs of dequantized operands in ``compute_dtype`` (float64: the test oracle;
    float32: the op's path where kernels cannot run). Reads tokens_per_expert on the host."""
    cd, dtype = compute_dtype, x.dtype
    n_tokens, hidden = x.shape
    ffn = fc2_weight.shape[2]
    gate_idx, up_idx = glu_index(ffn, glu_interleave, device=x.device)
    xq = dequant_rows(recipe, x).to(cd)
    w1q = dequant_weight(recipe, fc1_weight).to(cd)
    p = probs.to(cd)
    z = torch.zeros(n_tokens, 2 * ffn, dtype=cd, device=x.device)
    rows = expert_rows(tokens_per_expert, n_tokens)
    for e, start, stop in rows:
        z[start:stop] = xq[start:stop] @ w1q[e].t()
        if fc1_bias is not None:
            z[start:stop] += fc1_bias[e].to(cd)
    z = _rounded(z, dtype, cd)
    h = _rounded(p[:, None] * glu_activation(z[:, gate_idx], z[:, up_idx], activation), dtype, cd)
    hq = dequant_rows(recipe, h.to(dtype)).to(cd)
    w2q = dequant_weight(recipe, fc2_weight).to(cd)
    y = torch.zeros(n_tokens, hidden, dtype=cd, device=x.device)
    for e, start, stop in rows:
        y[start:stop] = hq[start:stop] @ w2q[e].t()
        if fc2_bias is not None:
            y[start:stop] += p[start:stop, None] * fc2_bias[e].to(cd)
    return y.to(dtype), z.to(dtype), h.to(dtype)


def recipe_backward(dy, x, tokens_per_expert, probs, fc1_weight, fc2_weight, z, h, *, activation, glu_interleave,
                    fc1_bias=None, fc2_bias=None, recipe, compute_dtype=torch.float64) -> dict:
    """The recipe's backward in plain PyTorch, from the saved z and h (x.dtype).

    Returns ``{"dx", "dprobs", "dfc1_weight", "dfc2_weight", "dfc1_bias", "dfc2_bias"}`` in their
    inputs' dtypes (bias gradients None without the bias). Per expert e, with Q the
    dequantized operands of the module docstring's table:

        dh = Q_rows(dy) Q_w(W2_e)           dprobs = sum_j dh a (+ dy . b2_e, dy unquantized)
        dz = rounded GLU backward of p dh   dx = Q_rows(dz) Q_w(W1_e)
        dW2_e = Q_cols(dy)^T Q_cols(h)      dW1_e = Q_cols(dz)^T Q_cols(x)
        db1_e = sum_t dz_t (rounded dz)     db2_e = sum_t p_t dy_t
    """
    cd, dtype = compute_dtype, x.dtype
    n_experts, two_ffn, hidden = fc1_weight.shape
    n_tokens = x.shape[0]
    gate_idx, up_idx = glu_index(two_ffn // 2, glu_interleave, device=x.device)
    p = probs.to(cd)[:, None]
    zc = z.to(cd)
    z_gate, z_up = zc[:, gate_idx], zc[:, up_idx]
    a = glu_activation(z_gate, z_up, activation)
    dyq = dequant_rows(recipe, dy).to(cd)
    w2q = dequant_weight(recipe, fc2_weight, transpose=True).to(cd)
    dh = torch.zeros(n_tokens, two_ffn // 2, dtype=cd, device=x.device)
    rows = expert_rows(tokens_per_expert, n_tokens)
    for e, start, stop in rows:
        dh[start:stop] = dyq[start:stop] @ w2q[e]
    dprobs = (dh * a).sum(-1)
    if fc2_bias is not None:
        for e, start, stop in rows:
            dprobs[start:stop] += dy[start:stop].to(cd) @ fc2_bias[e].to(cd)
    d_gate, d_up = glu_activation_backward(p * dh, z_gate, z_up, activation)
    dz = torch.empty(n_tokens, two_ffn, dtype=cd, device=x.device)
    dz[:, gate_idx] = d_gate
    dz[:, up_idx] = d_up
    dz = _rounded(dz, dtype, cd)
    dzq = dequant_rows(recipe, dz.to(dtype)).to(cd)
    w1q = dequant_weight(recipe, fc1_weight, transpose=True).to(cd)
    dx = torch.zeros(n_tokens, hidden, dtype=cd, device=x.device)
    zeros = {"dtype": cd, "device": x.device}
    dw1 = torch.zeros(n_experts, two_ffn, hidden, **zeros)
    dw2 = torch.zeros(n_experts, hidden, two_ffn // 2, **zeros)
    db1 = torch.zeros(n_experts, two_ffn, **zeros)
    db2 = torch.zeros(n_experts, hidden, **zeros)
    dy_c, h_c = dequant_cols(recipe, dy, tokens_per_expert).to(cd), dequant_cols(recipe, h, tokens_per_expert).to(cd)
    dz_c = dequant_cols(recipe, dz.to(dtype), tokens_per_expert).to(cd)
    x_c = dequant_cols(recipe, x, tokens_per_expert).to(cd)
    dyc = dy.to(cd)
    for e, start, stop in rows:
        dx[start:stop] = dzq[start:stop] @ w1q[e]
        if start == stop:
            continue
        dw2[e] = dy_c[start:stop].t() @ h_c[start:stop]
        dw1[e] = dz_c[start:stop].t() @ x_c[start:stop]
        db1[e] = dz[start:stop].sum(0)
        db2[e] = (p[start:stop] * dyc[start:stop]).sum(0)
    return {
        "dx": dx.to(dtype),
        "dprobs": dprobs.to(probs.dtype),
        "dfc1_weight": dw1.to(fc1_weight.dtype),
        "dfc2_weight": dw2.to(fc2_weight.dtype),
        "dfc1_bias": None if fc1_bias is None else db1.to(fc1_bias.dtype),
        "dfc2_bias": None if fc2_bias is None else db2.to(fc2_bias.dtype),
    }


def batched_gradients_error(recipe: str) -> NotImplementedError:
    """What a recipe's backward raises for a batched dy (the older vmap's:
    ``autograd.grad(is_grads_batched=True)``, ``jacobian(vectorize=True)``): no recipe
    rendering batches."""
    return NotImplementedError(f"grouped_glu_mlp: recipe {recipe!r} with batched gradients "
                               f"(is_grads_batched, jacobian(vectorize=True)); only recipe=None runs there")


def double_backward_error(recipe: str) -> RuntimeError:
    """What a recipe's backward raises under create_graph=True, on every path: no recipe has a
    double backward."""
    return RuntimeError(f"grouped_glu_mlp: recipe {recipe!r} has no double backward (create_graph=True); "
                        "its gradients come from quantized operands")


class RecipeReferenceFunction(torch.autograd.Function):
    """The recipe in plain PyTorch (float32 compute) with the recipe's backward: the op's path
    where the kernels cannot run (level 0; CPU without the interpreter). Reads
    tokens_per_expert on the host. Its GEMMs run in IEEE float32 whatever the caller's autocast
    region or matmul precision (reference.gemms_in_dtype), which the kernels ignore too. Batched
    gradients (the older vmap's) raise ``batched_gradients_error``, and create_graph=True
    ``double_backward_error``, as the kernels' backward does for a recipe."""

    @staticmethod
    def forward(ctx, x, counts, probs, w1, w2, b1, b2, activation, interleave, recipe):
        # no tensor on ctx but through save_for_backward (saved-tensor hooks see them all, and
        # they go after the backward)
        kw = dict(activation=activation, glu_interleave=interleave, recipe=recipe, compute_dtype=torch.float32)
        with gemms_in_dtype(x, ieee=True):
            y, z, h = recipe_forward(x, counts, probs, w1, w2, fc1_bias=b1, fc2_bias=b2, **kw)
        ctx.save_for_backward(x, counts, probs, w1, w2, b1, b2, z, h)
        ctx.kw = kw
        return y

    @staticmethod
    def backward(ctx, dy):
        if torch.is_grad_enabled():   # create_graph: refused by name (the kernels' path does too)
            raise double_backward_error(ctx.kw["recipe"])
        x, counts, probs, w1, w2, b1, b2, z, h = ctx.saved_tensors
        if is_batched(dy):
            raise batched_gradients_error(ctx.kw["recipe"])
        with gemms_in_dtype(x, ieee=True):
            g = recipe_backward(dy.contiguous(), x, counts, probs, w1, w2, z, h, fc1_bias=b1, fc2_bias=b2, **ctx.kw)
        return (g["dx"], None, g["dprobs"], g["dfc1_weight"], g["dfc2_weight"], g["dfc1_bias"], g["dfc2_bias"],
                None, None, None)
