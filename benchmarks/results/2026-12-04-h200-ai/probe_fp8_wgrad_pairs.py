"""Probe (prepared for the next session, GPU; not product code): fp8_block's weight gradients
through a warp-specialised Gluon kernel with the chunk pairs of ops/grouped_glu_mlp/ws_kernels.py.

The kernel is the one -aa run 2 measured and 700fbac reverted (bitwise grouped_wgrad_kernel,
0.88-1.04x its time: two consumer warp groups waited for each 128-token block's wgmma before
rescaling it, and a second product register set did not fit beside the block's column
scales), taken from that commit's parent, with ``PAIRS``: the blocks inside an expert two at a
time, both wgmma issued, the first block's scales loaded under them, the first rescaled while
the second runs, then the second's scales loaded and it rescaled. With 128 gradient columns a
tile that needs 64 + 64 + 64 accumulator registers and 2 + 32 scales a thread: under triton 3.6
(CPU, ``--compile``) it compiles to a 208-byte stack; with 64 columns a tile (``block_m`` 64,
twice the B traffic a FLOP) there is no stack. The
blocks an expert shares with a neighbour stay one at a time (A through registers, the other
expert's tokens zeroed). The arithmetic is grouped_wgrad_kernel's either way:
acc + part * (a_scale[:, None] * b_scale[None, :]), blocks in its order.

On the GPU: bitwise against launch._wgrad (grouped_wgrad_kernel at the fp8 heuristic) at small
problems with shared blocks and empty experts and at the timed ones, then dW1 + dW2 at the spec's
three shapes, balanced and routed counts, interleaved, CUDA-graph replay: the Triton heuristic,
the probe one block at a time and in pairs (rings 3 and 5), and torch._grouped_mm's bf16 wgrads.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ai/probe_fp8_wgrad_pairs.py --compile   # CPU
    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ai/probe_fp8_wgrad_pairs.py [--rounds 7]  # H200
"""
import argparse
import json
import sys
from pathlib import Path

import torch

from tilefuse.device import num_sms
from tilefuse.ops.gluon_hopper import (TensorDescriptor, available, gl, gluon, mbarrier, tma_load, warpgroup_mma,
                                       warpgroup_mma_wait)
from tilefuse.ops.grouped_glu_mlp import launch, recipes
from tilefuse.ops.grouped_glu_mlp.configs import heuristic
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
from tilefuse.ops.grouped_glu_mlp.ws_kernels import BLOCK, CONSUMER_REGS, MAX_STAGES, MAXNREG, PRODUCER_REGS, _rows_ok

R = "fp8_block"
WCFG = heuristic("wgrad", 2, R)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "2026-12-03-h200-aa"))
from run2_ws_wgrad import operands, routed  # noqa: E402  (-aa run 2's problem set-up)

