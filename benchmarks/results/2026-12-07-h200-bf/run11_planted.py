"""Run 11: does run 10's set-up catch an out-of-bounds write of a Triton kernel? A kernel stores
one float32 past the end of a 100-element tensor (PyTorch's caching allocator off, as in run
10, so the tensor is an allocation of its own); under compute-sanitizer's memcheck the run
must report an invalid global write and exit with the sanitizer's error code. Without the
sanitizer the store lands unnoticed (the program exits 0), which is why run 10 needs it."""
import torch
import triton
import triton.language as tl


@triton.jit
def one_past_the_end(p, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(p + i, 1.0, mask=i < n + 1)


x = torch.zeros(100, device="cuda")
one_past_the_end[(1,)](x, x.numel(), BLOCK=128)
torch.cuda.synchronize()
print("stored; x.sum() =", x.sum().item())
