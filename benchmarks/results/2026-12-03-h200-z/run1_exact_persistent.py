"""Run 1 (issue 15): the exact path's layer GEMM as a persistent Triton kernel whose K walk
runs on from tile to tile.

The exact relay GEMM (kernels.so2_gemm_kernel, IEEE FMA dots, 64x64 on 4 warps) runs one
program per (focus, 64-row block, column tile) with a short K walk: 4 (m = 0) or 6 (m = 1)
Cf-32 K tiles at Neo. Its backward pair at Neo takes 3.46 ms (results/2026-12-03-h200-y run
4): about the sum of its FMA time at the H200's float32 FMA rate (138 GFLOP / 67 TFLOP/s =
2.06 ms) and its DRAM time (4.97 GB / 3.5 TB/s = 1.42 ms), as if the loads of a tile and the
FMAs of another hardly overlapped. Here each program takes tiles pid, pid + P, ... (P =
``programs_per_sm`` x SMs) in one flattened (tile, K tile) loop, the form of Triton's
persistent-matmul tutorial: the software pipeline then requests the next tile's first K tiles
while this tile's last products and its epilogue run. Per tile the arithmetic is the shipped
kernel's (the same helpers, the same FMA chain per output over k in order), so every mode must
give its bits. The level-3 (wgmma) GEMM was measured persistent in results/2026-12-03-h200-y
runs 1-2 (no gain: its pace is the K step's latency); the exact one had not been.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-z/run1_exact_persistent.py --modes --pairs --step  # GPU
    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-z/run1_exact_persistent.py --ncu   # under ncu
    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-z/run1_exact_persistent.py --compile  # sm_90 only
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import sys

import torch
import triton
import triton.language as tl

from tilefuse.ops.so2_mixing_stack import kernels as K
from tilefuse.ops.so2_mixing_stack.kernels import (BWD_HEAD, FINAL, FWD_GATED, _tile, column_scales, head_g,
                                                   tile_product)
from tilefuse.ops.triton_common import to_output


@triton.jit
def so2_gemm_persistent_kernel(
    a_ptr, w_ptr, wlo_ptr, wscale_ptr, res_ptr, out_ptr, z_ptr, sigma_ptr, alpha_ptr,
    F, E, ROW, K_START, K_LEN, N_START, N_LEN, CF, LG,
    w_focus_stride, w_stride_k, w_stride_n,
    MODE: tl.constexpr, APPLY_ALPHA: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """kernels.so2_gemm_kernel over tiles pid, pid + P, ... in one loop of (tile, K tile)
    steps; the per-tile arithmetic and epilogue are the shipped kernel's."""
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    n_tiles = F * tl.cdiv(E, BLOCK_M) * tl.cdiv(N_LEN, BLOCK_N)
    k_tiles = tl.cdiv(K_LEN, BLOCK_K)
    my_tiles = tl.cdiv(n_tiles - pid, n_programs)
    rows = tl.arange(0, BLOCK_M)
    tile = pid - n_programs
    ki = k_tiles - 1
    focus = pid * 0
    edge0 = (pid * 0).to(tl.int64)
    n0 = pid * 0
    first = edge0
    a_first = edge0
    a_alpha = tl.zeros((BLOCK_M,), tl.float32)
    tile_rows = rows[:, None] * ROW
    if MODE == BWD_HEAD:
        a_tile = rows[:, None] * (F * ROW)
    else:
        a_tile = tile_rows
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, my_tiles * k_tiles):
        ki = tl.where(ki == k_tiles - 1, 0, ki + 1)
        if ki == 0:
            tile += n_programs
            focus, edge0, n0 = _tile(tile, E, N_LEN, BLOCK_M, BLOCK_N)
            first = focus.to(tl.int64) * E + edge0
            if MODE == BWD_HEAD:
                a_first = edge0 * F + focus
                if APPLY_ALPHA:
                    a_alpha = tl.load(alpha_ptr + (edge0 + rows) * F + focus, mask=(edge0 + rows) < E,
                                      other=0.0).to(tl.float32)
            else:
                a_first = first
        edges = edge0 + rows
        emask = edges < E
        n = N_START + n0 + tl.arange(0, BLOCK_N)
        nmask = n < N_START + N_LEN
        k = ki * BLOCK_K + tl.arange(0, BLOCK_K)
        kmask = k < K_LEN
        a = tl.load((a_ptr + a_first * ROW) + (a_tile + (K_START + k)[None, :]),
                    mask=emask[:, None] & kmask[None, :], other=0.0).to(tl.float32)
        if MODE == BWD_HEAD and APPLY_ALPHA:
            a = head_g(a, a_alpha, out_ptr).to(tl.float32)
        w_offs = focus.to(tl.int64) * w_focus_stride + k[:, None] * w_stride_k + (n - K_START)[None, :] * w_stride_n
        wmask = kmask[:, None] & nmask[None, :]
        w = tl.load(w_ptr + w_offs, mask=wmask, other=0.0)
        w_lo = w
        if DOT_PRECISION == "3xfp16" or DOT_PRECISION == "3xtf32":
            w_lo = tl.load(wlo_ptr + w_offs, mask=wmask, other=0.0)
        inv_col = column_scales(wscale_ptr, focus, w_stride_k, n - K_START, nmask, DOT_PRECISION)
        acc = tile_product(acc, a, w, w_lo, inv_col, DOT_PRECISION)
        if ki == k_tiles - 1:
            # kernels.so2_gemm_kernel's epilogue, operation for operation
            mask = emask[:, None] & nmask[None, :]
            base, offs = first * ROW, tile_rows + n[None, :]
            if MODE == FWD_GATED:
                tl.store((z_ptr + base) + offs, to_output(acc, z_ptr), mask=mask)
                gate = (n - CF) % LG
                acc *= tl.load((sigma_ptr + first * LG) + (rows[:, None] * LG + gate[None, :]), mask=mask,
                               other=0.0)
            if MODE == FINAL:
                y = tl.load((res_ptr + base) + offs, mask=mask, other=0.0).to(tl.float32) + acc
                if APPLY_ALPHA:
                    alpha = tl.load(alpha_ptr + edges * F + focus, mask=emask, other=0.0).to(tl.float32)
                    y = y * alpha[:, None]
                out_offs = (edges * F + focus) * ROW
                tl.store(out_ptr + out_offs[:, None] + n[None, :], to_output(y, out_ptr), mask=mask)
            else:
                res = tl.load((res_ptr + a_first * ROW) + (a_tile + n[None, :]), mask=mask,
                              other=0.0).to(tl.float32)
                if MODE == BWD_HEAD and APPLY_ALPHA:
                    res = head_g(res, a_alpha, out_ptr).to(tl.float32)
                tl.store((out_ptr + base) + offs, to_output(res + acc, out_ptr), mask=mask)
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)


