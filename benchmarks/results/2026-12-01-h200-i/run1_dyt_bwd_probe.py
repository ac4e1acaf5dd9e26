"""Run 1 probe: why does the dyt backward (channels-last, cols kernel) stay far below the copy
ceiling for bf16, and does issuing the next row block's loads before the current block's math
(register double-buffering) or Triton's loop pipeliner fix it?

    PYTHONPATH=src python3 run1_dyt_bwd_probe.py            # timing table, bitwise checks
    PYTHONPATH=src python3 run1_dyt_bwd_probe.py --ncu 4096 # one launch of each kernel and the forward, for ncu

Variants, all with the table's config for the key (tile, warps, programs per SM):
- base: tilefuse's dyt_bwd_cols_kernel, as shipped;
- prefetch: the same arithmetic, the next row block's x and dy loaded at the top of the loop;
- stages: the same loop as base under tl.range(num_stages=3).
prefetch and stages must give bitwise base's dx and partials (the same sums in the same order).
Times: triton.testing.do_bench medians of the main kernel alone; GB/s counts x, dy and dx.
"""
import argparse
import sys

import torch
import triton
import triton.language as tl

from tilefuse.ops.dyt import kernels as K
from tilefuse.ops.dyt import launch as L
from tilefuse.ops.dyt.configs import DyTConfig
from tilefuse.device import num_sms
from tilefuse.utils import cdiv


@triton.jit
def probe_bwd_prefetch(dy_ptr, x_ptr, dx_ptr, alpha_ptr, weight_ptr,
                       dweight_part_ptr, dbias_part_ptr, dalpha_part_ptr,
                       n_rows, n_cols, n_groups,
                       HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    n_col_blocks = tl.cdiv(n_cols, BLOCK_N)
    col_block = pid % n_col_blocks
    group = pid // n_col_blocks
    cols = col_block * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    alpha = tl.load(alpha_ptr).to(tl.float32)
    w = tl.load(weight_ptr + cols[None, :], mask=col_mask[None, :], other=0.0).to(tl.float32)
    dweight_acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    dbias_acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    dalpha_acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    n_row_blocks = tl.cdiv(n_rows, BLOCK_M)
    n_iter = tl.cdiv(n_row_blocks - group, n_groups)
    tile = tl.arange(0, BLOCK_M)[:, None] * n_cols + cols[None, :]
    rows = group * BLOCK_M + tl.arange(0, BLOCK_M)
    base = group.to(tl.int64) * BLOCK_M * n_cols
    step = n_groups.to(tl.int64) * BLOCK_M * n_cols
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + base + tile, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + base + tile, mask=mask, other=0.0)
    for i in range(0, n_iter):
        rows_n = rows + n_groups * BLOCK_M
        mask_n = (rows_n < n_rows)[:, None] & col_mask[None, :]
        base_n = base + step
        x_n = tl.load(x_ptr + base_n + tile, mask=mask_n, other=0.0)
        dy_n = tl.load(dy_ptr + base_n + tile, mask=mask_n, other=0.0)
        xf = x.to(tl.float32)
        dyf = dy.to(tl.float32)
        t = K.tanh_f32(tl.where(mask, alpha * xf, 0.0))
        g = dyf * w * (1.0 - t * t)
        tl.store(dx_ptr + base + tile, K.to_output(alpha * g, dx_ptr), mask=mask)
        dweight_acc += dyf * t
        dalpha_acc += xf * g
        if HAS_BIAS:
            dbias_acc += dyf
        x, dy, rows, mask, base = x_n, dy_n, rows_n, mask_n, base_n
    part = group.to(tl.int64) * n_cols + cols
    tl.store(dweight_part_ptr + part, tl.sum(dweight_acc, axis=0), mask=col_mask)
    if HAS_BIAS:
        tl.store(dbias_part_ptr + part, tl.sum(dbias_acc, axis=0), mask=col_mask)
    tl.store(dalpha_part_ptr + pid, tl.sum(tl.sum(dalpha_acc, axis=1), axis=0))


