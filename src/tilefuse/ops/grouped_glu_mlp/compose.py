"""grouped_glu_mlp's compose route: every GEMM on ``torch._grouped_mm`` (CUTLASS on Hopper), the
glue between the GEMMs as our own Triton kernels, one pass each (kernels.compose_*).

It is what a skilled user writes without tilefuse, with the eager glue's extra passes, casts and
gathers gone: the tuner's baseline (tune.py, choice "compose") and the op's path wherever no
fused winner is selected and ``torch._grouped_mm`` takes the inputs (op.route). The plain
semantics stay in reference.py (level 0, tests).

Forward: four launches, a fifth with fc2_bias (``ends`` = cumsum(tokens_per_expert), int32, on
the device, the offsets ``torch._grouped_mm`` takes, and the counts' device-side check: one
launch of compose_kernels.compose_ends_kernel and ``torch._assert_async``, ``_ends``):

    z  = x W1_e^T                _grouped_mm(x, W1^T, ends)      (T, 2F) x.dtype, without b1
    h  = p act(z + b1_e)         compose_kernels.compose_glu_kernel   (T, F) x.dtype
    y  = h W2_e^T                _grouped_mm(h, W2^T, ends)      (T, H) x.dtype
    y += p b2_e                  compose_kernels.compose_bias_kernel  in place, fc2_bias only

Saved for the backward: z, h and ends. z is stored as FC1's GEMM wrote it, without fc1's bias:
the GLU kernel and the dGLU kernel each add b1_e (an (E, 2F) table, cached) in float32 when
they read z. Storing the biased z instead would cost a (T, 2F) write in the forward (or a
read-modify-write pass) to save the backward only the bias loads, which hit in cache; and it is
also the rounding the unfused composition has (z rounded to x.dtype by the GEMM, the bias
added in float32). h is saved rather than recomputed: the forward writes it anyway as FC2's
operand, and recomputing it for dW2 would add a (T, F) write to the backward.

Backward: five launches, one more per bias, in this order:

    dW2_e = dy_e^T h_e           _grouped_mm(dy^T, h, ends)      (E, H, F)
    dh    = dy W2_e              _grouped_mm(dy, W2, ends)       (T, F)
    dz, dprobs                   compose_kernels.compose_dglu_kernel  (T, 2F) x.dtype, (T,) probs.dtype
    dW1_e = dz_e^T x_e           _grouped_mm(dz^T, x, ends)      (E, 2F, H)
    dx    = dz W1_e              _grouped_mm(dz, W1, ends)       (T, H)
    db1_e = sum_t dz_t, db2_e = sum_t p_t dy_t                   kernels.grouped_colsum_kernel

A weight that needs no gradient (frozen experts: ``need_dw1`` / ``need_dw2`` off, from the
autograd node's needs_input_grad) gets no weight-gradient GEMM and a None gradient; with
neither asked for, no second stream either (a third of the backward's GEMM work autograd would
discard). The other gradients are the same launches' bits.

A tuned variant (a ``GemmConfig.compose`` table entry, never the baseline itself) runs the two
weight gradients through ws_wgrad.py's warp-specialised Gluon kernel instead, where it runs (the
same bits as ``torch._grouped_mm`` wherever they were compared): on the H200 it ran them
1.24-1.35x faster than CUTLASS at the spec's shapes 2-3 and 1.03-1.11x at shape 1
(benchmarks/results/2026-12-03-h200-aa run 5); the tuner decides per key. A variant with a rows
tile also runs fc1, fc2 and the two dgrads through ws_rows.py's kernel (the same bits as
``torch._grouped_mm`` wherever compared; 1.06-1.28x CUTLASS on the four at the spec's shapes,
results/2026-12-03-h200-ab run 1), and, unless the config's ``rows_glu`` is off, the GLU in
fc1's epilogue where the layout allows (an interleave of 8 to half its tile, or the halves
layout with F a multiple of half its tile; the GLU kernel's bits, -ab run 4 and -ae run 2): the
H200 table's entries at every key.

Two streams: where the weight gradients run in Gluon, each runs on a second stream
(streams.py) beside the dgrad that follows it: dW2 forked from the caller's stream at the
start, dW1 after the dGLU, then joined back before the bias gradients. Each Gluon GEMM is
persistent, one program an SM, and its last wave leaves SMs idle (about 3% of a row GEMM at
shape 1); the next kernel's programs take those SMs as the first one's finish. Same kernels,
so the same bits. On the H200 the backward ran 1.017x / 1.003x / 1.007x faster than on one
stream at the spec's shapes (benchmarks/results/2026-12-04-h200-ag run 1; the dgrads enqueued
first: 1.009x / 1.000x / 0.997x), the op as called 1.029x / 1.031x / 1.030x (run 5).
streams.py says why the allocator and CUDA graphs are safe with it.

dprobs is reduced deterministically without atomics: a dGLU program owns whole rows and walks
F (and H, for the fc2-bias term dy_t . b2_e) in fixed steps, so each row's sum is formed in one
program in one order. The bias gradients are the colsum kernel's fixed-order per-expert sums.

The weight gradients are 2-D x 2-D grouped GEMMs over the ragged token dimension, in the layouts
torch's own autograd formula for ``_grouped_mm`` uses (read from its dispatch on torch 2.13):
A is a transposed view of a row-major (T, N) tensor (column-major, the token dimension strided),
B a row-major (T, M) tensor. x, h, dz and dy are row-major here (``reference._row_major``), so
the layout for which the CUTLASS kernel asserts on the device that every group is non-empty and
16-byte aligned (x^T row-major, reference._row_major's docstring) never occurs: zero-token
experts and group sizes off any multiple run as autograd's do. torch._grouped_mm leaves an
empty group's output zero (CPU fallback and sm90 CUTLASS; an open PyTorch issue, #172439,
reports nonzero results on sm100). At T == 0 no GEMM runs (a zero-length contraction is refused
on CUDA for some strides): the results are empty, the weight and bias gradients zeros.

Host time: the route's Triton and Gluon kernels launch through
triton_common.SpecializingLauncher (Triton's JIT binds and specializes the arguments of every
launch, 50 of a ws_rows launch's 73-76 us on the H200 host: benchmarks/results/2026-12-03-h200-ac
run 3; the launcher runs the JIT once per argument specialization, then the compiled kernel's
launcher), and op.compose_apply runs the forward without its autograd.Function when nothing
needs a gradient. A call plan (plan.py) holds ``ForwardPlan``: the forward's launches with
their grids, scalars and descriptors decided once per argument metadata, and through it
``BackwardPlan``, the backward's (benchmarks/results/2026-12-04-h200-ad runs 1-2: a forward +
backward's host time 0.80-0.97x a bare composition's on the H200 host, 1.14-1.35x with the
backward unplanned).

Host synchronization and CUDA graphs: the route itself reads nothing on the host (the counts
are checked on the device, ``_ends``). Whether ``torch._grouped_mm``
does depends on torch: bf16 on sm90 / sm100 runs a CUTLASS kernel without synchronization,
capturable in a CUDA graph; fp16 / fp32 on CUDA (and bf16 on older GPUs) run torch's fallback,
a loop over the groups that copies the offsets to the host (a synchronization; not capturable),
as the plain composition does with the same GEMMs. The route runs there too: its results are
right and its glue is cheaper than eager glue.

Inputs of any strides: ``torch._grouped_mm``'s operands are brought to a layout it takes with
``reference._row_major``, the glue's with ``launch.kernel_layouts`` / ``launch.summed_rows``,
copies only where needed, so results do not depend on the layout.
"""

