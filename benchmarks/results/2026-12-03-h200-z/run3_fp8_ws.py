"""Run 3 (issue 16): fp8_block's store-epilogue grouped GEMM (fc2, fc1 dgrad) warp-specialised,
one program an SM, as DeepGEMM structures it.

The Triton fp8_block GEMM waits for each 128-wide K chunk's wgmma before it rescales the chunk
into the float32 accumulator, and at its best tile (64x128 on 4 warps, two programs an SM)
runs at 785-885 TFLOP/s, against 1030-1170 for the same GEMM without the rescale at 128x128 on
8 warps and 1157-1236 for cuBLAS's row-wise fp8 (results/2026-12-02-h200-t run 2). At 128x128
on 8 warps the block-scaled form fell to 594-696: one program an SM, nothing hides the wait and
the rescale, and (triton 3.6) CTA barriers around every TMA hold its two warp groups together.
Here: one producer warp issues every TMA (A's 128x128 chunk and B's 128x128 chunk under one
mbarrier, STAGES chunks ahead, each slot handed back by both consumers through an "empty"
mbarrier), and two consumer warp groups each own 64 rows of the 128x128 tile, so that one
rescales while the other's wgmma runs, with no CTA barrier between them. Persistent: one
program an SM walks the tiles pid, pid + P, ... in the Triton kernel's order (row tile major,
the expert cursor of kernels.advance_expert). A producer-warp kernel was exact with one program
an SM and wrong with two or more (results/2026-12-03-h200-y runs 7-8); here there is one.

The arithmetic per output is the Triton kernel's (kernels.fp8_scaled_dot: acc + dot(a8, b8) *
(a_scale * b_scale), each chunk's dot from zero, chunks in K order), so the outputs must be
bitwise the shipped launch's.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-z/run3_fp8_ws.py            # GPU
    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-z/run3_fp8_ws.py --compile  # sm_90 only
"""

from __future__ import annotations

import json
import re
import sys

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

_tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared


@gluon.jit
def _advance(row_tile, counts_ptr, E, expert, tiles_before, rows_before, m, BLOCK_M: gl.constexpr):
    """kernels.advance_expert in Gluon."""
    while (expert < E) & (row_tile >= tiles_before + gl.cdiv(m, BLOCK_M)):
        tiles_before += gl.cdiv(m, BLOCK_M)
        rows_before += m
        expert += 1
        m = gl.load(counts_ptr + gl.minimum(expert, E - 1)).to(gl.int32)
    return expert, tiles_before, rows_before, m