@triton.jit
def probe_bwd_stages(dy_ptr, x_ptr, dx_ptr, alpha_ptr, weight_ptr,
                     dweight_part_ptr, dbias_part_ptr, dalpha_part_ptr,
                     n_rows, n_cols, n_groups,
                     HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    n_col_blocks = tl.cdiv(n_cols, BLOCK_N)
    col_block = pid % n_col_blocks
    group = pid // n_col_blocks
    cols = col_block * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    alpha = tl.load(alpha_ptr).to(tl.float32)
    w = tl.load(weight_ptr + cols[None, :], mask=col_mask[None, :], other=0.0).to(tl.float32)
    dweight_acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    dbias_acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    dalpha_acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    n_row_blocks = tl.cdiv(n_rows, BLOCK_M)
    for i in tl.range(0, tl.cdiv(n_row_blocks - group, n_groups), num_stages=3):
        row_block = group.to(tl.int64) + i * n_groups
        rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
        mask = (rows < n_rows)[:, None] & col_mask[None, :]
        offsets = rows[:, None] * n_cols + cols[None, :]
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        t = K.tanh_f32(tl.where(mask, alpha * x, 0.0))
        g = dy * w * (1.0 - t * t)
        tl.store(dx_ptr + offsets, K.to_output(alpha * g, dx_ptr), mask=mask)
        dweight_acc += dy * t
        dalpha_acc += x * g
        if HAS_BIAS:
            dbias_acc += dy
    part = group.to(tl.int64) * n_cols + cols
    tl.store(dweight_part_ptr + part, tl.sum(dweight_acc, axis=0), mask=col_mask)
    if HAS_BIAS:
        tl.store(dbias_part_ptr + part, tl.sum(dbias_acc, axis=0), mask=col_mask)
    tl.store(dalpha_part_ptr + pid, tl.sum(tl.sum(dalpha_acc, axis=1), axis=0))


KERNELS = {"base": K.dyt_bwd_cols_kernel, "prefetch": probe_bwd_prefetch, "stages": probe_bwd_stages}


def setup(n_cols, dtype, numel, cfg):
    n_rows = numel // n_cols
    dev = "cuda"
    x = torch.randn(n_rows, n_cols, device=dev, dtype=torch.float32).mul_(2).to(dtype)
    dy = torch.randn(n_rows, n_cols, device=dev, dtype=dtype)
    alpha = torch.tensor([0.7], device=dev)
    w = torch.randn(n_cols, device=dev)
    n_col_blocks = cdiv(n_cols, cfg.block_n)
    n_groups = max(1, min(cdiv(n_rows, cfg.block_m), cfg.programs_per_sm * num_sms(x.device) // n_col_blocks))
    return x, dy, alpha, w, n_rows, n_groups, n_col_blocks


def launcher(name, cfg, n_cols, dtype, numel):
    x, dy, alpha, w, n_rows, n_groups, ncb = setup(n_cols, dtype, numel, cfg)
    dx = torch.full_like(x, float("nan"))
    wp = torch.full((n_groups * n_cols,), float("nan"), device=x.device)
    bp = torch.full_like(wp, float("nan"))
    ap = torch.full((n_groups * ncb,), float("nan"), device=x.device)
    kern = KERNELS[name]

    def run():
        kern[(n_groups * ncb,)](dy, x, dx, alpha, w, wp, bp, ap, n_rows, n_cols, n_groups,
                                HAS_BIAS=True, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                                num_warps=cfg.num_warps)
    return run, (dx, wp, bp, ap), x.numel() * x.element_size() * 3


def table_config(n_cols, dtype, numel):
    x = torch.empty(numel // n_cols, n_cols, device="cuda", dtype=dtype)
    return L.pick_config(L.problem_for(x, True, "bwd"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ncu", type=int, default=0, help="width: one launch of each kernel (bf16)")
    ap.add_argument("--numel", type=int, default=2 ** 26)
    ap.add_argument("--widths", default="16,32,64,128,256,512,1024,2048,4096,8192")
    args = ap.parse_args()
    torch.manual_seed(0)
    if args.ncu:
        cfg = table_config(args.ncu, torch.bfloat16, args.numel)
        print("config", cfg.name)
        for name in KERNELS:
            run, outs, _ = launcher(name, cfg, args.ncu, torch.bfloat16, args.numel)
            run()
        x = torch.randn(args.numel // args.ncu, args.ncu, device="cuda").to(torch.bfloat16)
        L.forward(x, torch.tensor([0.7], device="cuda"), torch.randn(args.ncu, device="cuda"), None, True)
        torch.cuda.synchronize()
        return
    c = torch.empty(args.numel, device="cuda", dtype=torch.bfloat16)
    c2 = torch.empty_like(c)
    t_copy16 = triton.testing.do_bench(lambda: c2.copy_(c), rep=100)
    c = torch.empty(args.numel, device="cuda", dtype=torch.float32)
    c2 = torch.empty_like(c)
    t_copy32 = triton.testing.do_bench(lambda: c2.copy_(c), rep=100)
    del c, c2
    copy = {torch.bfloat16: 2 * args.numel * 2 / t_copy16 / 1e6, torch.float32: 2 * args.numel * 4 / t_copy32 / 1e6}
    print(f"copy ceiling GB/s: bf16 {copy[torch.bfloat16]:.0f}, fp32 {copy[torch.float32]:.0f}")
    print("| dtype | width | config | variant | us | GB/s | of copy | vs base | bitwise |")
    print("|---|---|---|---|---|---|---|---|---|")
    for dtype in (torch.bfloat16, torch.float32):
        for n_cols in [int(v) for v in args.widths.split(",")]:
            cfg = table_config(n_cols, dtype, args.numel)
            cfgs = [cfg]
            if dtype == torch.bfloat16:
                for tile, nw, pps in ((4096, 8, 2), (2048, 4, 4), (8192, 16, 2)):
                    bn = min(triton.next_power_of_2(n_cols), tile)
                    alt = DyTConfig(max(1, tile // bn), bn, nw, pps)
                    if alt not in cfgs:
                        cfgs.append(alt)
            for ci, cf in enumerate(cfgs):
                res = {}
                for name in KERNELS:
                    if ci > 0 and name == "stages":
                        continue
                    torch.manual_seed(n_cols)
                    run, outs, nbytes = launcher(name, cf, n_cols, dtype, args.numel)
                    try:
                        run()
                        torch.cuda.synchronize()
                        t = triton.testing.do_bench(run, rep=60) * 1e3
                    except Exception as e:  # noqa: BLE001
                        print(f"| {dtype} | {n_cols} | {cf.name} | {name} | failed: {type(e).__name__}: {str(e)[:80]} |")
                        continue
                    res[name] = (t, [o.clone() for o in outs])
                    bt = res["base"][0] if "base" in res else float("nan")
                    same = all(torch.equal(a.nan_to_num(1e30), b.nan_to_num(1e30))
                               for a, b in zip(res["base"][1], res[name][1])) if "base" in res else "-"
                    gbs = nbytes / t / 1e3
                    print(f"| {str(dtype)[6:]} | {n_cols} | {cf.name}{' (table)' if ci == 0 else ''} | {name} | {t:.1f} | "
                          f"{gbs:.0f} | {gbs / copy[dtype]:.1%} | {bt / t:.3f} | {same} |", flush=True)
                del res


if __name__ == "__main__":
    sys.exit(main())