from __future__ import annotations

import dataclasses

import torch

from ... import launches
from ...utils import cdiv, next_power_of_2
from . import streams
from .launch import ACTIVATIONS, bias_grads, kernel_layouts, summed_rows
from .reference import COUNTS_MESSAGE, _row_major, assert_counts_on_device, grouped_mm_takes, row_major_ok

# Experts scanned per step by compose_kernels.row_experts (a program compares its rows with this many
# end offsets at a time; a constant, so E does not recompile the kernels).
E_CHUNK = 32
# compose_ends_kernel reads every count in one block of the next power of two; past this many
# experts torch.cumsum and reference.assert_counts_on_device run instead.
MAX_ENDS_EXPERTS = 8192


@dataclasses.dataclass(frozen=True)
class GlueConfig:
    """Tiles of the glue kernels. glu_*: the forward GLU's (rows, activation columns) tile, also
    the fc2-bias kernel's (rows, H columns) tile; dglu_*: the dGLU's rows per program and its
    step along F and H. Not tuned: the defaults are a first guess at a bandwidth-bound tiling
    (8-16 elements per thread and tensor, thousands of programs at the spec's shapes), to be
    measured on the H200 (benchmarks/grouped_compose_gpu_check.py prints the glue's kernel
    times)."""
    glu_block_m: int = 16
    glu_block_f: int = 128
    dglu_block_m: int = 4
    dglu_block_f: int = 256
    num_warps: int = 4


DEFAULT_GLUE = GlueConfig()


# Whether the route's GEMMs can run on ``torch._grouped_mm``, asked of sizes (it calls
# ``torch._grouped_mm`` inside its custom ops, which run eagerly under torch.compile too, so the
# bf16-only meta kernel that restricts the traced composition does not restrict it).
takes = grouped_mm_takes


# The route's name: op.route's answer and the tuning family's baseline choice (tune.COMPOSE).
NAME = "compose"


