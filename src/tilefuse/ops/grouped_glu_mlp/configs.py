"""grouped_glu_mlp GEMM tile configs as data.

Tuning keys (tune.py): H, F, E, the dtype's size (bf16 and fp16 share keys) and a power-of-two
bucket of T. ``GemmConfig`` is one GEMM's tiles; the op uses one per kernel role (fc1, fc2,
dgrad, wgrad).
"""

from __future__ import annotations

import dataclasses
import functools

from ...utils import type_name


@dataclasses.dataclass(frozen=True)
class GemmConfig:
    block_m: int = 64
    block_n: int = 64
    block_k: int = 32
    num_warps: int = 4
    num_stages: int = 3
    programs_per_sm: int = 2
    # Read the operands (16-bit without a recipe, or fp8_block's float8 data) through TMA
    # tensor descriptors where their layouts allow it (launch.tma_plan says when); the same
    # tiles and dots either way.
    tma: bool = False
    # Registers per thread the kernel is compiled to (Triton's ``maxnreg``), or None: the
    # compiler's choice. A cap trades spills for more programs per SM (fp8_block's wgrad:
    # heuristic). It applies to launches through descriptors (tma, where launch.py's plan
    # takes them); the pointer loads compile uncapped, since their tiles spill under a cap
    # measured with descriptors (fp8_block's wgrad at 168: a 392-byte stack, triton 3.6).
    maxnreg: int | None = None
    # fp8_block's store GEMMs (fc2, fc1 dgrad) through the warp-specialised Gluon kernel
    # (ws_kernels: one program an SM, a producer warp and two consumer warp groups; the same
    # bits). Its tile is fixed at 128x128 with 128-wide K chunks on a ring of ws_kernels.
    # MAX_STAGES slots; the config's warps, stages, programs per SM and tma do not apply to it
    # (the deepest ring was the fastest at every spec shape and role measured, results/
    # 2026-12-04-h200-ai run 1). Where it cannot run
    # (another recipe or role, not Hopper, the interpreter, operands outside its layout) the
    # launch is grouped_gemm_kernel's with these tiles. fc1 + GLU and the fc2 dgrad + dGLU run
    # in it too where a z tile holds whole (gate, up) groups or in the halves layout
    # (ws_kernels.glu_applies, dglu_applies; with rows_glu: launch.forward and launch.backward
    # pass the flag beside glu_config and dglu_config, which drop it).
    ws: bool = False
    # recipe None: not the fused kernels but the compose route (compose.py: vendor GEMMs, Triton
    # glue) with its two weight gradients through the warp-specialised Gluon kernel
    # (ws_wgrad.py) instead of torch._grouped_mm: block_m the gradient's columns a tile (128
    # or 256), num_stages the depth of its ring; block_n 128 (gradient rows) and block_k 64
    # (tokens a chunk) are the kernel's, the other fields do not apply. Where the kernel cannot
    # run (not Hopper, the interpreter, layouts it does not take) the route's _grouped_mm
    # wgrads run, whose bits it gave wherever it was compared (results/2026-12-03-h200-aa).
    compose: bool = False
    # A compose config's four row-ragged GEMMs (fc1, fc2 and the two dgrads) through ws_rows.py's
    # warp-specialised Gluon kernel: rows_block_n its output columns a tile (128 or 256),
    # rows_stages the depth of its ring; 0, 0: those GEMMs on torch._grouped_mm. Where the
    # kernel cannot run (as for the wgrads, and the dgrads where K is off 64) the GEMM runs on
    # torch._grouped_mm, whose bits it gave wherever compared (results/2026-12-03-h200-ab).
    # Only with compose.
    rows_block_n: int = 0
    rows_stages: int = 0
    # With a rows tile: fc1's GLU in ws_rows' epilogue where the kernel takes the layout
    # (ws_rows.glu_applies); False: fc1 alone, then the GLU kernel (one launch more, no GLU
    # math and h stores holding up the warp groups between tiles). The same bits either way.
    # The epilogue ran the whole step 1.01-1.05x faster at the spec's shape 1 and 0.98-1.01x at
    # shapes 2-3, over the standard grid's keys (results/2026-12-04-h200-ae run 3); the tuner
    # decides per key. With ws (fp8_block): fc1 + GLU through the warp-specialised kernel where
    # ws_kernels.glu_applies; False: through grouped_gemm_kernel's GLU launch (glu_config's
    # tiles), the same bits. The role alone ran 1.40-1.42x faster in the ws kernel, the whole
    # op as called 1.01-1.05x on two streams, but on one stream the Triton launch was the
    # fastest form at shapes 2-3 with balanced counts (results/2026-12-04-h200-ai runs 3 and 6);
    # the tuner decides. Its sweep (ragged counts) took the ws GLU at all three spec keys, 2.5-5.4%
    # ahead of the Triton GLU (2026-12-04-h200-aj run 1). The backward's fc2 dgrad + dGLU goes
    # with it: through the ws kernel where ws_kernels.dglu_applies (F a multiple of 128, an
    # interleave of 8 to 64 or the halves layout), else through grouped_gemm_kernel's dGLU launch (dglu_config's
    # tiles), the same bits but for dprobs (its partials summed in another order).
    rows_glu: bool = True
    # The kernels route's second stream (streams.py): a recipe's W2 quantizer beside fc1, the
    # weight gradients (with a recipe their column-wise quantizers) beside the dgrads; False:
    # all of it in order on the caller's stream, the same bits. fp8_block measured 1.01-1.06x
    # faster on two streams with the ws GLU and 0.95-0.97x with the Triton GLU at shapes 2-3
    # (results/2026-12-04-h200-ai runs 3 and 6); the tuner decides per key (one stream at spec
    # shapes 1-2, 3.3-4.8% ahead, 2026-12-04-h200-aj run 1). The compose route
    # always forks its weight gradients (one stream measured 0.98x at the spec's shapes, run 6):
    # False is refused there.
    side_stream: bool = True

    def __post_init__(self):
        for name in ("ws", "compose", "rows_glu", "side_stream"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"GemmConfig.{name} must be a bool, got {type_name(getattr(self, name))}")
        if self.ws and not self.block_m == self.block_n == self.block_k == 128:
            raise ValueError("GemmConfig.ws takes the 128x128x128 tile (ws_kernels.BLOCK), got "
                             f"{self.block_m}x{self.block_n}x{self.block_k}")
        if self.compose and (self.ws or self.block_n != 128 or self.block_k != 64 or self.block_m not in (128, 256)):
            raise ValueError("GemmConfig.compose takes block_m 128 or 256, block_n 128, block_k 64 and no ws "
                             f"(ws_wgrad's tiles), got {self.block_m}x{self.block_n}x{self.block_k}"
                             + (" with ws" if self.ws else ""))
        for name in ("rows_block_n", "rows_stages"):
            if not isinstance(getattr(self, name), int) or isinstance(getattr(self, name), bool):
                raise TypeError(f"GemmConfig.{name} must be an int, got {type_name(getattr(self, name))}")
        rows = (self.rows_block_n, self.rows_stages)
        if rows != (0, 0) and not (self.compose and self.rows_block_n in (128, 256) and self.rows_stages >= 2):
            raise ValueError("GemmConfig.rows_block_n / rows_stages take 128 or 256 columns and a ring of 2 or "
                             f"more on a compose config (ws_rows' tiles), or 0, 0; got {rows}"
                             + ("" if self.compose else " without compose"))
        if not self.rows_glu and not (self.rows_block_n or self.ws):
            raise ValueError("GemmConfig.rows_glu False (fc1's GLU out of a warp-specialised kernel's epilogue) needs "
                             "a rows tile (rows_block_n) or ws")
        if not self.side_stream and self.compose:
            raise ValueError("GemmConfig.side_stream False applies to the kernels route; the compose route always "
                             "runs its weight gradients on the second stream")
        if self.maxnreg is None:
            return
        if not isinstance(self.maxnreg, int) or isinstance(self.maxnreg, bool):
            raise TypeError(f"GemmConfig.maxnreg must be an int or None, got {type(self.maxnreg).__name__}")
        if not 24 <= self.maxnreg <= 255:
            raise ValueError(f"GemmConfig.maxnreg must be None or in [24, 255], got {self.maxnreg}")

    @property
    def name(self) -> str:
        return (f"M{self.block_m}-N{self.block_n}-K{self.block_k}-w{self.num_warps}-s{self.num_stages}"
                f"-p{self.programs_per_sm}" + ("-tma" if self.tma else "")
                + (f"-r{self.maxnreg}" if self.maxnreg is not None else "") + ("-ws" if self.ws else "")
                + ("-compose" if self.compose else "")
                + (f"-rows{self.rows_block_n}s{self.rows_stages}" if self.rows_block_n else "")
                + ("" if self.rows_glu else "-noglu") + ("" if self.side_stream else "-1stream"))


