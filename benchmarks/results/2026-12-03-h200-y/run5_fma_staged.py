"""Run 5 (issue 15, exact path): run 4's register-tiled Gluon FMA GEMM with its K tiles staged
by cp.async.

Run 4's probe was bitwise so2_gemm_kernel and 0.78-0.80x its speed, half of it at Triton's own
tile: its K tiles went global -> registers -> shared memory (a transposed scalar store with
8-way bank conflicts between two CTA barriers). Here every K tile is copied asynchronously
(cp.async) into a ring of STAGES slots, A transposed (4-byte copies into its k rows; a row of
BLOCK_M values a k, read as two 16-byte loads a thread), W as 16-byte copies, STAGES - 1 tiles
ahead, one CTA barrier a K tile. Same arithmetic (one FMA chain an output over k in order),
so the result must again be bitwise so2_gemm_kernel's.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-y/run5_fma_staged.py            # GPU
    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-y/run5_fma_staged.py --compile  # sm_90 only
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import tempfile

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import async_copy

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import run4_fma_gemm as R4  # noqa: E402
from run4_fma_gemm import _acc_layout, _cta_barrier  # noqa: E402


@gluon.jit
def fma_gemm_staged_kernel(a_ptr, w_ptr, res_ptr, out_ptr, F, E, ROW, K_START, K_LEN, N_START, N_LEN,
                           w_focus_stride, w_stride_k,
                           BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                           num_warps: gl.constexpr, STAGES: gl.constexpr):
    acc_l: gl.constexpr = _acc_layout(BLOCK_M, BLOCK_N, num_warps)
    a_cp: gl.constexpr = gl.BlockedLayout([4, 1], [8, 4], [1, num_warps], [0, 1])    # (k, m): 4 k of a row a thread
    w_cp: gl.constexpr = gl.BlockedLayout([1, 4], [2, 16], [num_warps, 1], [1, 0])   # (k, n): 16 bytes a thread
    flat: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])   # a slot's (k, m) / (k, n), slots outermost
    flat1: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    pid = gl.program_id(0)
    n_tiles = gl.cdiv(N_LEN, BLOCK_N)
    n_row_blocks = gl.cdiv(E, BLOCK_M)
    rb = pid // n_tiles
    focus = rb // n_row_blocks
    edge0 = (rb % n_row_blocks).to(gl.int64) * BLOCK_M
    n0 = (pid % n_tiles) * BLOCK_N
    first = focus.to(gl.int64) * E + edge0
    a_base = a_ptr + first * ROW + K_START
    w_base = w_ptr + focus.to(gl.int64) * w_focus_stride + (N_START - K_START + n0)
    ka = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(1, a_cp))
    ma = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, a_cp))
    a_offs = ma[None, :] * ROW + ka[:, None]
    a_mask = ((edge0 + ma) < E)[None, :] & (ka < BLOCK_K)[:, None]
    kw = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(1, w_cp))
    nw = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, w_cp))
    w_offs = kw[:, None] * w_stride_k + nw[None, :]
    w_mask = (kw < BLOCK_K)[:, None] & ((n0 + nw) < N_LEN)[None, :]
    a_s = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_K, BLOCK_M], flat)
    w_s = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_K, BLOCK_N], flat)
    n_k = K_LEN // BLOCK_K
    for s in gl.static_range(STAGES - 1):
        ok = s < n_k
        async_copy.async_copy_global_to_shared(a_s.index(s), a_base + s * BLOCK_K + a_offs, mask=a_mask & ok)
        async_copy.async_copy_global_to_shared(w_s.index(s),
                                               w_base + s * BLOCK_K * w_stride_k + w_offs, mask=w_mask & ok)
        async_copy.commit_group()
    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=acc_l)
    for t in range(n_k):
        async_copy.wait_group(STAGES - 2)   # tile t's copies (this thread's) have landed
        _cta_barrier()                      # everyone's, and every warp is done with tile t - 1's slot
        nxt = t + STAGES - 1
        slot = nxt % STAGES
        ok = nxt < n_k
        async_copy.async_copy_global_to_shared(a_s.index(slot), a_base + nxt * BLOCK_K + a_offs, mask=a_mask & ok)
        async_copy.async_copy_global_to_shared(w_s.index(slot),
                                               w_base + nxt * BLOCK_K * w_stride_k + w_offs, mask=w_mask & ok)
        async_copy.commit_group()
        a_v = a_s.index(t % STAGES)._reinterpret(gl.float32, [BLOCK_K * BLOCK_M], flat1)   # a row of BLOCK_M a k
        w_v = w_s.index(t % STAGES)._reinterpret(gl.float32, [BLOCK_K * BLOCK_N], flat1)
        for k in gl.static_range(BLOCK_K):
            a = a_v.slice(k * BLOCK_M, BLOCK_M).load(gl.SliceLayout(1, acc_l))
            b = w_v.slice(k * BLOCK_N, BLOCK_N).load(gl.SliceLayout(0, acc_l))
            acc = gl.fma(a[:, None], b[None, :], acc)
    async_copy.wait_group(0)
    rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, acc_l))
    n = N_START + n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, acc_l))
    mask = ((edge0 + rows) < E)[:, None] & (n < N_START + N_LEN)[None, :]
    offs = first * ROW + rows[:, None] * ROW + n[None, :]
    res = gl.load(res_ptr + offs, mask=mask, other=0.0)
    gl.store(out_ptr + offs, res + acc, mask=mask)


# (BLOCK_M, BLOCK_N, warps, stages)
TILES = ((64, 64, 2, 2), (64, 64, 2, 3), (128, 64, 4, 2), (128, 64, 4, 3), (64, 64, 4, 3), (128, 128, 8, 2))


def compile_report():
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    cuobjdump = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    ints = ["F", "E", "ROW", "K_START", "K_LEN", "N_START", "N_LEN", "w_focus_stride", "w_stride_k"]
    for bm, bn, warps, stages in TILES:
        sig = {"a_ptr": "*fp32", "w_ptr": "*fp32", "res_ptr": "*fp32", "out_ptr": "*fp32", **{n: "i32" for n in ints}}
        ce = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=32, num_warps=warps, STAGES=stages)
        div = ["a_ptr", "w_ptr", "res_ptr", "out_ptr", "ROW", "K_START", "K_LEN", "N_START", "N_LEN", "w_focus_stride",
               "w_stride_k"]
        attrs = {(list(sig).index(n),): [["tt.divisibility", 16]] for n in div}
        src = GluonASTSource(fma_gemm_staged_kernel, {**sig, **{k: "constexpr" for k in ce}}, constexprs=ce,
                             attrs=attrs)
        c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(c.asm["cubin"])
            f.flush()
            usage = subprocess.run([str(cuobjdump), "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
            sass = subprocess.run([str(cuobjdump), "-sass", f.name], capture_output=True, text=True).stdout
        regs, stack = re.search(r"REG:(\d+) STACK:(\d+)", usage).groups()
        ins = [ln for ln in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", ln)]
        print(json.dumps({"tile": f"{bm}x{bn} w{warps} s{stages}", "regs": int(regs), "stack": int(stack),
                          "smem": c.metadata.shared, "sass": len(ins), "ffma": sum(" FFMA " in ln for ln in ins),
                          "lds": sum(" LDS" in ln for ln in ins), "ldgsts": sum("LDGSTS" in ln for ln in ins)}),
              flush=True)


class Staged(R4.FmaBwd):
    def __init__(self, tile):
        self.tile = tile
        self.name = "gluon FMA staged {}x{} w{} s{}".format(*tile)

    def __getitem__(self, grid):
        from tilefuse.ops.so2_mixing_stack.kernels import BWD

        def launch(*args, **kw):
            if int(kw["MODE"]) != int(BWD) or kw["DOT_PRECISION"] != "ieee" or args[13] % 32:
                return R4.SHIPPED[grid](*args, **kw)
            (a, w, _wlo, _ws, res, out, _z, _s, _al, F, E, ROW, K_START, K_LEN, N_START, N_LEN, _cf, _lg,
             wfs, wsk, wsn) = args
            assert wsn == 1
            bm, bn, warps, stages = self.tile
            g = (F * triton.cdiv(E, bm) * triton.cdiv(N_LEN, bn),)
            return fma_gemm_staged_kernel[g](a, w, res, out, F, E, ROW, K_START, K_LEN, N_START, N_LEN, wfs, wsk,
                                             BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=32, num_warps=warps, STAGES=stages)
        return launch


def main():
    if "--compile" in sys.argv:
        compile_report()
        return 0
    R4.SHIPPED = R4._shipped()
    print(f"# {torch.cuda.get_device_name()}; torch {torch.__version__}; triton {triton.__version__}", flush=True)
    # run 4's harness (R4.pairs builds FmaBwd(t) for t in TILES) on this kernel's variants
    orig = R4.FmaBwd
    R4.FmaBwd = Staged
    R4.TILES = TILES
    try:
        return 0 if R4.pairs(rounds=7) else 1
    finally:
        R4.FmaBwd = orig


if __name__ == "__main__":
    sys.exit(main())