def _glue_kernels():
    from .compose_kernels import compose_bias_kernel, compose_dglu_kernel, compose_glu_kernel
    return compose_glu_kernel, compose_dglu_kernel, compose_bias_kernel


def _launcher(kernel, num_warps: int):
    """``kernel``'s launcher (triton_common.SpecializingLauncher: the JIT once per argument
    specialization, then the compiled kernel's launcher; the JIT's own per-call path costs
    tens of microseconds of host time)."""
    from ..triton_common import specializing_launcher
    return specializing_launcher(kernel, num_warps=num_warps)


def _ends(counts, n_tokens: int, launch=None):
    """ends = cumsum(counts) as int32 on the device, with the counts checked there as
    reference.assert_counts_on_device checks them (each in [0, T], summing to T: a device-side
    assertion otherwise, no host sync), in one launch (compose_ends_kernel) and the assertion
    where torch.cumsum and the check took six. ``launch(counts, ends, ok)``: that launch with
    its grid and scalars fixed (ForwardPlan's), else made here."""
    E = counts.shape[0]
    if launch is None and (E == 0 or E > MAX_ENDS_EXPERTS):
        assert_counts_on_device(counts, n_tokens)
        return torch.cumsum(counts, 0, dtype=torch.int32)
    ends = torch.empty(E, dtype=torch.int32, device=counts.device)
    ok = torch.empty((), dtype=torch.bool, device=counts.device)
    if launch is None:
        from .compose_kernels import compose_ends_kernel
        _launcher(compose_ends_kernel, 4)((1,), (counts, ends, ok, E, n_tokens), (next_power_of_2(E),))
    else:
        launch(counts, ends, ok)
    torch._assert_async(ok, COUNTS_MESSAGE)
    return ends


# A tuned variant's Gluon tiles, (wgrad_block_m, wgrad_stages, rows_block_n, rows_stages,
# rows_glu): ``backward``'s weight gradients through ws_wgrad.py, ``forward``'s / ``backward``'s
# four row-ragged GEMMs through ws_rows.py (a 0 block: those GEMMs on torch._grouped_mm), and
# whether fc1's GLU goes into ws_rows' epilogue. ``backward`` takes the first four.
VENDOR = (0, 0, 0, 0, True)


def gluon_tiles(config) -> tuple[int, int, int, int, bool]:
    """The Gluon tiles of a ``GemmConfig.compose`` config (block_m and num_stages: the wgrads';
    rows_block_n, rows_stages and rows_glu: the row GEMMs'), VENDOR for anything else (the
    route itself)."""
    if not getattr(config, "compose", False):
        return VENDOR
    return (config.block_m, config.num_stages, config.rows_block_n, config.rows_stages, config.rows_glu)


def _rows_gemm(a, w, *, by_rows: bool, counts, ends, block_n: int, stages: int):
    """a_e @ (w[e]^T if by_rows else w[e]) for each expert's rows of row-major a: through
    ws_rows' Gluon kernel at tile (block_n, stages) where a tuned config asks for it (block_n >
    0) and the kernel runs, else torch._grouped_mm."""
    if block_n:
        from . import ws_rows
        out = torch.empty((a.shape[0], w.shape[1] if by_rows else w.shape[2]), dtype=a.dtype, device=a.device)
        if ws_rows.launch(a, w, out, counts, rows=by_rows, block_n=block_n, stages=stages):
            launches.record("grouped_ws_rows")
            return out
    return torch._grouped_mm(a, w.transpose(-2, -1) if by_rows else w, offs=ends)


def _fc1_glu(x, w1, counts, probs, b1, h, activation: str, glu_interleave, block_n: int, stages: int):
    """z = x_e W1_e^T with h = p act(z + b1_e) written beside it by ws_rows' kernel (the GLU
    kernel's values, from the rounded z), where a rows tile asks for it and the kernel takes it
    (``ws_rows.glu_applies``: gate and up interleaved by 8 to block_n / 2 columns); z, or None
    (then the caller runs fc1 and the GLU kernel)."""
    if not block_n:
        return None
    from . import ws_rows
    glu = (h, probs, b1, ACTIVATIONS[activation], glu_interleave)
    shape = (x.shape[0], w1.shape[1])
    if not ws_rows.glu_applies(shape, block_n, *glu):   # checked first: no z allocated twice
        return None
    z = torch.empty(shape, dtype=x.dtype, device=x.device)
    if not ws_rows.launch(x, w1, z, counts, rows=True, block_n=block_n, stages=stages, glu=glu, glu_checked=True):
        return None
    launches.record("grouped_ws_rows")
    launches.record("grouped_ws_rows_glu")
    return z


