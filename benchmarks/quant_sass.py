"""SASS instructions per element of the fp8 quantizer for sm_90, compiled as launches specialise
it (no GPU needed): the instruction count that bounds the activation copies (Nsight Compute,
results/2026-11-30-h200-e run 9: ALU-bound at about 23 thread instructions per element).

    PYTHONPATH=src:benchmarks python3 benchmarks/quant_sass.py
"""
import collections
import re
import subprocess
import tempfile

from compile_report import CUOBJDUMP, compile_kernel, summarize

from tilefuse.quant import kernels as K
from tilefuse.quant import launch as L

X = {"x_ptr": "*bf16", "n_rows": "i32", "n_cols": "i32", "x_stride_r": "i32", "x_stride_c": "i32"}
FP8 = {**X, "data_ptr": "*u8", "scale_ptr": "*fp32", "batch_rows": "i32", "x_stride_b": "i32", "out_rows": "i32",
       "data2_ptr": "*u8", "scale2_ptr": "*fp32", **{f"{a}_stride_{b}": "i32" for a in "ds" for b in "brc"},
       **{f"{a}2_stride_{b}": "i32" for a in "ds" for b in "rc"}}
# Every pointer and integer is a multiple of 16 at the shapes benchmarked (the launches'
# specialisation), except the unit strides, which are constexprs below.
ALIGNED = list(FP8)
LAYOUTS = {   # name: (block, second copy, unit strides of the layout grouped_glu_mlp launches)
    "rows 1x128, scales transposed": ((1, 128), False, {"x_stride_c": 1, "d_stride_c": 1, "s_stride_r": 1}),
    "cols 128x1, written transposed": ((128, 1), False, {"x_stride_c": 1, "d_stride_r": 1, "s_stride_c": 1}),
    "weight pair 128x128": ((128, 128), True, {"x_stride_c": 1, "d_stride_c": 1, "s_stride_c": 1, "d2_stride_r": 1,
                                               "s2_stride_r": 1}),
}


def main():
    for name, (block, second, unit) in LAYOUTS.items():
        bm, bk, warps = L.FP8_TILES[block]
        ce = {"BLOCK_ROWS": block[0], "BLOCK_COLS": block[1], "POW2": False, "SECOND": second, "BATCHED": second,
              "BLOCK_M": bm, "BLOCK_K": bk, **unit}
        sig = {**{k: v for k, v in FP8.items() if k not in ce}, **{k: "constexpr" for k in ce}}
        c = compile_kernel(K.fp8_block_kernel, sig, ce, [n for n in ALIGNED if n not in ce], 90, warps,
                           **L._COMPILE)
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(c.asm["cubin"])
            f.flush()
            sass = subprocess.run([str(CUOBJDUMP), "-sass", f.name], capture_output=True, text=True).stdout
        ops = collections.Counter(re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", sass))
        per_thread = bm * bk // (32 * warps)
        total = sum(ops.values())
        print(f"{name:32s} {bm}x{bk} w{warps}: {total} instructions, {per_thread} elements per thread, "
              f"{total / per_thread:.1f} per element; most: {', '.join(f'{k} {v}' for k, v in ops.most_common(8))}")
        print(f"{'':32s} {summarize(c)}")


if __name__ == "__main__":
    main()
