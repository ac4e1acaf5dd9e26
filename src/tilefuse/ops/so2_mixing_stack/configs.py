"""so2_mixing_stack launch configurations as data.

The stack's problem key is (lmax, focus_dim, dtype); edge counts vary per call and only set the
grid. ``So2Config`` holds the GEMM tiles; BLOCK_K equals focus_dim where focus_dim is a power
of two >= 16 so that one K tile is one sub-tile (what a bitwise-equal fused backward needs).
"""

from __future__ import annotations

import dataclasses

from ...utils import next_power_of_2


# ``So2Config.precision``: how the layer GEMMs' fp32 dots are computed.
# - "ieee": FMA dots, IEEE float32 (levels 1-2: the spec's exact path).
# - The level-3 splits: each fp32 operand is split into a head and a tail in a tensor-core
#   format, and per K tile the three products a_lo w_hi + a_hi w_lo + a_hi w_hi are summed on
#   the tensor cores from a zero accumulator, then added to the float32 accumulator with
#   float32 arithmetic (tensor cores truncate while they accumulate). The weights are split
#   once per call in memory (the kernels read head and tail tiles), the activation tiles in
#   registers. Used only on keys whose entry records a passed accuracy validation (tune.py).
#   - "3xtf32": CUTLASS's 3xTF32 scheme: hi = x rounded to TF32 (truncated where rounding
#     would overflow), lo = x - hi (exact) rounded to TF32. TF32 keeps float32's range.
#   - "3xfp16": float16 heads and tails of operands scaled by powers of two (weights per
#     column on the host, activation tiles per row in the kernel) so that each row's or
#     column's largest magnitude lands in [2**14, 2**15): float16's range then holds every
#     scaled value, and its tensor-core products run at twice TF32's rate with half the
#     operand bytes. The products are scaled back before they join the accumulator. Heads
#     and tails keep 22 bits of an operand within about 2**-17 of its row's (K tile's) or
#     column's largest magnitude, fewer below it (about 14 bits at 2**-24, 8 at 2**-30: the
#     tail reaches float16's subnormals); TF32's split keeps 22 bits down to about 2**-115 in
#     absolute value (18 at 2**-118, 12 at 2**-124: float32's subnormals).
#   The H200's measurements of 3xtf32, and the variants tried before it:
#   benchmarks/results/2026-12-01-h200-h.
#   - "3xfp16-gate": 3xfp16, and the forward gate kernel's scalar block s = u_m0 @ W0[:, :Cf]
#     (the gated layer GEMM's first Cf columns, which the gate kernel computes) in 3xfp16 too,
#     from the same split weights. The other precisions compute s with the exact dots. At
#     Neo the gate kernel took 1.9 ms of a 22 ms level-3 step (results/2026-12-01-h200-m
#     run 11); by count its two IEEE GEMMs (s, and s @ gw for sigma) take longer at the FMA
#     rate the layer GEMMs reach than its bytes at bandwidth (about 0.5 against 0.4 ms a
#     layer), so s on the tensor cores should leave it memory-bound (not yet measured: the
#     level-3 sweeps decide). The gate dots sigma = sigmoid(s @ gw) stay IEEE, as in the
#     backward's sigma recompute from the saved s: forward and backward gate the same s the
#     same way.
# 16-bit inputs take TF32 dots in every config (their products are exact in TF32).
EXACT = "ieee"
TF32X3 = "3xtf32"
FP16X3 = "3xfp16"
FP16X3_GATE = "3xfp16-gate"
PRECISIONS = (EXACT, TF32X3, FP16X3, FP16X3_GATE)
# The fused backward's K tiles take the relay GEMM's tile products (kernels.tile_product) in
# these precisions; 3xtf32, slower than the exact dots on the H200, is left out, and so is
# 3xfp16-gate (it differs from 3xfp16 only in the forward; its level-3 candidates are relays).
FUSED_PRECISIONS = (EXACT, FP16X3)