def forward(x, counts, probs, w1, w2, b1, b2, activation: str, glu_interleave, rows_block_n: int = 0,
            rows_stages: int = 0, rows_glu: bool = True, glue: GlueConfig = DEFAULT_GLUE, laid_out: bool = False):
    """(y (T, H), z (T, 2F), h (T, F), ends (E,) int32): y, z, h in x.dtype; z without fc1's
    bias; z, h and ends are what ``backward`` takes. Tensors of any strides, or with
    ``laid_out`` as ``lay_out`` returns them (then not checked again). rows_block_n > 0 (a
    ``GemmConfig.compose`` config's rows tile): fc1 and fc2 through ws_rows' kernel where it
    runs, with ``rows_glu`` the GLU in fc1's epilogue where it takes the layout
    (``_fc1_glu``)."""
    glu_kernel, _, bias_kernel = _glue_kernels()
    T, H = x.shape
    E, F = w2.shape[0], w2.shape[2]
    if not laid_out:
        x, counts, probs, w1, w2, b1, b2 = lay_out(x, counts, probs, w1, w2, b1, b2)
    ends = _ends(counts, T)
    launches.record("grouped_mlp_compose")
    if T == 0:
        return x.new_empty((0, H)), x.new_empty((0, 2 * F)), x.new_empty((0, F)), ends
    rows_tile = dict(counts=counts, ends=ends, block_n=rows_block_n, stages=rows_stages)
    h = torch.empty((T, F), dtype=x.dtype, device=x.device)
    z = _fc1_glu(x, w1, counts, probs, b1, h, activation, glu_interleave, rows_block_n if rows_glu else 0,
                 rows_stages)
    if z is None:
        z = _rows_gemm(x, w1, by_rows=True, **rows_tile)
        _launcher(glu_kernel, glue.num_warps)(
            (cdiv(T, glue.glu_block_m), cdiv(F, glue.glu_block_f)),
            (z, b1 if b1 is not None else z, ends, probs, h, T, F, E, z.stride(0), h.stride(0),
             b1.stride(0) if b1 is not None else 0),
            (ACTIVATIONS[activation], glu_interleave or 0, b1 is not None, glue.glu_block_m, glue.glu_block_f,
             E_CHUNK))
    y = _rows_gemm(h, w2, by_rows=True, **rows_tile)
    if b2 is not None:
        _launcher(bias_kernel, glue.num_warps)(
            (cdiv(T, glue.glu_block_m), cdiv(H, glue.glu_block_f)),
            (y, b2, ends, probs, T, H, E, y.stride(0), b2.stride(0)),
            (glue.glu_block_m, glue.glu_block_f, E_CHUNK))
    return y, z, h, ends


