"""Is each so2 backward GEMM launch within 1.15x of the forward GEMM launch of the same size?

The backward GEMMs (``launch._gemm_t`` -> ``so2_gemm_kernel`` in BWD mode, and the fused
layer kernel) read contiguous W^T copies with the forward's stride convention (launch.py's
module docstring). The "old swapped strides" rows read W^T through W's swapped strides instead,
the weight tile's inner (N) index walking W's slow axis, as a reference point (4.4x slower on
the H200, results/2026-12-01-h200-g run 1).

    PYTHONPATH=src python3 benchmarks/so2_backward_gemm.py            # a GPU (H200: ~1-2 min)
    PYTHONPATH=src python3 benchmarks/so2_backward_gemm.py --tiny     # CPU smoke test, Triton
                                                                      # interpreter (~1 min)

Shapes (E, lmax, Cf) = (647000, 3, 32), (300000, 6, 32), (400000, 2, 64) (the spec's; --tiny:
(37, 1, 16)), F = 2, fp32, NL = 3. Each table's launches (per shape: the single launches of
both segments; the pairs) are timed together, in one run of the project's timing harness
(``tilefuse.tuning.timing.interleaved``: warm-up, CUDA-graph replay, 5 rounds, one sample of
every launch a round in rotating order; every input surface is far larger than L2) on fresh
random inputs per table. A row's ms is its median over the rounds; a ratio is the median of
the per-round ratios (``timing.ratio``), so a backward launch and the forward launch it is
judged against always share a round and clock drift under the power cap (benchmarks/README.md)
falls on both alike. GEMM tiles: the relay heuristic (configs.heuristic), the same for forward
and backward; fused: ``--fused-tiles`` (default 32,64,4, one stage).

It prints, per shape, a table of launches (ms and the ratio to the forward launch of the same
size, i.e. the FINAL-mode forward ``_gemm`` over the same K and N columns; the gated forward
launch and the old swapped-stride reads are shown beside it), then the pairs: the gated layer's
forward ``_gemm`` pair, the final layer's forward pair, the backward ``_gemm_t`` pair (new and
old reads) and the fused layer (two passes, new and old reads), each against the forward final
pair; then whether the new reads are bitwise equal to the old ones (they must be), and the
answer: "yes" when every backward launch is within 1.15x of its forward launch. Exit status 0
either way (1 only if a bitwise check fails).

Runs on torch 2.11 / triton 3.6 (the GPU image) and newer. Device memory: a few (F, E, ROW)
fp32 surfaces at a time, about 10 GB at the largest shape.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

SHAPES = ((647000, 3, 32), (300000, 6, 32), (400000, 2, 64))
TINY_SHAPES = ((37, 1, 16),)
F, NL = 2, 3
LIMIT = 1.15


def _args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="tiny shape; on a CPU, in Triton's interpreter")
    p.add_argument("--fused-tiles", default="32,64,4", help="fused kernel BLOCK_M,BLOCK_N,num_warps")
    return p.parse_args()


ARGS = _args() if __name__ == "__main__" else None
if ARGS is not None and ARGS.tiny:
    import torch as _torch
    if not _torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")   # before the kernels are decorated

import torch  # noqa: E402

from tilefuse.ops.so2_mixing_stack import kernels, launch  # noqa: E402
from tilefuse.ops.so2_mixing_stack.configs import So2Config, heuristic  # noqa: E402
from tilefuse.ops.so2_mixing_stack.reference import So2Dims  # noqa: E402
from tilefuse.tuning import timing  # noqa: E402


def bench(providers: dict, device) -> dict[str, timing.Timing]:
    """Per-call times of ``providers``, all timed in one interleaved run (one sample of each a
    round, the order rotated each round), so ``timing.ratio`` between any two of them compares
    samples of the same round: CUDA-graph replays on a GPU, wall time in the interpreter."""
    out = timing.interleaved(providers, rounds=5 if device == "cuda" else 3, graphs=device == "cuda",
                             timer=None if device == "cuda" else timing.WallTimer())
    for t in out.values():
        if isinstance(t, Exception):
            raise t
    return out


def timed(specs, device) -> list:
    """(name, provider, reference name or None) rows -> (name, Timing, reference) rows, every
    provider of ``specs`` timed in the same ``bench`` run."""
    t = bench({name: fn for name, fn, _ in specs}, device)
    return [(name, t[name], ref) for name, _, ref in specs]


class Shape:
    def __init__(self, n_edges, lmax, focus_dim, device, fused_tiles):
        self.E, self.d, self.device = n_edges, So2Dims(lmax, focus_dim), device
        self.cfg = heuristic(lmax, focus_dim)
        bm, bn, warps = fused_tiles
        self.fused_cfg = So2Config(bm, bn, focus_dim, warps, 1, fused=True)
        self.gen = torch.Generator(device=device).manual_seed(0)

    def randn(self, *shape, scale=1.0):
        return torch.randn(shape, generator=self.gen, device=self.device, dtype=torch.float32) * scale

    def surface(self, scale=1.0):
        return self.randn(F, self.E, self.d.row, scale=scale)

    def weights(self):
        d = self.d
        return self.randn(NL, F, d.m0, d.m0, scale=d.m0 ** -0.5), self.randn(NL, F, d.m1, d.m1, scale=d.m1 ** -0.5)

    def segments(self):
        d = self.d
        return (("m0", 0, d.m0), ("m1", d.m0, d.m1))


def old_bwd_gemm(a, w, res, out, k_start, k_len, s: Shape):
    """The pre-issue-15 backward launch: W^T read through W's swapped strides."""
    cfg, d = s.cfg, s.d
    grid = launch.tiled_grid(F, s.E, k_len, cfg)
    kernels.so2_gemm_kernel[grid](
        a, w, w, out, res, out, out, out, out, F, s.E, d.row, k_start, k_len, k_start, k_len, d.focus_dim, d.lg,
        w.stride(0), w.stride(2), w.stride(1), MODE=kernels.BWD, APPLY_ALPHA=False, DOT_PRECISION="ieee",
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, num_warps=cfg.num_warps,
        num_stages=cfg.num_stages)