@dataclasses.dataclass(frozen=True)
class So2Config:
    """GEMM tiles of the stack's kernels, the backward route (the relay: three kernels per
    gated layer; with ``fused``, one fused kernel per layer and column segment; with
    ``compose``, the relay's pointwise kernels and cuBLAS batched GEMMs, compose.py) and the
    precision of the layer GEMMs' dots (``PRECISIONS``; the fused route takes the exact dots or
    3xfp16, the composition route the exact dots only). ``sigma_pass`` (fused only): each
    layer's gate sigmoid is written once by the relay's sigma kernel and read by the fused
    kernel, instead of recomputed by every program of it (kernels.so2_bwd_fused_kernel).
    ``wgmma`` (relay, 3xfp16 or 3xfp16-gate only): the layer GEMMs, forward and backward, run
    wgmma_kernels.so2_gemm3x_wgmma_kernel (Gluon: the three products of a K tile waited for
    once, the weight tiles through TMA into a ring of ``num_stages`` slots, 2 to WGMMA_MAX_STAGES,
    each K tile's requested num_stages - 1 tiles ahead)
    where it can run, else so2_gemm_kernel: bitwise the same result either way.
    The backward always uses the config; the forward uses the tiles and precision of a level-3
    entry, else of its own key's entry (tune.py's forward keys: relay tiles, or for float32 the
    composition route's cuBLAS GEMMs), else the heuristic's (op.forward_config)."""

    block_m: int = 32
    block_n: int = 64
    block_k: int = 32
    num_warps: int = 4
    num_stages: int = 2
    fused: bool = False
    precision: str = EXACT
    compose: bool = False
    sigma_pass: bool = False
    wgmma: bool = False

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"So2Config.precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.compose and self.precision != EXACT:
            raise ValueError("So2Config: the compose backward route is exact only (precision 'ieee')")
        if self.fused and self.precision not in FUSED_PRECISIONS:
            raise ValueError(f"So2Config: the fused backward route takes precision {' or '.join(FUSED_PRECISIONS)}, "
                             f"got {self.precision!r}")
        if self.fused and self.compose:
            raise ValueError("So2Config: fused and compose are two backward routes; set one")
        if self.sigma_pass and not self.fused:
            raise ValueError("So2Config: sigma_pass is a variant of the fused route (set fused=True)")
        if self.wgmma and (self.fused or self.compose or self.precision not in (FP16X3, FP16X3_GATE)):
            raise ValueError("So2Config: wgmma is a variant of the relay's 3xfp16 layer GEMMs (precision "
                             f"'3xfp16' or '3xfp16-gate', not fused or compose), got {self!r}")
        if self.wgmma and not 2 <= self.num_stages <= WGMMA_MAX_STAGES:
            raise ValueError(f"So2Config: a wgmma config's num_stages is its weight ring's depth, 2 to "
                             f"{WGMMA_MAX_STAGES}, got {self.num_stages}")

    @property
    def route(self) -> str:
        """The backward route: "fused", "compose" or "relay" (also the launch records'
        ``so2_bwd_{route}_layer``)."""
        return "fused" if self.fused else "compose" if self.compose else "relay"

    @property
    def name(self) -> str:
        suffix = ("" if self.precision == EXACT else f"-{self.precision}") + ("-wgmma" if self.wgmma else "")
        tiles = f"M{self.block_m}-N{self.block_n}-K{self.block_k}-w{self.num_warps}-s{self.num_stages}"
        return f"{self.route}{'-sigma' if self.sigma_pass else ''}-{tiles}{suffix}"

    def relay(self) -> "So2Config":
        """The relay with this config's tiles and precision: bitwise the fused route's result
        (the fused kernel's contract), so where a fused config cannot run (weight gradients),
        this runs the same arithmetic."""
        return dataclasses.replace(self, fused=False, sigma_pass=False)

    def dot_precision(self, dtype_is_fp32: bool) -> str:
        """The layer GEMMs' DOT_PRECISION (kernels.so2_gemm_kernel) for inputs of that dtype."""
        if not dtype_is_fp32:
            return "tf32"
        return FP16X3 if self.precision == FP16X3_GATE else self.precision

    def gate_precision(self, dtype_is_fp32: bool) -> str:
        """The forward gate kernel's S_PRECISION for its scalar block s (kernels.
        so2_fwd_gate_kernel): 3xfp16 for a "3xfp16-gate" config, else the exact dots ("ieee";
        "tf32" for 16-bit inputs, whose products TF32 holds exactly)."""
        if not dtype_is_fp32:
            return "tf32"
        return FP16X3 if self.precision == FP16X3_GATE else EXACT