class ForwardPlan:
    """``forward`` for tensors of one metadata (their shapes, strides, dtypes and device, laid
    out: ``lay_out`` copies nothing, x, w1 and w2 16-byte aligned), T > 0 and 0 < E <=
    MAX_ENDS_EXPERTS: the same launches with the same arguments, decided once. The offsets
    kernel and the glue launch through compiled-kernel launchers with their grids and
    scalars fixed (triton_common.CompiledLauncher), fc1 and fc2 through ws_rows.Prepared
    where the rows tile asks for them (both built on the first run, from its tensors); per
    call what remains is allocating the outputs and the launches. plan.py holds one per call
    key; ``run`` gives ``forward``'s results bit for bit."""

    def __init__(self, x, counts, probs, w1, w2, b1, b2, activation: str, glu_interleave, rows_block_n: int,
                 rows_stages: int, rows_glu: bool = True, glue: GlueConfig = DEFAULT_GLUE):
        from ..triton_common import CompiledLauncher
        from .compose_kernels import compose_ends_kernel
        glu_kernel, _, bias_kernel = _glue_kernels()
        T, H = x.shape
        E, F = w2.shape[0], w2.shape[2]
        self.sizes = (T, H, F, E)
        self.activation, self.interleave = activation, glu_interleave
        self.rows = (rows_block_n, rows_stages)
        self.rows_glu = rows_glu
        self.ends = CompiledLauncher(compose_ends_kernel, (1,), (E, T), {"BLOCK_E": next_power_of_2(E)}, num_warps=4)
        self.glu = CompiledLauncher(
            glu_kernel, (cdiv(T, glue.glu_block_m), cdiv(F, glue.glu_block_f)),
            (T, F, E, 2 * F, F, b1.stride(0) if b1 is not None else 0),
            {"ACT": ACTIVATIONS[activation], "INTERLEAVE": glu_interleave or 0, "HAS_BIAS": b1 is not None,
             "BLOCK_M": glue.glu_block_m, "BLOCK_F": glue.glu_block_f, "E_CHUNK": E_CHUNK}, num_warps=glue.num_warps)
        self.bias = None if b2 is None else CompiledLauncher(
            bias_kernel, (cdiv(T, glue.glu_block_m), cdiv(H, glue.glu_block_f)), (T, H, E, H, b2.stride(0)),
            {"BLOCK_M": glue.glu_block_m, "BLOCK_N": glue.glu_block_f, "E_CHUNK": E_CHUNK}, num_warps=glue.num_warps)
        self.fc1 = self.fc2 = None      # ws_rows.Prepared, False (torch._grouped_mm) or None (not yet built)
        self.fc1_glu = False
        self.has_b1 = b1 is not None
        self.b1_stride = b1.stride(0) if b1 is not None else 0
        self.params = _params_meta(w1, w2, b1, b2)   # what the launches fixed of them (backward)
        # the shapes, dtypes and devices of what a call's backward is given back (x, counts,
        # probs and the forward's ends, z and h): a saved-tensor hook may hand back others, which
        # the launches' fixed grids and kernels would misread
        dev = x.device
        self.saved = (*_saved_meta(x, counts, probs), (torch.Size((E,)), torch.int32, dev),
                      (torch.Size((T, 2 * F)), x.dtype, dev), (torch.Size((T, F)), x.dtype, dev))
        self.glue = glue
        self._backward: dict = {}       # BackwardPlan by the backward's Gluon tiles

    @staticmethod
    def applies(x, counts) -> bool:
        """Whether a plan can run these (laid-out) tensors: T > 0, 0 < E <= MAX_ENDS_EXPERTS."""
        return x.shape[0] > 0 and 0 < counts.shape[0] <= MAX_ENDS_EXPERTS

    def _build(self, x, counts, probs, w1, w2, b1, z, h, y):
        """The rows launches, made in locals and published fc1 last: ``run`` builds while fc1 is
        None and reads fc1_glu and fc2 after fc1, so a thread running the plan while another
        builds it sees None (and builds too) or the whole build, never an fc1 with a GLU
        epilogue before fc1_glu says so (which would run it without h, probs and b1)."""
        from . import ws_rows
        block_n, stages = self.rows
        fc1 = fc2 = False
        fc1_glu = False
        if block_n:
            glu = (h, probs, b1, ACTIVATIONS[self.activation], self.interleave)
            fc1 = ws_rows.prepare(x, w1, z, counts, rows=True, block_n=block_n, stages=stages,
                                  glu=glu) if self.rows_glu else None
            fc1_glu = fc1 is not None
            if fc1 is None:
                fc1 = ws_rows.prepare(x, w1, z, counts, rows=True, block_n=block_n, stages=stages) or False
            fc2 = ws_rows.prepare(h, w2, y, counts, rows=True, block_n=block_n, stages=stages) or False
        self.fc1_glu, self.fc2 = fc1_glu, fc2
        self.fc1 = fc1

    def run(self, x, counts, probs, w1, w2, b1, b2):
        """(y, z, h, ends) of ``forward`` for tensors of the plan's metadata."""
        T, H, F, E = self.sizes
        dev, dt = x.device, x.dtype
        ends = _ends(counts, T, self.ends)
        launches.record("grouped_mlp_compose")
        h = torch.empty((T, F), dtype=dt, device=dev)
        z = torch.empty((T, 2 * F), dtype=dt, device=dev)
        y = torch.empty((T, H), dtype=dt, device=dev)
        if self.fc1 is None:
            self._build(x, counts, probs, w1, w2, b1, z, h, y)
        glu_done = False
        if self.fc1 and self.fc1(x, w1, z, counts, *((h, probs, b1) if self.fc1_glu else ())):
            launches.record("grouped_ws_rows")
            if self.fc1_glu:
                launches.record("grouped_ws_rows_glu")
                glu_done = True
        else:
            z = torch._grouped_mm(x, w1.transpose(-2, -1), offs=ends)
        if not glu_done:
            self.glu(z, b1 if b1 is not None else z, ends, probs, h)
        if self.fc2 and self.fc2(h, w2, y, counts):
            launches.record("grouped_ws_rows")
        else:
            y = torch._grouped_mm(h, w2.transpose(-2, -1), offs=ends)
        if self.bias is not None:
            self.bias(y, b2, ends, probs)
        return y, z, h, ends

    def backward(self, dy, x, counts, ends, probs, w1, w2, b1, b2, z, h, activation: str, glu_interleave,
                 wgrad_block_m: int = 0, wgrad_stages: int = 0, rows_block_n: int = 0, rows_stages: int = 0,
                 need_dw1: bool = True, need_dw2: bool = True):
        """``backward`` (its signature) for this plan's call: through a BackwardPlan where dy is
        contiguous and row-major as ``_row_major`` takes it (16-byte row stride and first
        element) of x's dtype (what autograd hands back for a contiguous y of more than one
        row), the saved x, z, h and probs are still contiguous and aligned as the forward left
        them, and they, counts and ends have the shapes, dtypes and devices the forward made or
        was given, and the weights and biases have the strides and dtypes the plan's launches
        fixed; else ``backward`` itself. need_dw1 / need_dw2 apply per call: a BackwardPlan is shared
        by calls that ask for different weight gradients (nothing it fixes depends on them)."""
        tiles = (wgrad_block_m, wgrad_stages, rows_block_n, rows_stages)
        weight_grads = dict(need_dw1=need_dw1, need_dw2=need_dw2)
        # the saved tensors as the forward made them too (a saved-tensor hook may change them:
        # save_on_cpu gives a padded bias back contiguous, whose row stride the dGLU launch fixed)
        # Row-major by _row_major's rule, not is_contiguous: a one-row gradient of strides (1, 1)
        # is contiguous, and torch._grouped_mm refuses it (the BackwardPlan lays nothing out).
        if not (dy.dtype == x.dtype and dy.is_contiguous() and x.is_contiguous() and z.is_contiguous()
                and row_major_ok(dy) and row_major_ok(x) and row_major_ok(z) and row_major_ok(h)
                and counts.is_contiguous() and ends.is_contiguous()
                and h.is_contiguous() and probs.is_contiguous()
                and w1.data_ptr() & 15 == 0 and w2.data_ptr() & 15 == 0
                and _params_meta(w1, w2, b1, b2) == self.params
                and _saved_meta(x, counts, probs, ends, z, h) == self.saved):
            return backward(dy, x, counts, ends, probs, w1, w2, b1, b2, z, h, activation, glu_interleave, *tiles,
                            **weight_grads, glue=self.glue)
        bwd = self._backward.get(tiles)
        if bwd is None:
            bwd = self._backward[tiles] = BackwardPlan(self, b2, tiles)
        return bwd.run(dy, x, counts, ends, probs, w1, w2, b1, b2, z, h, **weight_grads)


