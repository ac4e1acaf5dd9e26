"""Run 8 (prepared, not run this stop): the compose route's four row-ragged bf16 GEMMs (fc1, fc2
and the two dgrads) through a warp-specialised Gluon kernel built like ws_wgrad.py, against
torch._grouped_mm (CUTLASS) doing the same GEMM. A probe, not product code: if it beats CUTLASS
it is the next lever for issue 16's bf16 targets (and the base for the GLU / dGLU epilogues).

The kernel: C[rows of e] = A[rows of e] @ B_e with A (T, K) row-major and B_e either W[e] read
as rows (ROWS: W (E, N, K), B_e(k, n) = W[e, n, k]: fc1, fc2) or as columns (W (E, K, N),
B_e(k, n) = W[e, k, n]: the dgrads). One persistent program an SM; a producer warp TMA-loads
64-wide K chunks of A's 128-row tile and of B's BLOCK_N columns into a ring; two consumer warp
groups own 64 rows each and chain the wgmma a chunk ahead (ws_wgrad's loop). Row tiles are an
expert's (kernels.advance_expert's cursor over the device-side counts); rows past the expert
belong to the next one, so the epilogue stores through pointers with the rows masked (a TMA
store would write them). K must be a multiple of 64 (a chunk never crosses experts in COLS).

1. Bitwise / close: small grouped problems against torch._grouped_mm (the bits where CUTLASS
   chains the same chunks in the same order; else the normwise difference).
2. Time: each role at the spec's three shapes, balanced counts, interleaved, graph replay.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-aa/run8_ws_rows.py [--rounds 7]
"""
import argparse

import torch

from tilefuse.device import num_sms
from tilefuse.ops.gluon_hopper import TensorDescriptor, gl, gluon, mbarrier, tma_load, warpgroup_mma, warpgroup_mma_wait

BLOCK_M = 128
BLOCK_K = 64
MAXNREG, CONSUMER_REGS, PRODUCER_REGS = 168, 232, 40


@gluon.jit
def _advance(row_tile, counts_ptr, E, expert, tiles_before, rows_before, m, BLOCK_M: gl.constexpr):
    while (expert < E) & (row_tile >= tiles_before + gl.cdiv(m, BLOCK_M)):
        tiles_before += gl.cdiv(m, BLOCK_M)
        rows_before += m
        expert += 1
        m = gl.load(counts_ptr + gl.minimum(expert, E - 1)).to(gl.int32)
    return expert, tiles_before, rows_before, m


@gluon.jit
def _producer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, T, N, K, E, n_tiles, ldc,
              ROWS: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
              STAGES: gl.constexpr):
    n_col_tiles = gl.cdiv(N, BLOCK_N)
    pid = gl.program_id(0)
    expert = pid * 0
    tiles_before = pid * 0
    rows_before = pid * 0
    m = gl.load(counts_ptr).to(gl.int32)
    it = 0
    for tile in range(pid, n_tiles, gl.num_programs(0)):
        row_tile = tile // n_col_tiles
        expert, tiles_before, rows_before, m = _advance(row_tile, counts_ptr, E, expert, tiles_before,
                                                        rows_before, m, BLOCK_M)
        if expert < E:
            row_start = rows_before + (row_tile - tiles_before) * BLOCK_M
            col0 = (tile % n_col_tiles) * BLOCK_N
            for k0 in range(0, K, BLOCK_K):
                slot = it % STAGES
                mbarrier.wait(empty.index(slot), ((it // STAGES) & 1) ^ 1)
                bar = ready.index(slot)
                mbarrier.expect(bar, (BLOCK_M * BLOCK_K + BLOCK_N * BLOCK_K) * 2)
                tma_load(a_desc, [row_start, k0], bar, a_s.index(slot))
                if ROWS:
                    tma_load(b_desc, [expert * N + col0, k0], bar, b_s.index(slot))
                else:
                    tma_load(b_desc, [expert * K + k0, col0], bar, b_s.index(slot))
                it += 1


@gluon.jit
def _consumer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, T, N, K, E, n_tiles, ldc,
              WG: gl.constexpr, ROWS: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
              BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
    HALF: gl.constexpr = BLOCK_M // 2
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                  instr_shape=[16, BLOCK_N, 16])
    store_l: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [4, 1], [1, 0])
    n_col_tiles = gl.cdiv(N, BLOCK_N)
    pid = gl.program_id(0)
    expert = pid * 0
    tiles_before = pid * 0
    rows_before = pid * 0
    m = gl.load(counts_ptr).to(gl.int32)
    it = 0
    for tile in range(pid, n_tiles, gl.num_programs(0)):
        row_tile = tile // n_col_tiles
        expert, tiles_before, rows_before, m = _advance(row_tile, counts_ptr, E, expert, tiles_before,
                                                        rows_before, m, BLOCK_M)
        if expert < E:
            row_start = rows_before + (row_tile - tiles_before) * BLOCK_M
            col0 = (tile % n_col_tiles) * BLOCK_N
            acc = gl.zeros([HALF, BLOCK_N], gl.float32, mma)
            n_k = K // BLOCK_K
            for j in range(n_k):
                slot = it % STAGES
                mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
                if ROWS:
                    b = b_s.index(slot).permute((1, 0))
                else:
                    b = b_s.index(slot)
                acc = warpgroup_mma(a_s.index(slot).slice(WG * HALF, HALF), b, acc, is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=1, deps=[acc])
                mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=j > 0)
                it += 1
            acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
            out = gl.convert_layout(acc.to(c_ptr.dtype.element_ty), store_l)
            srows = row_start + WG * HALF + gl.arange(0, HALF, layout=gl.SliceLayout(1, store_l))
            scols = col0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, store_l))
            smask = ((srows < rows_before + m) & (srows < T))[:, None] & (scols < N)[None, :]
            gl.store(c_ptr + srows.to(gl.int64)[:, None] * ldc + scols[None, :], out, mask=smask)


