"""Run 1 (issue 15): the level-3 wgmma GEMM with the next K tile's activations split while this
tile's products run.

wgmma_kernels.so2_gemm3x_wgmma_kernel walks its K tiles one after another: wait for the
activation tile, load it from shared memory into wgmma's register A layout, take each row's
amax (shuffles across the quad), scale and split it into float16 head and tail, issue the
three wgmma, wait for them, join the product into the float32 accumulator. Only the wgmma run
on the tensor cores, and nothing else of the program runs while they do: the load, the amax
and the split of the next tile wait behind the wgmma wait. results/2026-12-03-h200-w run 4
overlapped the wgmma chains themselves (two products in flight: 241-255 registers, slower)
and run 6 fetched the weights further ahead (slower). Here only the next tile's split is
moved between the wgmma issue and its wait: its head, tail and row scales (about 20 more
registers) are live during the wait, no product crosses the loop's back edge, and the
arithmetic is the shipped kernel's operation for operation, so every mode must give its bits.

The probe kernel has the shipped kernel's signature; the script swaps it in for
wgmma_kernels.so2_gemm3x_wgmma_kernel around launch._gemm, so the dispatch, descriptors and
grid are the product's.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-x/run1_prep_ahead.py [--modes]  # GPU
    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-x/run1_prep_ahead.py --compile  # sm_90 compile only
"""

from __future__ import annotations

import contextlib
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
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, warpgroup_mma, warpgroup_mma_wait

from tilefuse.ops.so2_mixing_stack import wgmma_kernels as W
from tilefuse.ops.so2_mixing_stack.kernels import BWD_HEAD
from tilefuse.ops.so2_mixing_stack.wgmma_kernels import (A_STAGES, _a_layout, _a_tile, _column_scales, _cta_barrier,
                                                         _epilogue, _head_g, _mma_layout, _pow2_scale, _ring,
                                                         _tile_of, _weight_tiles)


@gluon.jit
def _split(a, mma: gl.constexpr):
    """_k_step's split of the float32 tile ``a``: head, tail and the inverse row scales in the
    accumulator's row layout (the same operations)."""
    scale, inv = _pow2_scale(gl.max(gl.abs(a), axis=1))
    a_s = a * scale[:, None]
    a_hi = a_s.to(gl.float16)
    a_lo = (a_s - a_hi.to(gl.float32)).to(gl.float16)
    return a_hi, a_lo, gl.convert_layout(inv, gl.SliceLayout(1, mma))


