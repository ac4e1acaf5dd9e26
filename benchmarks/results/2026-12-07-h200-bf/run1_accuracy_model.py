"""CPU, float32 numpy model of run 2's question: the normwise error against float64 of the |m|=1 GEMM as
the dense product [x_n | x_p] @ [[U, V], [-V, U]] and as Gauss's three products, at 20000 rows, LG 96 /
192 / 128, x_p uncorrelated, correlated (0.9) and anti-correlated (-0.9) with x_n. Prints per case:
LG, correlation, [dense normwise, Gauss normwise, Gauss max-abs, dense max-abs] relative errors.

    python3 benchmarks/results/2026-12-07-h200-bf/run1_accuracy_model.py
"""
import numpy as np
rng=np.random.default_rng(0)
def run(E,LG,wscale=None,corr=0.0):
    xn=rng.standard_normal((E,LG)).astype(np.float32)
    xp=(corr*xn+np.sqrt(1-corr**2)*rng.standard_normal((E,LG))).astype(np.float32)
    s=wscale or 1/np.sqrt(2*LG)
    U=(rng.standard_normal((LG,LG))*s).astype(np.float32); V=(rng.standard_normal((LG,LG))*s).astype(np.float32)
    W=np.block([[U,V],[-V,U]]); X=np.concatenate([xn,xp],1)
    ref=X.astype(np.float64)@W.astype(np.float64)
    # dense fp32 via explicit fp32 dot in K blocks to avoid BLAS-specific tricks: use float32 matmul
    d=(X@W)
    k1=(xn+xp)@U; k2=xn@(V-U); k3=xp@(U+V)
    g=np.concatenate([k1-k3,k1+k2],1)
    e=lambda a: np.linalg.norm(a-ref)/np.linalg.norm(ref)
    return e(d),e(g), np.abs(g-ref).max()/np.abs(ref).max(), np.abs(d-ref).max()/np.abs(ref).max()
for LG in (96,192,128):
  for corr in (0.0,0.9,-0.9):
    print(LG,corr,["%.2e"%v for v in run(20000,LG,corr=corr)])
