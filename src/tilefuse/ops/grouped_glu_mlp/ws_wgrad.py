"""The 16-bit weight gradients warp-specialised in Gluon, one program an SM: dW_e = A_e^T B_e
over each expert's ragged token rows (what the compose route runs on ``torch._grouped_mm``).
Only ``@gluon.jit`` code, its layout check and its launch (``available``: ops/gluon_hopper.py).

The structure is ws_kernels.fp8_ws_gemm_kernel's: one producer warp issues every TMA (a chunk
of BLOCK_K tokens of A's BLOCK_N columns and of B's BLOCK_M columns under one mbarrier, STAGES
chunks ahead, straight from the row-major (T, N) and (T, M) activations: each expert's chunks
start at its first row, wherever that is), two consumer warp groups each own 64 of the tile's
BLOCK_N rows. With no per-chunk scales the products chain on one accumulator: each chunk's
wgmma is issued before the previous one is waited for, and the previous one's ring slot goes
back then. An expert's last chunk, where its rows end inside it, takes A through registers with
the rows past the expert zeroed (the next expert's rows of B then meet zeros: a non-finite
value there reaches this expert's gradient through 0 * inf or 0 * NaN); past T the copy
engine reads zeros. The tile leaves through shared
memory and an asynchronous TMA store, so the next tile's products start while it drains.
Tiles run expert by expert, the expert's first row from a cursor over the device-side counts
(no host sync).

Measured on the H200 (benchmarks/results/2026-12-03-h200-aa run 5; dW1 + dW2 at the spec's
shapes, balanced / routed counts, graph replay): the 256-column tile on a 3-slot ring ran
1.11x / 1.08x, 1.35x / 1.29x and 1.34x / 1.24x CUTLASS's bf16 wgrads (``torch._grouped_mm``)
at shapes 1-3, and gave their bits on every problem compared (and grouped_wgrad_kernel's at
its 16-bit heuristic tile: each chains the products chunk by chunk in token order). The tuner
decides per key whether the compose route takes it (GemmConfig.compose).
"""

from __future__ import annotations

import functools
import threading

import torch

from ...device import num_sms
from ...utils import cdiv
from ..gluon_hopper import (TensorDescriptor, available, fence_async_shared, gl, gluon,  # noqa: F401 - the API
                            mbarrier, tma, tma_load, tma_store, warpgroup_mma,         # of this module too
                            warpgroup_mma_wait)

BLOCK_N = 128     # A's columns a tile (the gradient's rows): 64 a consumer warp group
BLOCK_K = 64      # tokens a chunk
MAXNREG = 168
CONSUMER_REGS = 232
PRODUCER_REGS = 40
SMEM = 227 * 1024


def _smem_bytes(block_m: int, stages: int, itemsize: int = 2) -> int:
    """Shared memory a launch takes, an upper bound: the ring, the two consumers' epilogue
    buffers (64 x BLOCK_M each) and the barriers (tests/test_grouped_ws_wgrad.py compiles every
    candidate tile against it)."""
    return stages * BLOCK_K * (BLOCK_N + block_m) * itemsize + 2 * 64 * block_m * itemsize + 1024


def _rows_ok(t: torch.Tensor) -> bool:
    return (t.dim() == 2 and t.dtype in (torch.bfloat16, torch.float16) and t.stride(1) == 1
            and t.stride(0) * t.element_size() % 16 == 0 and t.data_ptr() % 16 == 0 and t.numel() > 0)


def counts_ok(counts: torch.Tensor, n_experts: int) -> bool:
    """tokens_per_expert as the Gluon kernels here, in ws_rows.py and in ws_kernels.py read it:
    (E,) contiguous, one count an expert at ``counts_ptr + e``."""
    return counts.dim() == 1 and counts.is_contiguous() and counts.shape[0] == n_experts


def applies(a, b, c, block_m: int, stages: int) -> bool:
    """Whether ``launch`` runs: a (T, N) and b (T, M) 16-bit, one dtype, row-major with 16-byte
    aligned rows, T > 0; c (E, N, M) contiguous of their dtype with 16-byte aligned rows (its
    descriptor's), N a multiple of 128; a tile of BLOCK_M 128 or 256 columns and a ring that
    fits shared memory, on a device where the kernel runs."""
    return (available(c.device) and block_m in (128, 256) and stages >= 2 and _smem_bytes(block_m, stages) <= SMEM
            and _rows_ok(a) and _rows_ok(b) and a.dtype == b.dtype == c.dtype and a.shape[0] == b.shape[0]
            and c.dim() == 3 and c.is_contiguous() and tuple(c.shape[1:]) == (a.shape[1], b.shape[1])
            and c.shape[1] % BLOCK_N == 0 and c.shape[2] * c.element_size() % 16 == 0 and c.data_ptr() % 16 == 0)