@gluon.jit
def _load_tile(a_s, a_bars, k_tile, a_layout: gl.constexpr, a_alpha, MODE: gl.constexpr, APPLY_ALPHA: gl.constexpr):
    slot = k_tile % A_STAGES
    mbarrier.wait(a_bars.index(slot), (k_tile // A_STAGES) & 1)
    a = a_s.index(slot).load(a_layout)
    if MODE == BWD_HEAD and APPLY_ALPHA:
        a = _head_g(a, a_alpha[:, None])
    return a


@gluon.jit
def gemm3x_prep_ahead_kernel(
    ad, wd, wlod, wscale_ptr, res_ptr, out_ptr, z_ptr, sigma_ptr, alpha_ptr,
    F, E, ROW, K_START, K_LEN, N_START, N_LEN, CF, LG, w_rows, w_stride_k,
    MODE: gl.constexpr, APPLY_ALPHA: gl.constexpr,
    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, num_warps: gl.constexpr,
    W_STAGES: gl.constexpr,
):
    a_layout: gl.constexpr = _a_layout(BLOCK_N, num_warps)
    mma: gl.constexpr = _mma_layout(BLOCK_N, num_warps)
    w_s, wlo_s, bars = _ring(wd, BLOCK_N, BLOCK_K, W_STAGES)
    a_s = gl.allocate_shared_memory(gl.float32, [A_STAGES, BLOCK_M, BLOCK_K], ad.layout)
    a_bars = gl.allocate_shared_memory(gl.int64, [A_STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(A_STAGES):
        mbarrier.init(a_bars.index(s), count=1)
    focus, edge0, n0 = _tile_of(E, N_LEN, BLOCK_M, BLOCK_N)
    n_k = K_LEN // BLOCK_K
    a_alpha = gl.zeros([BLOCK_M], gl.float32, layout=gl.SliceLayout(1, a_layout))
    if MODE == BWD_HEAD:
        a_row0 = edge0.to(gl.int32)
        a_col0 = focus * ROW + K_START
        if APPLY_ALPHA:
            rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, a_layout))
            a_alpha = gl.load(alpha_ptr + (edge0 + rows) * F + focus, mask=(edge0 + rows) < E,
                              other=0.0).to(gl.float32)
    else:
        a_row0 = (focus.to(gl.int64) * E + edge0).to(gl.int32)
        a_col0 = K_START
    for s in gl.static_range(A_STAGES):
        _a_tile(ad, a_s, a_bars, a_row0, a_col0, s, n_k, A_STAGES, BLOCK_M, BLOCK_K)
    inv_col = _column_scales(wscale_ptr, focus, w_stride_k, N_START, N_LEN, K_START, n0, BLOCK_N, num_warps)
    w_row0 = focus * w_rows
    w_col0 = N_START - K_START + n0
    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    p = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    for s in gl.static_range(W_STAGES - 1):
        _weight_tiles(wd, wlod, w_s, wlo_s, bars, w_row0, s, n_k, w_col0, BLOCK_K, BLOCK_N, W_STAGES)
    a_hi, a_lo, inv = _split(_load_tile(a_s, a_bars, 0, a_layout, a_alpha, MODE, APPLY_ALPHA), mma)
    for i in range(n_k):
        slot = i % W_STAGES
        # every warp is past K tile i - 1's wgmma wait (its weight slot is free for tile
        # i + W_STAGES - 1) and past its read of tile i's activations (slot free for i + A_STAGES)
        _cta_barrier()
        _weight_tiles(wd, wlod, w_s, wlo_s, bars, w_row0, i + W_STAGES - 1, n_k, w_col0, BLOCK_K, BLOCK_N, W_STAGES)
        _a_tile(ad, a_s, a_bars, a_row0, a_col0, i + A_STAGES, n_k, A_STAGES, BLOCK_M, BLOCK_K)
        mbarrier.wait(bars.index(slot), (i // W_STAGES) & 1)
        part = warpgroup_mma(a_lo, w_s.index(slot), p, use_acc=False, is_async=True)
        part = warpgroup_mma(a_hi, wlo_s.index(slot), part, is_async=True)
        part = warpgroup_mma(a_hi, w_s.index(slot), part, is_async=True)
        # the next tile's split while they run; at the last tile its own slot again (its barrier
        # phase is complete and no load was requested into it), the result unused
        n_hi, n_lo, n_inv = _split(_load_tile(a_s, a_bars, gl.minimum(i + 1, n_k - 1), a_layout, a_alpha, MODE,
                                              APPLY_ALPHA), mma)
        p, a_hi, a_lo = warpgroup_mma_wait(num_outstanding=0, deps=[part, a_hi, a_lo])
        acc += (p * inv_col[None, :]) * inv[:, None]
        a_hi, a_lo, inv = n_hi, n_lo, n_inv
    for s in gl.static_range(W_STAGES):
        mbarrier.invalidate(bars.index(s))
    for s in gl.static_range(A_STAGES):
        mbarrier.invalidate(a_bars.index(s))
    _epilogue(acc, out_ptr, res_ptr, z_ptr, sigma_ptr, alpha_ptr, F, E, ROW, CF, LG, N_START, N_LEN, focus,
              edge0, n0, MODE, APPLY_ALPHA, BLOCK_M, BLOCK_N, num_warps)


def compile_report():
    """sm_90 compile of the probe and the shipped kernel: registers, stack, wgmma, waits."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from tilefuse.ops.so2_mixing_stack import kernels as K
    ints = ["F", "E", "ROW", "K_START", "K_LEN", "N_START", "N_LEN", "CF", "LG", "w_rows", "w_stride_k"]
    cuobjdump = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    for cf in (32, 64):
        for bm, bn in ((64, 64), (64, 128)):
            for mode in (K.BWD, K.FWD_GATED, K.BWD_HEAD):
                for name, fn in (("shipped", W.so2_gemm3x_wgmma_kernel), ("prep-ahead", gemm3x_prep_ahead_kernel)):
                    lay = gl.NVMMASharedLayout.get_default_for([cf, bn], gl.float16)
                    desc = "tensordesc<fp16[%d, %d],%s>" % (cf, bn, lay)
                    adesc = "tensordesc<fp32[%d, %d],%s>" % (bm, cf, gl.NVMMASharedLayout.get_default_for([bm, cf],
                                                                                                          gl.float32))
                    sig = {"ad": adesc, "wd": desc, "wlod": desc, "wscale_ptr": "*fp32", "res_ptr": "*fp32",
                           "out_ptr": "*fp32", "z_ptr": "*fp32", "sigma_ptr": "*fp32", "alpha_ptr": "*fp32",
                           **{n: "i32" for n in ints}}
                    ce = dict(MODE=mode, APPLY_ALPHA=True, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=cf, num_warps=4,
                              W_STAGES=2)
                    src = GluonASTSource(fn, {**sig, **{k: "constexpr" for k in ce}}, constexprs=ce)
                    c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
                    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
                        f.write(c.asm["cubin"])
                        f.flush()
                        usage = subprocess.run([str(cuobjdump), "--dump-resource-usage", f.name],
                                               capture_output=True, text=True).stdout
                        sass = subprocess.run([str(cuobjdump), "-sass", f.name], capture_output=True, text=True).stdout
                    regs, stack = re.search(r"REG:(\d+) STACK:(\d+)", usage).groups()
                    print(json.dumps({"kernel": name, "cf": cf, "tile": f"{bm}x{bn}", "mode": int(mode),
                                      "regs": int(regs), "stack": int(stack), "smem": c.metadata.shared,
                                      "wgmma": c.asm["ptx"].count("wgmma.mma_async"),
                                      "waits": sass.count("WARPGROUP.DEPBAR")}), flush=True)


@contextlib.contextmanager
def probe_kernel():
    shipped = W.so2_gemm3x_wgmma_kernel
    W.so2_gemm3x_wgmma_kernel = gemm3x_prep_ahead_kernel
    try:
        yield
    finally:
        W.so2_gemm3x_wgmma_kernel = shipped


def bitwise_every_mode():
    """Each mode, alpha on and off, 64x64 and 64x128, Cf 32 and 64 with partial row blocks: the
    probe's outputs (and FWD_GATED's z) bit for bit the shipped kernel's."""
    from tilefuse.ops.so2_mixing_stack import kernels, launch
    from tilefuse.ops.so2_mixing_stack.configs import FP16X3, So2Config
    from tilefuse.ops.so2_mixing_stack.reference import So2Dims
    ok = True
    for mode_name in ("FWD_GATED", "FINAL", "BWD", "BWD_HEAD"):
        m = getattr(kernels, mode_name)
        for lmax, cf, edges in ((3, 32, 1000), (2, 64, 777), (6, 32, 3001)):
            d = So2Dims(lmax, cf)
            g = torch.Generator(device="cuda").manual_seed(lmax)
            shape = (edges, 2, d.row) if m == kernels.BWD_HEAD else (2, edges, d.row)
            a = torch.randn(shape, generator=g, device="cuda") * 3
            res = a if m == kernels.BWD_HEAD else torch.randn(2, edges, d.row, generator=g, device="cuda")
            w = torch.randn(1, 2, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
            weights = launch._layer(launch.split_fp16(w), 0)
            sigma = torch.rand(2, edges, d.lg, generator=g, device="cuda")
            alpha = torch.rand(edges, 2, generator=g, device="cuda") + 0.2
            seg = dict(k_start=d.m0, k_len=d.m1, n_start=d.m0, n_len=d.m1)
            for bm, bn in ((64, 64), (64, 128)):
                for apply_alpha in (True, False):
                    cfg = So2Config(bm, bn, cf, 4, 2, precision=FP16X3, wgmma=True)
                    outs = []
                    for probe in (False, True):
                        out_shape = (edges, 2, d.row) if m == kernels.FINAL else (2, edges, d.row)
                        out = torch.full(out_shape, float("nan"), device="cuda")
                        z = torch.full((2, edges, d.row), float("nan"), device="cuda")
                        with probe_kernel() if probe else contextlib.nullcontext():
                            launch._gemm(m, a, weights, res, out, d, cfg, z=z, sigma=sigma, alpha=alpha,
                                         apply_alpha=apply_alpha, **seg)
                        outs.append((out, z))
                    same = (torch.equal(outs[0][0].view(torch.int32), outs[1][0].view(torch.int32))
                            and torch.equal(outs[0][1].view(torch.int32), outs[1][1].view(torch.int32)))
                    ok &= same
                    if not same:
                        print(f"  NOT bitwise: {mode_name} lmax {lmax} Cf {cf} {bm}x{bn} alpha {apply_alpha}")
    print(f"bitwise every mode, tile, Cf, alpha: {ok}", flush=True)
    return ok


class Variant:
    """Stands in for wgmma_kernels.so2_gemm3x_wgmma_kernel: launches ``kernel`` with
    ``maxnreg`` = caps[(MODE, BLOCK_K)] at 64x64 tiles (none elsewhere)."""

    def __init__(self, kernel, caps):
        self.kernel, self.caps = kernel, caps

    def __getitem__(self, grid):
        def launch(*args, **kw):
            cap = self.caps.get((kw["MODE"], kw["BLOCK_K"])) if kw["BLOCK_N"] == 64 and kw["BLOCK_M"] == 64 else None
            if cap is not None:
                kw["maxnreg"] = cap
            return self.kernel[grid](*args, **kw)
        return launch


def caps_for(kernel_name):
    """Register caps that raise programs an SM without stack in the sm_90 compile (--compile,
    triton 3.6): 128 registers = four 64x64 programs an SM, 168 = three. At Cf 64 shared memory
    (66 KB) holds three an SM anyway, so 168 is enough there."""
    from tilefuse.ops.so2_mixing_stack import kernels as K
    fwd, fin, bwd, head = (int(K.FWD_GATED), int(K.FINAL), int(K.BWD), int(K.BWD_HEAD))
    if kernel_name == "shipped":   # 199 / 139 / 128 / 145 registers at Cf 32; 199 / 140 / 138 / 155 at Cf 64
        return {(fwd, 32): 168, (fin, 32): 128, (head, 32): 128, (fwd, 64): 168}
    # prep-ahead: 199 / 151 / 146 / 153 at Cf 32 (FINAL at 128 would take 16 bytes of stack); 199 / 164 / 164 / 167
    return {(fwd, 32): 168, (bwd, 32): 128, (head, 32): 128, (fwd, 64): 168}


@contextlib.contextmanager
def variant(v):
    shipped = W.so2_gemm3x_wgmma_kernel
    W.so2_gemm3x_wgmma_kernel = v
    try:
        yield
    finally:
        W.so2_gemm3x_wgmma_kernel = shipped


def whole_step(rounds):
    """The level-3 forward + force backward as users call it (the built-in table's level-3
    entry), each variant's outputs bitwise the shipped kernel's, then interleaved timings."""
    import tilefuse
    from tilefuse import policy
    from tilefuse.tuning import timing
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from so2_peers import make_inputs
    shipped = W.so2_gemm3x_wgmma_kernel
    variants = {"shipped": None, "shipped + caps": Variant(shipped, caps_for("shipped")),
                "prep-ahead": Variant(gemm3x_prep_ahead_kernel, {}),
                "prep-ahead + caps": Variant(gemm3x_prep_ahead_kernel, caps_for("prep-ahead"))}
    ok = True
    for E, lmax, cf in ((647000, 3, 32), (300000, 6, 32), (400000, 2, 64)):
        inp = make_inputs(E, lmax, cf, "cuda", seed=E)

        def step(v):
            def run():
                with policy.level(3), (variant(v) if v is not None else contextlib.nullcontext()):
                    x = tilefuse.so2_mixing_stack(*inp.args(), lmax=lmax, focus_dim=cf)
                    return (x.detach(), *torch.autograd.grad(x, (inp.u0, inp.alpha), inp.grad_out))
            return run
        print(f"\n## E={E} lmax={lmax} Cf={cf}: level-3 forward + force backward, ms", flush=True)
        want = step(None)()
        for name, v in variants.items():
            if v is None:
                continue
            got = step(v)()
            same = all(torch.equal(a.view(torch.int32), b.view(torch.int32)) for a, b in zip(want, got))
            ok &= same
            print(f"  {name:20s} bitwise the shipped step's (x, du0, dalpha): {same}", flush=True)
            del got
        del want
        t = timing.interleaved({n: step(v) for n, v in variants.items()}, graphs=False, rounds=rounds)
        base = t["shipped"].median_ms
        for name, r in t.items():
            print(f"  {name:20s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})  {base / r.median_ms:.3f}x", flush=True)
        del inp
        torch.cuda.empty_cache()
    return ok


def main():
    if "--compile" in sys.argv:
        compile_report()
        return 0
    print(f"# {torch.cuda.get_device_name()}; torch {torch.__version__}; triton {triton.__version__}", flush=True)
    ok = whole_step(rounds=7)
    if "--modes" in sys.argv:
        ok &= bitwise_every_mode()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
