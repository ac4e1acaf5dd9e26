"""Compile the DyT kernels for a GPU target on any machine (no GPU needed) and report what the
compiler made of them: registers, spills, shared memory, and the width of global loads/stores.

    python benchmarks/compile_report.py [--arch 90]

Arguments are specialised the way a launch would specialise them (pointers 16-byte aligned,
sizes divisible by 16 where the shape makes them so).
"""

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tilefuse.ops.dyt import kernels as K

CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
PTR = {"fp32": "*fp32", "bf16": "*bf16"}


def compile_kernel(fn, sig, constexprs, divisible, arch, num_warps, **options):
    names = fn.arg_names
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in divisible}
    src = ASTSource(fn=fn, signature=sig, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": num_warps, **options})


def summarize(c):
    ptx = c.asm["ptx"]
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(c.asm["cubin"])
        f.flush()
        usage = subprocess.run([str(CUOBJDUMP), "--dump-resource-usage", f.name],
                               capture_output=True, text=True).stdout
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", type=int, default=90)
    args = ap.parse_args()
    for dt in ("fp32", "bf16"):
        for bm, bn, warps in ((256, 16, 4), (16, 256, 4), (1, 4096, 4), (1, 4096, 8)):
            sig = {"x_ptr": PTR[dt], "y_ptr": PTR[dt], "alpha_ptr": "*fp32", "weight_ptr": "*fp32",
                   "bias_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32", "n_channels": "i32",
                   "HAS_BIAS": "constexpr", "PARAM_PER_ROW": "constexpr", "BLOCK_M": "constexpr",
                   "BLOCK_N": "constexpr"}
            c = compile_kernel(K.dyt_fwd_kernel, sig, {"HAS_BIAS": True, "PARAM_PER_ROW": False,
                               "BLOCK_M": bm, "BLOCK_N": bn},
                               ["x_ptr", "y_ptr", "weight_ptr", "bias_ptr", "n_cols", "n_channels"],
                               args.arch, warps)
            print(f"fwd  {dt} M{bm:<4} N{bn:<5} w{warps}: {summarize(c)}")
            sig = {"dy_ptr": PTR[dt], "x_ptr": PTR[dt], "dx_ptr": PTR[dt], "alpha_ptr": "*fp32",
                   "weight_ptr": "*fp32", "dweight_part_ptr": "*fp32", "dbias_part_ptr": "*fp32",
                   "dalpha_part_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32", "n_groups": "i32",
                   "HAS_BIAS": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
            for w in sorted({warps, 8}):
                c = compile_kernel(K.dyt_bwd_cols_kernel, sig, {"HAS_BIAS": True, "BLOCK_M": bm, "BLOCK_N": bn},
                                   ["dy_ptr", "x_ptr", "dx_ptr", "weight_ptr", "dweight_part_ptr",
                                    "dbias_part_ptr", "n_cols"], args.arch, w)
                print(f"bwd  {dt} M{bm:<4} N{bn:<5} w{w}: {summarize(c)}")


if __name__ == "__main__":
    main()