def heuristic(role: str, itemsize: int, recipe: str | None = None) -> GemmConfig:
    """Defaults per kernel role (16-bit without a recipe: measured, below). tl.dot needs tiles >= 16; 16-bit
    operands take larger K tiles for the same bytes.

    fp8_block: BLOCK_K is the 128-wide scaling block. Measured on the H200 at the spec's first
    two shapes (benchmarks/results/2026-11-29-h200-d/run1 and run2): 128x128 tiles on 8 warps,
    3 stages, ran the store GEMMs (fc2, fc1 dgrad) at 783-798 / 514-642 TFLOP/s (64x128 on
    4 warps within 3%, up to 9% ahead at the second shape); the fc1 + GLU and dGLU epilogues
    take BLOCK_N 64 (glu_config, dglu_config); the wgrads ran fastest with 64x128 tiles
    (BLOCK_M 64 of the weight's columns, BLOCK_N 128 of its rows) on 4 warps, 3 stages: 593 /
    316 TFLOP/s against 537 / 296 for 128x128 on 8 warps, with a 48-byte stack in the sm_90
    compile under triton 3.8. The wgrads read their float8 data through TMA: 2.296 / 1.569 ms
    against 2.427 / 1.755 through pointers at the first two shapes, the same tiles
    (results/2026-12-02-h200-o run 2). Through TMA the transposed tile, BLOCK_M 128 of the
    weight's columns and BLOCK_N 64 of its rows (4 warps, 3 stages), was the fastest of 15
    TMA launch shapes at each of the spec's three shapes: 2.076 / 1.484 / 2.060 ms against
    2.738 / 1.635 / 2.164 for 64x128 in the same run (results/2026-12-02-h200-r run 1).
    That tile compiles to 255 registers (two programs an SM); capped at 168 (maxnreg: three an
    SM) with its shared blocks through the descriptors and the expert offsets summed as
    vectors, the dW1 launch ran 1.16x / 1.58x / 1.87x faster at the three shapes with whole
    128-token blocks an expert, and 1.29x / 1.77x / 2.01x with every expert sharing blocks
    (1.525 -> 1.311 / 1.038 -> 0.658 / 1.379 -> 0.737 ms; results/2026-12-02-h200-r run 7).
    With the shared blocks' other tokens zeroed in the A tile only the capped build compiled
    without spills (161 registers, triton 3.6), and the launch ran 1.22x / 1.44x / 1.41x faster
    than with both zeroed where experts share blocks (results/2026-12-02-h200-s run 6); routed
    counts still cost 1.42-1.44x balanced ones at shapes 2-3 (2026-12-05-h200-ak run 1). The
    column-wise copies are grouped by expert (recipes.quantize_cols): no block is shared and
    every block loads whole. The tile and cap are those runs' choice, not re-timed on the
    grouped copies.
    mxfp8 / nvfp4 decode into bfloat16 in the loaders and use the 16-bit tiles."""
    if recipe == "fp8_block":
        if role == "wgrad":
            return GemmConfig(block_m=128, block_n=64, block_k=128, num_warps=4, num_stages=3, tma=True,
                              maxnreg=168)
        return GemmConfig(block_m=128, block_n=128, block_k=128, num_warps=8, num_stages=3)
    if recipe is None and itemsize <= 2:
        # Measured on the H200 (benchmarks/results/2026-11-29-h200-b/run3/grouped_profile.txt): for the
        # wgrads 128x128x64 on 8 warps, 3 stages, ran 1.4-1.7x faster than 64x64x32 on 4 warps
        # at the spec's three shapes (442 / 318 / 247 TFLOP/s); the other roles' best in the
        # sweeps was 128x128x64, 8 warps, 4 stages, one program per SM. Through TMA the same
        # tiles ran every role 1.1-1.35x faster than through pointers at the three shapes, and
        # stayed the fastest of the TMA tiles tried except for fc2 and the fc1 dgrad, where
        # 128x256 on 3 stages was 4-12% faster but does not fit the GLU's two B tiles in shared
        # memory (results/2026-12-01-h200-l runs 1, 2 and 4).
        if role == "wgrad":
            return GemmConfig(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3, tma=True)
        return GemmConfig(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=4, programs_per_sm=1,
                          tma=True)
    if recipe is not None:
        itemsize = 2
    block_k = 64 if itemsize <= 2 else 32
    if role == "wgrad":
        return GemmConfig(block_m=64, block_n=64, block_k=32, num_warps=4, num_stages=3)
    return GemmConfig(block_m=64, block_n=64, block_k=block_k, num_warps=4, num_stages=3)


