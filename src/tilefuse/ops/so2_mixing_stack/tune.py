"""so2_mixing_stack's tuning family: the backward route per (lmax, focus_dim, dtype).

The baseline is the relay (three kernels per gated layer, heuristic tiles). Candidates are
other relay tiles (a tile change, 1% margin; BLOCK_K unchanged) and, where the guards allow
fusion (fp32, focus_dim a power of two in [16, 64]), fused configs (BLOCK_M, BLOCK_N, warps,
stages; BLOCK_K = focus_dim; a route change, 3% margin). Every candidate must be bitwise equal
to the heuristic relay (the fused kernel's contract; for relay tiles the same K order) and must
launch its route's kernels; a sweep where a guard or the policy routed a fused candidate to
the relay fails.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path

import torch

from ...tuning.family import ROUTE, TILE, TuningFamily, cli_itemsize
from . import configs, launch
from .configs import So2Config, fused_candidates, fused_supported, relay_candidates
from .reference import So2Dims

_HERE = Path(__file__).resolve().parent
_KEY = re.compile(r"L(\d+)-C(\d+)-x(\d+)")
_SWEEP_DTYPE = {4: torch.float32, 2: torch.bfloat16}

# `tilefuse tune --all-defaults`: the spec's shapes, F 2, three layers, 2**19 edges (about the
# production edge count's power of two below; E only sets the grid, not the key).
DEFAULT_SHAPES = ((3, 32), (6, 32), (2, 64), (1, 32), (2, 32), (3, 64))
DEFAULT_EDGES = 2 ** 19
DEFAULT_FOCUS = 2
DEFAULT_LAYERS = 3


@dataclasses.dataclass(frozen=True)
class So2Problem:
    """What the backward dispatch knows: the stack's shape and dtype."""

    lmax: int
    focus_dim: int
    itemsize: int
    n_edges: int = DEFAULT_EDGES
    n_focus: int = DEFAULT_FOCUS
    n_layers: int = DEFAULT_LAYERS


@functools.lru_cache(maxsize=1024)
def key_of(p: So2Problem) -> str:
    """``L{lmax}-C{focus_dim}-x{itemsize}``: the fused kernel's registers and spills depend on
    these alone; edge and focus counts only size the grid."""
    return f"L{p.lmax}-C{p.focus_dim}-x{p.itemsize}"


@dataclasses.dataclass(frozen=True)
class So2Inputs:
    grad_out: torch.Tensor
    x_local: torch.Tensor
    z_all: torch.Tensor
    u_final: torch.Tensor
    alpha: torch.Tensor
    w0_all: torch.Tensor
    w1_all: torch.Tensor
    gw_all: torch.Tensor