@triton.jit
def so2_gemm_flat_kernel(
    a_ptr, w_ptr, wlo_ptr, wscale_ptr, res_ptr, out_ptr, z_ptr, sigma_ptr, alpha_ptr,
    F, E, ROW, K_START, K_LEN, N_START, N_LEN, CF, LG,
    w_focus_stride, w_stride_k, w_stride_n,
    MODE: tl.constexpr, APPLY_ALPHA: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """The shipped kernel's body in a loop over tiles pid, pid + P, ..., the nest flattened by
    the compiler (tl.range(flatten=True)), so its pipeline runs across tiles."""
    n_programs = tl.num_programs(0)
    n_tiles = F * tl.cdiv(E, BLOCK_M) * tl.cdiv(N_LEN, BLOCK_N)
    rows = tl.arange(0, BLOCK_M)
    tile_rows = rows[:, None] * ROW
    for tile in tl.range(tl.program_id(0), n_tiles, n_programs, flatten=True):
        focus, edge0, n0 = _tile(tile, E, N_LEN, BLOCK_M, BLOCK_N)
        edges = edge0 + rows
        emask = edges < E
        n = N_START + n0 + tl.arange(0, BLOCK_N)
        nmask = n < N_START + N_LEN
        first = focus.to(tl.int64) * E + edge0
        if MODE == BWD_HEAD:
            a_first = edge0 * F + focus
            a_tile = rows[:, None] * (F * ROW)
            a_alpha = tl.load(alpha_ptr + edges * F + focus, mask=emask & APPLY_ALPHA, other=0.0).to(tl.float32)
        else:
            a_first = first
            a_tile = tile_rows
            a_alpha = tl.zeros((BLOCK_M,), tl.float32)
        w_offset = focus.to(tl.int64) * w_focus_stride
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        inv_col = column_scales(wscale_ptr, focus, w_stride_k, n - K_START, nmask, DOT_PRECISION)
        for k0 in range(0, K_LEN, BLOCK_K):
            k = k0 + tl.arange(0, BLOCK_K)
            kmask = k < K_LEN
            a = tl.load((a_ptr + a_first * ROW) + (a_tile + (K_START + k)[None, :]),
                        mask=emask[:, None] & kmask[None, :], other=0.0).to(tl.float32)
            if MODE == BWD_HEAD and APPLY_ALPHA:
                a = head_g(a, a_alpha, out_ptr).to(tl.float32)
            w_offs = w_offset + k[:, None] * w_stride_k + (n - K_START)[None, :] * w_stride_n
            wmask = kmask[:, None] & nmask[None, :]
            w = tl.load(w_ptr + w_offs, mask=wmask, other=0.0)
            w_lo = w
            if DOT_PRECISION == "3xfp16" or DOT_PRECISION == "3xtf32":
                w_lo = tl.load(wlo_ptr + w_offs, mask=wmask, other=0.0)
            acc = tile_product(acc, a, w, w_lo, inv_col, DOT_PRECISION)
        mask = emask[:, None] & nmask[None, :]
        base, offs = first * ROW, tile_rows + n[None, :]
        if MODE == FWD_GATED:
            tl.store((z_ptr + base) + offs, to_output(acc, z_ptr), mask=mask)
            gate = (n - CF) % LG
            acc *= tl.load((sigma_ptr + first * LG) + (rows[:, None] * LG + gate[None, :]), mask=mask, other=0.0)
        if MODE == FINAL:
            y = tl.load((res_ptr + base) + offs, mask=mask, other=0.0).to(tl.float32) + acc
            if APPLY_ALPHA:
                alpha = tl.load(alpha_ptr + edges * F + focus, mask=emask, other=0.0).to(tl.float32)
                y = y * alpha[:, None]
            out_offs = (edges * F + focus) * ROW
            tl.store(out_ptr + out_offs[:, None] + n[None, :], to_output(y, out_ptr), mask=mask)
        else:
            res = tl.load((res_ptr + a_first * ROW) + (a_tile + n[None, :]), mask=mask, other=0.0).to(tl.float32)
            if MODE == BWD_HEAD and APPLY_ALPHA:
                res = head_g(res, a_alpha, out_ptr).to(tl.float32)
            tl.store((out_ptr + base) + offs, to_output(res + acc, out_ptr), mask=mask)


class Persistent:
    """Stands in for kernels.so2_gemm_kernel: launches the persistent kernel on min(tiles,
    k x SMs) programs (``programs`` fixes the count instead); ``stages`` overrides the
    launch's num_stages."""

    def __init__(self, programs_per_sm, stages=None, programs=None, flat=False, maxnreg=None):
        self.programs_per_sm, self.stages, self.programs = programs_per_sm, stages, programs
        self.kernel = so2_gemm_flat_kernel if flat else so2_gemm_persistent_kernel
        self.maxnreg = maxnreg
        self.name = (f"{'flat' if flat else 'persistent'} {programs_per_sm}/SM" + (f" s{stages}" if stages else "")
                     + (f" r{maxnreg}" if maxnreg else ""))

    def __getitem__(self, grid):
        def launch(*args, **kw):
            if self.stages:
                kw["num_stages"] = self.stages
            if self.maxnreg and int(kw["MODE"]) == int(K.BWD):   # the cap only where it does not spill
                kw["maxnreg"] = self.maxnreg
            sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
            p = self.programs or self.programs_per_sm * sms
            return self.kernel[(max(1, min(grid[0], p)),)](*args, **kw)
        return launch


class Capped:
    """The shipped kernel on its own grid with ``maxnreg`` on its BWD launches (four 4-warp
    programs an SM at 128 under triton 3.6 instead of three): whether occupancy alone moves it."""

    def __init__(self, maxnreg):
        self.maxnreg, self.name = maxnreg, f"shipped r{maxnreg}"

    def __getitem__(self, grid):
        def launch(*args, **kw):
            if int(kw["MODE"]) == int(K.BWD):
                kw["maxnreg"] = self.maxnreg
            return SHIPPED[grid](*args, **kw)
        return launch


SHIPPED = K.so2_gemm_kernel
# The sm_90 compile under triton 3.6 (the device image's): shipped BWD 64x64 w4 s2 156
# registers (three programs an SM), persistent 160, flat 168, each at 128 with no stack (four).
VARIANTS = (Capped(128), Persistent(3), Persistent(4, maxnreg=128), Persistent(3, flat=True),
            Persistent(4, flat=True, maxnreg=128))


@contextlib.contextmanager
def variant(v):
    shipped = K.so2_gemm_kernel
    if v is not None:
        K.so2_gemm_kernel = v
    try:
        yield
    finally:
        K.so2_gemm_kernel = shipped


def bitwise_every_mode(programs):
    """Each mode, alpha on and off, 64x64 and 32x128 exact tiles, Cf 32 and 64 with partial row
    blocks, on ``programs`` persistent programs (few: every program many tiles) and on the
    4-an-SM grid: the probe's outputs (and FWD_GATED's z) bit for bit the shipped kernel's."""
    from tilefuse.ops.so2_mixing_stack import launch
    from tilefuse.ops.so2_mixing_stack.configs import So2Config
    from tilefuse.ops.so2_mixing_stack.reference import So2Dims
    ok, n = True, 0
    for mode_name in ("FWD_GATED", "FINAL", "BWD", "BWD_HEAD"):
        m = getattr(K, mode_name)
        for lmax, cf, edges in ((3, 32, 1000), (2, 64, 777), (6, 32, 3001)):
            d = So2Dims(lmax, cf)
            g = torch.Generator(device="cuda").manual_seed(lmax)
            shape = (edges, 2, d.row) if m == BWD_HEAD else (2, edges, d.row)
            a = torch.randn(shape, generator=g, device="cuda") * 3
            res = a if m == BWD_HEAD else torch.randn(2, edges, d.row, generator=g, device="cuda")
            w = torch.randn(2, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
            sigma = torch.rand(2, edges, d.lg, generator=g, device="cuda")
            alpha = torch.rand(edges, 2, generator=g, device="cuda") + 0.2
            seg = dict(k_start=d.m0, k_len=d.m1, n_start=d.m0, n_len=d.m1)
            for bm, bn, warps in ((64, 64, 4), (32, 128, 4), (128, 64, 8)):
                for apply_alpha in (True, False):
                    cfg = So2Config(bm, bn, cf, warps, 2)
                    outs = []
                    for v in [None] + [Persistent(4, programs=p, flat=f) for p in programs for f in (False, True)]:
                        out_shape = (edges, 2, d.row) if m == FINAL else (2, edges, d.row)
                        out = torch.full(out_shape, float("nan"), device="cuda")
                        z = torch.full((2, edges, d.row), float("nan"), device="cuda")
                        with variant(v):
                            launch._gemm(m, a, w, res, out, d, cfg, z=z, sigma=sigma, alpha=alpha,
                                         apply_alpha=apply_alpha, **seg)
                        outs.append((out, z))
                    for got in outs[1:]:
                        same = (torch.equal(outs[0][0].view(torch.int32), got[0].view(torch.int32))
                                and torch.equal(outs[0][1].view(torch.int32), got[1].view(torch.int32)))
                        ok &= same
                        n += 1
                        if not same:
                            print(f"  NOT bitwise: {mode_name} lmax {lmax} Cf {cf} {bm}x{bn} alpha {apply_alpha}")
    print(f"bitwise every mode, tile, Cf, alpha, grid ({n} comparisons): {ok}", flush=True)
    return ok


SHAPES = ((647000, 3, 32), (300000, 6, 32), (400000, 2, 64))


def gemm_pairs(rounds):
    """The exact backward GEMM pair (both column segments, launch._gemm_t) at the three shapes:
    shipped 64x64 w4 s2 (the built-in exact tile at Cf 32) against persistent variants."""
    from tilefuse.ops.so2_mixing_stack import launch
    from tilefuse.ops.so2_mixing_stack.configs import So2Config
    from tilefuse.ops.so2_mixing_stack.reference import So2Dims
    from tilefuse.tuning import timing
    F, ok = 2, True
    variants = list(VARIANTS)
    for E, lmax, cf in SHAPES:
        d = So2Dims(lmax, cf)
        g = torch.Generator(device="cuda").manual_seed(E)
        gz = torch.randn(F, E, d.row, generator=g, device="cuda")
        res = torch.randn(F, E, d.row, generator=g, device="cuda")
        out = torch.empty_like(gz)
        w0t = (torch.randn(F, d.m0, d.m0, generator=g, device="cuda") * d.m0 ** -0.5).transpose(-1, -2).contiguous()
        w1t = (torch.randn(F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5).transpose(-1, -2).contiguous()
        flop = 2 * F * E * (d.m0 ** 2 + d.m1 ** 2)
        print(f"\n## E={E} lmax={lmax} Cf={cf}: the exact backward GEMM pair (both segments), ms", flush=True)
        providers = {}
        for bm, bn, warps in ((64, 64, 4), (32, 128, 4)):
            cfg = So2Config(bm, bn, cf, warps, 2)
            for v in [None] + variants:
                name = f"{'shipped' if v is None else v.name} {bm}x{bn} w{warps}"

                def run(cfg=cfg, v=v):
                    with variant(v):
                        launch._gemm_t(gz, w0t, w1t, res, out, d, cfg)
                providers[name] = run
        outs = {}
        for name, fn in list(providers.items()):
            out.fill_(float("nan"))
            try:
                fn()
                torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - a probe: reported, and not timed
                print(f"  {name}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                del providers[name]
                continue
            outs[name] = out.clone()
        for name, o in outs.items():
            ref = outs["shipped " + " ".join(name.split()[-2:])]
            same = torch.equal(o.view(torch.int32), ref.view(torch.int32))
            ok &= same
            if not same:
                print(f"  NOT bitwise: {name}", flush=True)
        del outs
        t = timing.interleaved(providers, graphs=True, rounds=rounds)
        base = t["shipped 64x64 w4"].median_ms
        for name, r in t.items():
            if isinstance(r, Exception):
                print(f"  {name:32s} {type(r).__name__}: {str(r)[:200]}", flush=True)
                continue
            print(f"  {name:32s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})  {base / r.median_ms:.3f}x"
                  f"  {flop / r.median_ms * 1e-9:6.1f} TFLOP/s", flush=True)
        del gz, res, out
        torch.cuda.empty_cache()
    print(f"bitwise (every variant against the shipped kernel at its tile): {ok}", flush=True)
    return ok


def whole_step(rounds, programs):
    """The exact forward + force backward as users call it (the built-in table), with every
    so2_gemm_kernel launch on the persistent kernel: bitwise the shipped step's, then timed."""
    import tilefuse
    from tilefuse import policy
    from tilefuse.tuning import timing
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from so2_peers import make_inputs
    variants = {"shipped": None, **{v.name: v for v in programs}}
    ok = True
    for E, lmax, cf in SHAPES:
        inp = make_inputs(E, lmax, cf, "cuda", seed=E)

        def step(v):
            def run():
                with policy.level(2), variant(v):
                    x = tilefuse.so2_mixing_stack(*inp.args(), lmax=lmax, focus_dim=cf)
                    return (x.detach(), *torch.autograd.grad(x, (inp.u0, inp.alpha), inp.grad_out))
            return run
        print(f"\n## E={E} lmax={lmax} Cf={cf}: exact forward + force backward, ms", flush=True)
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
            if isinstance(r, Exception):
                print(f"  {name:20s} {type(r).__name__}: {str(r)[:200]}", flush=True)
                continue
            print(f"  {name:20s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})  {base / r.median_ms:.3f}x", flush=True)
        del inp
        torch.cuda.empty_cache()
    return ok


def ncu_launches():
    """One exact backward m = 1 pass at Neo, 64x64 w4: the shipped kernel, then the persistent
    one at 4 programs an SM (ncu --kernel-name regex:"so2_gemm")."""
    from tilefuse.ops.so2_mixing_stack import launch
    from tilefuse.ops.so2_mixing_stack.configs import So2Config
    from tilefuse.ops.so2_mixing_stack.reference import So2Dims
    E, lmax, cf, F = 647000, 3, 32, 2
    d = So2Dims(lmax, cf)
    g = torch.Generator(device="cuda").manual_seed(0)
    g_cur = torch.randn(F, E, d.row, generator=g, device="cuda")
    gz = torch.randn(F, E, d.row, generator=g, device="cuda")
    w1t = (torch.randn(F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5).transpose(-1, -2).contiguous()
    out = torch.empty_like(g_cur)
    cfg = So2Config(64, 64, cf, 4, 2)
    for v in (None,) + VARIANTS[1:3]:
        with variant(v):
            launch._gemm(K.BWD, gz, w1t, g_cur, out, d, cfg, k_start=d.m0, k_len=d.m1, n_start=d.m0, n_len=d.m1)
    torch.cuda.synchronize()


def compile_report():
    """sm_90 registers, stack and shared memory of the shipped and the persistent kernel, exact
    BWD and FWD_GATED at the tiles timed here (benchmarks/compile_report.py's compile)."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from compile_report import _cuobjdump, compile_kernel
    import re
    ints = ["F", "E", "ROW", "K_START", "K_LEN", "N_START", "N_LEN", "CF", "LG", "w_focus_stride", "w_stride_k",
            "w_stride_n"]
    ptrs = ["a_ptr", "w_ptr", "wlo_ptr", "wscale_ptr", "res_ptr", "out_ptr", "z_ptr", "sigma_ptr", "alpha_ptr"]
    for fn, cap in ((K.so2_gemm_kernel, None), (so2_gemm_persistent_kernel, None), (so2_gemm_flat_kernel, None),
                    (so2_gemm_persistent_kernel, 128), (so2_gemm_flat_kernel, 128)):
        for mode in (K.BWD, K.FWD_GATED, K.BWD_HEAD):
            for bm, bn, bk, warps, stages in ((64, 64, 32, 4, 2), (32, 128, 32, 4, 2), (64, 64, 64, 4, 2)):
                options = dict(num_stages=stages, **({"maxnreg": cap} if cap else {}))
                ce = dict(MODE=mode, APPLY_ALPHA=True, DOT_PRECISION="ieee", BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
                sig = {**{p: "*fp32" for p in ptrs}, **{i: "i32" for i in ints}, **{c: "constexpr" for c in ce}}
                sig["w_stride_n"] = "constexpr"
                ce["w_stride_n"] = 1
                c = compile_kernel(fn, sig, ce, ptrs + ["ROW", "w_focus_stride", "w_stride_k"], 90, warps, **options)
                regs, stack = re.search(r"REG:(\d+) STACK:(\d+)", _cuobjdump(c, "--dump-resource-usage")).groups()
                print(json.dumps({"kernel": fn.__name__, "maxnreg": cap, "mode": int(mode), "tile": f"{bm}x{bn}x{bk} w{warps} s{stages}",
                                  "regs": int(regs), "stack": int(stack), "smem": c.metadata.shared}), flush=True)


def main():
    if "--compile" in sys.argv:
        compile_report()
        return 0
    if "--ncu" in sys.argv:
        ncu_launches()
        return 0
    print(f"# {torch.cuda.get_device_name()}; torch {torch.__version__}; triton {triton.__version__}", flush=True)
    ok = True
    if "--modes" in sys.argv:
        ok &= bitwise_every_mode(programs=(1, 7, 40, None))
    if "--pairs" in sys.argv:
        ok &= gemm_pairs(rounds=7)
    if "--step" in sys.argv:
        ok &= whole_step(rounds=5, programs=VARIANTS)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