@gluon.jit
def _consumer0(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, T, N, K, E, n_tiles, ldc,
               ROWS: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
               STAGES: gl.constexpr):
    _consumer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, T, N, K, E, n_tiles, ldc, 0, ROWS,
              BLOCK_M, BLOCK_N, BLOCK_K, STAGES)


@gluon.jit
def _consumer1(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, T, N, K, E, n_tiles, ldc,
               ROWS: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
               STAGES: gl.constexpr):
    _consumer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, T, N, K, E, n_tiles, ldc, 1, ROWS,
              BLOCK_M, BLOCK_N, BLOCK_K, STAGES)


@gluon.jit
def ws_rows_kernel(a_desc, b_desc, counts_ptr, c_ptr, T, N, K, E, n_tiles, ldc, ROWS: gl.constexpr,
                   BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr,
                   CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    a_s = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BLOCK_M, BLOCK_K], a_desc.layout)
    if ROWS:
        b_s = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BLOCK_N, BLOCK_K], b_desc.layout)
    else:
        b_s = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BLOCK_K, BLOCK_N], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=2)
    gl.warp_specialize([
        (_consumer0, (a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, T, N, K, E, n_tiles, ldc, ROWS,
                      BLOCK_M, BLOCK_N, BLOCK_K, STAGES)),
        (_consumer1, (a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, T, N, K, E, n_tiles, ldc, ROWS,
                      BLOCK_M, BLOCK_N, BLOCK_K, STAGES)),
        (_producer, (a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, T, N, K, E, n_tiles, ldc, ROWS,
                     BLOCK_M, BLOCK_N, BLOCK_K, STAGES)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


def launch(a, w, c, counts, *, rows: bool, block_n: int = 256, stages: int = 3, programs=None):
    """c = a @ (w_e^T if rows else w_e) per expert; a (T, K), w (E, N, K) or (E, K, N), c (T, N)."""
    T, K = a.shape
    E = counts.shape[0]
    N = w.shape[1] if rows else w.shape[2]
    assert K % BLOCK_K == 0 and w.is_contiguous() and c.stride(1) == 1
    dtype = gl.bfloat16 if a.dtype == torch.bfloat16 else gl.float16

    def desc(t, block):
        return TensorDescriptor.from_tensor(t, block, gl.NVMMASharedLayout.get_default_for(block, dtype))
    b_desc = desc(w.reshape(E * N, K), [block_n, BLOCK_K]) if rows else desc(w.reshape(E * K, N), [BLOCK_K, block_n])
    n_tiles = (-(-T // BLOCK_M) + E) * -(-N // block_n)
    ws_rows_kernel[(max(1, min(n_tiles, programs or num_sms(c.device))),)](
        desc(a, [BLOCK_M, BLOCK_K]), b_desc, counts, c, T, N, K, E, n_tiles, c.stride(0), ROWS=rows,
        BLOCK_M=BLOCK_M, BLOCK_N=block_n, BLOCK_K=BLOCK_K, STAGES=stages, CONSUMER_REGS=CONSUMER_REGS,
        PRODUCER_REGS=PRODUCER_REGS, num_warps=4, maxnreg=MAXNREG)


TILES = ((256, 3), (256, 4), (128, 4), (128, 6))


def roles(x, dy, h, dz, w1, w2):
    """{role: (a, w, rows, the torch._grouped_mm call's (a, b))} for the compose route's four
    row-ragged GEMMs."""
    return {"fc1": (x, w1, True, (x, w1.transpose(-2, -1))), "fc2": (h, w2, True, (h, w2.transpose(-2, -1))),
            "fc2 dgrad": (dy, w2, False, (dy, w2)), "fc1 dgrad": (dz, w1, False, (dz, w1))}


def check_small():
    from tilefuse.utils import normwise_rel_error
    same = close = bad = 0
    for i, (counts, H, F) in enumerate([([300, 0, 211, 17], 256, 192), ([64, 128, 192], 128, 128),
                                        ([1, 63, 65, 0, 640], 384, 256), ([0, 0, 513, 0], 256, 320)]):
        g = torch.Generator().manual_seed(i)
        T, E = sum(counts), len(counts)
        t = {k: torch.randn(T, n, generator=g).bfloat16().cuda() for k, n in (("x", H), ("dy", H), ("h", F),
                                                                               ("dz", 2 * F))}
        w1 = (torch.randn(E, 2 * F, H, generator=g) * 0.05).bfloat16().cuda()
        w2 = (torch.randn(E, H, F, generator=g) * 0.05).bfloat16().cuda()
        c = torch.tensor(counts, dtype=torch.int32, device="cuda")
        offs = torch.cumsum(c, 0).to(torch.int32)
        for role, (a, w, rows, (ga, gb)) in roles(t["x"], t["dy"], t["h"], t["dz"], w1, w2).items():
            want = torch._grouped_mm(ga, gb, offs=offs)
            for block_n, stages in TILES:
                for programs in (None, 1, 3):
                    got = torch.full_like(want, float("nan"))
                    launch(a, w, got, c, rows=rows, block_n=block_n, stages=stages, programs=programs)
                    if torch.equal(got.view(torch.int16), want.view(torch.int16)):
                        same += 1
                    elif normwise_rel_error(got, want) < 1e-2 and not got.isnan().any():
                        close += 1
                    else:
                        bad += 1
                        print(f"  BAD {role} counts {counts} tile {block_n} s{stages} p{programs}: "
                              f"{normwise_rel_error(got, want):.2e}")
    print(f"small problems: {same} bitwise _grouped_mm, {close} within 1e-2, {bad} wrong", flush=True)


def time_shape(index, E, T, H, F, rounds):
    from tilefuse.tuning import timing
    g = torch.Generator().manual_seed(index)
    t = {k: torch.randn(T, n, generator=g).bfloat16().cuda() for k, n in (("x", H), ("dy", H), ("h", F),
                                                                           ("dz", 2 * F))}
    w1 = (torch.randn(E, 2 * F, H, generator=g) * 0.05).bfloat16().cuda()
    w2 = (torch.randn(E, H, F, generator=g) * 0.05).bfloat16().cuda()
    c = torch.full((E,), T // E, dtype=torch.int32, device="cuda")
    offs = torch.cumsum(c, 0).to(torch.int32)
    for role, (a, w, rows, (ga, gb)) in roles(t["x"], t["dy"], t["h"], t["dz"], w1, w2).items():
        want = torch._grouped_mm(ga, gb, offs=offs)
        out = torch.empty_like(want)
        flop = 2 * T * a.shape[1] * want.shape[1]
        launch(a, w, out, c, rows=rows)
        same = torch.equal(out.view(torch.int16), want.view(torch.int16))

        def ours(block_n, stages):
            return lambda: launch(a, w, out, c, rows=rows, block_n=block_n, stages=stages)
        providers = {"CUTLASS": lambda: torch._grouped_mm(ga, gb, offs=offs),
                     **{f"ws {bn} s{s}": ours(bn, s) for bn, s in TILES}}
        res = timing.interleaved(providers, rounds=rounds, graphs=True)
        print(f"shape {index} {role} (bitwise _grouped_mm: {same}), ms, {rounds} rounds, graph replay")
        for name, r in res.items():
            if isinstance(r, Exception):
                print(f"  {name:12s} FAILED {r}")
                continue
            print(f"  {name:12s} {r.median_ms:7.3f} {flop / r.median_ms / 1e9:6.0f} TFLOP/s "
                  f"{timing.ratio(res['CUTLASS'], r):5.2f}x CUTLASS", flush=True)


def main():
    from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    print(torch.__version__, torch.cuda.get_device_name())
    check_small()
    for s in [int(v) for v in args.shapes.split(",")]:
        time_shape(s, *DEFAULT_SHAPES[s - 1], args.rounds)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
