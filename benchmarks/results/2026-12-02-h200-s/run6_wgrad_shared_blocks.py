"""fp8_block's wgrad with routed counts: run 2 found the fp8 step 1.12-1.27x slower with routed
counts than with balanced ones (bf16 1.03-1.10x), and 2026-12-02-h200-r run 7 put it in the
wgrad (dW1 alone 0.737 -> 1.450 ms at shape 3): the (at most two) 128-token blocks an expert
shares with its neighbours run after the pipelined loop, each a TMA load, a register pass that
zeroes the other expert's tokens in both operands, then the dot, with nothing overlapping.
Source variants of the shipped kernel (loaded as modules, as in -r run 7):

- "pair": the head and tail blocks' loads issued together, then the two dots in the shipped
  order (the same products in the same order: bitwise the shipped kernel);
- "A only": the other expert's tokens zeroed in the A tile (dz^T / dy^T) only; B (x, h) goes
  from shared memory to the tensor cores as in the loop. Bitwise the shipped kernel for finite
  data (0 * finite = 0); a NaN code in a neighbour's B tokens would reach this expert;
- "A only, pair": both.

Each variant checked bitwise against the shipped kernel (finite random data), then dW1 timed,
balanced and skewed counts, the spec's three shapes.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-s/run6_wgrad_shared_blocks.py [--tiny]
"""
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

TINY = "--tiny" in sys.argv
import torch  # noqa: E402

if TINY and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/: grouped_profile's helpers
from grouped_profile import SHAPES, gemm_flop, table  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import kernels, launch, recipes  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.configs import heuristic  # noqa: E402
from tilefuse.utils import cdiv  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

A_ONLY = ("""    b = b_desc.load([row_m, blk * BLOCK_K]).to(tl.uint8, bitcast=True)
    at = tl.where(tmask[None, :], at, 0).to(tl.float8e4nv, bitcast=True)
    b = tl.where(tmask[None, :], b, 0).to(tl.float8e4nv, bitcast=True).T
""", """    b = b_desc.load([row_m, blk * BLOCK_K]).T
    at = tl.where(tmask[None, :], at, 0).to(tl.float8e4nv, bitcast=True)
""")
PAIR_HELPER_ANCHOR = "@triton.jit\ndef grouped_wgrad_kernel("
PAIR_HELPER = '''@triton.jit
def wgrad_fp8_masked_tma_pair(acc, a_desc, b_desc, sa0, sb0, sa1, sb1, row_n, row_m, blk0, blk1, start, count,
                              BLOCK_K: tl.constexpr):
    """wgrad_fp8_masked_tma of blk0 then blk1, the four tiles loaded before either dot."""
    t0 = blk0 * BLOCK_K + tl.arange(0, BLOCK_K)
    t1 = blk1 * BLOCK_K + tl.arange(0, BLOCK_K)
    m0 = (t0 >= start) & (t0 < start + count)
    m1 = (t1 >= start) & (t1 < start + count)
    at0 = a_desc.load([row_n, blk0 * BLOCK_K]).to(tl.uint8, bitcast=True)
    b0 = b_desc.load([row_m, blk0 * BLOCK_K]).to(tl.uint8, bitcast=True)
    at1 = a_desc.load([row_n, blk1 * BLOCK_K]).to(tl.uint8, bitcast=True)
    b1 = b_desc.load([row_m, blk1 * BLOCK_K]).to(tl.uint8, bitcast=True)
    at0 = tl.where(m0[None, :], at0, 0).to(tl.float8e4nv, bitcast=True)
    b0 = tl.where(m0[None, :], b0, 0).to(tl.float8e4nv, bitcast=True).T
    at1 = tl.where(m1[None, :], at1, 0).to(tl.float8e4nv, bitcast=True)
    b1 = tl.where(m1[None, :], b1, 0).to(tl.float8e4nv, bitcast=True).T
    acc = fp8_scaled_dot(acc, at0, b0, sa0, sb0)
    return fp8_scaled_dot(acc, at1, b1, sa1, sb1)


'''
PAIR_HELPER_A_ONLY = PAIR_HELPER.replace(
    "b0 = b_desc.load([row_m, blk0 * BLOCK_K]).to(tl.uint8, bitcast=True)", "b0 = b_desc.load([row_m, blk0 * BLOCK_K]).T"
).replace("b1 = b_desc.load([row_m, blk1 * BLOCK_K]).to(tl.uint8, bitcast=True)", "b1 = b_desc.load([row_m, blk1 * BLOCK_K]).T"
          ).replace("    b0 = tl.where(m0[None, :], b0, 0).to(tl.float8e4nv, bitcast=True).T\n", ""
                    ).replace("    b1 = tl.where(m1[None, :], b1, 0).to(tl.float8e4nv, bitcast=True).T\n", "")