class So2Family(TuningFamily):
    name = "so2_mixing_stack"
    config_class = So2Config
    source_files = (_HERE / "kernels.py", _HERE / "configs.py", _HERE / "launch.py")

    def key(self, problem: So2Problem) -> str:
        return key_of(problem)

    def problem_for_key(self, key: str) -> So2Problem:
        m = _KEY.fullmatch(key) if isinstance(key, str) else None
        if m is None or int(m[1]) < 1 or int(m[2]) < 1 or int(m[3]) not in _SWEEP_DTYPE:
            raise ValueError(f"not a so2_mixing_stack key: {key!r} (expected e.g. 'L3-C32-x4')")
        return So2Problem(int(m[1]), int(m[2]), int(m[3]))

    def is_valid(self, key: str, config) -> bool:
        return config in self.candidates(self.problem_for_key(key))

    def baseline(self, problem: So2Problem) -> So2Config:
        return configs.heuristic(problem.lmax, problem.focus_dim)

    def candidates(self, problem: So2Problem) -> list[So2Config]:
        out = relay_candidates(problem.lmax, problem.focus_dim)
        if fused_supported(problem.focus_dim, problem.itemsize == 4):
            out += fused_candidates(problem.lmax, problem.focus_dim)
        return out

    def change(self, config: So2Config) -> str:
        return ROUTE if config.fused else TILE

    def complexity(self, config: So2Config) -> tuple:
        return (config.fused, config.num_warps, config.num_stages, config.block_m * config.block_n)

    def make_inputs(self, problem: So2Problem, device, seed: int) -> So2Inputs:
        gen = torch.Generator(device=device).manual_seed(seed)
        d = So2Dims(problem.lmax, problem.focus_dim)
        dtype = _SWEEP_DTYPE[problem.itemsize]
        F, E, NL = problem.n_focus, problem.n_edges, problem.n_layers

        def randn(*size, scale=1.0):
            return (torch.randn(size, generator=gen, device=device) * scale).to(dtype)

        u0 = randn(F, E, d.row, scale=0.5)
        alpha = (0.2 + torch.rand((E, F), generator=gen, device=device)).to(dtype)
        w0 = randn(NL, F, d.m0, d.m0, scale=d.m0 ** -0.5)
        w1 = randn(NL, F, d.m1, d.m1, scale=d.m1 ** -0.5)
        gw = randn(NL - 1, F, d.focus_dim, d.lg, scale=d.focus_dim ** -0.5)
        x_local, z_all, u_final = launch.forward(u0, alpha, w0, w1, gw, d, True)
        return So2Inputs(randn(E, F, d.row), x_local, z_all, u_final, alpha, w0, w1, gw)

    def input_bytes(self, problem: So2Problem) -> int:
        d = So2Dims(problem.lmax, problem.focus_dim)
        surfaces = 2 + (problem.n_layers - 1)   # grad_out, x_local, z per gated layer
        return surfaces * problem.n_edges * problem.n_focus * d.row * problem.itemsize

    def run(self, problem: So2Problem, choice: So2Config, inputs: So2Inputs) -> dict:
        i = inputs
        grad_u0, grad_alpha, _ = launch.backward(
            i.grad_out, i.x_local, i.z_all, i.u_final, i.alpha, i.w0_all, i.w1_all, i.gw_all,
            So2Dims(problem.lmax, problem.focus_dim), True, False, config=choice)
        return {"grad_u0": grad_u0, "grad_alpha": grad_alpha}

    def expected_launches(self, problem: So2Problem, choice: So2Config) -> tuple[str, ...]:
        return ("so2_bwd_fused_layer",) if choice.fused else ("so2_bwd_relay_layer",)

    def compare(self, problem: So2Problem, inputs: So2Inputs, got: dict, want: dict) -> list[str]:
        """Bitwise: the fused kernel's contract is equality with the relay in fp32."""
        out = []
        for name in ("grad_u0", "grad_alpha"):
            if not torch.equal(got[name], want[name]):
                diff = (got[name].double() - want[name].double()).abs()
                out.append(f"{name}: {int((diff != 0).sum())} of {diff.numel()} elements differ from the "
                           f"relay (max |diff| {diff.max().item():.3g}); the fused contract is bitwise")
        return out

    def default_problems(self) -> list[So2Problem]:
        return [So2Problem(lmax, cf, 4) for lmax, cf in DEFAULT_SHAPES]

    def problems_from_cli(self, shape: str, dtype: str | None, pass_: str | None) -> list[So2Problem]:
        m = re.fullmatch(r"(\d+)x(\d+)(?:x(\d+))?(?:x(\d+))?", shape or "")
        if m is None or int(m[1]) < 1 or int(m[2]) < 1:
            raise ValueError("so2_mixing_stack: --shape is LMAXxFOCUS_DIM[xEDGES[xFOCUS]], e.g. 3x32x647000x2; "
                             f"got {shape!r}")
        itemsize = cli_itemsize("so2_mixing_stack", dtype or "fp32")
        if pass_ not in (None, "bwd"):
            raise ValueError("so2_mixing_stack: only the backward is tuned (--pass bwd)")
        edges = int(m[3]) if m[3] else DEFAULT_EDGES
        focus = int(m[4]) if m[4] else DEFAULT_FOCUS
        return [So2Problem(int(m[1]), int(m[2]), itemsize, edges, focus)]


FAMILY = So2Family()
