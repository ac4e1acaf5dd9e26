"""Run 15 (probe, GPU; not product code): run 8's Gluon fp8 weight gradient with no global load
a tile waits for.

Why. Nsight Compute on run 8's best form (ping-pong, TMA store, scales a block ahead) at shape 2's
dW1 (run 14, H100): 643 us, SM throughput 42%, L2 44%, DRAM 41%: bound by neither, and its warps
spend 31% of their cycles between issues waiting on L1TEX (global) loads. Per tile (4 blocks at
512 tokens an expert) each consumer warp group reads the next tile's expert cursor from the
device-side counts at the tile's start (kernels' _tile: a load and its wait) and the tile's
first block's scales there too, with nothing of its own in flight; at ~500 cycles each against
~2000 cycles of the tile's tensor-core work, that is about the share Nsight Compute reports.
Here the next tile's cursor is read after this tile's first wgmma is issued (its load under
the product), and the next tile's first block's scales after its last wgmma is issued. The
tile's arithmetic and order are run 8's (so grouped_wgrad_kernel's: bitwise).

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run15_wgrad_next.py --compile   # CPU: sm_90 build
    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run15_wgrad_next.py [--rounds 5] [--shapes 1,2,3]
"""
import argparse
import json
import sys

import torch

from tilefuse.device import num_sms
from tilefuse.ops.gluon_hopper import (TensorDescriptor, fence_async_shared, gl, gluon, mbarrier, tma, tma_store,
                                       warpgroup_mma, warpgroup_mma_wait)

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from run8_wgrad_pingpong import (BLOCK, CONSUMER_REGS, MAX_STAGES, MAXNREG, PRODUCER_REGS, R, WCFG,  # noqa: E402
                                 _layouts, applies, launch, launch_wgrad, operands, recipes, routed)