HEAD_START = "        head = start // BLOCK_K\n        if (count > 0) & (head < first_full):"
PAIR_BRANCH = """        head = start // BLOCK_K
        has_head = (count > 0) & (head < first_full)
        has_tail = (count > 0) & (end_full * BLOCK_K < start + count) & (end_full >= first_full)
        if TMA & has_head & has_tail:
            sa0, sb0 = wgrad_fp8_scales(a_scale_ptr, b_scale_ptr, n64, m64, nmask, mmask, head, a_scale_ld, b_scale_ld)
            sa1, sb1 = wgrad_fp8_scales(a_scale_ptr, b_scale_ptr, n64, m64, nmask, mmask, end_full, a_scale_ld,
                                        b_scale_ld)
            acc = wgrad_fp8_masked_tma_pair(acc, a_desc, b_desc, sa0, sb0, sa1, sb1, tile_n * BLOCK_N,
                                            tile_m * BLOCK_M, head, end_full, start, count, BLOCK_K)
            has_head = False
            has_tail = False
        if has_head:"""
TAIL_COND = "        if (count > 0) & (end_full * BLOCK_K < start + count) & (end_full >= first_full):"


def pair_edits(helper):
    return [(PAIR_HELPER_ANCHOR, helper + PAIR_HELPER_ANCHOR), (HEAD_START, PAIR_BRANCH), (TAIL_COND, "        if has_tail:")]


VARIANTS = {"shipped": [], "pair": pair_edits(PAIR_HELPER), "A only": [A_ONLY],
            "A only, pair": [A_ONLY] + pair_edits(PAIR_HELPER_A_ONLY)}


def load(edits, workdir):
    """kernels.py with ``edits`` applied, imported as a module of tilefuse.ops.grouped_glu_mlp."""
    src = Path(kernels.__file__).read_text()
    for old, new in edits:
        assert src.count(old) == 1, "the shipped grouped_wgrad_kernel changed: this probe's edits no longer apply"
        src = src.replace(old, new)
    path = Path(workdir) / f"kernels_variant_{abs(hash(src))}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"tilefuse.ops.grouped_glu_mlp.{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "tilefuse.ops.grouped_glu_mlp"
    spec.loader.exec_module(mod)
    return mod


def wgrad(kernel, a, b, c, counts, T, wcfg):
    """launch._wgrad's fp8_block launch of ``kernel``."""
    E, n_dim, m_dim = c.shape
    plan = launch.wgrad_tma_plan(a.data, b.data, wcfg, "fp8_block")
    a_desc, b_desc = plan if plan is not None else (None, None)
    kernel[(E * cdiv(n_dim, wcfg.block_n) * cdiv(m_dim, wcfg.block_m),)](
        a.data, b.data, c, counts, a.scales, b.scales, c, a_desc, b_desc, T, n_dim, m_dim,
        a.data.stride(0), b.data.stride(0), a.scale_ld, b.scale_ld,
        IEEE=False, RECIPE=recipes.RECIPE_IDS["fp8_block"], TMA=plan is not None, BLOCK_N=wcfg.block_n,
        BLOCK_M=wcfg.block_m, BLOCK_K=wcfg.block_k, GROUP_N=launch.WGRAD_GROUP_N, num_warps=wcfg.num_warps,
        num_stages=wcfg.num_stages, maxnreg=wcfg.maxnreg if plan is not None else None)
    return c


def skewed(E, T):
    """E counts summing to T, none a multiple of 128: every expert shares blocks with its neighbours."""
    w = torch.linspace(0.5, 1.5, E)
    counts = (w / w.sum() * T).floor().long()
    counts[: E // 2] += 3
    counts[-1] += T - int(counts.sum())
    return counts.tolist()


def main():
    wcfg = heuristic("wgrad", 2, "fp8_block")
    workdir = tempfile.mkdtemp()
    mods = {name: load(edits, workdir).grouped_wgrad_kernel for name, edits in VARIANTS.items()}
    shapes = [(3, 700, 256, 128)] if TINY else [SHAPES[s] for s in (1, 2, 3)]
    for E, T, H, F in shapes:
        for label, counts in (("balanced", [T // E] * E), ("skewed", skewed(E, T))):
            g = torch.Generator().manual_seed(0)
            dz, x = (torch.randn(T, n, generator=g).to(DEVICE, torch.bfloat16) for n in (2 * F, H))
            a, b = recipes.quantize_cols("fp8_block", dz), recipes.quantize_cols("fp8_block", x)
            c = torch.tensor(counts, dtype=torch.int32, device=DEVICE)
            outs = {name: wgrad(k, a, b, torch.full((E, 2 * F, H), float("nan"), device=DEVICE,
                                                    dtype=torch.bfloat16), c, T, wcfg)
                    for name, k in mods.items()}
            print(f"\n## E {E} T {T} H {H} F {F}, {label} counts: dW1 (dz^T x)")
            for name, out in outs.items():
                print(f"  {name}: bitwise equal to the shipped kernel: {torch.equal(out, outs['shipped'])}")
            dw = torch.empty((E, 2 * F, H), device=DEVICE, dtype=torch.bfloat16)
            table("dW1", {name: (lambda k=k: wgrad(k, a, b, dw, c, T, wcfg)) for name, k in mods.items()},
                  gemm_flop(T, 2 * F, H), 2 if TINY else 7)


if __name__ == "__main__":
    main()
