"""Run 16 (probe, GPU; not product code): the bf16 weight gradients' Gluon kernel
(ops/grouped_glu_mlp/ws_wgrad.py, the op's wgrads at every bf16 key) with the next tile's expert
cursor read under this tile's first wgmma, as run 15 does for fp8_block's.

Why. ws_wgrad's consumers read their tile's token count (ws_wgrad._tile; its walk over the
counts before the expert is dead code in the consumers, which do not use the expert's start:
one load) when the tile starts, a load each waits for with no wgmma of its own in flight, then
run the tile's chunks (8 of 64 tokens at 512 tokens an expert, the spec's shapes 2-3) and its
store. Run 14's Nsight Compute found the fp8 wgrad's
warps waiting on such loads 31% of their cycles; a bf16 chunk takes twice an fp8 block's
tensor-core time at the same tile, so the share here is smaller, and whether it is worth taking
is this run's question. The chunk loop, the partial last chunk, the store and the producer
are ws_wgrad's (the producer is its own function, imported), so the result must be bitwise
ws_wgrad.launch's.

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run16_bf16_wgrad_next.py --compile   # CPU: sm_90 build
    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run16_bf16_wgrad_next.py [--rounds 5] [--shapes 1,2,3]
"""
import argparse
import json
import sys

import torch

from tilefuse.device import num_sms
from tilefuse.ops.gluon_hopper import fence_async_shared, gl, gluon, mbarrier, tma, tma_store, warpgroup_mma, \
    warpgroup_mma_wait
from tilefuse.ops.grouped_glu_mlp import ws_wgrad as W