def old_fused_layer(g_cur, z, gw, w0, w1, out, s: Shape):
    cfg, d = s.fused_cfg, s.d
    for w, start, length, seg_m0 in ((w0, 0, d.m0, True), (w1, d.m0, d.m1, False)):
        kernels.so2_bwd_fused_kernel[launch.tiled_grid(F, s.E, length, cfg)](
            g_cur, z, gw, out, w, w, out, out, s.E, d.row, d.m0, d.lg, start, length, start, length,
            w.stride(0), w.stride(2), w.stride(1), SEGMENT_M0=seg_m0, SIGMA_LOADED=False,
            DOT_PRECISION="ieee", BLOCK_M=cfg.block_m,
            BLOCK_N=cfg.block_n, CF_P=d.focus_dim, num_warps=cfg.num_warps, num_stages=cfg.num_stages)


def measure(s: Shape) -> tuple[list, list, dict]:
    """(launch rows, pair rows, bitwise checks); rows are (name, Timing, reference name or None),
    the rows of one table timed in one interleaved run."""
    d, cfg, dev = s.d, s.cfg, s.device
    bitwise = {}

    # Single launches, both segments' in one run, on fresh inputs: a (F, E, ROW) input, the
    # residual, the output (the segments write disjoint columns).
    a, res, out = s.surface(0.5), s.surface(), torch.empty(F, s.E, d.row, device=dev)
    w0_all, w1_all = s.weights()
    alpha = torch.rand(s.E, F, generator=s.gen, device=dev) + 0.2
    x_local = torch.empty(s.E, F, d.row, device=dev)
    sigma = torch.rand(F, s.E, d.lg, generator=s.gen, device=dev)
    z = torch.empty_like(out)

    def segment_specs(seg, k0, kl, w, wt):
        # A function per segment: the providers run after the loop below, so each binds its
        # own segment's columns and weights here.
        fwd = f"fwd final {seg} (K=N={kl})"
        gated_n0 = d.focus_dim if seg == "m0" else k0
        gated_nl = kl - d.focus_dim if seg == "m0" else kl
        return [
            (fwd, lambda: launch._gemm(kernels.FINAL, a, w, res, x_local, d, cfg, k_start=k0, k_len=kl,
                                       n_start=k0, n_len=kl, alpha=alpha, apply_alpha=True), None),
            (f"fwd gated {seg} (K={kl},N={gated_nl})",
             lambda: launch._gemm(kernels.FWD_GATED, a, w, res, out, d, cfg, k_start=k0, k_len=kl,
                                  n_start=gated_n0, n_len=gated_nl, z=z, sigma=sigma), fwd),
            (f"bwd {seg} (K=N={kl})",
             lambda: launch._gemm(kernels.BWD, a, wt, res, out, d, cfg, k_start=k0, k_len=kl, n_start=k0,
                                  n_len=kl), fwd),
            (f"bwd {seg} old swapped strides", lambda: old_bwd_gemm(a, w, res, out, k0, kl, s), fwd),
        ]

    weights, specs = {}, []
    for seg, k0, kl in s.segments():
        w = (w0_all if seg == "m0" else w1_all)[0]
        weights[seg] = w, launch.transposed(w)
        specs += segment_specs(seg, k0, kl, *weights[seg])
    launches = timed(specs, dev)
    del x_local, sigma, z, specs
    new, old = torch.full_like(out, float("nan")), torch.full_like(out, float("nan"))
    for seg, k0, kl in s.segments():
        w, wt = weights[seg]
        launch._gemm(kernels.BWD, a, wt, res, new, d, cfg, k_start=k0, k_len=kl, n_start=k0, n_len=kl)
        old_bwd_gemm(a, w, res, old, k0, kl, s)
        cols = slice(k0, k0 + kl)
        bitwise[f"bwd {seg} new == old"] = bool(torch.equal(new[..., cols], old[..., cols]))
    del a, res, out, new, old, weights

    # Pairs: one layer's two launches, on fresh inputs.
    a, res, out = s.surface(0.5), s.surface(), torch.empty(F, s.E, d.row, device=dev)
    w0_all, w1_all = s.weights()
    w0, w1 = w0_all[0], w1_all[0]
    w0t, w1t = launch.transposed(w0), launch.transposed(w1)
    alpha = torch.rand(s.E, F, generator=s.gen, device=dev) + 0.2
    x_local = torch.empty(s.E, F, d.row, device=dev)
    sigma = torch.rand(F, s.E, d.lg, generator=s.gen, device=dev)
    z = torch.empty_like(out)
    # The fused layer: g_cur, the saved z, the gate weights (z scaled like pre-activations).
    g_cur, z_saved = res, s.surface()
    gw = s.randn(F, d.focus_dim, d.lg, scale=d.focus_dim ** -0.5)
    fcfg = s.fused_cfg

    def fwd_final_pair():
        for w, k0, kl in ((w0, 0, d.m0), (w1, d.m0, d.m1)):
            launch._gemm(kernels.FINAL, a, w, res, x_local, d, cfg, k_start=k0, k_len=kl, n_start=k0, n_len=kl,
                         alpha=alpha, apply_alpha=True)

    def fwd_gated_pair():
        launch._gemm(kernels.FWD_GATED, a, w0, res, out, d, cfg, k_start=0, k_len=d.m0, n_start=d.focus_dim,
                     n_len=d.m0 - d.focus_dim, z=z, sigma=sigma)
        launch._gemm(kernels.FWD_GATED, a, w1, res, out, d, cfg, k_start=d.m0, k_len=d.m1, n_start=d.m0,
                     n_len=d.m1, z=z, sigma=sigma)

    def old_pair(dst):
        old_bwd_gemm(a, w0, res, dst, 0, d.m0, s)
        old_bwd_gemm(a, w1, res, dst, d.m0, d.m1, s)

    ref = "fwd final pair"
    pairs = timed([
        (ref, fwd_final_pair, None),
        ("fwd gated pair (a gated layer)", fwd_gated_pair, ref),
        ("bwd _gemm_t pair", lambda: launch._gemm_t(a, w0t, w1t, res, out, d, cfg), ref),
        ("bwd pair old swapped strides", lambda: old_pair(out), ref),
        (f"fused layer {fcfg.name}", lambda: launch.fused_layer(g_cur, z_saved, gw, w0t, w1t, out, d, fcfg), ref),
        ("fused layer old swapped strides", lambda: old_fused_layer(g_cur, z_saved, gw, w0, w1, out, s), ref),
    ], dev)
    del x_local, sigma, z
    new, old = torch.full_like(out, float("nan")), torch.full_like(out, float("nan"))
    launch.fused_layer(g_cur, z_saved, gw, w0t, w1t, new, d, fcfg)
    old_fused_layer(g_cur, z_saved, gw, w0, w1, old, s)
    bitwise["fused new == old"] = bool(torch.equal(new, old))
    new.fill_(float("nan"))
    old.fill_(float("nan"))
    launch._gemm_t(a, w0t, w1t, res, new, d, cfg)
    old_pair(old)
    bitwise["bwd _gemm_t pair new == old"] = bool(torch.equal(new, old))
    return launches, pairs, bitwise


