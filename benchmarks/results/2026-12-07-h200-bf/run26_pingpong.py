"""Run 26 (GPU): fp8_block's fc2 dgrad + dGLU with its two consumer warp groups out of phase.

Why. In the ws kernel (ws_kernels.fp8_ws_gemm_kernel) both consumer warp groups own 64 rows of
one 128 x 128 tile, so they finish its K walk together and run the dGLU epilogue together, with
no wgmma in flight: at shape 2 the launch takes about 400 us where its products alone take
about 190 (run 23: 472 TFLOP/s against the store roles' ~1000). The epilogue is issue- and
latency-bound work (z loads, the activation's gradient, dz, its fp8 copy), about 10 us a tile.

What. ``pp_dglu_kernel`` here: each warp group takes whole 64 x 128 tiles of its own, the
program's tiles with rows alternating between the two, so one warp group's epilogue runs while
the other's K walk keeps the tensor cores busy. One producer warp fills one ring in tile order
(a slot: A's 64 rows and B's 128 columns of a K chunk); a warp group starts a tile's K walk
only when the other has waited for every chunk of the tile before (a ``turn`` mbarrier each),
which both orders the walks and keeps every ring wait at most one phase behind. The K walk
(ws_kernels._chunk_pairs) and the epilogue (ws_kernels._dglu_epilogue) are the ws kernel's own,
so dz, its fp8 copy, its scales and the dprob partials should be the ws launch's bit for bit.
The cost: a 64-row tile reads B's chunk for half the rows, 1.5x the operand traffic a FLOP.

1. ``--compile``: the sm_90 build on any machine (registers, stack, shared memory, waits).
2. Small problems (ragged and empty experts, partial row tiles, 1 / 3 / all programs, rings of
   2 and 6, both activations, interleaves 8 / 32 / 64 and the halves layout): every output
   bitwise the ws launch's.
3. The launch at the spec's three shapes (SwiGLU, interleave 32 with dz's copy, and the halves
   layout without it): bits against the ws launch, do_bench medians in interleaved rounds of
   the Triton launch, the ws launch and this one at rings of 4 and 6.
4. fp8_block's step as called (interleave 32) with ws_kernels.launch's dGLU calls sent here
   against the shipped one, graph replays in interleaved rounds, bits between the two.

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run26_pingpong.py [--compile] [--rounds 4]
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json

import torch

from tilefuse.ops.grouped_glu_mlp import ws_kernels as W
from tilefuse.ops.grouped_glu_mlp.ws_kernels import gl, gluon, mbarrier, tma_load
from tilefuse.utils import cdiv

BLOCK_M = 64       # a warp group's tile rows
PP_STAGES = 6      # 6 x 24 KB of ring beside the two 32 KB dh buffers


if gluon is not None:
    from tilefuse.ops.grouped_glu_mlp.ws_kernels import _advance, _chunk_pairs, _dglu_epilogue

    @gluon.jit
    def _pp_producer(a_desc, b_desc, a_s, b_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                     probs_ptr, z_s, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld,
                     bs_e, bs_k, bs_n, b_rows, ldz, n_part_cols, F,
                     DGLU: gl.constexpr, INTERLEAVE: gl.constexpr, QUANT_DZ: gl.constexpr, BLOCK_M: gl.constexpr,
                     BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
        """One warp: every tile's K chunks into the ring in tile order, each slot once its
        consumer has handed it back."""
        n_col_tiles = gl.cdiv(N, BLOCK_N)
        expert = 0
        tiles_before = 0
        rows_before = 0
        m = gl.load(counts_ptr).to(gl.int32)
        it = 0
        for tile in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
            row_tile = tile // n_col_tiles
            expert, tiles_before, rows_before, m = _advance(row_tile, counts_ptr, E, expert, tiles_before,
                                                            rows_before, m, BLOCK_M)
            if expert < E:
                row_start = rows_before + (row_tile - tiles_before) * BLOCK_M
                b_row = expert * b_rows + (tile % n_col_tiles) * BLOCK_N
                for kb in range(K // BLOCK_K):
                    slot = it % STAGES
                    mbarrier.wait(empty.index(slot), ((it // STAGES) & 1) ^ 1)
                    bar = ready.index(slot)
                    mbarrier.expect(bar, BLOCK_M * BLOCK_K + BLOCK_N * BLOCK_K)
                    tma_load(a_desc, [row_start, kb * BLOCK_K], bar, a_s.index(slot))
                    tma_load(b_desc, [b_row, kb * BLOCK_K], bar, b_s.index(slot))
                    it += 1

    @gluon.jit
    def _pp_consumer(a_desc, b_desc, a_s, b_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                     probs_ptr, z_s, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld,
                     bs_e, bs_k, bs_n, b_rows, ldz, n_part_cols, F,
                     DGLU: gl.constexpr, INTERLEAVE: gl.constexpr, QUANT_DZ: gl.constexpr, WG: gl.constexpr,
                     BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
        """One warp group: the program's tiles with rows v = WG, WG + 2, ... (v counts them),
        each a whole 64 x 128 tile: its turn (the other warp group has waited for every chunk
        of tile v - 1), the K walk from ring position v * k_tiles, the other's turn, the dGLU."""
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                      instr_shape=[16, BLOCK_N, 32])
        row_l: gl.constexpr = gl.SliceLayout(1, mma)
        n_col_tiles = gl.cdiv(N, BLOCK_N)
        k_tiles = K // BLOCK_K
        expert = 0
        tiles_before = 0
        rows_before = 0
        m = gl.load(counts_ptr).to(gl.int32)
        part = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, mma)
        part2 = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, mma)
        v = 0
        for tile in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
            row_tile = tile // n_col_tiles
            col0 = (tile % n_col_tiles) * BLOCK_N
            expert, tiles_before, rows_before, m = _advance(row_tile, counts_ptr, E, expert, tiles_before,
                                                            rows_before, m, BLOCK_M)
            if expert < E:
                if v % 2 == WG:
                    # this warp group's i-th tile (i = v // 2) waits for the other's i-th (WG 1)
                    # or (i - 1)-th (WG 0) hand-over; a fresh barrier passes parity 1 at once
                    mbarrier.wait(turn.index(WG), ((v // 2) + 1 - WG) & 1)
                    row_start = rows_before + (row_tile - tiles_before) * BLOCK_M
                    rows = row_start + gl.arange(0, BLOCK_M, layout=row_l)
                    rmask = (rows < rows_before + m) & (rows < T)
                    bs_base = b_scale_ptr + expert.to(gl.int64) * bs_e + (col0 // 128) * bs_n
                    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, mma)
                    acc, part, part2, it = _chunk_pairs(a_s, b_s, ready, empty, a_scale_ptr, bs_base,
                                                        rows.to(gl.int64), rmask, acc, part, part2, v * k_tiles,
                                                        k_tiles, a_scale_ld, bs_k, 0, BLOCK_M, STAGES)
                    mbarrier.arrive(turn.index(1 - WG), count=1)
                    dhs = z_s.index(WG)
                    dhs.store(acc)
                    _dglu_epilogue(dhs, row_start, gl.minimum(rows_before + m, T), col0, T, F, c_ptr, ldc, z_ptr, ldz,
                                   probs_ptr, part_ptr, n_part_cols, q_ptr, q_scale_ptr, BLOCK_M, BLOCK_N, DGLU,
                                   INTERLEAVE, QUANT_DZ)
                v += 1

    @gluon.jit
    def _pp_consumer0(a_desc, b_desc, a_s, b_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                      probs_ptr, z_s, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld,
                      bs_e, bs_k, bs_n, b_rows, ldz, n_part_cols, F,
                      DGLU: gl.constexpr, INTERLEAVE: gl.constexpr, QUANT_DZ: gl.constexpr, BLOCK_M: gl.constexpr,
                      BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
        _pp_consumer(a_desc, b_desc, a_s, b_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                     probs_ptr, z_s, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld,
                     bs_e, bs_k, bs_n, b_rows, ldz, n_part_cols, F, DGLU, INTERLEAVE, QUANT_DZ, 0, BLOCK_M, BLOCK_N,
                     BLOCK_K, STAGES)

    @gluon.jit
    def _pp_consumer1(a_desc, b_desc, a_s, b_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                      probs_ptr, z_s, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld,
                      bs_e, bs_k, bs_n, b_rows, ldz, n_part_cols, F,
                      DGLU: gl.constexpr, INTERLEAVE: gl.constexpr, QUANT_DZ: gl.constexpr, BLOCK_M: gl.constexpr,
                      BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
        _pp_consumer(a_desc, b_desc, a_s, b_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
                     probs_ptr, z_s, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld,
                     bs_e, bs_k, bs_n, b_rows, ldz, n_part_cols, F, DGLU, INTERLEAVE, QUANT_DZ, 1, BLOCK_M, BLOCK_N,
                     BLOCK_K, STAGES)

    @gluon.jit
    def pp_dglu_kernel(a_desc, b_desc, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr, z_ptr, part_ptr, q_ptr,
                       q_scale_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, ldz, n_part_cols,
                       F, DGLU: gl.constexpr, INTERLEAVE: gl.constexpr, QUANT_DZ: gl.constexpr,
                       BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr,
                       Z_LAYOUT: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
        """fp8_ws_gemm_kernel's DGLU launch (its arguments' meanings) with 64-row tiles, each
        warp group's own."""
        a_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_M, BLOCK_K], a_desc.layout)
        b_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_N, BLOCK_K], b_desc.layout)
        z_s = gl.allocate_shared_memory(gl.float32, [2, BLOCK_M, BLOCK_N], Z_LAYOUT)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(ready.index(s), count=1)
            mbarrier.init(empty.index(s), count=1)   # one consumer a slot
        mbarrier.init(turn.index(0), count=1)
        mbarrier.init(turn.index(1), count=1)
        gl.warp_specialize([
            (_pp_consumer0, (a_desc, b_desc, a_s, b_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                             b_scale_ptr, probs_ptr, z_s, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles,
                             ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, ldz, n_part_cols, F, DGLU, INTERLEAVE,
                             QUANT_DZ, BLOCK_M, BLOCK_N, BLOCK_K, STAGES)),
            (_pp_consumer1, (a_desc, b_desc, a_s, b_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                             b_scale_ptr, probs_ptr, z_s, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles,
                             ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, ldz, n_part_cols, F, DGLU, INTERLEAVE,
                             QUANT_DZ, BLOCK_M, BLOCK_N, BLOCK_K, STAGES)),
            (_pp_producer, (a_desc, b_desc, a_s, b_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                            b_scale_ptr, probs_ptr, z_s, z_ptr, part_ptr, q_ptr, q_scale_ptr, T, N, K, E, n_tiles,
                            ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, ldz, n_part_cols, F, DGLU, INTERLEAVE,
                            QUANT_DZ, BLOCK_M, BLOCK_N, BLOCK_K, STAGES)),
        ], [4, 1], [W.CONSUMER_REGS, W.PRODUCER_REGS])


def pp_launch(a, w, c, counts, *, N, probs, dglu, stages=PP_STAGES, programs=None) -> bool:
    """ws_kernels.launch's dglu call through pp_dglu_kernel (False where that launch would not
    apply)."""
    from tilefuse.device import num_sms
    from tilefuse.ops.grouped_glu_mlp.ws_wgrad import _layout, counts_ok
    z, part, act, interleave, dz_rows = dglu
    if not (W.applies(a, w, c, 2) and counts_ok(counts, w.data.shape[0])
            and W.dglu_applies(a, w, c, z, probs, part, dz_rows, act, interleave)):
        return False
    T, E = c.shape[0], counts.shape[0]
    K = a.data.shape[1]
    if T == 0 or N == 0:
        return True
    B = W.BLOCK
    a_desc = W.TensorDescriptor.from_tensor(a.data.view(torch.float8_e4m3fn), [BLOCK_M, B],
                                            _layout((BLOCK_M, B), torch.float8_e4m3fn))
    w8 = w.data.view(torch.float8_e4m3fn)
    b_desc = W.TensorDescriptor.from_tensor(w8.reshape(-1, K), [B, B], _layout((B, B), torch.float8_e4m3fn))
    n_tiles = (cdiv(T, BLOCK_M) + E) * cdiv(N, B)
    bs = w.scales.stride()
    from tilefuse.ops.triton_common import specializing_launcher
    specializing_launcher(pp_dglu_kernel, num_warps=4, maxnreg=W.MAXNREG)(
        (max(1, min(n_tiles, programs or num_sms(c.device))),),
        (a_desc, b_desc, counts, c, a.scales, w.scales, probs, z, part,
         dz_rows.data if dz_rows is not None else c, dz_rows.scales if dz_rows is not None else c,
         T, N, K, E, n_tiles, c.stride(0), a.scale_ld, bs[0], bs[2], bs[1], w.data.shape[1], z.stride(0),
         part.stride(0), N),
        (act, interleave or 0, dz_rows is not None, BLOCK_M, B, B, stages, _layout((BLOCK_M, B), torch.float32),
         W.CONSUMER_REGS, W.PRODUCER_REGS))
    return True


def compile_report():
    """The sm_90 build of each variant (no GPU needed)."""
    import re
    import sys
    from pathlib import Path
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
    from sm90_helpers import cubin_report
    B = W.BLOCK
    a_lay = gl.NVMMASharedLayout.get_default_for([BLOCK_M, B], gl.float8e4nv)
    b_lay = gl.NVMMASharedLayout.get_default_for([B, B], gl.float8e4nv)
    ints = ["T", "N", "K", "E", "n_tiles", "ldc", "a_scale_ld", "bs_e", "bs_k", "bs_n", "b_rows", "ldz", "n_part_cols",
            "F"]
    out = {}
    for act, interleave, quant, stages in [(0, 32, True, 6), (0, 32, True, 4), (0, 0, False, 6), (1, 8, True, 6),
                                           (1, 64, False, 6), (1, 0, False, 2)]:
        sig = {"a_desc": "tensordesc<fp8e4nv[%d, %d],%s>" % (BLOCK_M, B, a_lay),
               "b_desc": "tensordesc<fp8e4nv[%d, %d],%s>" % (B, B, b_lay), "counts_ptr": "*i32", "c_ptr": "*bf16",
               "a_scale_ptr": "*fp32", "b_scale_ptr": "*fp32", "probs_ptr": "*fp32", "z_ptr": "*bf16",
               "part_ptr": "*fp32", "q_ptr": "*u8", "q_scale_ptr": "*fp32", **{n: "i32" for n in ints}}
        ce = dict(DGLU=act, INTERLEAVE=interleave, QUANT_DZ=quant, BLOCK_M=BLOCK_M, BLOCK_N=B, BLOCK_K=B,
                  STAGES=stages, Z_LAYOUT=gl.NVMMASharedLayout.get_default_for([BLOCK_M, B], gl.float32),
                  CONSUMER_REGS=W.CONSUMER_REGS, PRODUCER_REGS=W.PRODUCER_REGS)
        src = GluonASTSource(pp_dglu_kernel, {**sig, **{k: "constexpr" for k in ce}}, constexprs=ce)
        c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": W.MAXNREG})
        u = cubin_report(c)
        out[f"act{act}-i{interleave}-q{int(quant)}-s{stages}"] = {
            "regs": u["regs"], "stack": u["stack"], "smem": c.metadata.shared, "warps": c.metadata.num_warps,
            "qgmma": u["sass"].count("QGMMA"),
            "waits": re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", u["sass"]),
            "setmaxnreg": u["sass"].count("USETMAXREG")}
    print(triton.__version__, json.dumps(out, indent=1))


# --- GPU ---------------------------------------------------------------------------------------

def _problem(E, T, H, F, counts, seed):
    from tilefuse.ops.grouped_glu_mlp import recipes
    g = torch.Generator(device="cuda").manual_seed(seed)
    qa = recipes.quantize_rows("fp8_block", torch.randn(T, H, generator=g, device="cuda").bfloat16())
    qw = recipes.quantize_weight("fp8_block", (torch.randn(E, H, F, generator=g, device="cuda") * 0.02).bfloat16(),
                                 transpose=True)
    z = (torch.randn(T, 2 * F, generator=g, device="cuda") * 2).bfloat16()
    probs = torch.rand(T, generator=g, device="cuda")
    return qa, qw, z, probs, torch.tensor(counts, dtype=torch.int32, device="cuda")


def _outputs(T, F, quant):
    from tilefuse.ops.grouped_glu_mlp import recipes
    dz = torch.full((T, 2 * F), float("nan"), dtype=torch.bfloat16, device="cuda")
    part = torch.full((T, 2 * F // 128), float("nan"), device="cuda")
    return dz, part, (recipes.empty_fp8_rows(T, 2 * F, "cuda") if quant else None)


def _same(x, y):
    """Bitwise equality of two launches' (dz, partials, dz's copy)."""
    ok = torch.equal(x[0].view(torch.int16), y[0].view(torch.int16)) and \
        torch.equal(x[1].view(torch.int32), y[1].view(torch.int32))
    if x[2] is not None:
        ok = ok and torch.equal(x[2].data, y[2].data) and torch.equal(x[2].scales.view(torch.int32),
                                                                       y[2].scales.view(torch.int32))
    return ok


def small_problems():
    """pp against the ws launch on small ragged problems: every output bitwise."""
    cases = list(itertools.product([(4, [300, 0, 129, 64], 256, 256), (3, [1, 200, 77], 384, 128),
                                    (2, [0, 0], 128, 128), (5, [64, 64, 0, 1000, 63], 128, 512)],
                                   [(0, 32), (1, 8), (1, 64), (0, 0), (1, 0)], [None, 1, 3], [2, 6]))
    bad = 0
    for n, ((E, counts, H, F), (act, il), programs, stages) in enumerate(cases):
        T = sum(counts)
        qa, qw, z, probs, c = _problem(E, max(T, 1), H, F, counts, seed=n)
        if T == 0:
            continue
        quant = il != 0
        want, got = _outputs(T, F, quant), _outputs(T, F, quant)
        assert W.launch(qa, qw, want[0], c, N=F, probs=probs, programs=programs,
                        dglu=(z, want[1], act, il or None, want[2]))
        assert pp_launch(qa, qw, got[0], c, N=F, probs=probs, programs=programs, stages=stages,
                         dglu=(z, got[1], act, il or None, got[2]))
        torch.cuda.synchronize()
        if not _same(want, got):
            bad += 1
            print(f"  MISMATCH E {E} counts {counts} H {H} F {F} act {act} interleave {il} programs {programs} "
                  f"stages {stages}", flush=True)
    print(f"small problems: {len(cases)} compared, {bad} differ", flush=True)
    return bad == 0


SHAPES = {1: (8, 16384, 4096, 3584), 2: (64, 32768, 2048, 1408), 3: (128, 65536, 2048, 768)}


def role(s, interleave, rounds):
    import triton
    from tilefuse.ops.grouped_glu_mlp import launch
    from tilefuse.ops.grouped_glu_mlp.configs import dglu_config, heuristic
    from tilefuse.ops.grouped_glu_mlp.kernels import EPI_DGLU
    E, T, H, F = SHAPES[s]
    qa, qw, z, probs, counts = _problem(E, T, H, F, [T // E] * E, seed=T + F + interleave)
    dcfg = dglu_config(dataclasses.replace(heuristic("fwd", 2, "fp8_block"), ws=True), "fp8_block")
    quant = interleave != 0
    il = interleave   # 0: the halves layout (the Triton launch's INTERLEAVE 0)
    outs, fns = {}, {}
    for name in ("triton", "ws", "pp s4", "pp s6"):
        o = outs[name] = _outputs(T, F, quant)
        if name == "triton":
            fns[name] = (lambda o=o: launch._gemm(
                EPI_DGLU, qa, qw, o[0], counts, dcfg, K=H, N=F, b_strides=(0, 0, 0), ldc=2 * F, F=F, probs=probs, z=z,
                part=o[1], act=0, interleave=il, recipe="fp8_block", dz_rows=o[2]))
        elif name == "ws":
            fns[name] = lambda o=o: W.launch(qa, qw, o[0], counts, N=F, probs=probs, dglu=(z, o[1], 0, il, o[2]))
        else:
            fns[name] = lambda o=o, st=int(name[-1]): pp_launch(qa, qw, o[0], counts, N=F, probs=probs, stages=st,
                                                                 dglu=(z, o[1], 0, il, o[2]))
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    print(f"  pp bitwise the ws launch (dz, partials{', copy, scales' if quant else ''}): "
          f"s4 {_same(outs['ws'], outs['pp s4'])}, s6 {_same(outs['ws'], outs['pp s6'])}", flush=True)
    times = {n: [] for n in fns}
    for r in range(rounds):
        order = list(fns)[r % len(fns):] + list(fns)[:r % len(fns)]
        for n in order:
            times[n].append(triton.testing.do_bench(fns[n], warmup=25, rep=200))
    med = {n: sorted(t)[len(t) // 2] for n, t in times.items()}
    for n, t in times.items():
        print(f"  {n:7s} {med[n] * 1e3:8.1f} us  {2 * T * H * F / med[n] / 1e9:7.1f} TFLOP/s  "
              f"{med['ws'] / med[n]:.3f}x ws [rounds {min(t) * 1e3:.1f}-{max(t) * 1e3:.1f} us]", flush=True)


def steps(shapes, rounds):
    import tilefuse
    from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
    from tilefuse.tuning import timing
    shipped = W.launch

    def routed(a, w, c, counts, **kw):
        if kw.get("dglu") is not None and pp_launch(a, w, c, counts, N=kw["N"], probs=kw["probs"], dglu=kw["dglu"]):
            return True
        return shipped(a, w, c, counts, **kw)

    def step(i, leaves, recipe, pp):
        def run():
            W.launch = routed if pp else shipped
            try:
                y = tilefuse.grouped_glu_mlp(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"],
                                             activation="swiglu", glu_interleave=32, recipe=recipe)
                return (y, *torch.autograd.grad(y, list(leaves.values()), i["dy"]))
            finally:
                W.launch = shipped
        return run

    for s in shapes:
        E, T, H, F = SHAPES[s]
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(26 + s))
        leaves = {k: i[k].detach().requires_grad_(True) for k in ("x", "probs", "w1", "w2")}
        a, b = step(i, leaves, "fp8_block", False)(), step(i, leaves, "fp8_block", True)()
        same = [torch.equal(x.view(torch.uint8), y.view(torch.uint8)) for x, y in zip(a, b)]
        print(f"step, shape {s}: y, dx, dprobs, dw1, dw2 bitwise between ws and pp dGLU: {same}", flush=True)
        del a, b
        providers = {"fp8 ws": step(i, leaves, "fp8_block", False), "fp8 pp": step(i, leaves, "fp8_block", True),
                     "bf16": step(i, leaves, None, False)}
        r = timing.interleaved(providers, rounds=rounds, graphs=True)
        for name, t in r.items():
            print(f"  {name:7s} {t.median_ms:7.3f} ms [{t.min_ms:.3f}-{t.max_ms:.3f}]  "
                  f"{timing.ratio(r['fp8 ws'], t):.3f}x fp8 ws  {timing.ratio(r['bf16'], t):.3f}x bf16", flush=True)
        del i, leaves, providers, r
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--shapes", default="1,2,3")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: small,role,step")
    args = ap.parse_args()
    if args.compile:
        compile_report()
        return
    import triton
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    skip = set(args.skip.split(","))
    shapes = [int(s) for s in args.shapes.split(",")]
    if "small" not in skip and not small_problems():
        print("pp differs from the ws launch: no timing", flush=True)
        return
    if "role" not in skip:
        for s in shapes:
            for il in (32, 0):
                print(f"dGLU launch, shape {s} {SHAPES[s]}, interleave {il}", flush=True)
                role(s, il, args.rounds)
                torch.cuda.empty_cache()
    if "step" not in skip:
        steps(shapes, args.rounds)


if __name__ == "__main__":
    main()
