"""CPU, float32 numpy model (no GPU): the |m|=1 GEMM's error against float64 per output stripe,
dense ([x_n | x_p] @ [[U, V], [-V, U]]) against Gauss's three products, at 20000 rows, LG 96.
Gauss forms y_p = (x_n + x_p) U + x_n (V - U): where y_p is small beside x_n U (x_p small and
V small beside U), the two terms cancel and y_p keeps an absolute error of order eps |x_n U|.
Prints the normwise error of the whole output and of each stripe, for |x_p| / |x_n| of 1 to
1e-3, with V at U's scale and at 0.01 of it.
    python3 benchmarks/results/2026-12-07-h200-bf/run1_stripe_model.py
"""
import numpy as np

M, LG = 20000, 96


def rel(a, ref, cols):
    return np.linalg.norm(a[:, cols] - ref[:, cols]) / np.linalg.norm(ref[:, cols])


def case(rng, U, V, scale_p):
    xn = rng.standard_normal((M, LG)).astype(np.float32)
    xp = (rng.standard_normal((M, LG)) * scale_p).astype(np.float32)
    w = np.block([[U, V], [-V, U]]).astype(np.float32)
    x = np.concatenate([xn, xp], 1)
    ref = x.astype(np.float64) @ w.astype(np.float64)
    dense = x @ w
    k1, k2, k3 = (xn + xp) @ U, xn @ (V - U), xp @ (U + V)
    gauss = np.concatenate([k1 - k3, k1 + k2], 1)
    parts = {"whole": slice(None), "y_n": slice(0, LG), "y_p": slice(LG, 2 * LG)}
    cells = " | ".join(f"{rel(dense, ref, c):.2e} | {rel(gauss, ref, c):.2e}" for c in parts.values())
    return f"| {scale_p:g} | {cells} |"


def main():
    rng = np.random.default_rng(0)
    U = (rng.standard_normal((LG, LG)) / np.sqrt(2 * LG)).astype(np.float32)
    V0 = (rng.standard_normal((LG, LG)) / np.sqrt(2 * LG)).astype(np.float32)
    for v_scale in (1.0, 0.01):
        V = (V0 * np.float32(v_scale)).astype(np.float32)
        print(f"\nV at {v_scale:g} of U's scale")
        print("| \\|x_p\\| / \\|x_n\\| | whole dense | whole Gauss | y_n dense | y_n Gauss | y_p dense | y_p Gauss |")
        print("|---|---|---|---|---|---|---|")
        for s in (1, 1e-1, 1e-2, 1e-3):
            print(case(rng, U, V, s))


if __name__ == "__main__":
    main()