def print_table(rows):
    """One line per row: its median ms and its within-round ratio to its reference row."""
    times = {name: t for name, t, _ in rows}
    for name, t, ref in rows:
        ratio = f"{timing.ratio(t, times[ref]):6.2f}x {ref}" if ref else "  1.00x (reference)"
        print(f"  {name:44s} {t.median_ms:9.3f} ms  {ratio}")


def main() -> int:
    args = ARGS or _args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.tiny:
        print("no CUDA device: run with --tiny for the interpreter smoke test", file=sys.stderr)
        return 2
    import triton
    gpu = torch.cuda.get_device_name() if device == "cuda" else "CPU (Triton interpreter)"
    print(f"# {gpu}; torch {torch.__version__}, triton {triton.__version__}; F={F}, NL={NL}, fp32 IEEE dots")
    tiles = tuple(int(v) for v in args.fused_tiles.split(","))
    answers, exact = [], True
    for n_edges, lmax, focus_dim in (TINY_SHAPES if args.tiny else SHAPES):
        s = Shape(n_edges, lmax, focus_dim, device, tiles)
        d = s.d
        print(f"\nE={n_edges} lmax={lmax} Cf={focus_dim} (ROW {d.row}, M0 {d.m0}, M1 {d.m1}); "
              f"GEMM tiles {s.cfg.name}")
        t0 = time.perf_counter()
        launches, pairs, bitwise = measure(s)
        print_table(launches)
        print_table(pairs)
        times = {name: t for name, t, _ in launches}
        worst = []
        for seg, _, kl in s.segments():
            worst.append((seg, timing.ratio(times[f"bwd {seg} (K=N={kl})"], times[f"fwd final {seg} (K=N={kl})"])))
        ok = all(r <= LIMIT for _, r in worst)
        answers.append(ok)
        exact &= all(bitwise.values())
        print("  bitwise: " + ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in bitwise.items()))
        print(f"  each backward launch within {LIMIT}x of forward: {'yes' if ok else 'no'} ("
              + ", ".join(f"{seg} {r:.2f}x" for seg, r in worst) + f"); {time.perf_counter() - t0:.0f} s")
        del s
        if device == "cuda":
            torch.cuda.empty_cache()
    print(f"\nanswer: {'yes' if all(answers) else 'no'} (every shape, every backward launch within {LIMIT}x)"
          + ("" if exact else "; BITWISE MISMATCH between new and old weight reads"))
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