# Above this padded focus_dim (cf_padded) the gate dots are not formed from whole (CF_P x CF_P)
# register tiles: at CF_P 128 (focus_dim 96 and 128) those tiles spilled 1-17 KB a thread
# (sm_90: the sigma kernel 1016 bytes, the pointwise kernel 16,992, the forward gate 1024), and
# the op ran at 6-15 TFLOP/s there against 27-56 at focus_dim <= 64 (benchmarks/results/
# 2026-12-05-h200-at). Wider focus dims take the gate's K (sigma = sigmoid(s @ gw)) or a group's
# columns (the pointwise kernel's gq @ gw^T) kernels.GATE_CHUNK at a time, each chunk's dot
# accumulating onto the last, and the forward gate kernel leaves sigma to the sigma kernel
# (launch.forward). The fused kernel, whose bitwise contract with the relay covers these dots,
# runs only at focus_dim <= FUSED_MAX_FOCUS_DIM, where nothing changes.
GATE_REGISTER_MAX = 64

# The fused kernel forms gate dots in registers: above this focus_dim the per-program gate
# tiles spill (the seed project's cuBLAS gate path started at 96).
FUSED_MAX_FOCUS_DIM = 64


def fused_supported(focus_dim: int, dtype_is_fp32: bool) -> bool:
    """Shape/dtype guards of the fused backward: fp32, and focus_dim a power of two in
    [16, FUSED_MAX_FOCUS_DIM] so that BLOCK_K = focus_dim makes one K tile one sub-tile."""
    return dtype_is_fp32 and 16 <= focus_dim <= FUSED_MAX_FOCUS_DIM and cf_padded(focus_dim) == focus_dim


def fused_applies(cfg: So2Config, focus_dim: int, dtype_is_fp32: bool, weight_grads: bool) -> bool:
    """Whether a fused ``cfg`` may run this backward: the guards of fused_supported, BLOCK_K =
    focus_dim, and no weight gradients (they need gz and gq in memory: relay only)."""
    return (not weight_grads and cfg.block_k == focus_dim and fused_supported(focus_dim, dtype_is_fp32))


# With the sigma pass the fused kernel's K loop is the relay GEMM's plus gz = g * sigma: 80-83%
# of its sm_90 instructions FFMA at Cf 32 against the relay GEMM's 85% (triton 3.6; 1.5 times
# as many, 76%, where it recomputes sigma), so the relay's winning tiles (L3-C32: 64x64,
# L6-C32: 32x128, both 4 warps) are candidates with the relay's two stages too (96-168
# registers, no spills).
FUSED_SIGMA_PASS_PIPELINED = ((64, 64, 4), (32, 128, 4))


