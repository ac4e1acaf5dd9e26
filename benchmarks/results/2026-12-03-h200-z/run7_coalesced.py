"""Run 7 (issue 16): the ws store GEMM's epilogue through a coalescing layout.

The ws kernel stores each consumer's 64x128 tile straight from wgmma's accumulator layout: a
thread's pairs of columns, 4-byte stores, a warp's store touching 8 rows 16 bytes each (half
sectors). Triton's kernel converts its accumulator to a blocked layout before the store. At the
finer-grained shapes (6-22 chunks a tile) the epilogue is a larger share of a tile.
ws_kernels.fp8_ws_gemm_kernel's COALESCED (an opt-in constexpr for this run) converts the
rounded tile to 8 consecutive columns a thread (16-byte stores). Bitwise against the Triton
launch first (small grouped shapes with skewed and empty experts, bias, few programs), then
fc2 and the fc1 dgrad at the spec's shapes.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-z/run7_coalesced.py
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from grouped_profile import table  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import launch, recipes, ws_kernels  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig, heuristic  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.kernels import EPI_STORE  # noqa: E402

SHAPES = ((8, 16384, 4096, 3584), (64, 32768, 2048, 1408), (128, 65536, 2048, 768))
TMA64 = GemmConfig(64, 128, 128, 4, 3, 2, True)
ok = True
for E, T, N, K, bias in ((4, 1000, 384, 256, False), (5, 777, 256, 384, True), (3, 300, 128, 128, False),
                         (2, 130, 128, 640, True)):
    g = torch.Generator(device="cuda").manual_seed(T)
    counts = [T // 2, 0, T - T // 2 - T // 7, T // 7][:E] + [0] * max(0, E - 4)
    counts[-1] += T - sum(counts)
    counts = torch.tensor(counts, dtype=torch.int32, device="cuda")
    qa = recipes.quantize_rows("fp8_block", torch.randn(T, K, generator=g, device="cuda").bfloat16())
    qw = recipes.quantize_weight("fp8_block", (torch.randn(E, N, K, generator=g, device="cuda") * 0.05).bfloat16())
    probs = torch.rand(T, generator=g, device="cuda")
    b = torch.randn(E, N, generator=g, device="cuda").bfloat16() if bias else None
    want = torch.full((T, N), float("nan"), dtype=torch.bfloat16, device="cuda")
    launch._gemm(EPI_STORE, qa, qw, want, counts, heuristic("fwd", 2, "fp8_block"), K=K, N=N, b_strides=(0, 0, 0),
                 ldc=N, probs=probs, bias=b, recipe="fp8_block")
    for programs in (None, 1, 3):
        got = torch.full_like(want, float("nan"))
        assert ws_kernels.launch(qa, qw, got, counts, N=N, stages=3, probs=probs, bias=b, programs=programs,
                                 coalesced=True)
        same = torch.equal(got.view(torch.int16), want.view(torch.int16))
        ok &= same
        print(f"  E={E} T={T} N={N} K={K} bias={bias} programs={programs}: coalesced bitwise: {same}", flush=True)
for E, T, H, F in SHAPES:
    g = torch.Generator(device="cuda").manual_seed(E)
    counts = torch.full((E,), T // E, device="cuda", dtype=torch.int32)
    for role, K in (("fc2", F), ("fc1 dgrad", 2 * F)):
        qa = recipes.quantize_rows("fp8_block", torch.randn(T, K, generator=g, device="cuda").bfloat16())
        qw = recipes.quantize_weight("fp8_block", (torch.randn(E, H, K, generator=g, device="cuda") * 0.05).bfloat16())
        c = torch.empty(T, H, device="cuda", dtype=torch.bfloat16)
        providers = {
            "triton 64x128 w4 s3 tma": lambda: launch._gemm(EPI_STORE, qa, qw, c, counts, TMA64, K=K, N=H,
                                                            b_strides=(0, 0, 0), ldc=H, recipe="fp8_block"),
            "ws s3 (shipped)": lambda: ws_kernels.launch(qa, qw, c, counts, N=H, stages=3),
            "ws s3 coalesced store": lambda: ws_kernels.launch(qa, qw, c, counts, N=H, stages=3, coalesced=True),
        }
        outs = []
        for fn in providers.values():
            c.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            outs.append(c.clone())
        same = all(torch.equal(o.view(torch.int16), outs[0].view(torch.int16)) for o in outs[1:])
        ok &= same
        print(f"\n## E {E} T {T} H {H} F {F} {role}: every variant bitwise the Triton launch's: {same}", flush=True)
        table(f"{role} (M {T}, N {H}, K {K})", providers, 2 * T * H * K, 7)
        del qa, qw, c, outs
        torch.cuda.empty_cache()
print(f"bitwise: {ok}")
sys.exit(0 if ok else 1)