if gluon is not None:
    from run8_wgrad_pingpong import _producer, _tile   # the ring's producer and the tile cursor, unchanged

    # The partitions take run 8's kernel's arguments (Gluon's rule: the same for every
    # partition), so its producer runs as it is; TMA_STORE and AHEAD are not read here (the
    # tile always leaves by the TMA store, and every scale is read a block ahead).
    @gluon.jit
    def _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                  b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, WG: gl.constexpr, BLOCK_N: gl.constexpr,
                  BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr,
                  TMA_STORE: gl.constexpr, AHEAD: gl.constexpr):
        """One warp group: gradient rows [64 WG, 64 WG + 64) of every tile, run 8's per-block
        arithmetic (acc + part * (a_scale * b_scale), blocks in token order) with no global load
        a tile waits for."""
        HALF: gl.constexpr = BLOCK_N // 2
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                      instr_shape=[16, BLOCK_M, 32])
        row_l: gl.constexpr = gl.SliceLayout(1, mma)
        col_l: gl.constexpr = gl.SliceLayout(0, mma)
        pid = gl.program_id(0)
        cur_expert = pid * 0
        cur_blocks = pid * 0
        it = 0
        part = gl.zeros([HALF, BLOCK_M], gl.float32, mma)
        # The next tile's cursor is read after this tile's first wgmma is issued, and the next
        # tile's first block's scales after its last one: no global load a tile waits for.
        # Scale addresses: a scalar base a block and tile (int64) plus the tile-independent
        # lane offsets (int32), so no 64-bit index vector stays live across the loop.
        P = gl.num_programs(0)
        r32 = WG * HALF + gl.arange(0, HALF, layout=row_l)
        c32 = gl.arange(0, BLOCK_M, layout=col_l)
        expert, row_n, col_m, first, n_blocks, cur_expert, cur_blocks = _tile(
            gl.minimum(pid, n_tiles - 1), counts_ptr, cur_expert, cur_blocks, N, M, BLOCK_N, BLOCK_M, BLOCK_K)
        blk = gl.maximum(first + gl.minimum(n_blocks, 1) - 1, 0).to(gl.int64)
        a_next = gl.load(a_scale_ptr + (blk * a_scale_ld + row_n) + r32)
        b_next = gl.load(b_scale_ptr + (blk * b_scale_ld + col_m) + c32)
        for tile in range(pid, n_tiles, P):
            nt = gl.minimum(tile + P, n_tiles - 1)   # the next tile (this one again past the last)
            x_expert = expert
            x_row_n = row_n
            x_col_m = col_m
            x_first = first
            x_n_blocks = n_blocks
            acc = gl.zeros([HALF, BLOCK_M], gl.float32, mma)
            for j in range(n_blocks):
                slot = it % STAGES
                mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
                if PINGPONG:
                    mbarrier.wait(turn.index(WG), (it & 1) ^ (1 - WG))
                part = warpgroup_mma(a_s.index(slot).slice(WG * HALF, HALF), b_s.index(slot).permute((1, 0)),
                                     part, use_acc=False, is_async=True)
                if PINGPONG:
                    mbarrier.arrive(turn.index(1 - WG), count=1)
                if j == 0:
                    x_expert, x_row_n, x_col_m, x_first, x_n_blocks, cur_expert, cur_blocks = _tile(
                        nt, counts_ptr, cur_expert, cur_blocks, N, M, BLOCK_N, BLOCK_M, BLOCK_K)
                a_scale = a_next
                b_scale = b_next
                if j + 1 < n_blocks:   # this tile's next block
                    nxt = (first + j + 1).to(gl.int64)
                    a_next = gl.load(a_scale_ptr + (nxt * a_scale_ld + row_n) + r32)
                    b_next = gl.load(b_scale_ptr + (nxt * b_scale_ld + col_m) + c32)
                else:   # the next tile's first block, at its rows and columns
                    nxt = gl.maximum(x_first + gl.minimum(x_n_blocks, 1) - 1, 0).to(gl.int64)
                    a_next = gl.load(a_scale_ptr + (nxt * a_scale_ld + x_row_n) + r32)
                    b_next = gl.load(b_scale_ptr + (nxt * b_scale_ld + x_col_m) + c32)
                part = warpgroup_mma_wait(num_outstanding=0, deps=[part])
                mbarrier.arrive(empty.index(slot), count=1)
                acc = acc + part * (a_scale[:, None] * b_scale[None, :])
                it += 1
            if n_blocks == 0:   # an expert without tokens: no wgmma to read the next cursor under
                x_expert, x_row_n, x_col_m, x_first, x_n_blocks, cur_expert, cur_blocks = _tile(
                    nt, counts_ptr, cur_expert, cur_blocks, N, M, BLOCK_N, BLOCK_M, BLOCK_K)
                nxt = gl.maximum(x_first + gl.minimum(x_n_blocks, 1) - 1, 0).to(gl.int64)
                a_next = gl.load(a_scale_ptr + (nxt * a_scale_ld + x_row_n) + r32)
                b_next = gl.load(b_scale_ptr + (nxt * b_scale_ld + x_col_m) + c32)
            tma.store_wait(0)   # the last tile's store has read this warp group's buffer
            c_s.index(WG).store(acc.to(c_desc.dtype))
            fence_async_shared()
            tma_store(c_desc, [expert * N + row_n + WG * HALF, col_m], c_s.index(WG))
            expert = x_expert
            row_n = x_row_n
            col_m = x_col_m
            first = x_first
            n_blocks = x_n_blocks
        tma.store_wait(0)

    @gluon.jit
    def _consumer0(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                   b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
                   BLOCK_K: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr, TMA_STORE: gl.constexpr,
                   AHEAD: gl.constexpr):
        _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                  b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, 0, BLOCK_N, BLOCK_M, BLOCK_K, STAGES, PINGPONG,
                  TMA_STORE, AHEAD)

    @gluon.jit
    def _consumer1(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                   b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
                   BLOCK_K: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr, TMA_STORE: gl.constexpr,
                   AHEAD: gl.constexpr):
        _consumer(a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                  b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, 1, BLOCK_N, BLOCK_M, BLOCK_K, STAGES, PINGPONG,
                  TMA_STORE, AHEAD)

    @gluon.jit
    def next_fp8_wgrad_kernel(a_desc, b_desc, c_desc, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, N, M, n_tiles,
                              a_scale_ld, b_scale_ld, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr,
                              BLOCK_K: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr,
                              TMA_STORE: gl.constexpr, AHEAD: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                              PRODUCER_REGS: gl.constexpr):
        """run8_wgrad_pingpong.pingpong_fp8_wgrad_kernel's contract (the same arguments, shared
        memory and barriers), with this module's consumers."""
        a_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_N, BLOCK_K], a_desc.layout)
        b_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_M, BLOCK_K], b_desc.layout)
        c_s = gl.allocate_shared_memory(c_desc.dtype, [2, BLOCK_N // 2, BLOCK_M], c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(ready.index(s), count=1)
            mbarrier.init(empty.index(s), count=2)
        for w in gl.static_range(2):
            mbarrier.init(turn.index(w), count=1)
        gl.warp_specialize([
            (_consumer0, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                          b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N, BLOCK_M, BLOCK_K, STAGES,
                          PINGPONG, TMA_STORE, AHEAD)),
            (_consumer1, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                          b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N, BLOCK_M, BLOCK_K, STAGES,
                          PINGPONG, TMA_STORE, AHEAD)),
            (_producer, (a_desc, b_desc, c_desc, a_s, b_s, c_s, ready, empty, turn, counts_ptr, c_ptr, a_scale_ptr,
                         b_scale_ptr, N, M, n_tiles, a_scale_ld, b_scale_ld, BLOCK_N, BLOCK_M, BLOCK_K, STAGES,
                         PINGPONG, TMA_STORE, AHEAD)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


def launch_next(a, b, c, counts, *, stages=MAX_STAGES, pingpong=True, programs=None) -> bool:
    """run8_wgrad_pingpong.launch_wgrad's contract through next_fp8_wgrad_kernel."""
    if not applies(a, b, c, stages):
        return False
    E, N, M = c.shape
    lay_a, lay_b, lay_c = _layouts(BLOCK)
    a_desc = TensorDescriptor.from_tensor(a.data.view(torch.float8_e4m3fn), [BLOCK, BLOCK], lay_a)
    b_desc = TensorDescriptor.from_tensor(b.data.view(torch.float8_e4m3fn), [BLOCK, BLOCK], lay_b)
    c_desc = TensorDescriptor.from_tensor(c.view(E * N, M), [BLOCK // 2, BLOCK], lay_c)
    n_tiles = E * (N // BLOCK) * (M // BLOCK)
    next_fp8_wgrad_kernel[(max(1, min(n_tiles, programs or num_sms(c.device))),)](
        a_desc, b_desc, c_desc, counts, c, a.scales, b.scales, N, M, n_tiles, a.scale_ld, b.scale_ld,
        BLOCK_N=BLOCK, BLOCK_M=BLOCK, BLOCK_K=BLOCK, STAGES=stages, PINGPONG=pingpong, TMA_STORE=True,
        AHEAD=False, CONSUMER_REGS=CONSUMER_REGS, PRODUCER_REGS=PRODUCER_REGS, num_warps=4, maxnreg=MAXNREG)
    return True


# name -> a launch of dW = A^T B through one form: run 8's best, and this module's with and
# without the turns
FORMS = {
    "run 8's best": lambda a, b, c, counts, stages=MAX_STAGES, programs=None: launch_wgrad(
        a, b, c, counts, stages=stages, pingpong=True, tma_store=True, ahead=True, programs=programs),
    "next, ping-pong": lambda a, b, c, counts, stages=MAX_STAGES, programs=None: launch_next(
        a, b, c, counts, stages=stages, pingpong=True, programs=programs),
    "next, in step": lambda a, b, c, counts, stages=MAX_STAGES, programs=None: launch_next(
        a, b, c, counts, stages=stages, pingpong=False, programs=programs),
}


def compile_report():
    """sm_90 registers, stack and shared memory of this module's kernel at rings 3 and 5."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    sys.path.insert(0, "tests")
    from sm90_helpers import cubin_report
    lay_a, lay_b, lay_c = _layouts(BLOCK)
    sig = {"a_desc": "tensordesc<fp8e4nv[%d, %d],%s>" % (BLOCK, BLOCK, lay_a),
           "b_desc": "tensordesc<fp8e4nv[%d, %d],%s>" % (BLOCK, BLOCK, lay_b),
           "c_desc": "tensordesc<bf16[%d, %d],%s>" % (BLOCK // 2, BLOCK, lay_c), "counts_ptr": "*i32",
           "c_ptr": "*bf16", "a_scale_ptr": "*fp32", "b_scale_ptr": "*fp32",
           **{n: "i32" for n in ("N", "M", "n_tiles", "a_scale_ld", "b_scale_ld")}}
    for pingpong in (True, False):
        for stages in (3, MAX_STAGES):
            ce = dict(BLOCK_N=BLOCK, BLOCK_M=BLOCK, BLOCK_K=BLOCK, STAGES=stages, PINGPONG=pingpong, TMA_STORE=True,
                      AHEAD=False, CONSUMER_REGS=CONSUMER_REGS, PRODUCER_REGS=PRODUCER_REGS)
            src = GluonASTSource(next_fp8_wgrad_kernel, {**sig, **{k: "constexpr" for k in ce}}, constexprs=ce)
            c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": MAXNREG})
            u = cubin_report(c)
            # the global-load instructions between the first block's wgmma issue and its wait:
            # the next tile's cursor walk and two exclusive branches of scale loads (this tile's
            # next block, or the next tile's first), against run 8's scale loads alone
            sass = u["sass"]
            issue, wait = sass.find("QGMMA"), sass.find("WARPGROUP.DEPBAR")
            print(json.dumps({"pingpong": pingpong, "stages": stages, "stack": u["stack"], "regs": u.get("regs"),
                              "smem": c.metadata.shared, "qgmma": sass.count("QGMMA"),
                              "loads_under_the_first_wgmma": sass[issue:wait].count("LDG")}), flush=True)


def bitwise(qa, qb, counts, E, N, M, T, form, stages=MAX_STAGES, programs=None):
    want = torch.full((E, N, M), float("nan"), dtype=torch.bfloat16, device="cuda")
    got = torch.full_like(want, float("nan"))
    launch._wgrad(qa, qb, want, counts, T, WCFG, R)
    assert FORMS[form](qa, qb, got, counts, stages=stages, programs=programs)
    return torch.equal(got.view(torch.int16), want.view(torch.int16))


def check_small():
    """run 8's small problems (ragged, empty and zero-token experts), rings 2 / 3 / 5, 1 / 3 / all
    programs, every form."""
    cases = [([300, 0, 211, 17], 256, 384), ([128, 256, 384], 128, 128), ([1, 127, 129, 0, 640], 384, 128),
             ([1000], 128, 256), ([0, 0, 513, 0], 256, 256), ([5, 7, 90, 20], 128, 128), ([700, 0], 512, 128),
             ([0, 3, 0], 128, 256)]
    bad = []
    n = 0
    for i, (counts, N, M) in enumerate(cases):
        a, b, c = operands(counts, N, M, i)
        qa, qb = recipes.quantize_cols(R, a, c), recipes.quantize_cols(R, b, c)
        for stages in (2, 3, MAX_STAGES):
            for programs in (None, 1, 3):
                for form in FORMS:
                    n += 1
                    if not bitwise(qa, qb, c, len(counts), N, M, sum(counts), form, stages, programs):
                        bad.append((counts, N, M, stages, programs, form))
    for case in bad:
        print("  MISMATCH", case)
    print(f"small problems: {n - len(bad)} bitwise, {len(bad)} not", flush=True)


def time_shape(index, E, T, H, F, counts_kind, rounds):
    from tilefuse.tuning import timing
    counts = [T // E] * E if counts_kind == "balanced" else routed(E, T, index)
    g = torch.Generator().manual_seed(index)
    t = {k: torch.randn(T, n, generator=g).bfloat16().cuda() for k, n in (("dz", 2 * F), ("x", H), ("dy", H), ("h", F))}
    c = torch.tensor(counts, dtype=torch.int32, device="cuda")
    q = {k: recipes.quantize_cols(R, v, c) for k, v in t.items()}
    grads = ((q["dz"], q["x"], torch.empty(E, 2 * F, H, dtype=torch.bfloat16, device="cuda")),
             (q["dy"], q["h"], torch.empty(E, H, F, dtype=torch.bfloat16, device="cuda")))
    same = all(bitwise(qa, qb, c, E, out.shape[1], out.shape[2], T, form) for qa, qb, out in grads for form in FORMS)
    print(f"  shape {index} {counts_kind}: every form {'bitwise' if same else 'NOT bitwise'}", flush=True)

    def triton_heur():
        for qa, qb, out in grads:
            launch._wgrad(qa, qb, out, c, T, WCFG, R)

    def form_run(form, stages=MAX_STAGES):
        def run():
            for qa, qb, out in grads:
                FORMS[form](qa, qb, out, c, stages=stages)
        return run

    providers = {"triton (the op's)": triton_heur, **{form: form_run(form) for form in FORMS},
                 "next, ping-pong, s4": form_run("next, ping-pong", 4)}
    res = timing.interleaved(providers, rounds=rounds, graphs=True)
    base = res["triton (the op's)"]
    flop = 2 * T * 2 * F * H + 2 * T * H * F
    print(f"shape {index} (E {E} T {T} H {H} F {F}) {counts_kind}: dW1 + dW2, ms, {rounds} rounds, graph replay")
    for name, r in res.items():
        if isinstance(r, Exception):
            print(f"  {name:22s} FAILED {r}")
            continue
        print(f"  {name:22s} {r.median_ms:7.3f} [{r.min_ms:.3f}-{r.max_ms:.3f}] {flop / r.median_ms / 1e9:6.0f} TFLOP/s"
              f"  {timing.ratio(base, r):5.3f}x triton", flush=True)


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