if gluon is not None:
    @gluon.jit
    def _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, N, M, n_tiles,
                  WG: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr,
                  STAGES: gl.constexpr):
        """ws_wgrad._consumer with the next tile's cursor read after this tile's first wgmma is
        issued (an expert without rows: after its store)."""
        HALF: gl.constexpr = BLOCK_N // 2
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                      instr_shape=[16, BLOCK_M, 16])
        a_reg: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
        tok_l: gl.constexpr = gl.SliceLayout(0, a_reg)
        pid = gl.program_id(0)
        P = gl.num_programs(0)
        cur_expert = pid * 0
        cur_start = pid * 0
        it = 0
        expert, row_n, col_m, start, count, cur_expert = W._tile(gl.minimum(pid, n_tiles - 1), counts_ptr, cur_expert,
                                                                 cur_start, N, M, BLOCK_N, BLOCK_M)
        cur_start = start
        for tile in range(pid, n_tiles, P):
            nt = gl.minimum(tile + P, n_tiles - 1)   # the next tile (this one again past the last)
            x_expert = expert
            x_row_n = row_n
            x_col_m = col_m
            x_start = start
            x_count = count
            acc = gl.zeros([HALF, BLOCK_M], gl.float32, mma)
            n_whole = count // BLOCK_K
            for j in range(n_whole):
                slot = it % STAGES
                mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
                acc = warpgroup_mma(a_s.index(slot).slice(WG * HALF, HALF, dim=1).permute((1, 0)), b_s.index(slot),
                                    acc, is_async=True)
                if j == 0:   # the next tile's cursor, its loads under this wgmma
                    x_expert, x_row_n, x_col_m, x_start, x_count, cur_expert = W._tile(
                        nt, counts_ptr, cur_expert, cur_start, N, M, BLOCK_N, BLOCK_M)
                    cur_start = x_start
                acc = warpgroup_mma_wait(num_outstanding=1, deps=[acc])
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
                if n_whole == 0:   # no whole chunk read the cursor: under this one
                    x_expert, x_row_n, x_col_m, x_start, x_count, cur_expert = W._tile(
                        nt, counts_ptr, cur_expert, cur_start, N, M, BLOCK_N, BLOCK_M)
                    cur_start = x_start
                acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
                mbarrier.arrive(empty.index(slot), count=1)
                it += 1
            tma.store_wait(0)   # the last tile's store has read this warp group's buffer
            c_s.index(WG).store(acc.to(c_desc.dtype))
            fence_async_shared()
            tma_store(c_desc, [expert * N + row_n + WG * HALF, col_m], c_s.index(WG))
            if count == 0:   # an expert without rows: no wgmma to read the cursor under
                x_expert, x_row_n, x_col_m, x_start, x_count, cur_expert = W._tile(
                    nt, counts_ptr, cur_expert, cur_start, N, M, BLOCK_N, BLOCK_M)
                cur_start = x_start
            expert = x_expert
            row_n = x_row_n
            col_m = x_col_m
            start = x_start
            count = x_count
        tma.store_wait(0)

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
    def next_wgrad_kernel(a_desc, b_desc, c_desc, counts_ptr, N, M, n_tiles, BLOCK_N: gl.constexpr,
                          BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr,
                          CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
        """ws_wgrad.ws_wgrad_kernel's contract, with this module's consumers."""
        a_s = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BLOCK_K, BLOCK_N], a_desc.layout)
        b_s = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BLOCK_K, BLOCK_M], b_desc.layout)
        c_s = gl.allocate_shared_memory(c_desc.dtype, [2, BLOCK_N // 2, BLOCK_M], c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(ready.index(s), count=1)
            mbarrier.init(empty.index(s), count=2)
        gl.warp_specialize([
            (_consumer0, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, N, M, n_tiles, BLOCK_N,
                          BLOCK_M, BLOCK_K, STAGES)),
            (_consumer1, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, N, M, n_tiles, BLOCK_N,
                          BLOCK_M, BLOCK_K, STAGES)),
            (W._producer, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, counts_ptr, N, M, n_tiles, BLOCK_N,
                           BLOCK_M, BLOCK_K, STAGES)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


def launch_next(a, b, c, counts, *, block_m=256, stages=3, programs=None) -> bool:
    """ws_wgrad.launch's contract through next_wgrad_kernel (descriptors built per call)."""
    if not (W.applies(a, b, c, block_m, stages) and W.counts_ok(counts, c.shape[0])):
        return False
    E, N, M = c.shape
    n_tiles = E * (N // W.BLOCK_N) * -(-M // block_m)
    next_wgrad_kernel[(max(1, min(n_tiles, programs or num_sms(c.device))),)](
        W.descriptor(a, [W.BLOCK_K, W.BLOCK_N]), W.descriptor(b, [W.BLOCK_K, block_m]),
        W.descriptor(c.view(E * N, M), [W.BLOCK_N // 2, block_m]), counts, N, M, n_tiles,
        BLOCK_N=W.BLOCK_N, BLOCK_M=block_m, BLOCK_K=W.BLOCK_K, STAGES=stages, CONSUMER_REGS=W.CONSUMER_REGS,
        PRODUCER_REGS=W.PRODUCER_REGS, num_warps=4, maxnreg=W.MAXNREG)
    return True


TILES = ((256, 3), (128, 5))   # ws_wgrad's candidates (block_m, stages) the tables use


def compile_report():
    """sm_90 stack, wgmma count and the global loads between the first chunk's wgmma issue and
    the next wait, for this kernel and ws_wgrad's, at both tiles (no GPU needed)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    sys.path.insert(0, "tests")
    from sm90_helpers import cubin_report

    def desc(shape):
        return "tensordesc<bf16[%d, %d],%s>" % (shape[0], shape[1], W._layout(tuple(shape), torch.bfloat16))

    for block_m, stages in TILES:
        sig = {"a_desc": desc([W.BLOCK_K, W.BLOCK_N]), "b_desc": desc([W.BLOCK_K, block_m]),
               "c_desc": desc([W.BLOCK_N // 2, block_m]), "counts_ptr": "*i32", "N": "i32", "M": "i32",
               "n_tiles": "i32"}
        ce = dict(BLOCK_N=W.BLOCK_N, BLOCK_M=block_m, BLOCK_K=W.BLOCK_K, STAGES=stages,
                  CONSUMER_REGS=W.CONSUMER_REGS, PRODUCER_REGS=W.PRODUCER_REGS)
        for name, kernel in (("ws_wgrad", W.ws_wgrad_kernel), ("next", next_wgrad_kernel)):
            src = GluonASTSource(kernel, {**sig, **{k: "constexpr" for k in ce}}, constexprs=ce)
            c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": W.MAXNREG})
            u = cubin_report(c)
            sass = u["sass"]
            issue, wait = sass.find("HGMMA"), sass.find("WARPGROUP.DEPBAR")
            print(json.dumps({"kernel": name, "block_m": block_m, "stages": stages, "stack": u["stack"],
                              "smem": c.metadata.shared, "hgmma": sass.count("HGMMA"),
                              "loads_under_the_first_wgmma": sass[issue:wait].count("LDG")}), flush=True)


def routed(E, T, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(E, generator=g)
    return torch.bincount(torch.multinomial(w, T, replacement=True, generator=g), minlength=E).tolist()


def bitwise(a, b, counts, E, block_m, stages, programs=None):
    want = torch.full((E, a.shape[1], b.shape[1]), float("nan"), dtype=a.dtype, device="cuda")
    got = torch.full_like(want, float("nan"))
    assert W.launch(a, b, want, counts, block_m=block_m, stages=stages, programs=programs)
    assert launch_next(a, b, got, counts, block_m=block_m, stages=stages, programs=programs)
    return torch.equal(got.view(torch.int16), want.view(torch.int16))


def check_small():
    """Ragged, empty and partial-chunk experts at both tiles, 1 / 3 / all programs."""
    cases = [([300, 0, 211, 17], 256, 384), ([64, 128, 192], 128, 256), ([1, 63, 65, 0, 640], 384, 128),
             ([1000], 128, 256), ([0, 0, 513, 0], 256, 256), ([5, 7, 90, 20], 128, 128), ([0, 3, 0], 128, 256)]
    bad, n = [], 0
    for i, (counts, N, M) in enumerate(cases):
        g = torch.Generator().manual_seed(i)
        T = sum(counts)
        a = torch.randn(T, N, generator=g).bfloat16().cuda()
        b = torch.randn(T, M, generator=g).bfloat16().cuda()
        c = torch.tensor(counts, dtype=torch.int32, device="cuda")
        for block_m, stages in TILES:
            for programs in (None, 1, 3):
                n += 1
                if not bitwise(a, b, c, len(counts), block_m, stages, programs):
                    bad.append((counts, N, M, block_m, stages, programs))
    for case in bad:
        print("  MISMATCH", case)
    print(f"small problems: {n - len(bad)} bitwise, {len(bad)} not", flush=True)


def time_shape(index, E, T, H, F, counts_kind, rounds):
    from tilefuse.tuning import timing
    counts = [T // E] * E if counts_kind == "balanced" else routed(E, T, index)
    g = torch.Generator().manual_seed(index)
    t = {k: torch.randn(T, n, generator=g).bfloat16().cuda() for k, n in (("dz", 2 * F), ("x", H), ("dy", H), ("h", F))}
    c = torch.tensor(counts, dtype=torch.int32, device="cuda")
    grads = ((t["dz"], t["x"], torch.empty(E, 2 * F, H, dtype=torch.bfloat16, device="cuda")),
             (t["dy"], t["h"], torch.empty(E, H, F, dtype=torch.bfloat16, device="cuda")))
    same = all(bitwise(a, b, c, E, bm, st) for a, b, _ in grads for bm, st in TILES)
    print(f"  shape {index} {counts_kind}: {'bitwise' if same else 'NOT bitwise'}", flush=True)

    def run(fn, block_m, stages):
        def step():
            for a, b, out in grads:
                fn(a, b, out, c, block_m=block_m, stages=stages)
        return step

    providers = {}
    for bm, st in TILES:
        providers[f"ws_wgrad {bm} s{st}"] = run(W.launch, bm, st)
        providers[f"next {bm} s{st}"] = run(launch_next, bm, st)
    res = timing.interleaved(providers, rounds=rounds, graphs=True)
    flop = 2 * T * 2 * F * H + 2 * T * H * F
    print(f"shape {index} (E {E} T {T} H {H} F {F}) {counts_kind}: dW1 + dW2, ms, {rounds} rounds, graph replay")
    for bm, st in TILES:
        base, new = res[f"ws_wgrad {bm} s{st}"], res[f"next {bm} s{st}"]
        for name, r in ((f"ws_wgrad {bm} s{st}", base), (f"next {bm} s{st}", new)):
            if isinstance(r, Exception):
                print(f"  {name:18s} FAILED {r}")
        if not isinstance(base, Exception) and not isinstance(new, Exception):
            print(f"  {bm} s{st}: ws_wgrad {base.median_ms:7.3f}  next {new.median_ms:7.3f} "
                  f"({flop / new.median_ms / 1e9:5.0f} TFLOP/s)  next faster by {timing.ratio(base, new):5.3f}x",
                  flush=True)


def main():
    from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default="1,2,3")
    ap.add_argument("--compile", action="store_true", help="sm_90 compile report only (no GPU)")
    args = ap.parse_args()
    if args.compile:
        compile_report()
        return
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    check_small()
    for s in [int(v) for v in args.shapes.split(",")]:
        for kind in ("balanced", "routed"):
            time_shape(s, *DEFAULT_SHAPES[s - 1], kind, args.rounds)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
