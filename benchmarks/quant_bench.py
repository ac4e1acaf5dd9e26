"""H200 check: quantizer bandwidth vs a device copy (bytes read + written), issue 6.

    PYTHONPATH=src python3 benchmarks/quant_bench.py
"""
import torch, triton
from tilefuse.quant import launch
torch.manual_seed(0)
x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16)
n = x.numel()
amax = x.float().abs().amax()
def bw(fn, nbytes):
    ms = triton.testing.do_bench(fn, warmup=25, rep=200)
    return nbytes / ms / 1e6, ms
copy_gbs, copy_ms = bw(lambda: x.clone(), 4 * n)
print(f"copy bf16 clone: {copy_gbs:.0f} GB/s ({copy_ms*1e3:.0f} us)")
cases = {
    "fp8_block 1x128": (lambda: launch.fp8_block(x, (1, 128), False), 3 * n + n // 32),
    "fp8_block 128x128": (lambda: launch.fp8_block(x, (128, 128), False), 3 * n),
    "fp8_block 1x128 scales transposed": (lambda: launch.fp8_block(x, (1, 128), False, scales_transposed=True),
                                          3 * n + n // 32),
    "fp8_block 128x1 written transposed": (lambda: launch.fp8_block(x, (128, 1), False, transpose=True),
                                           3 * n + n // 32),
    "fp8_block 128x128 written transposed": (lambda: launch.fp8_block(x, (128, 128), False, transpose=True),
                                             3 * n),
    "fp8_block 1x128 of x^T (strided read)": (lambda: launch.fp8_block(x.t(), (1, 128), False), 3 * n + n // 32),
    "mxfp8 compact": (lambda: launch.mxfp8(x, False), 3 * n + n // 32),
    "mxfp8 swizzled": (lambda: launch.mxfp8(x, True), 3 * n + n // 32),
    "nvfp4 amax given": (lambda: launch.nvfp4(x, amax, False, False, None, False), 2.5 * n + n // 16),
    "nvfp4 amax computed": (lambda: launch.nvfp4(x, None, False, False, None, False), 4.5 * n + n // 16),
    "nvfp4 2d swizzled": (lambda: launch.nvfp4(x, amax, True, False, None, True), 2.5 * n + n // 16),
    "nvfp4 rht": (lambda: launch.nvfp4(x, amax, False, True, None, False), 2.5 * n + n // 16),
}
bits = torch.randint(-2**31, 2**31 - 1, x.shape, device="cuda", dtype=torch.int32)
cases["nvfp4 stochastic"] = (lambda: launch.nvfp4(x, amax, False, False, bits, False), 6.5 * n + n // 16)
for name, (fn, nbytes) in cases.items():
    g, ms = bw(fn, nbytes)
    print(f"{name}: {g:.0f} GB/s = {g / copy_gbs:.0%} of copy ({ms*1e3:.0f} us)")