def _saved_meta(*tensors) -> tuple:
    return tuple([(t.shape, t.dtype, t.device) for t in tensors])


def _params_meta(w1, w2, b1, b2) -> tuple:
    """The weights' and biases' strides and dtypes: what a ForwardPlan's launches (the GLU's and
    dGLU's bias row strides, the Gluon GEMMs' weight layouts) were built for."""
    return tuple(None if t is None else (t.stride(), t.dtype) for t in (w1, w2, b1, b2))


class BackwardPlan:
    """``backward`` for a ForwardPlan's call and a contiguous, 16-byte aligned dy (the
    ForwardPlan's ``backward`` decides): the same launches with the same arguments, decided
    once. The dGLU launches through a compiled-kernel launcher with its grid and scalars fixed
    (triton_common.CompiledLauncher), the two dgrads through ws_rows.Prepared and the two
    weight gradients through ws_wgrad.Prepared where the Gluon tiles ask for them (each built
    on its first run, from that run's tensors); per call what remains is allocating the
    gradients and the launches. ``run`` gives ``backward``'s results bit for bit."""

    def __init__(self, forward: ForwardPlan, b2, tiles):
        self.forward, self.tiles = forward, tiles
        self.has_b2 = b2 is not None
        self.b2_stride = b2.stride(0) if b2 is not None else 0
        self.gemms: dict = {}      # role: ws_rows / ws_wgrad Prepared, or False (torch._grouped_mm)
        self.dglu = None           # (the dGLU's launcher, the dh row stride it was built for)

    def _prepare(self, wgrad: bool, a, w, out, counts):
        from . import ws_rows, ws_wgrad
        wgrad_block_m, wgrad_stages, block_n, stages = self.tiles
        if wgrad:
            return ws_wgrad.prepare(a, w, out, counts, block_m=wgrad_block_m, stages=wgrad_stages) or False
        return ws_rows.prepare(a, w, out, counts, rows=False, block_n=block_n, stages=stages) or False

    def _gemm(self, role, a, w, shape, counts, vendor, side=None):
        """``role``'s product (a dgrad, "dh" / "dx", through ws_rows; a weight gradient,
        "dw1" / "dw2", through ws_wgrad) by its Prepared Gluon launch, on the stream ``side``
        if given (streams.on_side), recorded as ``backward`` records it, or ``vendor()``
        (torch._grouped_mm, on the caller's stream) where the tiles do not ask for one, it
        does not apply or it declines these tensors."""
        wgrad = role in ("dw1", "dw2")
        prepared = self.gemms.get(role)
        if prepared is False or not (self.tiles[0] if wgrad else self.tiles[2]):   # a 0 block: vendor
            return vendor()
        out = torch.empty(shape, dtype=a.dtype, device=a.device)
        if prepared is None:
            prepared = self.gemms[role] = self._prepare(wgrad, a, w, out, counts)
        if prepared is True or (prepared and streams.on_side(side, a.device, lambda: prepared(a, w, out, counts))):
            launches.record("grouped_ws_wgrad" if wgrad else "grouped_ws_rows")
            return out
        return vendor()

    def _dglu(self, dh):
        """The dGLU's launcher for a dh of dh's row stride (fixed on the first run: a dh from
        torch._grouped_mm has its own, padded to 16 bytes). The launcher and the stride it was
        built for are published as one tuple, so a thread never pairs one with the other's."""
        held = self.dglu
        lddh = dh.stride(0)
        if held is not None and held[1] == lddh:
            return held[0]
        from ..triton_common import CompiledLauncher
        _, dglu_kernel, _ = _glue_kernels()
        fwd = self.forward
        T, H, F, E = fwd.sizes
        launcher = CompiledLauncher(
            dglu_kernel, (cdiv(T, fwd.glue.dglu_block_m),),
            (T, F, H, E, lddh, 2 * F, 2 * F, H, fwd.b1_stride, self.b2_stride),
            {"ACT": ACTIVATIONS[fwd.activation], "INTERLEAVE": fwd.interleave or 0, "HAS_B1": fwd.has_b1,
             "HAS_B2": self.has_b2, "BLOCK_M": fwd.glue.dglu_block_m, "BLOCK_F": fwd.glue.dglu_block_f,
             "BLOCK_H": fwd.glue.dglu_block_f, "E_CHUNK": E_CHUNK}, num_warps=fwd.glue.num_warps)
        self.dglu = (launcher, lddh)
        return launcher

    def run(self, dy, x, counts, ends, probs, w1, w2, b1, b2, z, h, need_dw1: bool = True, need_dw2: bool = True):
        """(dx, dprobs, dw1 or None, dw2 or None, db1 or None, db2 or None) of ``backward``."""
        T, H, F, E = self.forward.sizes
        launches.record("grouped_mlp_compose_bwd")
        # backward's order and streams
        side = streams.side_stream(x) if self.tiles[0] and (need_dw1 or need_dw2) else None
        dw1 = dw2 = None
        with streams.joined(side, x.device):
            if need_dw2:
                dw2 = self._gemm("dw2", dy, h, w2.shape, counts, lambda: torch._grouped_mm(dy.t(), h, offs=ends),
                                 side)
            dh = self._gemm("dh", dy, w2, (T, F), counts, lambda: torch._grouped_mm(dy, w2, offs=ends))
            dz = torch.empty((T, 2 * F), dtype=x.dtype, device=x.device)
            dprobs = torch.empty((T,), dtype=probs.dtype, device=x.device)
            self._dglu(dh)(dh, z, b1 if b1 is not None else z, ends, probs, dy, b2 if b2 is not None else z, dz, dprobs)
            if need_dw1:
                dw1 = self._gemm("dw1", dz, x, w1.shape, counts, lambda: torch._grouped_mm(dz.t(), x, offs=ends),
                                 side)
            dx = self._gemm("dx", dz, w1, (T, H), counts, lambda: torch._grouped_mm(dz, w1, offs=ends))
        return (dx, dprobs, dw1, dw2, *bias_grads(dz, dy, probs, counts, b1, b2))


