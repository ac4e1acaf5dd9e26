"""Run 6 (issue 15): the level-3 wgmma GEMM with its TMA loads in a warp of their own.

Runs 1-3 left the shipped kernel's pace to the latency inside its K step. Its sm_90 code
(triton 3.6 and 3.8) shows where much of it comes from: six CTA-wide bar.sync a K step, one of
them the kernel's own (`_cta_barrier`, so that a ring slot is refilled only after every warp
has read it), the other five inserted by the compiler around each mbarrier expect and TMA copy
(expect, weight head, weight tail, the wait, the activation tile). Every one holds the four
warps of a program together. Here one producer warp issues every TMA (activation tile and
weight head and tail of a K step under one mbarrier, STAGES steps ahead, each slot handed back
by the consumers through an "empty" mbarrier), and the four consumer warps only wait on
mbarriers: no CTA barrier in their K loop. The consumers' arithmetic is the shipped kernel's,
operation for operation (its helpers), so every mode must give its bits.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-y/run6_ws.py --pairs --modes --step   # GPU
    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-y/run6_ws.py --compile                  # sm_90 only
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
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, warpgroup_mma,
                                                               warpgroup_mma_wait)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import run1_persistent as R1  # noqa: E402
from tilefuse.ops.so2_mixing_stack.kernels import BWD_HEAD  # noqa: E402
from tilefuse.ops.so2_mixing_stack.wgmma_kernels import (_a_layout, _column_scales, _cta_barrier,  # noqa: E402
                                                         _epilogue, _head_g, _mma_layout, _pow2_scale, _tile_of,
                                                         _tma_load)


@gluon.jit
def _producer(ad, wd, wlod, a_s, w_s, wlo_s, ready, empty, a_row0, a_col0, w_row0, w_col0, n_k,
              BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr):
    """One warp: K step i's activation tile and weight head and tail into slot i % STAGES, once
    the consumers have handed the slot back."""
    for i in range(n_k):
        slot = i % STAGES
        mbarrier.wait(empty.index(slot), ((i // STAGES) & 1) ^ 1)   # the first pass finds every slot free
        bar = ready.index(slot)
        mbarrier.expect(bar, BLOCK_M * BLOCK_K * 4 + 2 * BLOCK_K * BLOCK_N * 2)
        _tma_load(ad, [a_row0, a_col0 + i * BLOCK_K], bar, a_s.index(slot))
        _tma_load(wd, [w_row0 + i * BLOCK_K, w_col0], bar, w_s.index(slot))
        _tma_load(wlod, [w_row0 + i * BLOCK_K, w_col0], bar, wlo_s.index(slot))


@gluon.jit
def _consumer(a_s, w_s, wlo_s, ready, empty, inv_col, a_alpha, n_k, out_ptr, res_ptr, z_ptr, sigma_ptr, alpha_ptr,
              F, E, ROW, CF, LG, N_START, N_LEN, focus, edge0, n0, MODE: gl.constexpr, APPLY_ALPHA: gl.constexpr,
              BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, num_warps: gl.constexpr, STAGES: gl.constexpr):
    """The shipped K walk (wgmma_kernels._k_step's arithmetic) on mbarriers only, then the
    shipped epilogue (here, not after the region: triton 3.6 cannot return the default
    partition's tensors)."""
    a_layout: gl.constexpr = _a_layout(BLOCK_N, num_warps)
    mma: gl.constexpr = _mma_layout(BLOCK_N, num_warps)
    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    p = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    for i in range(n_k):
        slot = i % STAGES
        mbarrier.wait(ready.index(slot), (i // STAGES) & 1)
        a = a_s.index(slot).load(a_layout)
        if MODE == BWD_HEAD and APPLY_ALPHA:
            a = _head_g(a, a_alpha[:, None])
        scale, inv = _pow2_scale(gl.max(gl.abs(a), axis=1))
        a_sc = a * scale[:, None]
        a_hi = a_sc.to(gl.float16)
        a_lo = (a_sc - a_hi.to(gl.float32)).to(gl.float16)
        part = warpgroup_mma(a_lo, w_s.index(slot), p, use_acc=False, is_async=True)
        part = warpgroup_mma(a_hi, wlo_s.index(slot), part, is_async=True)
        part = warpgroup_mma(a_hi, w_s.index(slot), part, is_async=True)
        p = warpgroup_mma_wait(num_outstanding=0, deps=[part])
        fence_async_shared()   # the activation tile's generic read before the slot's next TMA write
        mbarrier.arrive(empty.index(slot), count=1)
        acc += (p * inv_col[None, :]) * gl.convert_layout(inv, gl.SliceLayout(1, mma))[:, None]
    _epilogue(acc, out_ptr, res_ptr, z_ptr, sigma_ptr, alpha_ptr, F, E, ROW, CF, LG, N_START, N_LEN, focus,
              edge0, n0, MODE, APPLY_ALPHA, BLOCK_M, BLOCK_N, num_warps)


@gluon.jit
def gemm3x_ws_kernel(
    ad, wd, wlod, wscale_ptr, res_ptr, out_ptr, z_ptr, sigma_ptr, alpha_ptr,
    F, E, ROW, K_START, K_LEN, N_START, N_LEN, CF, LG, w_rows, w_stride_k,
    MODE: gl.constexpr, APPLY_ALPHA: gl.constexpr,
    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, num_warps: gl.constexpr,
    W_STAGES: gl.constexpr, INIT_FENCE: gl.constexpr = False, WORKER_REGS: gl.constexpr = 24,
):
    # INIT_FENCE / WORKER_REGS: run 8's bisection of run 7's fault (defaults: run 6 as it ran)
    a_layout: gl.constexpr = _a_layout(BLOCK_N, num_warps)
    a_s = gl.allocate_shared_memory(gl.float32, [W_STAGES, BLOCK_M, BLOCK_K], ad.layout)
    w_s = gl.allocate_shared_memory(gl.float16, [W_STAGES, BLOCK_K, BLOCK_N], wd.layout)
    wlo_s = gl.allocate_shared_memory(gl.float16, [W_STAGES, BLOCK_K, BLOCK_N], wd.layout)
    ready = gl.allocate_shared_memory(gl.int64, [W_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [W_STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(W_STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    if INIT_FENCE:   # the inits ordered before the async proxy (TMA complete_tx) uses the barriers
        fence_async_shared()
        _cta_barrier()
    focus, edge0, n0 = _tile_of(E, N_LEN, BLOCK_M, BLOCK_N)
    n_k = K_LEN // BLOCK_K
    rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, a_layout))
    if MODE == BWD_HEAD:
        a_row0 = edge0.to(gl.int32)
        a_col0 = focus * ROW + K_START
        a_alpha = gl.load(alpha_ptr + (edge0 + rows) * F + focus, mask=((edge0 + rows) < E) & APPLY_ALPHA,
                          other=0.0).to(gl.float32)
    else:
        a_row0 = (focus.to(gl.int64) * E + edge0).to(gl.int32)
        a_col0 = K_START + focus * 0
        a_alpha = gl.zeros([BLOCK_M], gl.float32, layout=gl.SliceLayout(1, a_layout))
    inv_col = _column_scales(wscale_ptr, focus, w_stride_k, N_START, N_LEN, K_START, n0, BLOCK_N, num_warps)
    w_row0 = focus * w_rows
    w_col0 = N_START - K_START + n0
    gl.warp_specialize([
        (_consumer, (a_s, w_s, wlo_s, ready, empty, inv_col, a_alpha, n_k, out_ptr, res_ptr, z_ptr, sigma_ptr,
                     alpha_ptr, F, E, ROW, CF, LG, N_START, N_LEN, focus, edge0, n0, MODE, APPLY_ALPHA, BLOCK_M,
                     BLOCK_N, num_warps, W_STAGES)),
        (_producer, (ad, wd, wlod, a_s, w_s, wlo_s, ready, empty, a_row0, a_col0, w_row0, w_col0, n_k, BLOCK_M,
                     BLOCK_N, BLOCK_K, W_STAGES)),
    ], [1], [WORKER_REGS])
    for s in gl.static_range(W_STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))


def compile_report(maxnreg, stages):
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from tilefuse.ops.so2_mixing_stack import kernels as K
    ints = ["F", "E", "ROW", "K_START", "K_LEN", "N_START", "N_LEN", "CF", "LG", "w_rows", "w_stride_k"]
    cuobjdump = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    for cf in (32, 64):
        bm, bn = 64, 64
        for mode in (K.BWD, K.FWD_GATED, K.FINAL, K.BWD_HEAD):
            lay = gl.NVMMASharedLayout.get_default_for([cf, bn], gl.float16)
            desc = "tensordesc<fp16[%d, %d],%s>" % (cf, bn, lay)
            adesc = "tensordesc<fp32[%d, %d],%s>" % (bm, cf, gl.NVMMASharedLayout.get_default_for([bm, cf], gl.float32))
            sig = {"ad": adesc, "wd": desc, "wlod": desc, "wscale_ptr": "*fp32", "res_ptr": "*fp32",
                   "out_ptr": "*fp32", "z_ptr": "*fp32", "sigma_ptr": "*fp32", "alpha_ptr": "*fp32",
                   **{n: "i32" for n in ints}}
            ce = dict(MODE=mode, APPLY_ALPHA=True, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=cf, num_warps=4, W_STAGES=stages)
            src = GluonASTSource(gemm3x_ws_kernel, {**sig, **{k: "constexpr" for k in ce}}, constexprs=ce)
            c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": maxnreg})
            with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
                f.write(c.asm["cubin"])
                f.flush()
                usage = subprocess.run([str(cuobjdump), "--dump-resource-usage", f.name], capture_output=True,
                                       text=True).stdout
                sass = subprocess.run([str(cuobjdump), "-sass", f.name], capture_output=True, text=True).stdout
            regs, stack = re.search(r"REG:(\d+) STACK:(\d+)", usage).groups()
            print(json.dumps({"cf": cf, "mode": int(mode), "maxnreg": maxnreg, "stages": stages, "regs": int(regs),
                              "stack": int(stack), "smem": c.metadata.shared, "bar.sync": sass.count("BAR.SYNC"),
                              "setmaxnreg": sass.count("USETMAXREG"), "warps": c.metadata.num_warps}), flush=True)


class WS:
    """Stands in for wgmma_kernels.so2_gemm3x_wgmma_kernel: the shipped grid, this kernel with a
    ring of ``stages`` slots and ``maxnreg`` (the per-thread launch budget of its 8 warps: 80
    leaves the consumers 136 registers and three programs an SM, 64 leaves them 104 and four)."""

    def __init__(self, stages, maxnreg, **extra):
        self.stages, self.maxnreg, self.extra = stages, maxnreg, extra
        self.name = f"ws s{stages} maxnreg {maxnreg}" + "".join(f" {k}={v}" for k, v in extra.items())

    def __getitem__(self, grid):
        def launch(*args, **kw):
            kw["W_STAGES"] = self.stages
            return gemm3x_ws_kernel[grid](*args, maxnreg=self.maxnreg, **kw, **self.extra)
        return launch


VARIANTS = (WS(2, 80), WS(3, 80), WS(2, 64))


def pairs(rounds):
    from tilefuse.ops.so2_mixing_stack import launch
    from tilefuse.ops.so2_mixing_stack.configs import FP16X3, So2Config
    from tilefuse.ops.so2_mixing_stack.reference import So2Dims
    from tilefuse.tuning import timing
    F, ok = 2, True
    for E, lmax, cf in ((647000, 3, 32), (300000, 6, 32), (400000, 2, 64)):
        d = So2Dims(lmax, cf)
        g = torch.Generator(device="cuda").manual_seed(E)
        gz = torch.randn(F, E, d.row, generator=g, device="cuda")
        res = torch.randn(F, E, d.row, generator=g, device="cuda")
        out = torch.empty_like(gz)
        w0 = torch.randn(1, F, d.m0, d.m0, generator=g, device="cuda") * d.m0 ** -0.5
        w1 = torch.randn(1, F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
        w0t = launch._layer(launch.split_fp16(w0.transpose(-1, -2)), 0)
        w1t = launch._layer(launch.split_fp16(w1.transpose(-1, -2)), 0)
        cfg = So2Config(64, 64, cf, 4, 2, precision=FP16X3, wgmma=True)
        print(f"\n## E={E} lmax={lmax} Cf={cf}: the backward GEMM pair (both segments), 64x64, ms", flush=True)
        providers = {}
        for v in (None,) + VARIANTS:
            def run(v=v):
                with R1.variant(v):
                    launch._gemm_t(gz, w0t, w1t, res, out, d, cfg)
            providers["shipped" if v is None else v.name] = run
        outs = {}
        for name, fn in list(providers.items()):
            out.fill_(float("nan"))
            try:
                fn()
                torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - a probe: reported, not timed
                print(f"  {name}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                del providers[name]
                continue
            outs[name] = out.clone()
        for name, o in outs.items():
            same = torch.equal(o.view(torch.int32), outs["shipped"].view(torch.int32))
            ok &= same
            print(f"  {name}: bitwise the shipped kernel's: {same}", flush=True)
        t = timing.interleaved(providers, graphs=True, rounds=rounds)
        base = t["shipped"].median_ms
        for name, r in t.items():
            if isinstance(r, Exception):
                print(f"  {name:24s} {type(r).__name__}: {str(r)[:200]}", flush=True)
                continue
            print(f"  {name:24s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})  {base / r.median_ms:.3f}x", flush=True)
        del gz, res, out, outs
        torch.cuda.empty_cache()
    return ok


def modes():
    """run 1's every-mode check with this kernel standing in for the persistent one (its
    ``programs`` argument is ignored: one program a tile)."""
    ok = True
    for v in VARIANTS[:1]:   # the same arithmetic code in every variant; the pairs check all of them in BWD
        R1.Persistent = lambda pps, gated=None, programs=None, v=v: v   # noqa: E731 - the harness builds Persistent(...)
        print(f"# {v.name}", flush=True)
        ok &= R1.bitwise_every_mode(programs=(None,))
    return ok


def main():
    if "--compile" in sys.argv:
        for maxnreg, stages in ((80, 2), (64, 2)):
            compile_report(maxnreg, stages)
        return 0
    print(f"# {torch.cuda.get_device_name()}; torch {torch.__version__}; triton {triton.__version__}", flush=True)
    ok = True
    if "--pairs" in sys.argv:
        ok &= pairs(rounds=7)
    if "--modes" in sys.argv:
        ok &= modes()
    if "--step" in sys.argv:
        ok &= R1.whole_step(rounds=5, programs=VARIANTS[:1])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