def fused_candidates(lmax: int, focus_dim: int) -> list[So2Config]:
    """Fused configs worth timing against the relay (BLOCK_K is always focus_dim), each with
    sigma recomputed in every program and with the relay's sigma pass (``sigma_pass``), on one
    stage (the fused kernel's K loop walks sub-tiles whose loads are few and latency is hidden
    by occupancy; every extra candidate costs two compiles per sweep), and with the sigma pass
    the relay's pipelined tiles (FUSED_SIGMA_PASS_PIPELINED).

    Recomputing sigma costs every program L (m = 0 pass) or 2 L (|m| = 1 pass) gate dots of
    BLOCK_M x Cf x Cf FMAs and the gate weights' registers: on the H200 the fastest recomputing
    fused config took 1.72x (L3-C32) and 2.13x (L6-C32) the relay's backward
    (benchmarks/results/2026-12-02-h200-p run 4), where the relay's sigma kernel writes sigma
    once per layer (0.34 ms of a 5.7 ms relay layer at Neo: results/2026-12-01-h200-m).

    No 16-row tiles on 8 warps: on the H200 (triton 3.6) the fused kernel with 16x128 tiles on
    8 warps differed from the relay in the last bit at focus_dim 16 (about 1 element in 6;
    benchmarks/results/2026-11-29-h200-b/so2_bitwise_diag.py), where every other config
    measured was bitwise equal. The sweep's bitwise check would reject it on the swept inputs, but the contract must hold at
    every edge count, so the space leaves that layout out."""
    one_stage = [So2Config(block_m, block_n, focus_dim, num_warps, 1, fused=True, sigma_pass=sigma_pass)
                 for sigma_pass in (False, True)
                 for block_m in (16, 32, 64) for block_n in (64, 128) for num_warps in (4, 8)
                 if not (block_m == 16 and num_warps == 8)]
    return one_stage + [So2Config(block_m, block_n, focus_dim, num_warps, 2, fused=True, sigma_pass=True)
                        for block_m, block_n, num_warps in FUSED_SIGMA_PASS_PIPELINED]


# Relay tiles worth timing against the heuristic's 32x64 on 4 warps (BLOCK_K stays the
# heuristic's): the relay GEMM is bound by Triton's FMA dots (IEEE fp32), whose throughput grows
# with the outputs each thread accumulates; on the H200 the untuned relay layer (its 138 GFLOP
# GEMM plus the pointwise work) took 20.2 ms, about 7 TFLOP/s, against ~44 for a plain tiled
# Triton GEMM at this shape (docs/specs/so2_mixing_stack.md; benchmarks/results/2026-11-29-h200-b/run5).
RELAY_TILES = ((64, 64, 4, 2), (32, 128, 4, 2), (64, 128, 8, 2), (128, 64, 8, 2), (128, 128, 8, 2))


def compose_candidates(lmax: int, focus_dim: int) -> list[So2Config]:
    """The composition route (compose.py), its pointwise kernels (and the forward's gate kernel)
    on the heuristic's rows and warps (its GEMMs are cuBLAS's: no tiles to try)."""
    return [dataclasses.replace(heuristic(lmax, focus_dim), compose=True)]


def relay_candidates(lmax: int, focus_dim: int) -> list[So2Config]:
    """Relay configs (tile changes) worth timing against the heuristic relay."""
    base = heuristic(lmax, focus_dim)
    return [So2Config(block_m, block_n, base.block_k, num_warps, num_stages)
            for block_m, block_n, num_warps, num_stages in RELAY_TILES]


# Level-3 tiles: tensor-core dots want wider tiles and deeper pipelines than the FMA dots;
# (BLOCK_M, BLOCK_N, warps, stages), BLOCK_K the heuristic's. 3xtf32: the fastest three at
# the Neo shape (benchmarks/results/2026-12-01-h200-h, run 3), of 6 measured. 3xfp16: the
# tiles whose sm_90 compile (triton 3.6 and 3.8) has no spills, from one to two warpgroups
# (tests/test_so2_level3.py checks the spills); the H200 sweeps picked 64x64, 64x128 and
# 128x128 (benchmarks/results/2026-12-01-h200-l, run 10b). Measured and left out
# (benchmarks/results/2026-12-02-h200-q): 128x64 on two warpgroups (its Neo GEMM pairs looked
# 1.05-1.12x faster than 64x64 alone, but the level-3 sweeps timed the whole op at 1.442x /
# 1.753x the baseline against the winners' 1.571x / 2.001x at L3-C32 / L6-C32); a K tile of
# 2 Cf, never faster than the best Cf tile, exact or 3xfp16 (same tile: exact 0.89-1.11x,
# 3xfp16 0.66-1.02x the Cf tile's speed), so BLOCK_K stays the heuristic's.
TF32X3_TILES = ((32, 64, 4, 2), (128, 64, 4, 3), (128, 128, 8, 3))
FP16X3_TILES = ((64, 64, 4, 3), (128, 64, 4, 3), (64, 128, 4, 3), (128, 128, 8, 3))