# The fc2-dgrad + dGLU epilogue holds dh, z's gate and up tiles and their gradients at once. On
# sm_90 (benchmarks/compile_report.py --ops grouped, triton 3.8) a 128x128 dh tile on 8 warps spilled 504
# bytes, 128x64 none (239 registers). So the dGLU's BLOCK_N is at most 64 and a program computes
# two such halves side by side (dglu_tile_n), sharing the A tile, and runs the epilogue on one
# half at a time (kernels.dglu_store).
DGLU_MAX_BLOCK_N = 64


def dglu_tile_n(cfg: GemmConfig) -> int:
    """dh columns per program of the dGLU launch with ``cfg`` (its two BLOCK_N halves)."""
    return 2 * cfg.block_n


# fp8_block's fc1 + GLU tile holds the gate and up accumulators and each K chunk's fresh dot
# result: at BLOCK_N 128 on 8 warps it spills (sm_90 compile report) and ran at 91 TFLOP/s
# against 652 for BLOCK_N 64 at (8, 16384, 4096, 3584) on the H200 (results/2026-11-29-h200-c/
# run3). The 16-bit GLU keeps its tile (593 TFLOP/s at 128x128, the same run).
FP8_GLU_MAX_BLOCK_N = 64


def _cap(cfg: GemmConfig, field: str, cap: int, keep_threads: bool) -> GemmConfig:
    """cfg with its ``field`` tile size (block_m or block_n) at most ``cap``; with
    ``keep_threads`` the warps shrink with the tile (the same elements per thread, 4 warps at
    least) and the programs per SM grow by the same factor."""
    size = getattr(cfg, field)
    if size <= cap:
        return cfg
    if not keep_threads:
        return dataclasses.replace(cfg, **{field: cap})
    factor = min(size // cap, cfg.num_warps // 4) or 1
    return dataclasses.replace(cfg, **{field: cap}, num_warps=cfg.num_warps // factor,
                               programs_per_sm=cfg.programs_per_sm * factor)


# fp8_block's capped GLU tile keeps the elements per thread: 128x64 on 4 warps, two programs per
# SM, against 8 warps and one program, ran the fc1 + GLU at 838 against 700 TFLOP/s at
# (8, 16384, 4096, 3584) (results/2026-11-29-h200-d/run1), with a 40-byte stack in the sm_90
# compile under triton 3.8.


@functools.lru_cache(maxsize=64)
def glu_config(cfg: GemmConfig, recipe: str | None) -> GemmConfig:
    """The config the fc1 + GLU launch of grouped_gemm_kernel uses: ``cfg``, with BLOCK_N at
    most FP8_GLU_MAX_BLOCK_N for fp8_block (warps and programs per SM scaled with the tile),
    without ``ws`` (launch.forward passes that flag, and rows_glu, beside it: the ws kernel takes
    fc1 + GLU where ws_kernels.glu_applies, else this launch runs)."""
    cfg = dataclasses.replace(cfg, ws=False, rows_glu=True) if cfg.ws else cfg
    if recipe != "fp8_block":
        return cfg
    return _cap(cfg, "block_n", FP8_GLU_MAX_BLOCK_N, keep_threads=True)


# fp8_block's dGLU ran 8-12% faster with 64-row tiles on 4 warps, two programs per SM, than
# with 128-row tiles on 8 warps, at the spec's three shapes (0.97 / 0.58 / 0.70 against
# 1.05 / 0.65 / 0.79 ms, results/2026-11-30-h200-e run 3) with the epilogue's dz copy, whose
# sm_90 compile spills 80 bytes under triton 3.6 (the image measured) and none under 3.8. The
# 16-bit dGLU keeps 128 rows on 8 warps (1.32 against 1.51 ms at the first shape, within 4% at
# the other two; 32 bytes of spills under triton 3.6, none under 3.8). Its float8 data and z
# through TMA ran the 64x64 tile 1.28-1.31x faster than through pointers at the three shapes
# (3 or 4 stages alike) and the whole fp8 step 1.02-1.03x (results/2026-12-02-h200-r runs
# 5-6), so the fp8 dGLU reads through descriptors whatever the config's tma says.
FP8_DGLU_MAX_BLOCK_M = 64


@functools.lru_cache(maxsize=64)
def dglu_config(cfg: GemmConfig, recipe: str | None = None) -> GemmConfig:
    """The config the fc2-dgrad + dGLU launch uses: ``cfg`` with BLOCK_N at most
    DGLU_MAX_BLOCK_N, and for fp8_block BLOCK_M at most FP8_DGLU_MAX_BLOCK_M (warps shrinking
    with the tile, to 4 at least, and programs per SM growing by the same factor) and TMA on."""
    cfg = dataclasses.replace(cfg, ws=False, rows_glu=True) if cfg.ws else cfg   # the dGLU: grouped_gemm_kernel
    capped = _cap(cfg, "block_n", DGLU_MAX_BLOCK_N, keep_threads=False)
    if recipe != "fp8_block":
        return capped
    return dataclasses.replace(_cap(capped, "block_m", FP8_DGLU_MAX_BLOCK_M, keep_threads=True), tma=True)
