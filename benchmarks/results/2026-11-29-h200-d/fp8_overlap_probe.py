"""Compile-only probe (no GPU): can Triton overlap an fp8 block-scaled GEMM's per-chunk fp32
promotion (``acc += dot(a8, b8) * sa * sb``) with the next chunk's tensor-core MMA on sm_90?

    python benchmarks/results/2026-11-29-h200-d/fp8_overlap_probe.py

(Written as benchmarks/fp8_overlap_probe.py; moved here with the run that needed it. It
imports ``compile_kernel`` and ``summarize`` from benchmarks/compile_report.py.)

Two formulations of a 128x128x128 fp8 GEMM with per-K-chunk row and column scales, compiled for
sm_90 with this Triton's bundled toolchain:
1. ``tl.range(..., warp_specialize=True)`` over TMA tensor descriptors (Triton's automatic warp
   specialization, which would put loads, MMAs and the promotion in separate warp groups);
2. a lagged loop that issues chunk k's dot before promoting chunk k-1's result.
It prints, per variant, the warp-specialized regions, the MMA waits' ``pendings`` (0: each MMA
is waited on before anything else runs) and compile_report's summary (registers, stack, ...).
"""
import re
import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/
from compile_report import compile_kernel, summarize  # noqa: E402


@triton.jit
def fp8_ws(a_desc, b_desc, c_ptr, sa_ptr, sb_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
           WS: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in tl.range(0, K // BK, warp_specialize=WS, num_stages=3):
        a = a_desc.load([pid_m * BM, k * BK])
        b = b_desc.load([pid_n * BN, k * BK])
        sa = tl.load(sa_ptr + k * M + rows)
        sb = tl.load(sb_ptr + k * N + cols)
        acc += tl.dot(a, b.T) * (sa[:, None] * sb[None, :])
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.bfloat16))


@triton.jit
def fp8_lagged(a_ptr, b_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K, lda, ldb, BM: tl.constexpr, BN: tl.constexpr,
               BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    kk = tl.arange(0, BK)
    ap = a_ptr.to(tl.pointer_type(tl.float8e4nv), bitcast=True)
    bp = b_ptr.to(tl.pointer_type(tl.float8e4nv), bitcast=True)
    acc = tl.zeros((BM, BN), tl.float32)
    d_prev = tl.dot(tl.load(ap + rows[:, None] * lda + kk[None, :]), tl.load(bp + cols[None, :] * ldb + kk[:, None]))
    s_prev = tl.load(sa_ptr + rows)[:, None] * tl.load(sb_ptr + cols)[None, :]
    for k in range(1, K // BK):
        a = tl.load(ap + rows[:, None] * lda + (k * BK + kk)[None, :])
        b = tl.load(bp + cols[None, :] * ldb + (k * BK + kk)[:, None])
        s = tl.load(sa_ptr + k * M + rows)[:, None] * tl.load(sb_ptr + k * N + cols)[None, :]
        d = tl.dot(a, b)
        acc += d_prev * s_prev
        d_prev = d
        s_prev = s
    acc += d_prev * s_prev
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.bfloat16))


def report(name, fn, sig, constexprs, divisible, warps):
    c = compile_kernel(fn, {**sig, **{k: "constexpr" for k in constexprs}}, constexprs, divisible, 90, warps)
    regions = len(re.findall("ttg.warp_specialize", c.asm["ttgir"]))
    pendings = re.findall(r"warp_group_dot_wait[^\n]*pendings = (\d+)", c.asm["ttgir"])
    print(f"{name:36s} warp_specialize regions {regions}, MMA waits pendings {pendings} | {summarize(c)}")


def main():
    print(f"triton {triton.__version__}, sm_90")
    scalars = {"M": "i32", "N": "i32", "K": "i32"}
    ws_sig = {"a_desc": "tensordesc<fp8e4nv[128, 128]>", "b_desc": "tensordesc<fp8e4nv[128, 128]>",
              "c_ptr": "*bf16", "sa_ptr": "*fp32", "sb_ptr": "*fp32", **scalars}
    for ws in (False, True):
        report(f"TMA descriptors, warp_specialize={ws}", fp8_ws, ws_sig,
               {"BM": 128, "BN": 128, "BK": 128, "WS": ws}, ["c_ptr", "sa_ptr", "sb_ptr", "M", "N", "K"], 8)
    lag_sig = {"a_ptr": "*u8", "b_ptr": "*u8", "c_ptr": "*bf16", "sa_ptr": "*fp32", "sb_ptr": "*fp32", **scalars,
               "lda": "i32", "ldb": "i32"}
    report("lagged promotion, 128x128, 8 warps", fp8_lagged, lag_sig, {"BM": 128, "BN": 128, "BK": 128},
           list(lag_sig), 8)


if __name__ == "__main__":
    main()