@gluon.jit
def _producer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr,
              bias_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, bias_e,
              HAS_BIAS: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
              BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
    """One warp: every tile's K chunks (A rows of the tile, B rows of its columns) into the
    ring, a slot once both consumers handed it back."""
    n_col_tiles = gl.cdiv(N, BLOCK_N)
    k_tiles = K // BLOCK_K
    expert = 0
    tiles_before = 0
    rows_before = 0
    m = gl.load(counts_ptr).to(gl.int32)
    it = 0
    for tile in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        row_tile = tile // n_col_tiles
        expert, tiles_before, rows_before, m = _advance(row_tile, counts_ptr, E, expert, tiles_before, rows_before,
                                                        m, BLOCK_M)
        if expert < E:
            row_start = rows_before + (row_tile - tiles_before) * BLOCK_M
            b_row = expert * b_rows + (tile % n_col_tiles) * BLOCK_N
            for kb in range(k_tiles):
                slot = it % STAGES
                mbarrier.wait(empty.index(slot), ((it // STAGES) & 1) ^ 1)
                bar = ready.index(slot)
                mbarrier.expect(bar, BLOCK_M * BLOCK_K + BLOCK_N * BLOCK_K)
                _tma_load(a_desc, [row_start, kb * BLOCK_K], bar, a_s.index(slot))
                _tma_load(b_desc, [b_row, kb * BLOCK_K], bar, b_s.index(slot))
                it += 1


@gluon.jit
def _consumer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr,
              bias_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, bias_e,
              HAS_BIAS: gl.constexpr, WG: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
              BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
    """One warp group: rows [64 WG, 64 WG + 64) of every tile; each chunk's wgmma from zero,
    waited for, the slot handed back, then acc + part * (a_scale * b_scale); the store
    epilogue (+ p * bias) from registers. BLOCK_N 256 (run 4): the tile's two 128-column
    halves one after the other through one product register set (a 128-wide wgmma, its wait
    and its rescale each), so that a chunk's A bytes serve twice the columns."""
    HALF: gl.constexpr = BLOCK_M // 2
    SUB: gl.constexpr = 128
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, SUB, 32])
    row_l: gl.constexpr = gl.SliceLayout(1, mma)
    col_l: gl.constexpr = gl.SliceLayout(0, mma)
    n_col_tiles = gl.cdiv(N, BLOCK_N)
    k_tiles = K // BLOCK_K
    expert = 0
    tiles_before = 0
    rows_before = 0
    m = gl.load(counts_ptr).to(gl.int32)
    it = 0
    part = gl.zeros([HALF, SUB], gl.float32, mma)
    for tile in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        row_tile = tile // n_col_tiles
        col0 = (tile % n_col_tiles) * BLOCK_N
        expert, tiles_before, rows_before, m = _advance(row_tile, counts_ptr, E, expert, tiles_before, rows_before,
                                                        m, BLOCK_M)
        if expert < E:
            row_start = rows_before + (row_tile - tiles_before) * BLOCK_M
            rows = row_start + WG * HALF + gl.arange(0, HALF, layout=row_l)
            rmask = (rows < rows_before + m) & (rows < T)
            rows64 = rows.to(gl.int64)
            bs_base = b_scale_ptr + expert.to(gl.int64) * bs_e + (col0 // 128) * bs_n
            a_next = gl.load(a_scale_ptr + rows64, mask=rmask, other=0.0)
            b_next = gl.load(bs_base)
            b_next1 = b_next
            if BLOCK_N == 256:
                b_next1 = gl.load(bs_base + gl.where((col0 + SUB) < N, bs_n, 0))
            acc = gl.zeros([HALF, SUB], gl.float32, mma)
            acc1 = gl.zeros([HALF, SUB], gl.float32, mma)
            for kb in range(k_tiles):
                slot = it % STAGES
                a_scale = a_next
                b_scale = b_next
                b_scale1 = b_next1
                mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
                part = warpgroup_mma(a_s.index(slot).slice(WG * HALF, HALF), b_s.index(slot).slice(0, SUB).permute((1, 0)),
                                     part, use_acc=False, is_async=True)
                k_next = gl.minimum(kb + 1, k_tiles - 1)   # the last chunk reloads itself
                a_next = gl.load(a_scale_ptr + k_next * a_scale_ld + rows64, mask=rmask, other=0.0)
                b_next = gl.load(bs_base + k_next * bs_k)
                if BLOCK_N == 256:
                    b_next1 = gl.load(bs_base + k_next * bs_k + gl.where((col0 + SUB) < N, bs_n, 0))
                part = warpgroup_mma_wait(num_outstanding=0, deps=[part])
                if BLOCK_N == 128:
                    mbarrier.arrive(empty.index(slot), count=1)
                acc = acc + part * (a_scale * b_scale)[:, None]
                if BLOCK_N == 256:
                    part = warpgroup_mma(a_s.index(slot).slice(WG * HALF, HALF),
                                         b_s.index(slot).slice(SUB, SUB).permute((1, 0)), part, use_acc=False,
                                         is_async=True)
                    part = warpgroup_mma_wait(num_outstanding=0, deps=[part])
                    mbarrier.arrive(empty.index(slot), count=1)
                    acc1 = acc1 + part * (a_scale * b_scale1)[:, None]
                it += 1
            _store(acc, c_ptr, probs_ptr, bias_ptr, rows64, rmask, col0, N, ldc, expert, bias_e, HAS_BIAS, col_l)
            if BLOCK_N == 256:
                _store(acc1, c_ptr, probs_ptr, bias_ptr, rows64, rmask, col0 + SUB, N, ldc, expert, bias_e, HAS_BIAS,
                       col_l)


@gluon.jit
def _store(acc, c_ptr, probs_ptr, bias_ptr, rows64, rmask, col0, N, ldc, expert, bias_e, HAS_BIAS: gl.constexpr,
           col_l: gl.constexpr):
    cols = col0 + gl.arange(0, acc.shape[1], layout=col_l)
    cmask = cols < N
    if HAS_BIAS:
        p = gl.load(probs_ptr + rows64, mask=rmask, other=0.0).to(gl.float32)
        bias = gl.load(bias_ptr + expert.to(gl.int64) * bias_e + cols, mask=cmask, other=0.0).to(gl.float32)
        acc += p[:, None] * bias[None, :]
    gl.store(c_ptr + rows64[:, None] * ldc + cols[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=rmask[:, None] & cmask[None, :])


@gluon.jit
def _consumer0(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr,
               bias_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, bias_e,
               HAS_BIAS: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
               STAGES: gl.constexpr):
    _consumer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr,
              bias_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, bias_e, HAS_BIAS, 0, BLOCK_M,
              BLOCK_N, BLOCK_K, STAGES)


@gluon.jit
def _consumer1(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr,
               bias_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, bias_e,
               HAS_BIAS: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
               STAGES: gl.constexpr):
    _consumer(a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr,
              bias_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, bias_e, HAS_BIAS, 1, BLOCK_M,
              BLOCK_N, BLOCK_K, STAGES)


@gluon.jit
def fp8_ws_gemm_kernel(a_desc, b_desc, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr, bias_ptr,
                       T, N, K, E, n_tiles, ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, bias_e,
                       HAS_BIAS: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                       BLOCK_K: gl.constexpr, STAGES: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                       PRODUCER_REGS: gl.constexpr):
    a_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_M, BLOCK_K], a_desc.layout)
    b_s = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_N, BLOCK_K], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=2)
    gl.warp_specialize([(_consumer0, (a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr,
                          bias_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, bias_e, HAS_BIAS,
                          BLOCK_M, BLOCK_N, BLOCK_K, STAGES)),
                        (_consumer1, (a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr,
                          bias_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, bias_e, HAS_BIAS,
                          BLOCK_M, BLOCK_N, BLOCK_K, STAGES)),
                        (_producer, (a_desc, b_desc, a_s, b_s, ready, empty, counts_ptr, c_ptr, a_scale_ptr, b_scale_ptr, probs_ptr,
                          bias_ptr, T, N, K, E, n_tiles, ldc, a_scale_ld, bs_e, bs_k, bs_n, b_rows, bias_e, HAS_BIAS,
                          BLOCK_M, BLOCK_N, BLOCK_K, STAGES))], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


BLOCK = 128


def launch_ws(a_rows, w, c, counts, *, K, N, probs=None, bias=None, stages=4, maxnreg=168, consumer_regs=232,
              producer_regs=40, programs=None, block_n=BLOCK):
    """fc2 / fc1 dgrad through fp8_ws_gemm_kernel: a_rows a recipes.QuantRows (T, K), w a
    recipes.QuantWeight (E, N, K) K-contiguous, c (T, N)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    from tilefuse.utils import cdiv
    T, E = c.shape[0], counts.shape[0]
    a8 = a_rows.data.view(torch.float8_e4m3fn)
    w8 = w.data.view(torch.float8_e4m3fn)
    lay = gl.NVMMASharedLayout.get_default_for([BLOCK, BLOCK], gl.float8e4nv)
    a_desc = TensorDescriptor.from_tensor(a8, [BLOCK, BLOCK], lay)
    b_lay = gl.NVMMASharedLayout.get_default_for([block_n, BLOCK], gl.float8e4nv)
    b_desc = TensorDescriptor.from_tensor(w8.reshape(-1, w8.shape[2]), [block_n, BLOCK], b_lay)
    n_tiles = (cdiv(T, BLOCK) + E) * cdiv(N, block_n)
    sms = torch.cuda.get_device_properties(c.device).multi_processor_count
    bs = w.scales.stride()
    fp8_ws_gemm_kernel[(min(n_tiles, programs or sms),)](
        a_desc, b_desc, counts, c, a_rows.scales, w.scales, probs if probs is not None else c,
        bias if bias is not None else c, T, N, K, E, n_tiles, c.stride(0), a_rows.scale_ld, bs[0], bs[2], bs[1],
        w.data.shape[1], bias.stride(0) if bias is not None else 0,
        HAS_BIAS=bias is not None, BLOCK_M=BLOCK, BLOCK_N=block_n, BLOCK_K=BLOCK, STAGES=stages,
        CONSUMER_REGS=consumer_regs, PRODUCER_REGS=producer_regs, num_warps=4, maxnreg=maxnreg)


def compile_report():
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    import pathlib
    import subprocess
    import tempfile
    cuobjdump = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    lay = gl.NVMMASharedLayout.get_default_for([BLOCK, BLOCK], gl.float8e4nv)
    desc = "tensordesc<fp8e4nv[%d, %d],%s>" % (BLOCK, BLOCK, lay)
    ints = ["T", "N", "K", "E", "n_tiles", "ldc", "a_scale_ld", "bs_e", "bs_k", "bs_n", "b_rows", "bias_e"]
    for bn, stages, maxnreg, cregs, pregs in ((128, 4, 168, 232, 40), (128, 3, 168, 232, 40), (256, 3, 168, 232, 40), (256, 3, 168, 240, 24),
                                              (256, 4, 168, 232, 40)):
        for has_bias in (False, True):
            bdesc = "tensordesc<fp8e4nv[%d, %d],%s>" % (bn, BLOCK, gl.NVMMASharedLayout.get_default_for([bn, BLOCK],
                                                                                                     gl.float8e4nv))
            sig = {"a_desc": desc, "b_desc": bdesc, "counts_ptr": "*i32", "c_ptr": "*bf16", "a_scale_ptr": "*fp32",
                   "b_scale_ptr": "*fp32", "probs_ptr": "*fp32", "bias_ptr": "*bf16", **{n: "i32" for n in ints}}
            ce = dict(HAS_BIAS=has_bias, BLOCK_M=BLOCK, BLOCK_N=bn, BLOCK_K=BLOCK, STAGES=stages,
                      CONSUMER_REGS=cregs, PRODUCER_REGS=pregs)
            src = GluonASTSource(fp8_ws_gemm_kernel, {**sig, **{k: "constexpr" for k in ce}}, constexprs=ce)
            c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": maxnreg})
            with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
                f.write(c.asm["cubin"])
                f.flush()
                usage = subprocess.run([str(cuobjdump), "--dump-resource-usage", f.name], capture_output=True,
                                       text=True).stdout
                sass = subprocess.run([str(cuobjdump), "-sass", f.name], capture_output=True, text=True).stdout
            regs, stack = re.search(r"REG:(\d+) STACK:(\d+)", usage).groups()
            print(json.dumps({"block_n": bn, "stages": stages, "cregs": cregs, "bias": has_bias, "maxnreg": maxnreg, "regs": int(regs),
                              "stack": int(stack), "smem": c.metadata.shared, "bar.sync": sass.count("BAR.SYNC"),
                              "setmaxnreg": sass.count("USETMAXREG"), "qgmma": sass.count("QGMMA"),
                              "depbar": sass.count("WARPGROUP.DEPBAR"), "warps": c.metadata.num_warps}), flush=True)


SHAPES = ((8, 16384, 4096, 3584), (64, 32768, 2048, 1408), (128, 65536, 2048, 768))
# --wide (run 4): BLOCK_N 256 beside 128 (two 128-column halves a consumer, one after the other).
WIDE = "--wide" in sys.argv


def ncu_launches():
    """Shape 1's fc2 once through the product's ws kernel and once through the Triton kernel at
    64x128 on 4 warps via TMA (ncu --kernel-name regex:"fp8_ws_gemm|grouped_gemm")."""
    from tilefuse.ops.grouped_glu_mlp import launch, recipes, ws_kernels
    from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig
    from tilefuse.ops.grouped_glu_mlp.kernels import EPI_STORE
    E, T, H, F = SHAPES[0]
    g = torch.Generator(device="cuda").manual_seed(0)
    counts = torch.full((E,), T // E, device="cuda", dtype=torch.int32)
    a = torch.randn(T, F, generator=g, device="cuda").bfloat16()
    w = torch.randn(E, H, F, generator=g, device="cuda").bfloat16() * 0.05
    qa, qw = recipes.quantize_rows("fp8_block", a), recipes.quantize_weight("fp8_block", w)
    c = torch.empty(T, H, device="cuda", dtype=torch.bfloat16)
    assert ws_kernels.launch(qa, qw, c, counts, N=H, stages=3)
    launch._gemm(EPI_STORE, qa, qw, c, counts, GemmConfig(64, 128, 128, 4, 3, tma=True), K=F, N=H,
                 b_strides=(0, 0, 0), ldc=H, recipe="fp8_block")
    torch.cuda.synchronize()


def main():
    if "--compile" in sys.argv:
        compile_report()
        return 0
    if "--ncu" in sys.argv:
        ncu_launches()
        return 0
    from tilefuse.ops.grouped_glu_mlp import launch, recipes
    from tilefuse.ops.grouped_glu_mlp.configs import heuristic
    from tilefuse.ops.grouped_glu_mlp.kernels import EPI_STORE
    from tilefuse.tuning import timing
    print(f"# {torch.cuda.get_device_name()}; torch {torch.__version__}; triton {triton.__version__}", flush=True)
    ok = True
    # Correctness first: small grouped problems with skewed and empty experts, partial tiles.
    for E, T, N, K, bias in ((4, 1000, 384, 256, False), (5, 777, 256, 384, True), (3, 300, 128, 128, False)):
        g = torch.Generator(device="cuda").manual_seed(T)
        counts = torch.tensor([T // 2, 0, T - T // 2 - T // 7] + [T // 7] + [0] * (E - 4), device="cuda",
                              dtype=torch.int32)[:E]
        counts[-1] += T - counts.sum()
        a = torch.randn(T, K, generator=g, device="cuda").bfloat16()
        w = torch.randn(E, N, K, generator=g, device="cuda").bfloat16() * 0.05
        probs = torch.rand(T, generator=g, device="cuda")
        b = torch.randn(E, N, generator=g, device="cuda").bfloat16() if bias else None
        qa, qw = recipes.quantize_rows("fp8_block", a), recipes.quantize_weight("fp8_block", w)
        want = torch.full((T, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        got = torch.full_like(want, float("nan"))
        cfg = heuristic("fwd", 2, "fp8_block")
        launch._gemm(EPI_STORE, qa, qw, want, counts, cfg, K=K, N=N, b_strides=(0, 0, 0), ldc=N, probs=probs, bias=b,
                     recipe="fp8_block")
        for programs, bn in ((None, 128), (1, 128), (3, 128)) + (((None, 256), (3, 256)) if WIDE else ()):
            got.fill_(float("nan"))
            launch_ws(qa, qw, got, counts, K=K, N=N, probs=probs, bias=b, programs=programs, block_n=bn)
            torch.cuda.synchronize()
            same = torch.equal(got.view(torch.int16), want.view(torch.int16))
            ok &= same
            print(f"  E={E} T={T} N={N} K={K} bias={bias} programs={programs} BLOCK_N {bn}: bitwise the Triton launch's: "
                  f"{same}"
                  + ("" if same else f" (max |diff| {(got.float() - want.float()).abs().max().item():.3g}, "
                     f"nan {got.isnan().sum().item()})"), flush=True)
    # Timing: fc2 (K = F, N = H) and fc1 dgrad (K = 2F, N = H) at the spec's shapes, balanced counts.
    for E, T, H, F in SHAPES[:1] if WIDE else SHAPES:   # --wide: shape 1 only
        g = torch.Generator(device="cuda").manual_seed(E)
        counts = torch.full((E,), T // E, device="cuda", dtype=torch.int32)
        for role, K in (("fc2", F), ("fc1 dgrad", 2 * F)):
            a = torch.randn(T, K, generator=g, device="cuda").bfloat16()
            w = torch.randn(E, H, K, generator=g, device="cuda").bfloat16() * 0.05
            qa, qw = recipes.quantize_rows("fp8_block", a), recipes.quantize_weight("fp8_block", w)
            c = torch.empty(T, H, device="cuda", dtype=torch.bfloat16)
            flop = 2 * T * H * K
            providers = {}
            for name, cfg in (("triton heuristic", heuristic("fwd", 2, "fp8_block")),):
                providers[name] = (lambda cfg=cfg: launch._gemm(EPI_STORE, qa, qw, c, counts, cfg, K=K, N=H,
                                                                b_strides=(0, 0, 0), ldc=H, recipe="fp8_block"))
            from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig
            tma64 = GemmConfig(64, 128, 128, 4, 3, tma=True)
            providers["triton 64x128 w4 s3 tma"] = lambda: launch._gemm(EPI_STORE, qa, qw, c, counts, tma64, K=K, N=H,
                                                                        b_strides=(0, 0, 0), ldc=H,
                                                                        recipe="fp8_block")
            for stages, bn in ((3, 128), (3, 256), (4, 256)) if WIDE else ((3, 128), (4, 128), (5, 128)):
                providers[f"ws 128x{bn} s{stages}"] = (lambda s=stages, bn=bn: launch_ws(qa, qw, c, counts, K=K, N=H,
                                                                                        stages=s, block_n=bn))
            outs = {}
            for name, fn in providers.items():
                c.fill_(float("nan"))
                try:
                    fn()
                    torch.cuda.synchronize()
                except Exception as exc:  # noqa: BLE001 - a probe: reported
                    print(f"  {name}: {type(exc).__name__}: {str(exc)[:400]}", flush=True)
                    continue
                outs[name] = c.clone()
            ref = outs.get("triton heuristic")
            for name, o in outs.items():
                same = ref is not None and torch.equal(o.view(torch.int16), ref.view(torch.int16))
                ok &= same
                if not same:
                    print(f"  NOT bitwise: {name}", flush=True)
            providers = {n: f for n, f in providers.items() if n in outs}
            t = timing.interleaved(providers, graphs=True, rounds=7)
            print(f"\n## shape E={E} T={T} H={H} F={F}: {role} (M={T}, N={H}, K={K}), ms", flush=True)
            base = t["triton heuristic"].median_ms
            for name, r in t.items():
                if isinstance(r, Exception):
                    print(f"  {name:26s} {type(r).__name__}: {str(r)[:200]}", flush=True)
                    continue
                print(f"  {name:26s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})  {base / r.median_ms:.3f}x"
                      f"  {flop / r.median_ms * 1e-9:7.1f} TFLOP/s", flush=True)
            del a, w, qa, qw, c, outs
            torch.cuda.empty_cache()
    print(f"bitwise: {ok}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
