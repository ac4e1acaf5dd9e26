"""Run 1's probe: the |m|=1 layer GEMM by Gauss's three-product complex multiplication.

The |m|=1 weights of SeZM are built from two blocks (DeePMD-kit's so2.py, ``_build_so2_weight``):
w1 = [[U, V], [-V, U]] (in x out, the m=-1 stripe's rows and columns first), so
y = [x_n | x_p] @ w1 is the complex product (x_n + i x_p)(U + i V). The dense GEMM takes four
LG x LG products a row; Gauss's form takes three: k1 = (x_n + x_p) U, k2 = x_n (V - U),
k3 = x_p (U + V); y_n = k1 - k3, y_p = k1 + k2. Both are IEEE float32 FMA dots here.

The question: how much faster is the three-product GEMM than the dense one in the same Triton
form (same tiles, same K tile, ``input_precision="ieee"``), and than cuBLAS fp32, at the issue's
three shapes' |m|=1 GEMMs, and what does it cost in accuracy against float64. Not the op's
kernel: a probe of the arithmetic, to decide whether the op should take (U, V).
"""
import argparse
import itertools

import torch
import triton
import triton.language as tl


@triton.jit
def dense_kernel(x_ptr, w_ptr, y_ptr, M, K: tl.constexpr, N: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr, STAGES: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = (pid_m * BM + tl.arange(0, BM)).to(tl.int64)
    cols = pid_n * BN + tl.arange(0, BN)
    rmask = rows < M
    cmask = cols < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, num_stages=STAGES):
        ks = k + tl.arange(0, BK)
        a = tl.load(x_ptr + rows[:, None] * K + ks[None, :], mask=rmask[:, None], other=0.0)
        w = tl.load(w_ptr + ks[:, None] * N + cols[None, :], mask=cmask[None, :], other=0.0)
        acc = tl.dot(a, w, acc, input_precision="ieee")
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], acc, mask=rmask[:, None] & cmask[None, :])


@triton.jit
def gauss_kernel(x_ptr, u_ptr, d_ptr, s_ptr, y_ptr, M, LG: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr, STAGES: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = (pid_m * BM + tl.arange(0, BM)).to(tl.int64)
    cols = pid_n * BN + tl.arange(0, BN)
    rmask = rows < M
    cmask = cols < LG
    k1 = tl.zeros((BM, BN), dtype=tl.float32)
    k2 = tl.zeros((BM, BN), dtype=tl.float32)
    k3 = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, LG, BK, num_stages=STAGES):
        ks = k + tl.arange(0, BK)
        an = tl.load(x_ptr + rows[:, None] * (2 * LG) + ks[None, :], mask=rmask[:, None], other=0.0)
        ap = tl.load(x_ptr + rows[:, None] * (2 * LG) + LG + ks[None, :], mask=rmask[:, None], other=0.0)
        woff = ks[:, None] * LG + cols[None, :]
        wmask = cmask[None, :]
        k1 = tl.dot(an + ap, tl.load(u_ptr + woff, mask=wmask, other=0.0), k1, input_precision="ieee")
        k2 = tl.dot(an, tl.load(d_ptr + woff, mask=wmask, other=0.0), k2, input_precision="ieee")
        k3 = tl.dot(ap, tl.load(s_ptr + woff, mask=wmask, other=0.0), k3, input_precision="ieee")
    out = y_ptr + rows[:, None] * (2 * LG) + cols[None, :]
    omask = rmask[:, None] & cmask[None, :]
    tl.store(out, k1 - k3, mask=omask)
    tl.store(out + LG, k1 + k2, mask=omask)


def dense(x, w, y, cfg):
    bm, bn, bk, warps, stages = cfg
    M, K = x.shape
    N = w.shape[1]
    dense_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](x, w, y, M, K, N, bm, bn, bk, stages, num_warps=warps)


def gauss(x, u, d, s, y, cfg):
    bm, bn, bk, warps, stages = cfg
    M = x.shape[0]
    LG = u.shape[0]
    gauss_kernel[(triton.cdiv(M, bm), triton.cdiv(LG, bn))](x, u, d, s, y, M, LG, bm, bn, bk, stages, num_warps=warps)


def cublas_gauss(x, u, d, s):
    LG = u.shape[0]
    xn, xp = x[:, :LG], x[:, LG:]
    k1 = (xn + xp) @ u
    return torch.cat([k1 - xp @ s, k1 + xn @ d], 1)


def rel(a, ref):
    return ((a.double() - ref).norm() / ref.norm()).item()


