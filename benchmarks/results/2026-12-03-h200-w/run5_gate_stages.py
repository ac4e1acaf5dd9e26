"""Run 5: the forward gate kernel (kernels.so2_fwd_gate_kernel, exact scalar block) at Neo and the
other benchmark shapes, over its software-pipelining depth (num_stages, Triton's default 3 on
the shipped launch, which passes none), rows and warps. Its outputs do not depend on the
launch shape (each element one fixed-order dot): checked bitwise against the shipped launch
here, NaN-poisoned outputs. Timed interleaved under graph replay.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-w/run5_gate_stages.py
"""

from __future__ import annotations

import torch

from tilefuse.check.so2 import _inputs
from tilefuse.ops.so2_mixing_stack import launch
from tilefuse.ops.so2_mixing_stack.configs import EXACT, cf_padded
from tilefuse.ops.so2_mixing_stack.kernels import so2_fwd_gate_kernel
from tilefuse.tuning.timing import interleaved


def gate(u, w0, gw, z, u_next, sigma, d, block_m, warps, stages):
    F, E = u.shape[0], u.shape[1]
    kw = {} if stages is None else {"num_stages": stages}
    so2_fwd_gate_kernel[(F * -(-E // block_m),)](
        u, w0, w0, w0, gw, z, u_next, sigma, E, d.row, d.m0, d.lg, d.focus_dim, IEEE=True, S_PRECISION=EXACT,
        BLOCK_M=block_m, CF_P=cf_padded(d.focus_dim), BLOCK_K=d.focus_dim, num_warps=warps, **kw)


def main():
    print(torch.cuda.get_device_name(), torch.__version__)
    for E, lmax, cf in ((647000, 3, 32), (300000, 6, 32), (400000, 2, 64)):
        d, ins = _inputs(lmax, 2, cf, E, "cuda")
        u, _, w0, _, gw = (t.detach() for t in ins)
        w0, gw = w0[0].contiguous(), gw[0].contiguous()
        shipped = (launch.GATE_BLOCK_M, launch.gate_warps(cf, EXACT), None)
        variants = [shipped] + [(bm, w, s) for bm, w in ((32, 4), (32, 2), (64, 4), (64, 8)) for s in (1, 2, 3)]
        outs, providers = {}, {}
        for v in variants:
            z, u_next = torch.full_like(u, float("nan")), torch.full_like(u, float("nan"))
            sigma = torch.full((2, E, d.lg), float("nan"), device="cuda")
            try:
                gate(u, w0, gw, z, u_next, sigma, d, *v)
                torch.cuda.synchronize()
            except Exception as exc:   # noqa: BLE001 - a probe: reported
                print(f"  {v}: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            outs[v] = (z[..., :cf].clone(), u_next[..., :cf].clone(), sigma.clone())
            providers[v] = (lambda v=v, z=z, u_next=u_next, sigma=sigma: gate(u, w0, gw, z, u_next, sigma, d, *v))
        base = outs[shipped]
        t = interleaved({str(v): f for v, f in providers.items()}, rounds=7, graphs=True)
        print(f"\n## ({E}, {lmax}, {cf}): gate launch (rows, warps, stages; None = Triton's default), ms")
        for v in providers:
            r = t[str(v)]
            same = all(torch.equal(a, b) for a, b in zip(outs[v], base))
            print(f"  {str(v):16s} {r.median_ms:7.3f} [{r.min_ms:.3f}-{r.max_ms:.3f}]  bitwise the shipped launch's: {same}",
                  flush=True)
        del u, outs, providers
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
