"""fp8_block's weight gradients: source variants of grouped_wgrad_kernel against the shipped one
(prepared in the session of runs 1-6, not run: its device time was spent).

Why: the fp8 wgrad waits for each 128-token chunk's wgmma before it rescales it (run 1), and
its sm_90 build (triton 3.6, the 128x64 TMA tile on 4 warps) takes 255 registers and a
32-byte stack, so an SM holds two programs. Compiled here (triton 3.6, sm_90):
- the shipped kernel: 255 registers, stack 32; capped at 168 registers (maxnreg, three
  programs an SM): stack 224;
- with the (at most two) 128-token blocks an expert shares with a neighbour read through the
  descriptors too, their rows outside the expert zeroed in registers ("masked blocks through
  TMA"; shipped: int64 pointer tiles): stack 0; capped at 168: stack 24;
- with the counts before the expert summed as vectors (as the 16-bit wgrad does) besides:
  the same.
So the question for the GPU: does the masked-TMA variant at 168 registers (three programs an
SM) run the wgrads faster, with balanced counts (no shared blocks) and with skewed ones? Each
variant's outputs must be bitwise the shipped kernel's (the same products in the same order;
checked before timing).

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-r/run7_wgrad_variants.py [--shapes 1,2,3]
    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-r/run7_wgrad_variants.py --tiny   # CPU smoke
"""
import argparse
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import torch

TINY = "--tiny" in sys.argv
if TINY and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/: grouped_profile's helpers
from grouped_profile import SHAPES, gemm_flop, table  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import kernels, launch, recipes  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.configs import heuristic  # noqa: E402
from tilefuse.utils import cdiv  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

SCAN = "start, count = _expert_rows(counts_ptr, expert, E, RECIPE != RECIPE_FP8_BLOCK)"
VECTOR = "start, count = _expert_rows(counts_ptr, expert, E, True)"
MASKED_HELPER_ANCHOR = "@triton.jit\ndef grouped_wgrad_kernel("
MASKED_HELPER = '''@triton.jit
def wgrad_fp8_masked_tma(acc, a_desc, b_desc, a_scale, b_scale, row_n, row_m, blk, start, count,
                         BLOCK_K: tl.constexpr):
    """acc + the fp8_block wgrad product of the 128-token block ``blk`` the expert shares with a
    neighbour: both copies' tiles through their descriptors, the rows outside [start, start +
    count) zeroed in registers."""
    t = blk * BLOCK_K + tl.arange(0, BLOCK_K)
    tmask = (t >= start) & (t < start + count)
    at = a_desc.load([row_n, blk * BLOCK_K]).to(tl.uint8, bitcast=True)
    b = b_desc.load([row_m, blk * BLOCK_K]).to(tl.uint8, bitcast=True)
    at = tl.where(tmask[None, :], at, 0).to(tl.float8e4nv, bitcast=True)
    b = tl.where(tmask[None, :], b, 0).to(tl.float8e4nv, bitcast=True).T
    return fp8_scaled_dot(acc, at, b, a_scale, b_scale)


'''
HEAD_OLD = """            acc = wgrad_fp8_step(acc, a_ptr, b_ptr, a_scale, b_scale, n64, m64, nmask, mmask, head * BLOCK_K, start,
                                 count, lda, ldb, True, BLOCK_K)"""
HEAD_NEW = """            if TMA:
                acc = wgrad_fp8_masked_tma(acc, a_desc, b_desc, a_scale, b_scale, tile_n * BLOCK_N, tile_m * BLOCK_M,
                                           head, start, count, BLOCK_K)
            else:
                acc = wgrad_fp8_step(acc, a_ptr, b_ptr, a_scale, b_scale, n64, m64, nmask, mmask, head * BLOCK_K,
                                     start, count, lda, ldb, True, BLOCK_K)"""
TAIL_OLD = """            acc = wgrad_fp8_step(acc, a_ptr, b_ptr, a_scale, b_scale, n64, m64, nmask, mmask, end_full * BLOCK_K,
                                 start, count, lda, ldb, True, BLOCK_K)"""
TAIL_NEW = """            if TMA:
                acc = wgrad_fp8_masked_tma(acc, a_desc, b_desc, a_scale, b_scale, tile_n * BLOCK_N, tile_m * BLOCK_M,
                                           end_full, start, count, BLOCK_K)
            else:
                acc = wgrad_fp8_step(acc, a_ptr, b_ptr, a_scale, b_scale, n64, m64, nmask, mmask,
                                     end_full * BLOCK_K, start, count, lda, ldb, True, BLOCK_K)"""