def lay_out(x, counts, probs, w1, w2, b1, b2):
    """The forward's tensors as its GEMMs and glue read them (``torch._grouped_mm``'s operands
    by ``reference._row_major``, the glue's by ``launch.kernel_layouts``), copies only where
    needed."""
    x, w1, w2 = _row_major(x), _row_major(w1), _row_major(w2)
    _, counts, probs, b1, b2 = kernel_layouts(x, counts, probs, b1, b2)
    return x, counts, probs, w1, w2, b1, b2


def _zero_grads(x, probs, w1, w2, b1, b2, need_dw1: bool = True, need_dw2: bool = True):
    """The gradients at T == 0: empty dx and dprobs, zero weight and bias gradients (None for a
    weight whose gradient is not asked for)."""
    def zeros(t):
        return None if t is None else torch.zeros(t.shape, dtype=t.dtype, device=t.device)
    return (x.new_empty((0, x.shape[1])), probs.new_empty((0,)), zeros(w1) if need_dw1 else None,
            zeros(w2) if need_dw2 else None, zeros(b1), zeros(b2))


def _wgrad(a, b, counts, ends, n_experts: int, wgrad_block_m: int, wgrad_stages: int, side=None):
    """dW_e = a_e^T b_e (E, N, M) for row-major a (T, N), b (T, M): through ws_wgrad's Gluon
    kernel at tile (wgrad_block_m, wgrad_stages) where a tuned config asks for it
    (wgrad_block_m > 0) and the kernel runs, on the stream ``side`` if given (streams.on_side),
    else torch._grouped_mm on the caller's stream."""
    if wgrad_block_m:
        from . import ws_wgrad
        out = torch.empty((n_experts, a.shape[1], b.shape[1]), dtype=a.dtype, device=a.device)
        if streams.on_side(side, a.device, lambda: ws_wgrad.launch(a, b, out, counts, block_m=wgrad_block_m,
                                                            stages=wgrad_stages)):
            launches.record("grouped_ws_wgrad")
            return out
    return torch._grouped_mm(a.t(), b, offs=ends)


