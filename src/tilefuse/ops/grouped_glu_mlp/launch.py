"""grouped_glu_mlp launchers: tensors in, tensors out; no host synchronisation.

tokens_per_expert is only ever read by kernels (and by one device-side assert that it sums to
T). The row-tile schedule is found in-kernel from the counts; grids are sized by the static
bound cdiv(T, BLOCK_M) + E and a persistent program count, so a call is CUDA-graph capturable
and T may change between calls.
"""

from __future__ import annotations

import torch

from ... import launches
from ...device import num_sms
from ...utils import cdiv
from .configs import GemmConfig, heuristic

ACTIVATIONS = {"swiglu": 0, "geglu": 1}


def _ieee(t: torch.Tensor) -> bool:
    return t.dtype == torch.float32


def check_split(counts: torch.Tensor, n_tokens: int) -> None:
    """Device-side assert that tokens_per_expert sums to T (no host sync on CUDA; a failure
    raises a device-side assertion at the next synchronisation)."""
    torch._assert_async(counts.sum() == n_tokens, "grouped_glu_mlp: tokens_per_expert must sum to T = x.shape[0]")


def _gemm(epilogue, a, b, c, counts, cfg: GemmConfig, *, K, N, b_strides, ldc, F=1, probs=None, bias=None,
          z=None, part=None, act=0, interleave=0):
    from .kernels import grouped_gemm_kernel
    T = a.shape[0]
    E = counts.shape[0]
    if T == 0 or N == 0:
        return
    bound = cdiv(T, cfg.block_m) + E
    total = bound * cdiv(N, cfg.block_n)
    programs = max(1, min(total, cfg.programs_per_sm * num_sms(a.device)))
    dummy = c
    grouped_gemm_kernel[(programs,)](
        a, b, c, counts, probs if probs is not None else dummy, bias if bias is not None else dummy,
        z if z is not None else dummy, part if part is not None else dummy,
        T, K, N, E, F, bound,
        a.stride(0), b_strides[0], b_strides[1], b_strides[2], ldc, z.stride(0) if z is not None else 0,
        bias.stride(0) if bias is not None else 0, part.stride(0) if part is not None else 0,
        EPILOGUE=epilogue, ACT=act, INTERLEAVE=interleave, HAS_BIAS=bias is not None, IEEE=_ieee(a),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )


def forward(x, counts, probs, w1, w2, b1, b2, activation: str, glu_interleave, config=None):
    """Returns (y (T, H), z (T, 2F), h (T, F)); z and h in x.dtype, saved for the backward."""
    from .kernels import EPI_GLU, EPI_STORE
    cfg = config or heuristic("fwd", x.element_size())
    T, H = x.shape
    F = w2.shape[2]
    x = x.contiguous()
    z = torch.empty((T, 2 * F), dtype=x.dtype, device=x.device)
    h = torch.empty((T, F), dtype=x.dtype, device=x.device)
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    check_split(counts, T)
    act, inter = ACTIVATIONS[activation], glu_interleave or 0
    # FC1 + GLU: B_e(k, n) = W1[e, n, k].
    _gemm(EPI_GLU, x, w1, h, counts, cfg, K=H, N=F, b_strides=(w1.stride(0), w1.stride(2), w1.stride(1)),
          ldc=h.stride(0), F=F, probs=probs, bias=b1, z=z, act=act, interleave=inter)
    # FC2 (+ p * b2): B_e(k, n) = W2[e, n, k].
    _gemm(EPI_STORE, h, w2, y, counts, cfg, K=F, N=H, b_strides=(w2.stride(0), w2.stride(2), w2.stride(1)),
          ldc=y.stride(0), probs=probs, bias=b2)
    launches.record("grouped_mlp_fwd")
    return y, z, h


def backward(dy, x, counts, probs, w1, w2, b1, b2, z, h, activation: str, glu_interleave, config=None,
             wgrad_config=None):
    """(dx, dprobs, dw1, dw2, db1 or None, db2 or None)."""
    from .kernels import EPI_DGLU, EPI_STORE, grouped_colsum_kernel, grouped_wgrad_kernel
    cfg = config or heuristic("bwd", x.element_size())
    wcfg = wgrad_config or heuristic("wgrad", x.element_size())
    T, H = x.shape
    E, F = w2.shape[0], w2.shape[2]
    dy = dy.contiguous()
    act, inter = ACTIVATIONS[activation], glu_interleave or 0
    dz = torch.empty((T, 2 * F), dtype=x.dtype, device=x.device)
    n_col_tiles = cdiv(F, cfg.block_n)
    part = torch.empty((T, n_col_tiles), dtype=torch.float32, device=x.device)
    # FC2 dgrad + dGLU: dh = dy @ W2_e, B_e(k, n) = W2[e, k, n].
    _gemm(EPI_DGLU, dy, w2, dz, counts, cfg, K=H, N=F, b_strides=(w2.stride(0), w2.stride(1), w2.stride(2)),
          ldc=dz.stride(0), F=F, probs=probs, z=z, part=part, act=act, interleave=inter)
    dprobs = part.sum(dim=1)   # fixed-order reduction over column tiles: deterministic
    if b2 is not None:
        expert_of_row = torch.repeat_interleave(torch.arange(E, device=x.device), counts, output_size=T)
        dprobs = dprobs + (dy.float() * b2.float()[expert_of_row]).sum(dim=1)
    # FC1 dgrad: dx = dz @ W1_e, B_e(k, n) = W1[e, k, n].
    dx = torch.empty_like(x)
    _gemm(EPI_STORE, dz, w1, dx, counts, cfg, K=2 * F, N=H, b_strides=(w1.stride(0), w1.stride(1), w1.stride(2)),
          ldc=dx.stride(0))
    # Ragged-K weight gradients, written in full (zeros for experts without tokens).
    dw1 = torch.empty_like(w1, memory_format=torch.contiguous_format)
    dw2 = torch.empty_like(w2, memory_format=torch.contiguous_format)
    for a, b, c, n_dim, m_dim in ((dz, x, dw1, 2 * F, H), (dy, h, dw2, H, F)):
        grouped_wgrad_kernel[(E * cdiv(n_dim, wcfg.block_n), cdiv(m_dim, wcfg.block_m))](
            a, b, c, counts, T, n_dim, m_dim, E, a.stride(0), b.stride(0),
            IEEE=_ieee(a), BLOCK_N=wcfg.block_n, BLOCK_M=wcfg.block_m, BLOCK_K=wcfg.block_k,
            num_warps=wcfg.num_warps, num_stages=wcfg.num_stages)
    db1 = db2 = None
    if b1 is not None:
        db1 = torch.empty_like(b1, memory_format=torch.contiguous_format)
        grouped_colsum_kernel[(E, cdiv(2 * F, 64))](dz, dz, db1, counts, T, 2 * F, E, dz.stride(0),
                                                     HAS_SCALE=False, BLOCK_K=32, BLOCK_N=64)
    if b2 is not None:
        db2 = torch.empty_like(b2, memory_format=torch.contiguous_format)
        grouped_colsum_kernel[(E, cdiv(H, 64))](dy, probs, db2, counts, T, H, E, dy.stride(0),
                                                 HAS_SCALE=True, BLOCK_K=32, BLOCK_N=64)
    launches.record("grouped_mlp_bwd")
    return dx, dprobs.to(probs.dtype), dw1, dw2, db1, db2