MASKED = [(MASKED_HELPER_ANCHOR, MASKED_HELPER + MASKED_HELPER_ANCHOR), (HEAD_OLD, HEAD_NEW), (TAIL_OLD, TAIL_NEW)]

VARIANTS = {"shipped": ([], None), "masked blocks through TMA": (MASKED, None),
            "masked blocks through TMA, 168 registers": (MASKED, 168),
            "masked blocks through TMA, vector counts, 168 registers": (MASKED + [(SCAN, VECTOR)], 168),
            "shipped, 168 registers": ([], 168)}


def load(edits, workdir):
    """kernels.py with ``edits`` applied, imported as a module of tilefuse.ops.grouped_glu_mlp."""
    src = Path(kernels.__file__).read_text()
    for old, new in edits:
        assert old in src, "the shipped grouped_wgrad_kernel changed: this probe's edits no longer apply"
        src = src.replace(old, new)
    path = Path(workdir) / f"kernels_variant_{abs(hash(src))}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"tilefuse.ops.grouped_glu_mlp.{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "tilefuse.ops.grouped_glu_mlp"
    spec.loader.exec_module(mod)
    return mod


def wgrad(kernel, maxnreg, a, b, c, counts, T, wcfg):
    """launch._wgrad's fp8_block launch of ``kernel`` (maxnreg: the register cap, CUDA only)."""
    E, n_dim, m_dim = c.shape
    plan = launch.wgrad_tma_plan(a.data, b.data, wcfg, "fp8_block")
    a_desc, b_desc = plan if plan is not None else (None, None)
    extra = {"maxnreg": maxnreg} if maxnreg and DEVICE == "cuda" else {}
    kernel[(E * cdiv(n_dim, wcfg.block_n) * cdiv(m_dim, wcfg.block_m),)](
        a.data, b.data, c, counts, a.scales, b.scales, c, a_desc, b_desc, T, n_dim, m_dim, E,
        a.data.stride(0), b.data.stride(0), a.scale_ld, b.scale_ld,
        IEEE=False, RECIPE=recipes.RECIPE_IDS["fp8_block"], TMA=plan is not None, BLOCK_N=wcfg.block_n,
        BLOCK_M=wcfg.block_m, BLOCK_K=wcfg.block_k, GROUP_N=launch.WGRAD_GROUP_N, num_warps=wcfg.num_warps,
        num_stages=wcfg.num_stages, **extra)
    return c


def skewed(E, T):
    """E counts summing to T, none a multiple of 128: every expert shares blocks with its neighbours."""
    w = torch.linspace(0.5, 1.5, E)
    counts = (w / w.sum() * T).floor().long()
    counts[: E // 2] += 3
    counts[-1] += T - int(counts.sum())
    return counts.tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1,2,3")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    wcfg = heuristic("wgrad", 2, "fp8_block")
    workdir = tempfile.mkdtemp()
    mods = {name: (load(edits, workdir).grouped_wgrad_kernel, cap) for name, (edits, cap) in VARIANTS.items()}
    shapes = [(2, 600, 256, 128)] if args.tiny else [SHAPES[int(s)] for s in args.shapes.split(",")]
    for E, T, H, F in shapes:
        for label, counts in (("balanced", [T // E] * E), ("skewed", skewed(E, T))):
            g = torch.Generator().manual_seed(0)
            dz, x = (torch.randn(T, n, generator=g).to(DEVICE, torch.bfloat16) for n in (2 * F, H))
            a, b = recipes.quantize_cols("fp8_block", dz), recipes.quantize_cols("fp8_block", x)
            c = torch.tensor(counts, dtype=torch.int32, device=DEVICE)
            outs = {name: wgrad(k, cap, a, b, torch.full((E, 2 * F, H), float("nan"), device=DEVICE,
                                                            dtype=torch.bfloat16), c, T, wcfg)
                    for name, (k, cap) in mods.items()}
            ref = outs["shipped"]
            print(f"\n## E {E} T {T} H {H} F {F}, {label} counts: dW1 (dz^T x)")
            for name, out in outs.items():
                print(f"  {name}: bitwise equal to the shipped kernel: {torch.equal(out, ref)}")
            dw = torch.empty((E, 2 * F, H), device=DEVICE, dtype=torch.bfloat16)
            table("dW1", {name: (lambda k=k, cap=cap: wgrad(k, cap, a, b, dw, c, T, wcfg))
                          for name, (k, cap) in mods.items()}, gemm_flop(T, 2 * F, H), 2 if args.tiny else 7)


if __name__ == "__main__":
    main()