if gluon is not None:
    # --- the weight gradients (grouped_wgrad_kernel's fp8_block arithmetic) -------------------

    # ws_wgrad's tile walk (expert by expert, a forward-only cursor over the counts): its
    # cdiv column count is M // BLOCK_M here, wgrad_applies asking M a multiple of BLOCK_M.
    from tilefuse.ops.grouped_glu_mlp.ws_wgrad import _tile as _wgrad_tile

    @gluon.jit
    def _wgrad_blocks(start, count, BLOCK_K: gl.constexpr):
        """grouped_wgrad_kernel's 128-token blocks of an expert, in its order: the blocks wholly
        inside [start, start + count) (first_full, n_full of them), then the one it shares with
        the expert before (head) and the one with the expert after (tail), each where it exists.
        Returns (first_full, n_full, n_shared, head or tail block of shared chunk 0, tail)."""
        first_full = gl.cdiv(start, BLOCK_K)
        end_full = (start + count) // BLOCK_K
        n_full = gl.maximum(end_full - first_full, 0)
        head = start // BLOCK_K
        has_head = (count > 0) & (head < first_full)
        has_tail = (count > 0) & (end_full * BLOCK_K < start + count) & (end_full >= first_full)
        shared0 = gl.where(has_head, head, end_full)
        return first_full, n_full, has_head.to(gl.int32) + has_tail.to(gl.int32), shared0, end_full

    @gluon.jit
    def _wgrad_producer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                        N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
                        BLOCK_K: gl.constexpr, STAGES: gl.constexpr, PAIRS: gl.constexpr):
        """One warp: every tile's token blocks (A's BLOCK_N rows, B's BLOCK_M rows, 128 tokens
        each) into the ring in _wgrad_blocks' order, each slot once both consumers handed it back."""
        pid = gl.program_id(0)
        cur_expert = pid * 0
        cur_start = pid * 0
        it = 0
        for tile in range(pid, n_tiles, gl.num_programs(0)):
            expert, row_n, row_m, start, count, cur_expert = _wgrad_tile(tile, counts_ptr, cur_expert, cur_start,
                                                                         N, M, BLOCK_N, BLOCK_M)
            cur_start = start
            first_full, n_full, n_shared, shared0, tail = _wgrad_blocks(start, count, BLOCK_K)
            for j in range(n_full + n_shared):
                blk = gl.where(j < n_full, first_full + j, gl.where(j == n_full, shared0, tail))
                slot = it % STAGES
                mbarrier.wait(empty.index(slot), ((it // STAGES) & 1) ^ 1)   # the first pass finds it free
                bar = ready.index(slot)
                mbarrier.expect(bar, BLOCK_N * BLOCK_K + BLOCK_M * BLOCK_K)
                tma_load(a_desc, [row_n, blk * BLOCK_K], bar, a_s.index(slot))
                tma_load(b_desc, [row_m, blk * BLOCK_K], bar, b_s.index(slot))
                it += 1

    @gluon.jit
    def _wgrad_consumer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                        N, M, n_tiles, a_scale_ld, b_scale_ld, WG: gl.constexpr, BLOCK_N: gl.constexpr,
                        BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr, PAIRS: gl.constexpr):
        """One warp group: rows [64 WG, 64 WG + 64) of A's BLOCK_N rows, all BLOCK_M columns.
        Each block's wgmma from zero, waited for, joined as acc + part * (a_scale * b_scale);
        the shared blocks' A comes through registers with the other expert's tokens zeroed
        (kernels.wgrad_fp8_masked_tma); then the tile rounded and stored."""
        HALF: gl.constexpr = BLOCK_N // 2
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                      instr_shape=[16, BLOCK_M, 32])
        a_reg: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=4)
        tok_l: gl.constexpr = gl.SliceLayout(0, a_reg)
        row_l: gl.constexpr = gl.SliceLayout(1, mma)
        col_l: gl.constexpr = gl.SliceLayout(0, mma)
        store_l: gl.constexpr = gl.BlockedLayout([1, 8], [32 // (BLOCK_M // 8), BLOCK_M // 8], [4, 1], [1, 0])
        pid = gl.program_id(0)
        cur_expert = pid * 0
        cur_start = pid * 0
        it = 0
        part = gl.zeros([HALF, BLOCK_M], gl.float32, mma)
        part2 = gl.zeros([HALF, BLOCK_M], gl.float32, mma)
        for tile in range(pid, n_tiles, gl.num_programs(0)):
            expert, row_n, row_m, start, count, cur_expert = _wgrad_tile(tile, counts_ptr, cur_expert, cur_start,
                                                                         N, M, BLOCK_N, BLOCK_M)
            cur_start = start
            first_full, n_full, n_shared, shared0, tail = _wgrad_blocks(start, count, BLOCK_K)
            n64 = (row_n + WG * HALF + gl.arange(0, HALF, layout=row_l)).to(gl.int64)
            m64 = (row_m + gl.arange(0, BLOCK_M, layout=col_l)).to(gl.int64)
            acc = gl.zeros([HALF, BLOCK_M], gl.float32, mma)
            # The blocks inside the expert: A and B from shared memory. One block at a time
            # (PAIRS False, -aa run 2's kernel): each block's scales loaded a block ahead, under
            # the previous block's wgmma (the last reloads its own).
            if PAIRS:
                # Two blocks at a time: both wgmma issued, the first's scales loaded under them,
                # the first waited for (the second still in flight) and rescaled, then the
                # second's scales, its wait and rescale. One scale set live at a time: 64 + 64
                # + 64 accumulator registers and 34 scales a thread.
                for j in range(n_full // 2):
                    blk = (first_full + 2 * j).to(gl.int64)
                    slot = it % STAGES
                    mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
                    pa = warpgroup_mma(a_s.index(slot).slice(WG * HALF, HALF), b_s.index(slot).permute((1, 0)),
                                       part, use_acc=False, is_async=True)
                    slot2 = (it + 1) % STAGES
                    mbarrier.wait(ready.index(slot2), ((it + 1) // STAGES) & 1)
                    pb = warpgroup_mma(a_s.index(slot2).slice(WG * HALF, HALF), b_s.index(slot2).permute((1, 0)),
                                       part2, use_acc=False, is_async=True)
                    a_scale = gl.load(a_scale_ptr + blk * a_scale_ld + n64)
                    b_scale = gl.load(b_scale_ptr + blk * b_scale_ld + m64)
                    part = warpgroup_mma_wait(num_outstanding=1, deps=[pa])
                    mbarrier.arrive(empty.index(slot), count=1)
                    acc = acc + part * (a_scale[:, None] * b_scale[None, :])
                    a_scale = gl.load(a_scale_ptr + (blk + 1) * a_scale_ld + n64)
                    b_scale = gl.load(b_scale_ptr + (blk + 1) * b_scale_ld + m64)
                    part2 = warpgroup_mma_wait(num_outstanding=0, deps=[pb])
                    mbarrier.arrive(empty.index(slot2), count=1)
                    acc = acc + part2 * (a_scale[:, None] * b_scale[None, :])
                    it += 2
                if n_full % 2 == 1:
                    blk = (first_full + n_full - 1).to(gl.int64)
                    slot = it % STAGES
                    mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
                    pa = warpgroup_mma(a_s.index(slot).slice(WG * HALF, HALF), b_s.index(slot).permute((1, 0)),
                                       part, use_acc=False, is_async=True)
                    a_scale = gl.load(a_scale_ptr + blk * a_scale_ld + n64)
                    b_scale = gl.load(b_scale_ptr + blk * b_scale_ld + m64)
                    part = warpgroup_mma_wait(num_outstanding=0, deps=[pa])
                    mbarrier.arrive(empty.index(slot), count=1)
                    acc = acc + part * (a_scale[:, None] * b_scale[None, :])
                    it += 1
            else:
                blk = gl.where(n_full > 0, first_full, 0).to(gl.int64)
                a_next = gl.load(a_scale_ptr + blk * a_scale_ld + n64)
                b_next = gl.load(b_scale_ptr + blk * b_scale_ld + m64)
                for j in range(n_full):
                    slot = it % STAGES
                    a_scale = a_next
                    b_scale = b_next
                    mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
                    part = warpgroup_mma(a_s.index(slot).slice(WG * HALF, HALF), b_s.index(slot).permute((1, 0)),
                                         part, use_acc=False, is_async=True)
                    blk = (first_full + gl.minimum(j + 1, n_full - 1)).to(gl.int64)
                    a_next = gl.load(a_scale_ptr + blk * a_scale_ld + n64)
                    b_next = gl.load(b_scale_ptr + blk * b_scale_ld + m64)
                    part = warpgroup_mma_wait(num_outstanding=0, deps=[part])
                    mbarrier.arrive(empty.index(slot), count=1)
                    acc = acc + part * (a_scale[:, None] * b_scale[None, :])
                    it += 1
            # The shared blocks: A through registers, the other expert's tokens zeroed.
            for j in range(n_shared):
                shared = gl.where(j == 0, shared0, tail)
                a_scale = gl.load(a_scale_ptr + shared.to(gl.int64) * a_scale_ld + n64)
                b_scale = gl.load(b_scale_ptr + shared.to(gl.int64) * b_scale_ld + m64)
                slot = it % STAGES
                mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
                t = shared * BLOCK_K + gl.arange(0, BLOCK_K, layout=tok_l)
                keep = (t >= start) & (t < start + count)
                a = a_s.index(slot).slice(WG * HALF, HALF).load(a_reg).to(gl.uint8, bitcast=True)
                a = gl.where(keep[None, :], a, 0).to(gl.float8e4nv, bitcast=True)
                part = warpgroup_mma(a, b_s.index(slot).permute((1, 0)), part, use_acc=False, is_async=True)
                part = warpgroup_mma_wait(num_outstanding=0, deps=[part])
                mbarrier.arrive(empty.index(slot), count=1)
                acc = acc + part * (a_scale[:, None] * b_scale[None, :])
                it += 1
            out = gl.convert_layout(acc.to(c_ptr.dtype.element_ty), store_l)
            srows = row_n + WG * HALF + gl.arange(0, HALF, layout=gl.SliceLayout(1, store_l))
            scols = row_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, store_l))
            base = c_ptr + expert.to(gl.int64) * N * M
            gl.store(base + srows.to(gl.int64)[:, None] * M + scols[None, :], out)

    @gluon.jit
    def _wgrad_consumer0(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                         N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
                         BLOCK_K: gl.constexpr, STAGES: gl.constexpr, PAIRS: gl.constexpr):
        _wgrad_consumer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                        N, M, n_tiles, a_scale_ld, b_scale_ld, 0, BLOCK_N, BLOCK_M, BLOCK_K, STAGES, PAIRS)

    @gluon.jit
    def _wgrad_consumer1(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                         N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
                         BLOCK_K: gl.constexpr, STAGES: gl.constexpr, PAIRS: gl.constexpr):
        _wgrad_consumer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                        N, M, n_tiles, a_scale_ld, b_scale_ld, 1, BLOCK_N, BLOCK_M, BLOCK_K, STAGES, PAIRS)

    @gluon.jit
    def fp8_ws_wgrad_kernel(a_desc, b_desc, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, N, M, n_tiles,
                            a_scale_ld, b_scale_ld, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
                            BLOCK_K: gl.constexpr, STAGES: gl.constexpr, PAIRS: gl.constexpr,
                            CONSUMER_REGS: gl.constexpr,
                            PRODUCER_REGS: gl.constexpr):
        """C[e] (N, M) = A[tokens of e]^T @ B[tokens of e], fp8_block (grouped_wgrad_kernel with
        RECIPE_FP8_BLOCK): a_desc over the column-wise copy A^T (N, Tp) float8, tiles [BLOCK_N,
        BLOCK_K]; b_desc over B^T (M, Tp), tiles [BLOCK_M, BLOCK_K]; a_scale_ptr (Tp / 128, N)
        and b_scale_ptr (Tp / 128, M) float32, row strides a_scale_ld, b_scale_ld; c (E, N, M)
        contiguous, written in full (zeros for experts without tokens). n_tiles: E * (N /
        BLOCK_N) * (M / BLOCK_M)."""
        a_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_N, BLOCK_K], a_desc.layout)
        b_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_M, BLOCK_K], b_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(ready.index(s), count=1)
            mbarrier.init(empty.index(s), count=2)   # both consumer warp groups hand a slot back
        gl.warp_specialize([
            (_wgrad_consumer0, (a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                                N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N, BLOCK_M, BLOCK_K, STAGES, PAIRS)),
            (_wgrad_consumer1, (a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                                N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N, BLOCK_M, BLOCK_K, STAGES, PAIRS)),
            (_wgrad_producer, (a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                               N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N, BLOCK_M, BLOCK_K, STAGES, PAIRS)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


def wgrad_applies(a, b, c, stages: int, block_m: int) -> bool:
    return (available(c.device) and 2 <= stages <= MAX_STAGES and _rows_ok(a.data) and _rows_ok(b.data)
            and a.data.shape[1] == b.data.shape[1] and a.data.shape[1] > 0 and c.dim() == 3 and c.is_contiguous()
            and c.shape[1:] == (a.data.shape[0], b.data.shape[0]) and c.shape[1] % BLOCK == 0
            and c.shape[2] % block_m == 0)


def launch_wgrad(a, b, c, counts, *, stages: int, pairs: bool, block_m: int = BLOCK, programs=None) -> bool:
    """c[e] = a[:, tokens of e] @ b[:, tokens of e]^T (a, b: recipes.QuantRows column-wise
    copies (N, Tp), (M, Tp); c (E, N, M) contiguous) in tiles of 128 x ``block_m``, or False
    where it does not apply."""
    if not wgrad_applies(a, b, c, stages, block_m):
        return False
    E, N, M = c.shape
    lay_a = gl.NVMMASharedLayout.get_default_for([BLOCK, BLOCK], gl.float8e4nv)
    lay_b = gl.NVMMASharedLayout.get_default_for([block_m, BLOCK], gl.float8e4nv)
    a_desc = TensorDescriptor.from_tensor(a.data.view(torch.float8_e4m3fn), [BLOCK, BLOCK], lay_a)
    b_desc = TensorDescriptor.from_tensor(b.data.view(torch.float8_e4m3fn), [block_m, BLOCK], lay_b)
    n_tiles = E * (N // BLOCK) * (M // block_m)
    fp8_ws_wgrad_kernel[(max(1, min(n_tiles, programs or num_sms(c.device))),)](
        a_desc, b_desc, counts, c, a.scales, b.scales, N, M, n_tiles, a.scale_ld, b.scale_ld,
        BLOCK_N=BLOCK, BLOCK_M=block_m, BLOCK_K=BLOCK, STAGES=stages, PAIRS=pairs, CONSUMER_REGS=CONSUMER_REGS,
        PRODUCER_REGS=PRODUCER_REGS, num_warps=4, maxnreg=MAXNREG)
    return True


def compile_report():
    """sm_90 registers, stack and wgmma waits of both forms at rings 3 and 5, with the
    gradient's columns a tile (BLOCK_M) 128 and 64 (no GPU needed)."""
    import re
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    sys.path.insert(0, "tests")
    from sm90_helpers import cubin_report
    out = {}
    for block_m in (BLOCK, BLOCK // 2):
        lay_a = gl.NVMMASharedLayout.get_default_for([BLOCK, BLOCK], gl.float8e4nv)
        lay_b = gl.NVMMASharedLayout.get_default_for([block_m, BLOCK], gl.float8e4nv)
        sig = {"a_desc": "tensordesc<fp8e4nv[%d, %d],%s>" % (BLOCK, BLOCK, lay_a),
               "b_desc": "tensordesc<fp8e4nv[%d, %d],%s>" % (block_m, BLOCK, lay_b), "counts_ptr": "*i32",
               "c_ptr": "*bf16", "a_scale_ptr": "*fp32", "b_scale_ptr": "*fp32",
               **{n: "i32" for n in ("N", "M", "n_tiles", "a_scale_ld", "b_scale_ld")}}
        for pairs in (False, True):
            for stages in (3, MAX_STAGES):
                ce = dict(BLOCK_N=BLOCK, BLOCK_M=block_m, BLOCK_K=BLOCK, STAGES=stages, PAIRS=pairs,
                          CONSUMER_REGS=CONSUMER_REGS, PRODUCER_REGS=PRODUCER_REGS)
                src = GluonASTSource(fp8_ws_wgrad_kernel, {**sig, **{k: "constexpr" for k in ce}}, constexprs=ce)
                c = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                                   options={"num_warps": 4, "maxnreg": MAXNREG})
                u = cubin_report(c)
                out[f"BLOCK_M {block_m} pairs={pairs} s{stages}"] = {
                    "stack": u["stack"], "smem": c.metadata.shared, "qgmma": u["sass"].count("QGMMA"),
                    "waits": "".join(w[-1] for w in re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)",
                                                             u["sass"]))}
                print(json.dumps({k: out[k] for k in list(out)[-1:]}), flush=True)


# (pairs, columns a tile): one block at a time at 128 (-aa run 2's kernel), pairs at 128 (a
# 208-byte stack under triton 3.6: the two product sets and a block's 32 column scales a thread
# do not fit 232 registers) and pairs at 64 (no stack).
FORMS = ((False, BLOCK), (True, BLOCK), (True, BLOCK // 2))


def bitwise(qa, qb, counts, E, N, M, T, stages, form, programs=None):
    want = torch.full((E, N, M), float("nan"), dtype=torch.bfloat16, device="cuda")
    got = torch.full_like(want, float("nan"))
    launch._wgrad(qa, qb, want, counts, T, WCFG, R)
    pairs, block_m = form
    assert launch_wgrad(qa, qb, got, counts, stages=stages, pairs=pairs, block_m=block_m, programs=programs)
    return torch.equal(got.view(torch.int16), want.view(torch.int16))


def check_small():
    cases = [([300, 0, 211, 17], 256, 384), ([128, 256, 384], 128, 128), ([1, 127, 129, 0, 640], 384, 128),
             ([1000], 128, 256), ([0, 0, 513, 0], 256, 256), ([5, 7, 90, 20], 128, 128), ([700, 0], 512, 128),
             ([256, 384, 512], 128, 128)]
    ok = bad = 0
    for i, (counts, N, M) in enumerate(cases):
        a, b, c = operands(counts, N, M, i)
        qa, qb = recipes.quantize_cols(R, a), recipes.quantize_cols(R, b)
        for stages in (2, 3, MAX_STAGES):
            for programs in (None, 1, 3):
                for form in FORMS:
                    same = bitwise(qa, qb, c, len(counts), N, M, sum(counts), stages, form, programs)
                    ok += same
                    bad += not same
                    if not same:
                        print(f"  MISMATCH counts {counts} N {N} M {M} stages {stages} programs {programs} form {form}")
    print(f"small problems: {ok} bitwise, {bad} not", flush=True)


def time_shape(index, E, T, H, F, counts_kind, rounds):
    from tilefuse.tuning import timing
    counts = [T // E] * E if counts_kind == "balanced" else routed(E, T, index)
    g = torch.Generator().manual_seed(index)
    t = {k: torch.randn(T, n, generator=g).bfloat16().cuda() for k, n in (("dz", 2 * F), ("x", H), ("dy", H), ("h", F))}
    c = torch.tensor(counts, dtype=torch.int32, device="cuda")
    ends = torch.cumsum(c, 0).to(torch.int32)
    q = {k: recipes.quantize_cols(R, v) for k, v in t.items()}
    dw1 = torch.empty(E, 2 * F, H, dtype=torch.bfloat16, device="cuda")
    dw2 = torch.empty(E, H, F, dtype=torch.bfloat16, device="cuda")
    for name, (qa, qb, out) in {"dW1": (q["dz"], q["x"], dw1), "dW2": (q["dy"], q["h"], dw2)}.items():
        for form in FORMS:
            same = bitwise(qa, qb, c, E, out.shape[1], out.shape[2], T, MAX_STAGES, form)
            print(f"  shape {index} {counts_kind} {name} {form}: {'bitwise' if same else 'NOT bitwise'}", flush=True)

    def triton_heur():
        launch._wgrad(q["dz"], q["x"], dw1, c, T, WCFG, R)
        launch._wgrad(q["dy"], q["h"], dw2, c, T, WCFG, R)

    def ws(stages, pairs, block_m):
        def run():
            launch_wgrad(q["dz"], q["x"], dw1, c, stages=stages, pairs=pairs, block_m=block_m)
            launch_wgrad(q["dy"], q["h"], dw2, c, stages=stages, pairs=pairs, block_m=block_m)
        return run

    def cutlass():
        torch._grouped_mm(t["dz"].t(), t["x"], offs=ends)
        torch._grouped_mm(t["dy"].t(), t["h"], offs=ends)

    providers = {"triton heuristic": triton_heur, "ws 128 s5": ws(5, False, 128), "ws pairs 128 s5": ws(5, True, 128),
                 "ws pairs 64 s3": ws(3, True, 64), "ws pairs 64 s5": ws(5, True, 64), "bf16 _grouped_mm": cutlass}
    res = timing.interleaved(providers, rounds=rounds, graphs=True)
    base = res["triton heuristic"]
    flop = 2 * T * 2 * F * H + 2 * T * H * F
    print(f"shape {index} (E {E} T {T} H {H} F {F}) {counts_kind}: dW1 + dW2, ms, {rounds} rounds, graph replay")
    for name, r in res.items():
        if isinstance(r, Exception):
            print(f"  {name:20s} FAILED {r}")
            continue
        print(f"  {name:20s} {r.median_ms:7.3f} [{r.min_ms:.3f}-{r.max_ms:.3f}] {flop / r.median_ms / 1e9:6.0f} TFLOP/s"
              f"  {timing.ratio(base, r):5.3f}x triton", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--shapes", default="1,2,3")
    ap.add_argument("--compile", action="store_true", help="sm_90 compile report only (no GPU)")
    args = ap.parse_args()
    if args.compile:
        compile_report()
        return
    print(torch.__version__, torch.cuda.get_device_name())
    check_small()
    for s in [int(v) for v in args.shapes.split(",")]:
        for kind in ("balanced", "routed"):
            time_shape(s, *DEFAULT_SHAPES[s - 1], kind, args.rounds)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