# The fused route in 3xfp16 (level 3, with the relay's sigma pass): (BLOCK_M, BLOCK_N, warps,
# stages). Its K tiles hold more than the relay GEMM's (g, sigma and, on the m = 0 pass, every
# group's z and gq), so of the relay's 3xfp16 tiles only these compile for sm_90 without spills
# at Cf 32 and both passes (triton 3.6; 64x64 on 4 warps at Cf 64 too: 155-214 registers,
# benchmarks/compile_report.py --ops so2); the others spill 8-1264 bytes.
FUSED_FP16X3_TILES = ((64, 64, 4, 2), (64, 64, 4, 3), (128, 128, 8, 2))
# The relay's 3xfp16 GEMMs in Gluon (So2Config.wgmma; num_stages is the weight tiles' ring depth:
# 2 requests each K tile's weights one tile ahead, as every tile below does; deeper rings are in
# the kernel (their sm_90 compiles keep the same registers: tests/test_so2_wgmma.py), bitwise the
# same on the GPU and 1.06-1.31x slower at 64x64 (results/2026-12-03-h200-w run 6; at 64x128 they
# gain 2-8% at Cf 32, still behind 64x64, and lose 1.6x at Cf 64), so not among the candidates).
# Against so2_gemm_kernel's 3xfp16 at the same tiles the backward GEMM pair ran 1.06-1.34x
# faster at the three benchmark shapes, bitwise the same (results/2026-12-02-h200-t run 5);
# 64 rows on 4 warps or 128 on 8 (a warp group's wgmma takes 64 rows); none of these spills
# in the sm_90 compile (triton 3.6 and 3.8).
WGMMA_TILES = ((64, 64, 4, 2), (64, 128, 4, 2), (128, 64, 8, 2), (128, 128, 8, 2))
WGMMA_MAX_STAGES = 4


def level3_candidates(lmax: int, focus_dim: int) -> list[So2Config]:
    """The split-precision configs a level-3 key's sweep validates and times against the exact
    heuristic relay: relay configs of both splits (3xfp16 also with the gate's scalar block in
    3xfp16, FP16X3_GATE), and where the fused guards allow it
    (fused_supported; BLOCK_K = focus_dim) the fused route in 3xfp16 with the relay's sigma
    pass (FUSED_FP16X3_TILES); and both 3xfp16 relays with their GEMMs in Gluon (wgmma,
    WGMMA_TILES) where BLOCK_K = focus_dim is a multiple of 16 (wgmma's K step)."""
    base = heuristic(lmax, focus_dim)
    out = [So2Config(block_m, block_n, base.block_k, num_warps, num_stages, precision=precision)
           for precision, tiles in ((FP16X3, FP16X3_TILES), (FP16X3_GATE, FP16X3_TILES), (TF32X3, TF32X3_TILES))
           for block_m, block_n, num_warps, num_stages in tiles]
    if base.block_k == focus_dim and focus_dim % 16 == 0:
        out += [So2Config(block_m, block_n, focus_dim, num_warps, num_stages, precision=precision, wgmma=True)
                for precision in (FP16X3, FP16X3_GATE) for block_m, block_n, num_warps, num_stages in WGMMA_TILES]
    if fused_supported(focus_dim, True) and base.block_k == focus_dim:
        out += [So2Config(block_m, block_n, focus_dim, num_warps, num_stages, fused=True, sigma_pass=True,
                          precision=FP16X3) for block_m, block_n, num_warps, num_stages in FUSED_FP16X3_TILES]
    return out


def cf_padded(focus_dim: int) -> int:
    """focus_dim rounded up to a power of two, at least 16 (tl.dot's smallest tile)."""
    return max(16, next_power_of_2(focus_dim))


def heuristic(lmax: int, focus_dim: int) -> So2Config:
    """The relay's tiles: BLOCK_K = focus_dim where that is a power of two (<= 64), so relay
    and fused share the K walk; 32 otherwise."""
    block_k = focus_dim if cf_padded(focus_dim) == focus_dim and focus_dim <= 64 else 32
    return So2Config(block_m=32, block_n=64, block_k=block_k, num_warps=4, num_stages=2)
