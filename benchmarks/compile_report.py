"""What does the compiler make of each tilefuse kernel for a GPU target (no GPU needed)?

Compiles the kernels with this Triton's bundled toolchain for sm_90 (``--arch``), the
arguments specialised the way a launch specialises them (pointers 16-byte aligned, sizes
divisible by 16 where the shape makes them so, unit strides constexpr), and prints one line
per kernel and config:

    regs R stack S smem B local L | ld v4 / v2 / scalar loads | st v4 / v2 | calls C async copies A

(``stack`` > 0: the kernel spills; ``calls``: helpers left un-inlined, which keep a K loop
from being software-pipelined; ``async copies``: the cp.async of a pipelined loop.) Sections
(``--ops``, default all):

- ``dyt``: the forward and the column-partials backward at four tilings, fp32 and bf16 (bf16
  also the persistent prefetching forward, and the backward with PREFETCH at 8 warps);
- ``so2``: the fused backward (both column passes; sigma recomputed and from the sigma pass) at
  Cf 16/32/64, in 3xfp16 at the relay's 3xfp16 tiles (configs.FUSED_FP16X3_TILES are those
  without spills), and the relay's BWD GEMM (exact, and each
  level-3 split at its candidate tiles, configs.py);
- ``grouped``: the grouped GEMM's fc1 + GLU, fc2 dgrad + dGLU and store epilogues, bf16 and
  fp8_block;
- ``quant``: the fp8_block quantizer at the tiles ``quant.launch.FP8_TILES`` holds, for the
  three layouts a grouped_glu_mlp step launches (rows 1x128, columns 128x1 written transposed,
  the 128x128 weight pair), with SASS instructions per element (the count that bounds the
  activation copies: results/2026-11-30-h200-e run 9, results/2026-11-30-h200-f).

Command (any machine, no GPU; the same on the H200 machine):

    PYTHONPATH=src python3 benchmarks/compile_report.py [--ops dyt,so2,grouped,quant] [--arch 90]

Time: about 40 s on one CPU core for every section (triton 3.8; grouped and so2 take most; the
Triton cache makes a second run faster). ``compile_kernel`` and ``summarize`` are imported by
probes in results/ (results/2026-11-29-h200-d/fp8_overlap_probe.py).
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
PTR = {"fp32": "*fp32", "bf16": "*bf16"}


def compile_kernel(fn, sig, constexprs, divisible, arch, num_warps, **options):
    """``fn`` compiled for sm_``arch``: ``sig`` the signature, ``constexprs`` their values,
    ``divisible`` the argument names specialised as multiples of 16."""
    names = fn.arg_names
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in divisible}
    src = ASTSource(fn=fn, signature=sig, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": num_warps, **options})


def _cuobjdump(c, flag: str) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(c.asm["cubin"])
        f.flush()
        return subprocess.run([str(CUOBJDUMP), flag, f.name], capture_output=True, text=True).stdout


def summarize(c) -> str:
    """One line of resource usage and memory-access shape of a compiled kernel."""
    ptx = c.asm["ptx"]
    usage = _cuobjdump(c, "--dump-resource-usage")
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", usage)
    widths = {w: len(re.findall(rf"ld\.global(\.\w+)*\.{w}\b", ptx)) for w in ("v4", "v2")}
    scalar = len(re.findall(r"ld\.global(\.\w+)*\.b(16|32)\b", ptx))
    stores = {w: len(re.findall(rf"st\.global(\.\w+)*\.{w}\b", ptx)) for w in ("v4", "v2")}
    # Calls left after inlining (a helper with a return inside a branch stays a call, and a
    # call in a K loop keeps it from being software-pipelined) and the async copies of a
    # pipelined loop.
    calls = len(re.findall(r"tt\.call", c.asm["ttgir"]))
    copies = len(re.findall("async_copy_global_to_local", c.asm["ttgir"]))
    return (f"regs {m.group(1)} stack {m.group(2)} smem {m.group(3)} local {m.group(4)} | "
            f"ld v4 {widths['v4']} v2 {widths['v2']} scalar {scalar} | st v4 {stores['v4']} v2 {stores['v2']} | "
            f"calls {calls} async copies {copies}")


def sass_per_element(c, elements_per_thread: int, top: int = 8) -> str:
    """SASS instructions of the compiled kernel ``c`` per element a thread handles (a tile's
    static count: the loop body once, which for a tile-per-program kernel is the work of one
    tile), and its most frequent opcodes."""
    ops = collections.Counter(re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", _cuobjdump(c, "-sass")))
    total = sum(ops.values())
    return (f"{total} SASS instructions, {elements_per_thread} elements per thread, "
            f"{total / max(elements_per_thread, 1):.1f} per element; most: "
            + ", ".join(f"{k} {v}" for k, v in ops.most_common(top)))


# --------------------------------------------------------------------------- dyt

def report_dyt(arch: int):
    from tilefuse.ops.dyt import kernels as K
    print("dyt forward and backward (column partials):")
    for dt in ("fp32", "bf16"):
        for bm, bn, warps in ((256, 16, 4), (16, 256, 4), (1, 4096, 4), (1, 4096, 8)):
            sig = {"x_ptr": PTR[dt], "y_ptr": PTR[dt], "alpha_ptr": "*fp32", "weight_ptr": "*fp32",
                   "bias_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32", "n_channels": "i32",
                   "HAS_BIAS": "constexpr", "PARAM_PER_ROW": "constexpr", "BLOCK_M": "constexpr",
                   "BLOCK_N": "constexpr"}
            c = compile_kernel(K.dyt_fwd_kernel, sig, {"HAS_BIAS": True, "PARAM_PER_ROW": False,
                               "BLOCK_M": bm, "BLOCK_N": bn},
                               ["x_ptr", "y_ptr", "weight_ptr", "bias_ptr", "n_cols", "n_channels"], arch, warps)
            print(f"  fwd  {dt} M{bm:<4} N{bn:<5} w{warps}   : {summarize(c)}", flush=True)
            if dt == "bf16":
                c = compile_kernel(K.dyt_fwd_persistent_kernel, {**sig, "n_groups": "i32"},
                                   {"HAS_BIAS": True, "PARAM_PER_ROW": False, "BLOCK_M": bm, "BLOCK_N": bn},
                                   ["x_ptr", "y_ptr", "weight_ptr", "bias_ptr", "n_cols", "n_channels"], arch, warps)
                print(f"  fwd  {dt} M{bm:<4} N{bn:<5} w{warps} pf: {summarize(c)}", flush=True)
            sig = {"dy_ptr": PTR[dt], "x_ptr": PTR[dt], "dx_ptr": PTR[dt], "alpha_ptr": "*fp32",
                   "weight_ptr": "*fp32", "dweight_part_ptr": "*fp32", "dbias_part_ptr": "*fp32",
                   "dalpha_part_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32", "n_groups": "i32",
                   "HAS_BIAS": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
                   "PREFETCH": "constexpr"}
            for w in sorted({warps, 8}):
                for pf in (False, True) if dt == "bf16" and w >= 8 else (False,):
                    c = compile_kernel(K.dyt_bwd_cols_kernel, sig,
                                       {"HAS_BIAS": True, "BLOCK_M": bm, "BLOCK_N": bn, "PREFETCH": pf},
                                       ["dy_ptr", "x_ptr", "dx_ptr", "weight_ptr", "dweight_part_ptr",
                                        "dbias_part_ptr", "n_cols"], arch, w)
                    print(f"  bwd  {dt} M{bm:<4} N{bn:<5} w{w}{' pf' if pf else '   '}: {summarize(c)}", flush=True)
                    print(f"  {'':27s}{sass_per_element(c, bm * bn // (32 * w))}", flush=True)


# --------------------------------------------------------------------------- so2

def _so2_fused(arch, seg_m0, block_m, block_n, cf, warps, sigma_loaded=False, precision="ieee", stages=1):
    """The fused backward specialised as launch.fused_layer's launches are: w_stride_n == 1, the
    segment bounds, strides and pointers multiples of 16 (Cf a power of two >= 16), one stage
    for the exact candidates (configs.fused_candidates)."""
    from tilefuse.ops.so2_mixing_stack import kernels as K
    weight = "*fp16" if precision == "3xfp16" else "*fp32"
    sig = {"g_ptr": "*fp32", "z_ptr": "*fp32", "gw_ptr": "*fp32", "sigma_ptr": "*fp32", "w_ptr": weight,
           "wlo_ptr": weight, "wscale_ptr": "*fp32", "out_ptr": "*fp32",
           "E": "i32", "ROW": "i32", "M0": "i32", "LG": "i32", "K_START": "i32", "K_LEN": "i32",
           "N_START": "i32", "N_LEN": "i32", "w_focus_stride": "i32", "w_stride_k": "i32", "w_stride_n": "constexpr",
           "SEGMENT_M0": "constexpr", "SIGMA_LOADED": "constexpr", "DOT_PRECISION": "constexpr",
           "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "CF_P": "constexpr"}
    return compile_kernel(K.so2_bwd_fused_kernel, sig, {"w_stride_n": 1, "SEGMENT_M0": seg_m0,
                                                        "SIGMA_LOADED": sigma_loaded, "DOT_PRECISION": precision,
                                                        "BLOCK_M": block_m, "BLOCK_N": block_n, "CF_P": cf},
                          ["g_ptr", "z_ptr", "gw_ptr", "sigma_ptr", "w_ptr", "wlo_ptr", "wscale_ptr", "out_ptr", "ROW",
                           "M0", "LG", "K_START", "K_LEN", "N_START", "N_LEN", "w_focus_stride", "w_stride_k"],
                          arch, warps, num_stages=stages)


def _so2_relay_gemm(arch, block_m, block_n, block_k, warps, precision="ieee", stages=3):
    """The relay GEMM specialised as launch.py's launches are: w_stride_n == 1 (the JIT makes
    it a constant) and the segment bounds, strides and pointers multiples of 16 (Cf 32)."""
    from tilefuse.ops.so2_mixing_stack import kernels as K
    weight = "*fp16" if precision == "3xfp16" else "*fp32"
    sig = {"a_ptr": "*fp32", "w_ptr": weight, "wlo_ptr": weight, "wscale_ptr": "*fp32", "res_ptr": "*fp32",
           "out_ptr": "*fp32", "z_ptr": "*fp32", "sigma_ptr": "*fp32", "alpha_ptr": "*fp32", "F": "i32", "E": "i32",
           "ROW": "i32", "K_START": "i32", "K_LEN": "i32", "N_START": "i32", "N_LEN": "i32", "CF": "i32", "LG": "i32",
           "w_focus_stride": "i32", "w_stride_k": "i32", "w_stride_n": "constexpr", "MODE": "constexpr",
           "APPLY_ALPHA": "constexpr", "DOT_PRECISION": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
           "BLOCK_K": "constexpr"}
    return compile_kernel(K.so2_gemm_kernel, sig, {"w_stride_n": 1, "MODE": 2, "APPLY_ALPHA": False,
                                                   "DOT_PRECISION": precision, "BLOCK_M": block_m,
                                                   "BLOCK_N": block_n, "BLOCK_K": block_k},
                          ["a_ptr", "w_ptr", "wlo_ptr", "wscale_ptr", "res_ptr", "out_ptr", "ROW", "K_START",
                           "K_LEN", "N_START", "N_LEN", "CF", "LG", "w_focus_stride", "w_stride_k"], arch, warps,
                          num_stages=stages)


def report_so2(arch: int):
    from tilefuse.ops.so2_mixing_stack.configs import FP16X3_TILES, TF32X3_TILES
    print("so2 fused backward (fp32, BLOCK_K = Cf; sigma recomputed, and read from the sigma pass):")
    for cf in (16, 32, 64):
        for seg in (True, False):
            for bm, bn, w in ((32, 64, 4), (64, 64, 8), (16, 128, 8)):
                for loaded in (False, True):
                    print(f"  Cf{cf:<3} {'m0 pass' if seg else 'm1 pass'} M{bm:<3} N{bn:<4} w{w} "
                          f"{'sigma-pass' if loaded else 'recompute '}: "
                          f"{summarize(_so2_fused(arch, seg, bm, bn, cf, w, loaded))}", flush=True)
    print("so2 fused backward, 3xfp16 with the sigma pass (level 3; the relay's 3xfp16 tiles, two stages):")
    for cf in (32, 64):
        for seg in (True, False):
            for bm, bn, w, _ in FP16X3_TILES:
                print(f"  Cf{cf:<3} {'m0 pass' if seg else 'm1 pass'} M{bm:<3} N{bn:<4} w{w} s2: "
                      f"{summarize(_so2_fused(arch, seg, bm, bn, cf, w, True, '3xfp16', 2))}", flush=True)
    print("so2 relay GEMM (BWD mode; ieee: the exact path, 3xtf32 and 3xfp16: the level-3 variants):")
    tiles = {"ieee": ((32, 64, 4, 2), (64, 64, 4, 2), (64, 64, 8, 2), (128, 64, 4, 2)),
             "3xtf32": TF32X3_TILES, "3xfp16": FP16X3_TILES}
    for precision, shapes in tiles.items():
        for bm, bn, w, stages in shapes:
            report = summarize(_so2_relay_gemm(arch, bm, bn, 32, w, precision, stages))
            print(f"  {precision:7s} M{bm} N{bn} K32 w{w} s{stages}: {report}", flush=True)


# --------------------------------------------------------------------------- grouped

def _grouped_gemm(arch, block_m, block_n, block_k, warps, recipe=0, epilogue=1):
    """The grouped GEMM with an epilogue (1: fc1 + GLU, 2: fc2 dgrad + dGLU, 0: store); recipe
    0: bf16 operands, 1: fp8_block (uint8 E4M3 bits, float32 scales). B K-contiguous (the
    launches' weights; Triton specialises the stride 1)."""
    from tilefuse.ops.grouped_glu_mlp import kernels as G
    operand = "*u8" if recipe else "*bf16"
    sig = {"a_ptr": operand, "b_ptr": operand, "c_ptr": "*bf16", "counts_ptr": "*i32", "probs_ptr": "*fp32",
           "bias_ptr": "*bf16", "z_ptr": "*bf16", "part_ptr": "*fp32", "q_ptr": "*u8", "q_scale_ptr": "*fp32",
           "a_scale_ptr": "*fp32",
           "b_scale_ptr": "*fp32", "gscale_ptr": "*fp32", "T": "i32", "K": "i32", "N": "i32", "E": "i32",
           "F": "i32", "n_row_tiles_bound": "i32", "lda": "i32", "b_e_stride": "i32", "b_k_stride": "constexpr",
           "b_n_stride": "i32", "ldc": "i32", "ldz": "i32", "bias_e_stride": "i32", "n_part_cols": "i32",
           "a_scale_ld": "i32", "b_scale_e_stride": "i32", "b_scale_k_stride": "i32", "b_scale_n_stride": "i32",
           "b_scale_rows": "i32", "b_scale_cols": "i32",
           "EPILOGUE": "constexpr", "ACT": "constexpr", "INTERLEAVE": "constexpr", "HAS_BIAS": "constexpr",
           "IEEE": "constexpr", "RECIPE": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
           "BLOCK_K": "constexpr", "GLU_UNIFORM_SCALE": "constexpr", "QUANT_DZ": "constexpr"}
    return compile_kernel(G.grouped_gemm_kernel, sig, {"EPILOGUE": epilogue, "ACT": 0, "INTERLEAVE": 32,
                                                       "HAS_BIAS": False, "IEEE": False, "RECIPE": recipe,
                                                       "GLU_UNIFORM_SCALE": bool(recipe), "BLOCK_M": block_m,
                                                       "QUANT_DZ": bool(recipe) and epilogue == 2,
                                                       "b_k_stride": 1,   # K-contiguous B, as launched
                                                       "BLOCK_N": block_n, "BLOCK_K": block_k},
                          ["a_ptr", "b_ptr", "c_ptr", "z_ptr", "q_ptr", "K", "N", "F", "lda", "b_e_stride",
                           "b_n_stride", "ldc", "ldz"], arch, warps)


def report_grouped(arch: int):
    print("grouped GEMM fc1 + GLU (bf16):")
    for bm, bn, bk, w in ((64, 64, 64, 4), (128, 64, 64, 8), (128, 128, 64, 8)):
        print(f"  M{bm} N{bn} K{bk} w{w}: {summarize(_grouped_gemm(arch, bm, bn, bk, w))}", flush=True)
    for name, epi in (("fc2 dgrad + dGLU", 2), ("store (fc2, fc1 dgrad)", 0)):
        print(f"grouped GEMM {name} (bf16):")
        for bm, bn, bk, w in ((128, 64, 64, 8), (128, 128, 64, 8)):
            print(f"  M{bm} N{bn} K{bk} w{w}: {summarize(_grouped_gemm(arch, bm, bn, bk, w, epilogue=epi))}",
                  flush=True)
    print("grouped GEMM fc1 + GLU (fp8_block):")
    for bm, bn, bk, w in ((128, 64, 128, 8), (128, 128, 128, 8), (64, 64, 128, 4)):
        print(f"  M{bm} N{bn} K{bk} w{w}: {summarize(_grouped_gemm(arch, bm, bn, bk, w, recipe=1))}", flush=True)


# --------------------------------------------------------------------------- quant

_QX = {"x_ptr": "*bf16", "n_rows": "i32", "n_cols": "i32", "x_stride_r": "i32", "x_stride_c": "i32"}
_FP8 = {**_QX, "data_ptr": "*u8", "scale_ptr": "*fp32", "batch_rows": "i32", "x_stride_b": "i32", "out_rows": "i32",
        "data2_ptr": "*u8", "scale2_ptr": "*fp32", "out2_rows": "i32", **{f"{a}_stride_{b}": "i32" for a in "ds" for b in "brc"},
        **{f"{a}2_stride_{b}": "i32" for a in "ds" for b in "rc"}, "rows_ptr": "*i32", "n_blocks": "i32"}
# Every pointer and integer is a multiple of 16 at the shapes benchmarked (the launches'
# specialisation), except the unit strides, which are constexprs below.
_QUANT_LAYOUTS = {   # name: (block, second copy's block or None, batched, grouped by expert, unit strides of
    # the layout grouped_glu_mlp launches)
    "rows 1x128, scales transposed": ((1, 128), None, False, False,
                                      {"x_stride_c": 1, "d_stride_c": 1, "s_stride_r": 1}),
    "cols 128x1 by expert, transposed": ((128, 1), None, False, True,
                                         {"x_stride_c": 1, "d_stride_r": 1, "s_stride_c": 1}),
    "weight pair 128x128": ((128, 128), (128, 128), True, False,
                            {"x_stride_c": 1, "d_stride_c": 1, "s_stride_c": 1, "d2_stride_r": 1, "s2_stride_r": 1}),
    "rows 1x128 + cols by expert": ((1, 128), (128, 1), False, True,
                                    {"x_stride_c": 1, "d_stride_c": 1, "s_stride_r": 1, "d2_stride_r": 1,
                                     "s2_stride_c": 1}),
}


def report_quant(arch: int):
    from tilefuse.quant import kernels as K
    from tilefuse.quant import launch as L
    print("fp8_block quantizer (bf16 in), the layouts of a grouped_glu_mlp step at their default tiles:")
    for name, (block, second, batched, grouped, unit) in _QUANT_LAYOUTS.items():
        bm, bk, warps = L.FP8_TILES[block] if second in (None, block) else L.FP8_ROWS_COLS_TILE
        ce = {"BLOCK_ROWS": block[0], "BLOCK_COLS": block[1], "POW2": False, "SECOND": second is not None,
              "SECOND_ROWS": (second or block)[0], "SECOND_COLS": (second or block)[1], "BATCHED": batched,
              "BLOCK_M": bm, "BLOCK_K": bk, "GROUPED": grouped, **unit}
        sig = {**{k: v for k, v in _FP8.items() if k not in ce}, **{k: "constexpr" for k in ce}}
        c = compile_kernel(K.fp8_block_kernel, sig, ce, [n for n in _FP8 if n not in ce], arch, warps,
                           **L._COMPILE)
        print(f"  {name:32s} {bm}x{bk} w{warps}: {sass_per_element(c, bm * bk // (32 * warps))}")
        print(f"  {'':32s} {summarize(c)}", flush=True)


SECTIONS = {"dyt": report_dyt, "so2": report_so2, "grouped": report_grouped, "quant": report_quant}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default=",".join(SECTIONS), help=f"comma-separated sections: {', '.join(SECTIONS)}")
    ap.add_argument("--arch", type=int, default=90, help="compute capability to compile for (default 90)")
    args = ap.parse_args()
    names = [n.strip() for n in args.ops.split(",") if n.strip()]
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        ap.error(f"unknown sections {unknown}; choose from {', '.join(SECTIONS)}")
    print(f"triton {triton.__version__}, sm_{args.arch}")
    for name in names:
        SECTIONS[name](args.arch)


if __name__ == "__main__":
    main()
