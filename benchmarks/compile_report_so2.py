"""Compile the so2_mixing_stack backward kernels and the grouped-MLP GEMM for sm_90 on any
machine (no GPU) and print the compiler's resource report: registers, spill stack, shared
memory. The fused so2 backward's register pressure decides where fusion can win (the spec
reports +69% at lmax 6 on another GPU from spills).

    python benchmarks/compile_report_so2.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile_report import compile_kernel, summarize  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import kernels as G  # noqa: E402
from tilefuse.ops.so2_mixing_stack import kernels as K  # noqa: E402


def so2_fused(seg_m0, block_m, block_n, cf, warps):
    sig = {"g_ptr": "*fp32", "z_ptr": "*fp32", "gw_ptr": "*fp32", "w_ptr": "*fp32", "out_ptr": "*fp32",
           "E": "i32", "ROW": "i32", "M0": "i32", "LG": "i32", "CF": "i32", "K_START": "i32", "K_LEN": "i32",
           "N_START": "i32", "N_LEN": "i32", "w_focus_stride": "i32", "w_stride_k": "i32", "w_stride_n": "i32",
           "SEGMENT_M0": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "CF_P": "constexpr"}
    return compile_kernel(K.so2_bwd_fused_kernel, sig, {"SEGMENT_M0": seg_m0, "BLOCK_M": block_m,
                                                        "BLOCK_N": block_n, "CF_P": cf},
                          ["g_ptr", "z_ptr", "gw_ptr", "w_ptr", "out_ptr", "ROW", "M0", "LG", "CF"], 90, warps)


def so2_relay_gemm(block_m, block_n, block_k, warps):
    sig = {"a_ptr": "*fp32", "w_ptr": "*fp32", "res_ptr": "*fp32", "out_ptr": "*fp32", "z_ptr": "*fp32",
           "sigma_ptr": "*fp32", "alpha_ptr": "*fp32", "F": "i32", "E": "i32", "ROW": "i32", "K_START": "i32",
           "K_LEN": "i32", "N_START": "i32", "N_LEN": "i32", "CF": "i32", "LG": "i32", "w_focus_stride": "i32",
           "w_stride_k": "i32", "w_stride_n": "i32", "MODE": "constexpr", "APPLY_ALPHA": "constexpr",
           "IEEE": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"}
    return compile_kernel(K.so2_gemm_kernel, sig, {"MODE": 2, "APPLY_ALPHA": False, "IEEE": True, "BLOCK_M": block_m,
                                                   "BLOCK_N": block_n, "BLOCK_K": block_k},
                          ["a_ptr", "w_ptr", "res_ptr", "out_ptr", "ROW"], 90, warps)


def grouped_glu(block_m, block_n, block_k, warps, recipe=0, epilogue=1):
    """The grouped GEMM with an epilogue (1: fc1 + GLU, 2: fc2 dgrad + dGLU, 0: store); recipe
    0: bf16 operands, 1: fp8_block (uint8 E4M3 bits, float32 scales). B K-contiguous (the
    launches' weights; Triton specialises the stride 1)."""
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
                           "b_n_stride", "ldc", "ldz"], 90, warps)


def main():
    print("so2 fused backward (fp32, BLOCK_K = Cf):")
    for cf in (16, 32, 64):
        for seg in (True, False):
            for bm, bn, w in ((32, 64, 4), (64, 64, 8), (16, 128, 8)):
                print(f"  Cf{cf:<3} {'m0 pass' if seg else 'm1 pass'} M{bm:<3} N{bn:<4} w{w}: "
                      f"{summarize(so2_fused(seg, bm, bn, cf, w))}", flush=True)
    print("so2 relay GEMM (BWD mode):")
    for bm, bn, bk, w in ((32, 64, 32, 4), (64, 64, 32, 8)):
        print(f"  M{bm} N{bn} K{bk} w{w}: {summarize(so2_relay_gemm(bm, bn, bk, w))}", flush=True)
    print("grouped GEMM fc1 + GLU (bf16):")
    for bm, bn, bk, w in ((64, 64, 64, 4), (128, 64, 64, 8), (128, 128, 64, 8)):
        print(f"  M{bm} N{bn} K{bk} w{w}: {summarize(grouped_glu(bm, bn, bk, w))}", flush=True)
    for name, epi in (("fc2 dgrad + dGLU", 2), ("store (fc2, fc1 dgrad)", 0)):
        print(f"grouped GEMM {name} (bf16):")
        for bm, bn, bk, w in ((128, 64, 64, 8), (128, 128, 64, 8)):
            print(f"  M{bm} N{bn} K{bk} w{w}: {summarize(grouped_glu(bm, bn, bk, w, epilogue=epi))}", flush=True)
    print("grouped GEMM fc1 + GLU (fp8_block):")
    for bm, bn, bk, w in ((128, 64, 128, 8), (128, 128, 128, 8), (64, 64, 128, 4)):
        print(f"  M{bm} N{bn} K{bk} w{w}: {summarize(grouped_glu(bm, bn, bk, w, recipe=1))}", flush=True)


if __name__ == "__main__":
    main()