SHAPES = {"neo": (2 * 647000, 96), "l6c32": (2 * 300000, 192), "l2c64": (2 * 400000, 128)}
DENSE_TILES = [(64, 64, 32, 4, 2), (64, 32, 32, 4, 2), (32, 128, 32, 4, 2), (64, 128, 32, 8, 2)]
GAUSS_TILES = [(64, 32, 32, 4, 2), (64, 64, 32, 4, 2), (128, 32, 32, 8, 2), (64, 64, 32, 8, 2)]


def cpu_check():
    """Both kernels in Triton's interpreter (TRITON_INTERPRET=1) at 37 rows (a partial row tile),
    LG 64 and 96 (a partial column tile at 64 columns), unit-scale weights: each one's normwise
    error against float64, every output written (finite)."""
    torch.manual_seed(0)
    for LG in (64, 96):
        M = 37
        x, u, v = torch.randn(M, 2 * LG), torch.randn(LG, LG), torch.randn(LG, LG)
        w = torch.cat([torch.cat([u, v], 1), torch.cat([-v, u], 1)], 0).contiguous()
        d, s = (v - u).contiguous(), (u + v).contiguous()
        ref = x.double() @ w.double()
        for name, run in (("dense", lambda y: dense(x, w, y, (32, 64, 32, 4, 1))),
                          ("gauss", lambda y: gauss(x, u, d, s, y, (32, 64, 32, 4, 1)))):
            y = torch.full((M, 2 * LG), float("nan"))
            run(y)
            print(f"LG {LG} {name}: normwise error {rel(y, ref):.2e}, finite {bool(torch.isfinite(y).all())}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="neo,l6c32,l2c64")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cpu-check", action="store_true", help="cpu_check() in Triton's interpreter, then exit")
    args = p.parse_args()
    if args.cpu_check:
        return cpu_check()
    torch.backends.cuda.matmul.allow_tf32 = False
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
    for name in args.shapes.split(","):
        M, LG = SHAPES[name]
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(M, 2 * LG, device="cuda", generator=g)
        sc = (2 * LG) ** -0.5
        u = torch.randn(LG, LG, device="cuda", generator=g) * sc
        v = torch.randn(LG, LG, device="cuda", generator=g) * sc
        w = torch.cat([torch.cat([u, v], 1), torch.cat([-v, u], 1)], 0).contiguous()
        d, s = (v - u).contiguous(), (u + v).contiguous()
        sub = 65536
        ref = x[:sub].double() @ w.double()
        flop = 2.0 * M * (2 * LG) ** 2
        cands = {f"dense {c[0]}x{c[1]} w{c[3]}": (lambda y, c=c: dense(x, w, y, c)) for c in DENSE_TILES}
        cands.update({f"gauss {c[0]}x{c[1]} w{c[3]}": (lambda y, c=c: gauss(x, u, d, s, y, c)) for c in GAUSS_TILES})
        cands["cublas dense"] = lambda y: torch.matmul(x, w, out=y)
        cands["cublas gauss (3 GEMMs + adds)"] = lambda y: y.copy_(cublas_gauss(x, u, d, s))
        ys = {}
        for k, f in cands.items():
            y = torch.full((M, 2 * LG), float("nan"), device="cuda")
            f(y)
            torch.cuda.synchronize()
            ys[k] = (y, rel(y[:sub], ref), bool(torch.isfinite(y).all()))
        times = {k: [] for k in cands}
        for r in range(args.rounds):
            order = list(cands) if r % 2 == 0 else list(reversed(list(cands)))
            for k in order:
                times[k].append(triton.testing.do_bench(lambda: cands[k](ys[k][0]), warmup=25, rep=100))
        print(f"\n## {name}: rows {M}, LG {LG} (dense K = N = {2 * LG}); median of {args.rounds} do_bench medians")
        print("| variant | ms | TFLOP/s (dense-equivalent) | normwise error vs float64 | finite |")
        print("|---|---|---|---|---|")
        med = {k: sorted(t)[len(t) // 2] for k, t in times.items()}
        for k in cands:
            print(f"| {k} | {med[k]:.3f} | {flop / med[k] / 1e9:.1f} | {ys[k][1]:.2e} | {ys[k][2]} |")
        bd = min((k for k in cands if k.startswith("dense")), key=med.get)
        bg = min((k for k in cands if k.startswith("gauss")), key=med.get)
        print(f"best dense {bd} {med[bd]:.3f} ms, best gauss {bg} {med[bg]:.3f} ms: {med[bd] / med[bg]:.3f}x; "
              f"cublas dense / best gauss {med['cublas dense'] / med[bg]:.3f}x")


if __name__ == "__main__":
    main()