def backward(dy, x, counts, ends, probs, w1, w2, b1, b2, z, h, activation: str, glu_interleave,
             wgrad_block_m: int = 0, wgrad_stages: int = 0, rows_block_n: int = 0, rows_stages: int = 0,
             need_dw1: bool = True, need_dw2: bool = True, glue: GlueConfig = DEFAULT_GLUE):
    """(dx, dprobs, dw1 or None, dw2 or None, db1 or None, db2 or None) from ``forward``'s z, h
    and ends; dx in x.dtype, dprobs in probs.dtype, the others in their parameter's dtype, all
    contiguous. wgrad_block_m > 0 (a ``GemmConfig.compose`` config's block_m and num_stages):
    the two weight gradients through ws_wgrad's warp-specialised kernel where it runs;
    rows_block_n > 0 (and rows_stages): the two dgrads through ws_rows' kernel where it runs.
    need_dw1 / need_dw2 off: that weight's gradient is None and its GEMM does not run (neither
    asked for: no second stream).
    The other tensors as ``forward`` read them (op.compose_apply lays them out before the
    forward; z and h are its own outputs); dy of any strides (``y.sum().backward()`` gives an
    expanded one)."""
    _, dglu_kernel, _ = _glue_kernels()
    T, H = x.shape
    E, F = w2.shape[0], w2.shape[2]
    launches.record("grouped_mlp_compose_bwd")
    if T == 0:
        return _zero_grads(x, probs, w1, w2, b1, b2, need_dw1, need_dw2)
    dy = _row_major(dy)
    # The saved tensors as forward made them, laid out again where they are not: a saved-tensor
    # hook may give them back in another layout (``torch.autograd.graph.saved_tensors_hooks``);
    # no copy otherwise. The dGLU kernel reads z by rows, probs, counts and ends at ``ptr + i``
    # and the biases through their row stride (kernel_layouts, as the forward laid them out).
    x, z, h = _row_major(x), _row_major(z), _row_major(h)
    _, counts, probs, b1, b2 = kernel_layouts(x, counts, probs, b1, b2)
    ends = ends.contiguous()
    # dy is reduced along H for the fc2 bias (dprobs' term and db2): summed_rows, so that the
    # reductions compile as for a contiguous dy whatever dy's row stride (launch.summed_rows).
    dy_summed = summed_rows(dy) if b2 is not None else dy
    rows_tile = dict(counts=counts, ends=ends, block_n=rows_block_n, stages=rows_stages)
    side = streams.side_stream(x) if wgrad_block_m and (need_dw1 or need_dw2) else None
    dw1 = dw2 = None
    # dW2 first, on the side stream where it runs in Gluon: dh takes the SMs its last wave
    # leaves idle ("Two streams")
    with streams.joined(side, x.device):   # joined however it ends (streams.py)
        if need_dw2:
            dw2 = _wgrad(dy, h, counts, ends, E, wgrad_block_m, wgrad_stages, side)
        dh = _rows_gemm(dy, w2, by_rows=False, **rows_tile)
        dz = torch.empty((T, 2 * F), dtype=x.dtype, device=x.device)
        dprobs = torch.empty((T,), dtype=probs.dtype, device=x.device)
        _launcher(dglu_kernel, glue.num_warps)(
            (cdiv(T, glue.dglu_block_m),),
            (dh, z, b1 if b1 is not None else z, ends, probs, dy_summed, b2 if b2 is not None else z, dz, dprobs,
             T, F, H, E, dh.stride(0), z.stride(0), dz.stride(0), dy_summed.stride(0),
             b1.stride(0) if b1 is not None else 0, b2.stride(0) if b2 is not None else 0),
            (ACTIVATIONS[activation], glu_interleave or 0, b1 is not None, b2 is not None, glue.dglu_block_m,
             glue.dglu_block_f, glue.dglu_block_f, E_CHUNK))
        if need_dw1:
            dw1 = _wgrad(dz, x, counts, ends, E, wgrad_block_m, wgrad_stages, side)
        dx = _rows_gemm(dz, w1, by_rows=False, **rows_tile)
    return (dx, dprobs, dw1, dw2, *bias_grads(dz, dy_summed, probs, counts, b1, b2))
