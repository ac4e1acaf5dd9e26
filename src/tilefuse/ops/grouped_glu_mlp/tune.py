"""grouped_glu_mlp's tuning family: fused kernels (GEMM tiles) against the compose route.

Key: H, F, E, the dtype's size (exact: they set the GEMM shapes; bf16 and fp16 share keys,
swept on bfloat16), a power-of-two bucket of T (varies per call), the epilogue's constexprs
(activation, interleave, bias) and the quantized recipe if any. Without a recipe the baseline
is what the op runs when the table has no winner (op.route): the compose route (compose.py:
every GEMM on ``torch._grouped_mm``, the glue as Triton kernels; choice ``"compose"``), or
where ``torch._grouped_mm`` does not take the row sizes the fused kernels at their heuristic
tiles. Tables store either as the entry ``"baseline"`` (the choice names only appear in the
measurement's description). Every fused candidate is a route change (3% margin). A recipe has
no unfused composition: its baseline is the kernels with the heuristic tiles
(configs.heuristic), and the candidates are other tiles (fp8_block: BLOCK_K 128 only). Outputs
must agree with the baseline within the tolerance derived in ``compare``. ``tilefuse tune
--dtype fp8_block`` (or mxfp8, nvfp4) sweeps bf16 inputs with that recipe.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import torch

from ...tuning.family import ROUTE, TuningFamily, cli_itemsize
from ...utils import next_power_of_2, normwise_rel_error
from . import compose
from .configs import GemmConfig, heuristic
from .reference import random_inputs

_HERE = Path(__file__).resolve().parent
_KEY = re.compile(r"H(\d+)-F(\d+)-E(\d+)-x(\d+)-T(\d+)-(swiglu|geglu)-s(\d+)(-bias)?(?:-(fp8_block|mxfp8|nvfp4))?")
# Recipe-relative spacing of the quantized data (one step of E4M3's 3-bit or E2M1's 1-bit
# mantissa, relative to the value), for ``compare``.
_QUANT_STEP = {"fp8_block": 2.0 ** -3, "mxfp8": 2.0 ** -3, "nvfp4": 2.0 ** -1}
_SWEEP_DTYPE = {2: torch.bfloat16, 4: torch.float32}
COMPOSE = compose.NAME   # the baseline where compose.takes: the compose route; elsewhere the
# fused kernels at their heuristic tiles (rows off 16 bytes, a quantized recipe)

# The spec's three shapes (experts, tokens, H, F).
DEFAULT_SHAPES = ((8, 16384, 4096, 3584), (64, 32768, 2048, 1408), (128, 65536, 2048, 768))
# The epilogue keys the default grid sweeps at each shape (activation, interleave (0: halves),
# bias): the default first.
EPILOGUE_GRID = tuple((act, inter, bias) for bias in (False, True) for act in ("swiglu", "geglu")
                      for inter in (32, 0))
# ``tilefuse tune --shape``: EXPERTSxTOKENSxHxF with the key's epilogue suffixes.
_CLI_SHAPE = re.compile(r"(\d+)x(\d+)x(\d+)x(\d+)(?:-(?P<act>swiglu|geglu))?(?:-s(?P<inter>\d+))?(?P<bias>-bias)?")


@dataclasses.dataclass(frozen=True)
class GroupedProblem:
    n_tokens: int          # a power-of-two bucket of T
    hidden: int
    ffn: int
    n_experts: int
    itemsize: int
    activation: str
    interleave: int        # 0: halves
    has_bias: bool
    recipe: str = ""       # "": none; else a quantized recipe (recipes.RECIPES)

    @classmethod
    def of(cls, n_tokens, hidden, ffn, n_experts, itemsize, activation, interleave, has_bias, recipe=""):
        return cls(next_power_of_2(max(n_tokens, 1)), hidden, ffn, n_experts, itemsize, activation, interleave,
                   has_bias, recipe)


# The sweep's candidates. Each one compiles every kernel of the forward and backward (one
# config serves all roles), so the space is a short list of Hopper-shaped tiles rather than a
# product: wgmma wants 64-row multiples per warp group, 8 warps for 128x128 and larger
# accumulators, and 3-4 stages of 64-wide K tiles fit the 227 KiB of shared memory. 16-bit
# operands read through TMA (GemmConfig.tma: every role ran 1.1-1.35x faster so on the H200,
# results/2026-12-01-h200-l; where a layout does not allow descriptors the same tiles read
# through pointers). Left out as measured there: 128x256 (the GLU's two B tiles do not fit in
# shared memory), 256x128 and 128x128 on 4 warps (the GLU at 150-160 TFLOP/s). fp32 (tf32-free
# IEEE dots) keeps 32-wide K tiles and pointers.
_CANDIDATES_16BIT = (
    (128, 128, 64, 8, 4, 1, True), (128, 128, 64, 8, 3, 1, True), (128, 128, 32, 8, 4, 1, True),
    (128, 64, 64, 4, 4, 2, True), (64, 128, 64, 4, 4, 2, True), (64, 64, 64, 4, 4, 2, True),
)
_CANDIDATES_FP32 = ((64, 64, 32, 4, 3, 2), (128, 64, 32, 4, 3, 1), (64, 128, 32, 4, 3, 1), (128, 128, 32, 8, 3, 1))
# 16-bit, where the compose route is the baseline: the compose route itself with its two weight
# gradients through ws_wgrad's warp-specialised Gluon kernel (GemmConfig.compose: block_m the
# gradient columns a tile, num_stages its ring). Against CUTLASS's wgrads (the baseline's) the
# 256-column tile on a 3-slot ring ran 1.08-1.11x faster at the spec's shape 1 and 1.24-1.35x
# at shapes 2-3, the 128-column one on 5 slots 1.03-1.11x and 1.26-1.31x (balanced and routed
# counts, results/2026-12-03-h200-aa run 5); 256 columns on 2 slots ran 0.73-0.88x (run 3).
# With them, the route's four row-ragged GEMMs through ws_rows' kernel (GemmConfig.rows_block_n,
# rows_stages) or not. The four together against CUTLASS's, balanced / routed counts
# (results/2026-12-03-h200-ab run 1): 256 columns on 3 slots 1.06x / 1.14x, 1.13x / 1.23x and
# 1.15x / 1.28x at the spec's shapes 1-3; 128 on 5 slots 1.02x / 1.06x, 1.13x / 1.25x, 1.16x /
# 1.25x; 128 on 4 and on 6 no better than one of those anywhere (0.96-1.25x).
# With a rows tile, fc1's GLU in ws_rows' epilogue (where the layout allows) or the GLU kernel
# after fc1 (GemmConfig.rows_glu): the epilogue ran 1.05x against 1.01x CUTLASS + GLU kernel
# at shape 1 interleaved and within 1% of the unfused pair at shapes 2-3 (-ab run 4); in the
# halves layout 1.003x / 0.998x / 0.977x the GLU kernel's route as called (-ae run 2); over
# the whole grid the best of each 1.01-1.05x the other's at shape 1, 0.98-1.01x at shapes 2-3
# (-ae run 3, where the GLU kernel won five keys).
_WGRAD_TILES = ((256, 3), (128, 5))
_ROWS_TILES = ((0, 0, True), (256, 3, True), (128, 5, True), (256, 3, False), (128, 5, False))
COMPOSE_CANDIDATES = tuple(GemmConfig(bm, 128, 64, 4, s, 1, compose=True, rows_block_n=rn, rows_stages=rs,
                                      rows_glu=glu)
                           for rn, rs, glu in _ROWS_TILES for bm, s in _WGRAD_TILES)


# fp8_block: BLOCK_K is the 128-wide scaling block; the heuristic is the recipe's baseline
# (candidates_for leaves it out), the others are the runner-up tilings of the H200 profile and
# two through TMA: the heuristic's tiles, and 64x128 on 4 warps, the fastest tile measured for
# fc2 and the fc1 dgrad (0.593 / 1.157 ms at the first shape against 0.645 / 1.323 for the
# heuristic's, results/2026-12-02-h200-o run 2; its GLU and dGLU launches take 64x64 tiles).
# Left out as measured: that tile capped at 168 registers, three programs an SM
# (GemmConfig.maxnreg, which the GLU's pointer launch does not take). It ran fc2 1.05-1.19x,
# the dGLU 1.13-1.15x and the fc1 dgrad 1.00-1.08x faster at the spec's shapes 2-3, the GLU
# 0.92-0.96x (results/2026-12-02-h200-s run 3), and the whole op 0.958x / 1.004x / 1.026x the
# baseline at the three keys against 1.012x / 1.020x / 1.034x uncapped (run 4). Caps on
# shape 1's 8-warp tiles ran every role 1.2-2x slower.
# The last: the heuristic with fc2 and the fc1 dgrad through the warp-specialised Gluon kernel
# (GemmConfig.ws). Those two roles ran 1.07-1.19x faster so than at the best Triton tile, 64x128
# on 4 warps through TMA, at the spec's three shapes (results/2026-12-03-h200-z run 7), and the
# whole op 1.034x / 1.058x / 1.048x the heuristic (run 8). With it, fc1 + GLU through the ws
# kernel or through the Triton GLU launch (rows_glu, which takes the fc2 dgrad + dGLU along
# where a tile holds whole gate / up groups or in the halves layout; the runs below timed the
# GLU alone, at interleave 32), each with the
# second stream or on one (side_stream): on two streams the ws GLU ran the op 1.01-1.05x
# faster, on one stream the Triton GLU was the fastest form at shapes 2-3, 4-5% ahead of the ws
# GLU on two (results/2026-12-04-h200-ai runs 3 and 6, balanced counts). The sweep of the four
# (its ragged counts) took the ws GLU at every spec key, on one stream at shapes 1-2
# (2026-12-04-h200-aj run 1).
_WS_FP8 = GemmConfig(128, 128, 128, 8, 3, 2, ws=True)
_CANDIDATES_FP8 = tuple(GemmConfig(*c) for c in (
    (128, 128, 128, 8, 3, 1), (128, 64, 128, 8, 3, 1), (128, 64, 128, 8, 4, 1), (64, 128, 128, 4, 3, 2),
    (64, 64, 128, 4, 4, 2), (128, 128, 128, 8, 3, 2, True), (64, 128, 128, 4, 3, 2, True),
)) + tuple(dataclasses.replace(_WS_FP8, rows_glu=glu, side_stream=side)
           for glu, side in ((True, True), (False, True), (True, False), (False, False)))


def _glu_layout_fits(p: GroupedProblem, block_n: int) -> bool:
    """Whether ws_rows' tile of ``block_n`` columns takes fc1's GLU in its epilogue for this
    key's layout (ws_rows.glu_applies' layout rule: an interleave of 8 to block_n / 2, a power
    of two; or the halves layout with F a multiple of block_n / 2)."""
    if p.interleave == 0:
        return p.ffn % (block_n // 2) == 0
    return 8 <= p.interleave <= block_n // 2 and p.interleave & (p.interleave - 1) == 0


def candidates_for(problem: GroupedProblem) -> list[GemmConfig]:
    """Tile candidates. Where the baseline is the heuristic config (a quantized recipe, rows
    off 16 bytes: GroupedFamily.baseline) it is left out here; mxfp8 / nvfp4 decode into
    bfloat16 and take the 16-bit tiles."""
    if problem.recipe == "fp8_block":
        configs = list(_CANDIDATES_FP8)
    else:
        configs = [GemmConfig(*c) for c in (_CANDIDATES_FP32 if problem.itemsize == 4 and not problem.recipe
                                            else _CANDIDATES_16BIT)]
    if problem.recipe or not compose.takes(problem.itemsize, problem.hidden, problem.ffn):
        configs = [c for c in configs if c != heuristic("fwd", problem.itemsize, problem.recipe or None)]
    elif problem.itemsize == 2:
        configs += COMPOSE_CANDIDATES
    return configs


def _ws_runs_here() -> bool:
    """Whether a ``ws`` config's store GEMMs (or a ``compose`` config's wgrads) run in Gluon where
    sweeps run (the current CUDA device; the CPU never): there its sweep must see them launch.
    Elsewhere the config runs grouped_gemm_kernel (torch._grouped_mm), the same bits, and is
    timed as that."""
    from .. import gluon_hopper   # imports Triton: only where a sweep asks
    return gluon_hopper.available_here()


# What a sweep compares, candidate against baseline (compare): the biases' gradients on keys
# with biases.
OUTPUTS = ("y", "dx", "dprobs", "dw1", "dw2", "db1", "db2")


def _outputs(y, dx, dprobs, dw1, dw2, db1, db2) -> dict:
    out = dict(y=y, dx=dx, dprobs=dprobs, dw1=dw1, dw2=dw2, db1=db1, db2=db2)
    return {name: t for name, t in out.items() if t is not None}


class GroupedFamily(TuningFamily):
    name = "grouped_glu_mlp"
    config_class = GemmConfig
    # What a measurement depends on (the cache file's fingerprint, store.kernel_source_hash):
    # the kernels and their launch (the recipes' quantizers included, with the format
    # constants they compile in and the scale layout), the routes, streams and plans, the
    # candidates and tolerances, and the reference. Not the generic helpers (utils.cdiv, ...,
    # device.num_sms), whose meaning does not change with an edit of theirs.
    source_files = (_HERE / "kernels.py", _HERE / "compose_kernels.py", _HERE / "configs.py", _HERE / "launch.py",
                    _HERE / "compose.py", _HERE / "ws_kernels.py", _HERE / "ws_wgrad.py", _HERE / "ws_rows.py",
                    _HERE / "recipes.py", _HERE / "streams.py", _HERE / "plan.py", _HERE / "op.py", _HERE / "tune.py",
                    _HERE / "reference.py", _HERE.parent / "triton_common.py", _HERE.parent / "gluon_hopper.py",
                    _HERE.parent.parent / "quant" / "kernels.py", _HERE.parent.parent / "quant" / "launch.py",
                    _HERE.parent.parent / "quant" / "formats.py", _HERE.parent.parent / "quant" / "swizzle.py")

    def key(self, p: GroupedProblem) -> str:
        return (f"H{p.hidden}-F{p.ffn}-E{p.n_experts}-x{p.itemsize}-T{p.n_tokens}-{p.activation}-s{p.interleave}"
                + ("-bias" if p.has_bias else "") + (f"-{p.recipe}" if p.recipe else ""))

    def problem_for_key(self, key: str) -> GroupedProblem:
        m = _KEY.fullmatch(key) if isinstance(key, str) else None
        if m is None or int(m[4]) not in _SWEEP_DTYPE:
            raise ValueError(f"not a grouped_glu_mlp key: {key!r} (e.g. 'H2048-F1408-E64-x2-T32768-swiglu-s32')")
        if next_power_of_2(int(m[5])) != int(m[5]):
            raise ValueError(f"not a grouped_glu_mlp key: {key!r}: T is a power-of-two bucket (GroupedProblem.of)")
        return GroupedProblem(int(m[5]), int(m[1]), int(m[2]), int(m[3]), int(m[4]), m[6], int(m[7]),
                              m[8] is not None, m[9] or "")

    def is_valid(self, key: str, config) -> bool:
        problem = self.problem_for_key(key)
        return config in candidates_for(problem) or config == self.baseline(problem)

    def baseline(self, problem):
        """The compose route where ``torch._grouped_mm`` takes the key (compose.takes), else the
        fused kernels at their heuristic tiles (a quantized recipe, rows off 16 bytes): what
        op.route runs for a key never swept."""
        if problem.recipe or not compose.takes(problem.itemsize, problem.hidden, problem.ffn):
            return heuristic("fwd", problem.itemsize, problem.recipe or None)
        return COMPOSE

    def candidates(self, problem) -> list[GemmConfig]:
        return candidates_for(problem)

    def sweep_candidates(self, problem) -> list[GemmConfig]:
        """candidates_for, less those that would run what the baseline or an earlier candidate
        runs: where the Gluon kernels do not run (_ws_runs_here: the CPU, a GPU other than
        Hopper) a compose config is the compose route on torch._grouped_mm (COMPOSE, the
        baseline) and a ws config the Triton kernels of the same config without ws (whose
        rows_glu then chooses nothing)."""
        if _ws_runs_here():
            return candidates_for(problem)

        def runs_as(choice):
            if choice == COMPOSE or choice.compose:
                return COMPOSE
            return dataclasses.replace(choice, ws=False, rows_glu=True) if choice.ws else choice
        seen, kept = {runs_as(self.baseline(problem))}, []
        for config in candidates_for(problem):
            path = runs_as(config)
            if path not in seen:
                seen.add(path)
                kept.append(config)
        return kept

    def change(self, config) -> str:
        return ROUTE

    def complexity(self, config: GemmConfig) -> tuple:
        """Ties go to fewer moving parts first (a second stream, the warp-specialised kernels,
        descriptors, a register cap), then to the smaller launch."""
        return (config.side_stream and not config.compose, config.ws, config.rows_block_n > 0, config.tma,
                config.maxnreg is not None, config.num_warps, config.num_stages, config.programs_per_sm,
                config.block_m * config.block_n)

    def describe(self, choice) -> str:
        return choice if isinstance(choice, str) else choice.name

    def make_inputs(self, p: GroupedProblem, device, seed: int):
        gen = torch.Generator(device=device).manual_seed(seed)
        dtype = _SWEEP_DTYPE[p.itemsize]
        T, H, F, E = p.n_tokens, p.hidden, p.ffn, p.n_experts
        # Ragged split: multinomial counts, so an expert's rows leave a partial last row tile
        # (the sweep's check sees them at the key's power-of-two T), with a zero-token expert
        # where E > 2 (over two experts that would leave one expert every token: full tiles)
        weights = torch.rand(E, generator=gen, device=device)
        if E > 2:
            weights[E // 2] = 0
        counts = torch.bincount(torch.multinomial(weights, T, replacement=True, generator=gen), minlength=E)
        return random_inputs(counts, H, F, dtype, bias=p.has_bias, device=device, generator=gen)

    def input_bytes(self, p: GroupedProblem) -> int:
        return p.n_tokens * p.hidden * p.itemsize * 2 + p.n_experts * 3 * p.hidden * p.ffn * p.itemsize

    def run(self, p: GroupedProblem, choice, i) -> dict:
        from . import launch
        inter = p.interleave or None
        if choice == COMPOSE or (isinstance(choice, GemmConfig) and choice.compose):
            tiles = compose.gluon_tiles(choice)
            y, z, h, ends = compose.forward(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["b1"], i["b2"],
                                            p.activation, inter, *tiles[2:])
            dx, dprobs, dw1, dw2, db1, db2 = compose.backward(i["dy"], i["x"], i["counts"], ends, i["probs"],
                                                              i["w1"], i["w2"], i["b1"], i["b2"], z, h, p.activation,
                                                              inter, *tiles[:4])
            return _outputs(y, dx, dprobs, dw1, dw2, db1, db2)
        recipe = p.recipe or None
        y, z, h = launch.forward(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], i["b1"], i["b2"], p.activation,
                                 inter, config=choice, recipe=recipe)
        dx, dprobs, dw1, dw2, db1, db2 = launch.backward(i["dy"], i["x"], i["counts"], i["probs"], i["w1"], i["w2"],
                                                         i["b1"], i["b2"], z, h, p.activation, inter, config=choice,
                                                         recipe=recipe)
        return _outputs(y, dx, dprobs, dw1, dw2, db1, db2)

    def expected_launches(self, p, choice) -> tuple[str, ...]:
        if choice == COMPOSE:
            return ("grouped_mlp_compose", "grouped_mlp_compose_bwd")
        if choice.compose:   # the Gluon GEMMs proven to run where they can, not the _grouped_mm fallback
            gluon = ()
            if _ws_runs_here():
                gluon = ("grouped_ws_wgrad",) + (("grouped_ws_rows",) if choice.rows_block_n else ())
                if choice.rows_block_n and choice.rows_glu and _glu_layout_fits(p, choice.rows_block_n):
                    gluon += ("grouped_ws_rows_glu",)   # the epilogue proven to run, not the GLU kernel
            return ("grouped_mlp_compose", "grouped_mlp_compose_bwd") + gluon
        if choice.ws and p.recipe == "fp8_block" and _ws_runs_here():   # proven to run, not its fallback
            # fc1 + GLU and the fc2 dgrad + dGLU too where a 128-column z tile holds whole groups
            # or the halves layout's gate and up halves, and z and dz are 16-bit
            # (ws_kernels.glu_applies, dglu_applies; fp8_block's F is a multiple of 128; float32
            # x, which fp8_block takes, keeps the Triton launches)
            from . import ws_kernels   # imports Triton: only where a sweep asks
            whole = choice.rows_glu and p.itemsize == 2 and ws_kernels.glu_layout_ok(p.interleave)
            glu = ("grouped_fp8_ws_glu",) if whole and ws_kernels.TAKES_GLU else ()
            if whole and ws_kernels.TAKES_DGLU:
                glu += ("grouped_fp8_ws_dglu",)
            return ("grouped_mlp_fwd", "grouped_mlp_bwd", "grouped_fp8_ws_gemm") + glu
        return ("grouped_mlp_fwd", "grouped_mlp_bwd")

    def compare(self, p: GroupedProblem, inputs, got: dict, want: dict) -> list[str]:
        """Fused vs the baseline (the compose route or the unfused composition) on the same
        inputs. Both round z, h (and y, dx, dz) to x.dtype; the baseline also rounds dh (its
        GEMM's output) and z before fc1's bias, and the fused path accumulates K-long dots in
        fp32 in another order (CUTLASS's or torch's against Triton's). Normwise, two fp32
        summation orders of K terms differ by ~sqrt(K) eps32, far below the x.dtype roundings,
        which differ wherever an fp32 value lands on the other side of a rounding boundary:
        up to one ulp of x.dtype per rounded element, ~2 eps_x normwise through a second GEMM.
        Tolerance: 4 eps_x + 16 sqrt(K) eps32 normwise per output: 4 sqrt(K) eps32 per GEMM
        (so2's tuner's margin) for the four GEMMs on dx's path, K the longest contraction.

        A recipe compares two tilings of its kernels on the same quantized x, W1, W2, dy. A
        flipped x.dtype rounding of h or dz can move the quantization of that element, or of
        its block through the block amax (nvfp4: of its expert's whole h through the per-expert
        amax, a rare flip of that one element), by one step of the data format (_QUANT_STEP
        relative). Flips are where the two fp32 results straddle an x.dtype rounding boundary;
        allowing up to 1/64 of an operand's elements to move by a step, an output moves by
        step * sqrt(1/64) normwise. Tolerance: the above + step / 8 (fp8 1.6e-2, nvfp4 6.3e-2).
        It rejects what a worst-case bound of whole steps accepted: a scaled output (x0.8) or
        one of zeros. A candidate rejected for a rare amax flip is a candidate lost, never a
        wrong kernel kept."""
        eps_x = torch.finfo(_SWEEP_DTYPE[p.itemsize]).eps
        k = max(p.hidden, 2 * p.ffn, p.n_tokens)
        tol = 4 * eps_x + 16 * math.sqrt(k) * torch.finfo(torch.float32).eps
        if p.recipe:
            tol += _QUANT_STEP[p.recipe] / 8
        out = []
        for name in OUTPUTS:
            if name not in want:   # the biases' gradients of a key without biases
                continue
            err = normwise_rel_error(got[name], want[name])
            if not err <= tol:
                out.append(f"{name}: normwise relative difference {err:.2e} > {tol:.2e}")
        return out

    def default_problems(self) -> list[GroupedProblem]:
        """The spec's grid: its three shapes, bf16, each epilogue key (SwiGLU and GeGLU,
        interleave 32 and the halves layout, bias off and on), and fp8_block at the default
        epilogue key (SwiGLU, interleave 32, no bias; bf16 inputs): 27 keys. The default bf16
        key of each shape first, then the fp8_block ones: a sweep cut short has covered
        what the op runs by default."""
        bf16 = [GroupedProblem.of(t, h, f, e, 2, act, inter, bias)
                for act, inter, bias in EPILOGUE_GRID for e, t, h, f in DEFAULT_SHAPES]
        fp8 = [GroupedProblem.of(t, h, f, e, 2, *EPILOGUE_GRID[0], recipe="fp8_block") for e, t, h, f in DEFAULT_SHAPES]
        n = len(DEFAULT_SHAPES)
        return bf16[:n] + fp8 + bf16[n:]

    def problems_from_cli(self, shape: str, dtype, pass_) -> list[GroupedProblem]:
        m = _CLI_SHAPE.fullmatch(shape or "")
        if m is None:
            raise ValueError(f"grouped_glu_mlp: --shape is EXPERTSxTOKENSxHxF[-ACTIVATION][-sINTERLEAVE][-bias], "
                             f"e.g. 64x32768x2048x1408 (SwiGLU, interleave 32, no bias) or "
                             f"64x32768x2048x1408-geglu-s0-bias (s0: the halves layout); got {shape!r}")
        if pass_ is not None:
            raise ValueError("grouped_glu_mlp: --pass does not apply (a key times forward + backward)")
        name = dtype or "bf16"
        recipe = ""
        if name in _QUANT_STEP:        # a recipe: bf16 inputs quantized by it
            name, recipe = "bf16", name
        itemsize = cli_itemsize("grouped_glu_mlp", name, also=tuple(_QUANT_STEP))
        e, t, h, f = (int(v) for v in m.groups()[:4])
        if 0 in (e, t, h, f):
            raise ValueError(f"grouped_glu_mlp: --shape {shape!r} has a zero size")
        interleave = 32 if m["inter"] is None else int(m["inter"])
        if interleave and (interleave & (interleave - 1) or f % interleave):
            raise ValueError(f"grouped_glu_mlp: --shape {shape!r}: the interleave must be 0 (halves) or a power "
                             f"of two dividing F = {f}")
        return [GroupedProblem.of(t, h, f, e, itemsize, m["act"] or "swiglu", interleave, m["bias"] is not None,
                                  recipe)]


FAMILY = GroupedFamily()