if gluon is not None:
    @gluon.jit
    def _tile(tile, counts_ptr, cur_expert, cur_start, N, M, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr):
        """Tile ``tile``: (expert, its first gradient row, first column, the expert's first token
        and token count, the cursor's expert). Tiles run expert by expert, each expert's (N /
        BLOCK_N) x cdiv(M, BLOCK_M) tiles row-major; the cursor (an expert and the tokens before
        it) only moves forward, as a program's tiles do."""
        m_tiles = gl.cdiv(M, BLOCK_M)
        per_expert = (N // BLOCK_N) * m_tiles
        expert = tile // per_expert
        local = tile % per_expert
        while cur_expert < expert:
            cur_start += gl.load(counts_ptr + cur_expert).to(gl.int32)
            cur_expert += 1
        count = gl.load(counts_ptr + expert).to(gl.int32)
        return expert, (local // m_tiles) * BLOCK_N, (local % m_tiles) * BLOCK_M, cur_start, count, cur_expert

    @gluon.jit
    def _producer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, N, M, n_tiles,
                  BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
        """One warp: every tile's token chunks (A's BLOCK_N columns, B's BLOCK_M columns) into the
        ring, each slot once both consumers have handed it back."""
        pid = gl.program_id(0)
        cur_expert = pid * 0
        cur_start = pid * 0
        it = 0
        for tile in range(pid, n_tiles, gl.num_programs(0)):
            expert, row_n, col_m, start, count, cur_expert = _tile(tile, counts_ptr, cur_expert, cur_start, N, M,
                                                                   BLOCK_N, BLOCK_M)
            cur_start = start
            for k0 in range(0, count, BLOCK_K):
                slot = it % STAGES
                mbarrier.wait(empty.index(slot), ((it // STAGES) & 1) ^ 1)   # the first pass finds it free
                bar = ready.index(slot)
                mbarrier.expect(bar, BLOCK_K * (BLOCK_N + BLOCK_M) * 2)
                tma_load(a_desc, [start + k0, row_n], bar, a_s.index(slot))
                tma_load(b_desc, [start + k0, col_m], bar, b_s.index(slot))
                it += 1

    @gluon.jit
    def _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, N, M, n_tiles,
                  WG: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr,
                  STAGES: gl.constexpr):
        """One warp group: gradient rows [64 WG, 64 WG + 64) of every tile. Each chunk's wgmma is
        chained on the accumulator and the previous chunk's slot handed back once it is done;
        an expert's partial last chunk takes A through registers, its rows past the expert
        zeroed; then the tile rounded and stored (columns past M masked)."""
        HALF: gl.constexpr = BLOCK_N // 2
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                      instr_shape=[16, BLOCK_M, 16])
        a_reg: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
        tok_l: gl.constexpr = gl.SliceLayout(0, a_reg)
        pid = gl.program_id(0)
        cur_expert = pid * 0
        cur_start = pid * 0
        it = 0
        for tile in range(pid, n_tiles, gl.num_programs(0)):
            expert, row_n, col_m, start, count, cur_expert = _tile(tile, counts_ptr, cur_expert, cur_start, N, M,
                                                                   BLOCK_N, BLOCK_M)
            cur_start = start
            acc = gl.zeros([HALF, BLOCK_M], gl.float32, mma)
            n_whole = count // BLOCK_K
            for j in range(n_whole):
                slot = it % STAGES
                mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
                acc = warpgroup_mma(a_s.index(slot).slice(WG * HALF, HALF, dim=1).permute((1, 0)), b_s.index(slot),
                                    acc, is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=1, deps=[acc])
                # the previous chunk's product is done: its slot goes back
                mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=j > 0)
                it += 1
            acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
            if n_whole > 0:
                mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
            if n_whole * BLOCK_K < count:   # the expert's rows end inside this chunk
                slot = it % STAGES
                mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
                keep = gl.arange(0, BLOCK_K, layout=tok_l) < count - n_whole * BLOCK_K
                a = a_s.index(slot).slice(WG * HALF, HALF, dim=1).permute((1, 0)).load(a_reg)
                a = gl.where(keep[None, :], a, gl.zeros_like(a))
                acc = warpgroup_mma(a, b_s.index(slot), acc, is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
                mbarrier.arrive(empty.index(slot), count=1)
                it += 1
            # The tile goes out through shared memory and one asynchronous TMA store (columns past
            # M clipped by the copy engine): the next tile's products start while it drains. Stored
            # by pointers from registers instead, the wgrads ran 1.03-1.15x slower
            # (results/2026-12-03-h200-aa run 5).
            tma.store_wait(0)   # the last tile's store has read this warp group's buffer
            c_s.index(WG).store(acc.to(c_desc.dtype))
            fence_async_shared()
            tma_store(c_desc, [expert * N + row_n + WG * HALF, col_m], c_s.index(WG))
        tma.store_wait(0)

    # One wrapper a consumer warp group (ws_kernels' reason: a literal in a partition's
    # argument tuple did not survive Gluon's flattening under triton 3.6).
    @gluon.jit
    def _consumer0(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, N, M, n_tiles,
                   BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
        _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, N, M, n_tiles, 0, BLOCK_N,
                  BLOCK_M, BLOCK_K, STAGES)

    @gluon.jit
    def _consumer1(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, N, M, n_tiles,
                   BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
        _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, N, M, n_tiles, 1, BLOCK_N,
                  BLOCK_M, BLOCK_K, STAGES)

    @gluon.jit
    def ws_wgrad_kernel(a_desc, b_desc, c_desc, counts_ptr, N, M, n_tiles, BLOCK_N: gl.constexpr,
                        BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr,
                        CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
        """C[e] (N, M) = A[rows of e]^T @ B[rows of e]: a_desc over A (T, N), tiles [BLOCK_K,
        BLOCK_N]; b_desc over B (T, M), tiles [BLOCK_K, BLOCK_M]; c_desc over C (E, N, M)
        contiguous as (E * N, M), tiles [BLOCK_N / 2, BLOCK_M], written in full (zeros for
        experts without rows). n_tiles: E * (N / BLOCK_N) * cdiv(M, BLOCK_M)."""
        a_s = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BLOCK_K, BLOCK_N], a_desc.layout)
        b_s = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BLOCK_K, BLOCK_M], b_desc.layout)
        c_s = gl.allocate_shared_memory(c_desc.dtype, [2, BLOCK_N // 2, BLOCK_M], c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(ready.index(s), count=1)
            mbarrier.init(empty.index(s), count=2)   # both consumer warp groups hand a slot back
        gl.warp_specialize([
            (_consumer0, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, N, M, n_tiles, BLOCK_N,
                          BLOCK_M, BLOCK_K, STAGES)),
            (_consumer1, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, N, M, n_tiles, BLOCK_N,
                          BLOCK_M, BLOCK_K, STAGES)),
            (_producer, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, N, M, n_tiles, BLOCK_N,
                         BLOCK_M, BLOCK_K, STAGES)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


_GL_DTYPES = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float8_e4m3fn: "float8e4nv",
              torch.float32: "float32"}


@functools.lru_cache(maxsize=64)
def _layout(block: tuple[int, ...], dtype: torch.dtype):
    """The default NVMMA shared layout of ``block`` tiles of ``dtype``, made once (building one
    takes about 6 us on the host) for the Gluon launches here, in ws_rows.py (through
    ``descriptor``) and in ws_kernels.py, which asks for its layouts on every launch."""
    return gl.NVMMASharedLayout.get_default_for(list(block), getattr(gl, _GL_DTYPES[dtype]))


def descriptor(t: torch.Tensor, block: list[int]):
    """A TMA descriptor over 16-bit ``t`` with ``block`` tiles in the default NVMMA swizzle (what
    the 16-bit Gluon kernels here and in ws_rows.py read and store through); the layout is
    built once per (block, dtype)."""
    return TensorDescriptor.from_tensor(t, block, _layout(tuple(block), t.dtype))


def _rebase(proto, base):
    """``proto`` (a TensorDescriptor) over ``base``, a tensor of the metadata ``proto`` was
    built and checked on (its shape, strides and dtype), without the constructor's checks:
    only the address differs, and the launcher reads the address from ``base``."""
    d = object.__new__(proto.__class__)
    d.__dict__.update(proto.__dict__)
    d.base = base
    return d


_SPECS: dict = {}   # a DescriptorLaunch's argument specialization -> a small int (its launch key)
_SPECS_LOCK = threading.Lock()   # two specializations never get one int, whichever threads launch


def _intern(spec) -> int:
    with _SPECS_LOCK:
        return _SPECS.setdefault(spec, len(_SPECS))


class DescriptorLaunch:
    """One Gluon kernel's launch with every argument's metadata fixed by a first set of
    tensors: its TMA descriptors (the kernel's leading arguments), its other arguments
    (tensors, integers) and constexprs. Calls with tensors of that metadata (shapes, strides,
    dtypes) launch with their addresses: the descriptors are the first ones with another base
    (``_rebase``), and the compiled kernel is looked up by the arguments' Triton
    specialization, computed once (triton_common.specialization: the integers', the
    descriptors', the tensors' dtypes and devices; interned as a small int, ``_SPECS``), and
    the tensors' 16-byte alignment, which is all that can differ (SpecializingLauncher.launch_held /
    launch_keyed). The first launch of a key goes through the JIT with descriptors built and
    checked as for a first call. ws_rows' and ws_wgrad's launches all go through one: a call
    plan keeps it (compose.ForwardPlan, BackwardPlan), ``launch`` makes one per call."""

    __slots__ = ("launcher", "grid", "blocks", "consts", "protos", "spec", "tensors")

    def __init__(self, launcher, grid, bases, blocks, rest, consts):
        from ..triton_common import constexpr_key, specialization
        self.launcher, self.grid, self.blocks, self.consts = launcher, grid, tuple(blocks), consts
        protos = tuple(descriptor(b, blk) for b, blk in zip(bases, self.blocks))
        # a tensor's specialization is its dtype, alignment and device: the dtype and device
        # here, the alignment per call
        spec = (constexpr_key(consts), *map(specialization, protos),
                *((r.dtype, r.get_device()) if isinstance(r, torch.Tensor) else specialization(r) for r in rest))
        self.spec = _intern(spec)
        self.tensors = tuple(i for i, r in enumerate(rest) if isinstance(r, torch.Tensor))
        for d in protos:   # checked on these tensors; kept without them (a plan outlives the call)
            d.base = None
        self.protos = protos

    def __call__(self, bases, rest) -> bool:
        """Launch over descriptors on ``bases`` (False, launching nothing, where one is not
        16-byte aligned: a descriptor needs it) with the other arguments ``rest``, both of
        the first call's metadata."""
        acc = 0
        for b in bases:
            acc |= b.data_ptr()
        if acc & 15:
            return False
        key = (self.spec, tuple([rest[i].data_ptr() & 15 == 0 for i in self.tensors]))
        launcher = self.launcher
        if not launcher.launch_held(key, self.grid, (*map(_rebase, self.protos, bases), *rest), self.consts):
            # the JIT's launch: descriptors built and checked as for a first call
            descs = [descriptor(b, blk) for b, blk in zip(bases, self.blocks)]
            launcher.launch_keyed(key, self.grid, (*descs, *rest), self.consts)
        return True


class Prepared:
    """A ws_wgrad launch for tensors of one metadata (a call plan's: compose.BackwardPlan),
    built by ``prepare``; ``__call__(a, b, c, counts)`` launches, False (nothing launched)
    where a, b or c is not 16-byte aligned."""

    __slots__ = ("n_experts", "scalars", "launch")

    def __init__(self, a, b, c, counts, block_m, stages, programs):
        E, N, M = c.shape
        n_tiles = E * (N // BLOCK_N) * cdiv(M, block_m)
        self.n_experts = E
        self.scalars = (N, M, n_tiles)
        self.launch = DescriptorLaunch(
            _launcher(), (max(1, min(n_tiles, programs or num_sms(c.device))),), self._bases(a, b, c),
            ([BLOCK_K, BLOCK_N], [BLOCK_K, block_m], [BLOCK_N // 2, block_m]), (counts, *self.scalars),
            (BLOCK_N, block_m, BLOCK_K, stages, CONSUMER_REGS, PRODUCER_REGS))

    def _bases(self, a, b, c):
        return (a, b, c.view(self.n_experts * self.scalars[0], self.scalars[1]))

    def __call__(self, a, b, c, counts) -> bool:
        return self.launch(self._bases(a, b, c), (counts, *self.scalars))


def prepare(a, b, c, counts, *, block_m: int = 256, stages: int = 3, programs: int | None = None):
    """A Prepared launch for tensors of the metadata of these, None where ``launch`` would not
    run them (``applies``, ``counts_ok``), or True where there is nothing to launch (c empty)."""
    if not (applies(a, b, c, block_m, stages) and counts_ok(counts, c.shape[0])):
        return None
    if c.numel() == 0:
        return True
    return Prepared(a, b, c, counts, block_m, stages, programs)


def launch(a, b, c, counts, *, block_m: int = 256, stages: int = 3, programs: int | None = None) -> bool:
    """c[e] = a[rows of e]^T @ b[rows of e] through ws_wgrad_kernel, or False where it does not
    apply (``applies``): the caller then takes its other route. a (T, N), b (T, M), c (E, N, M).
    ``programs``: the persistent program count (default one an SM; tests use fewer)."""
    p = prepare(a, b, c, counts, block_m=block_m, stages=stages, programs=programs)
    return p is True or (p is not None and p(a, b, c, counts))


@functools.lru_cache(maxsize=1)
def _launcher():
    """ws_wgrad_kernel's launcher (triton_common.SpecializingLauncher: the JIT once per
    argument specialization, then the compiled kernel's launcher)."""
    from ..triton_common import SpecializingLauncher
    return SpecializingLauncher(ws_wgrad_kernel, num_warps=4, maxnreg=MAXNREG)
