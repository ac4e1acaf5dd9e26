#!/usr/bin/env python3
"""How fast is tilefuse.so2_mixing_stack against every peer a user would pick instead?

Forward + force backward (the gradients of u0 and alpha; the weights do not require grad;
``--training``: the weights' gradients too, which tilefuse computes on the relay backward),
fp32, F (n_focus) = 2, NL = 3 mixing layers (2 gated + the final linear layer), at the
spec's shapes (E, lmax, Cf) = (647000, 3, 32) "Neo", (300000, 6, 32), (400000, 2, 64)
(docs/specs/so2_mixing_stack.md). Every peer runs the same mathematical problem on the
same tensors:

- ``tilefuse``: ``tilefuse.so2_mixing_stack`` as users call it, at level 2 (the tuning
  table's pick for the key on this GPU; the pick is printed). Where it differs from the
  table's pick, also ``tilefuse relay`` (a runtime-registered "baseline" entry: the
  heuristic relay backward) and ``tilefuse fused <cfg>`` (a runtime-registered fused entry;
  only where the fused guards allow it: Cf a power of two in [16, 64]). The launches are
  counted to show which backward route ran.
- ``tilefuse level 3``: the same call at level 3, where the table's level-3 key holds a
  validated split-precision variant (3xfp16 or 3xtf32; ``tilefuse tune --op so2_mixing_stack
  --shape LxC --pass level3`` sweeps it); reported unavailable when the key was never swept or kept the exact path.
- ``eager``: ``tilefuse.ops.so2_mixing_stack.reference.so2_stack_reference`` (cuBLAS fp32,
  TF32 off: ``torch.backends.cuda.matmul.allow_tf32 = False`` and
  ``torch.set_float32_matmul_precision("highest")``) with autograd.
- ``torch.compile``: ``torch.compile(reference, dynamic=False)`` (default mode;
  ``--compile-mode``), forward and AOT-compiled backward (one graph, no graph break, on
  torch 2.13). Static shapes: the best case for the peer (an MD run whose edge count
  changes every step gets a dynamic graph).
- ``deepmd fp32``: DeePMD-kit 3.2.0's Triton operator ``sezm_triton::so2_mixing_stack``
  (``deepmd/kernels/triton/sezm/so2_value_path.py``: the ``torch.library.triton_op``
  ``_mixing_stack_op`` over ``_mixing_stack_impl``, with ``_mixing_stack_bwd_impl`` as its
  registered backward), the op that ``_TritonSO2ValuePath`` binds at ``DP_TRITON_INFER=2``.
- ``deepmd fp16x3``: DeePMD-kit's "level 3" operator ``mixing_stack_fp16x3``
  (``so2_stack_fp16x3.py``, ``sezm_triton::so2_mixing_stack_fp16x3``): each fp32 GEMM as
  three fp16 tensor-core products (head/tail split, tails x 2^11, activations x 2^-4).
  DeePMD binds it instead of the fp32 op when ``DP_TRITON_INFER >= 3`` *and*
  ``tile_configs.stack_fp16x3_configs(Cf, lmax)`` has a validated entry for the GPU; it has
  no fallback config, so without an entry the peer is reported unavailable.

DeePMD-kit's launch tables are keyed by the exact GPU name and ship for "NVIDIA H20" only.
``--deepmd-tiles`` picks where its entries come from (a comma list; each source gives its
own DeePMD peers, and "x DeePMD fp32" is taken against the fastest fp32 one):
``default`` (what DeePMD resolves on this GPU with nothing registered: on an H200 the
pointwise kernels' spill-safe fallback (16, 8, 2) and no fp16x3 entry), ``h20`` (its
shipped H20 tables registered for this GPU at run time; fp16x3 entries validated by DeePMD
on the H20, not here: this script's checks below guard them at the check and timed edge
counts), ``sweep`` (DeePMD's own sweeps on this GPU, as its freeze auto-tuner runs them:
``sweep_tile_configs.sweep_pointwise`` and, when the fp16x3 peer is asked for,
``sweep_fp16x3``; cached in ``--deepmd-tiles-cache``). The fp32 GEMMs use one constant
tiling (64, 64, 32, 4 warps, 2 stages) whatever the source; no ``triton.autotune``.

The mapping tilefuse -> DeePMD-kit is the identity. Both sides use the same argument order,
layouts and math (checked against both sources; the checks below measure it):
u0 (F, E, ROW) focus-major with ROW = (3L+1) Cf, rows m-major (sub-tiles 0..L: m = 0,
l = 0..L; L+1..2L: m = -1, l = 1..L; 2L+1..3L: m = +1); alpha (E, F);
w0_all (NL, F, M0, M0) and w1_all (NL, F, M1, M1) in the (in, out) convention (z = u @ W);
gw_all (NL-1, F, Cf, L Cf); gate group of sub-tile r: (r-1) % L on m = 0 and (r-L-1) % L on
|m| = 1 (tilefuse: [sigma | sigma] on the stripes); SiLU on the scalar sub-tile, u + act
residual, final identity layer u + [u_m0 W0 | u_m1 W1], times alpha, stored edge-major
(E, F, ROW). DeePMD's op returns (x_local, z_all): the peer takes x_local. Its backward
computes grad_alpha = sum(g x) / alpha.clamp_min(1e-12) (tilefuse: / alpha; equal for the
alpha > 0 used here) and transposes the weights on every call
(``w.transpose(2, 3).contiguous()``); and since z_all is a differentiable output that the
caller does not use, autograd materializes a zero cotangent for it (a memset of z_all) on
every backward. Both are part of its cost as its model calls it, so both are timed.

Checks before any timing, per shape (a peer that fails is reported and not timed), each peer's
calls with fresh allocations NaN-poisoned (``tilefuse.tuning.sweep.poisoned_allocations``, as
``tilefuse check``: with the caching allocator a peer gets the blocks an earlier peer freed, so
an output row it never wrote could otherwise hold that peer's correct values):
1. float64: at E_c edges (``--check-edges``, default 65536, rounded to E's residue mod 16
   so Triton's integer specialization is the same as at E: its kernels compile once) and
   the same (lmax, Cf), fresh inputs, each peer's x, grad u0 and grad alpha against the
   float64 reference (tilefuse's ``so2_stack_reference`` on float64 copies), normwise
   relative error ||got - ref|| / ||ref||, bound 1e-5 (fp32's NL-GEMM chain stays far below;
   DeePMD reports ~2.4e-7 fp32 and ~3e-7 fp16x3);
2. full E: on the timing inputs, each peer against the eager fp32 reference: the same norm
   (bound 1e-5) and finiteness (DeePMD documents fp16x3 miscompiles that give NaN rows at
   some edge counts only). With ``--training``, against a float64 reference at full E
   instead: a weight gradient sums over all E rows, so eager fp32's own error grows with E
   (~1.5e-5 at Neo); an output's bound is then max(1e-5, twice eager fp32's error), with
   eager run once untimed for it when it is not among ``--peers``.

Timing: each peer is one zero-argument callable (forward + ``torch.autograd.grad`` of
(u0, alpha) with a fixed random cotangent), timed with CUDA events by
``tilefuse.tuning.timing.interleaved`` (the project's one harness): warm-up, then ``--rounds`` rounds in rotating order,
about ``--target-ms`` per peer per round; median per peer (``--graphs``: CUDA-graph replays).
``--sustained``: each peer's sample is a 2 s block instead (``timing.SUSTAINED``: 0.5 s untimed,
then 1.5 s timed), so each runs at its own clock under the GPU's power limit rather than at the
mix's (benchmarks/README.md, "The power cap"; about 2 s a peer a round: use few rounds).
Inputs are fresh random tensors per shape, freed (with every peer's state) between shapes.

What it prints: the versions and GPU; per shape the table's pick, the check table (errors,
route launches, first-call seconds: compile / Triton JIT) and the timing table; at the end
one table: shape, peer, median ms, spread, "x DeePMD fp32" (= DeePMD-kit fp32 ms / peer ms,
> 1: faster than DeePMD-kit fp32; the fastest DeePMD-kit fp32 peer by median) and "x compile"
(= torch.compile ms / peer ms), each the median over rounds of the ratio within a round
(``timing.ratio``; every peer of a shape is timed in one interleaved call).
``--profile``: a torch.profiler per-kernel table (CUDA time and calls per fwd+bwd, top
kernels) for tilefuse and DeePMD-kit at one shape (``--profile-shape``, default the first).
``--json PATH``: everything above as JSON (rewritten after every shape; each timed peer's
row with its per-round ``samples_ms``).

Run on the H200 (torch 2.11, triton 3.6, Python 3.12, no network), from the repository
root. .whl/ (DeePMD-kit 3.2.0 and its pure-Python dependencies, ~12 MB) is git-ignored:
carry it to the device (the device tool's ``carry: [".whl"]``), then install it into a
scratch target and put that and src/ on the path:

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src
    python3 benchmarks/so2_peers.py --json $OUT/so2_peers.json [--shapes 647000:3:32] \\
        [--rounds 10] [--profile] [--deepmd-tiles h20,default]

Exit status: 0; 1 when a shape aborted (its table row says why; the other shapes still run); 2
on a usage error, or without a GPU unless ``--tiny``.

How long (estimates for the H200, not measured): imports ~10 s; per shape, cold caches,
~2.5-5 minutes: torch.compile of the forward + backward twice (E_c and E: static shapes),
~30-60 s each, and once more at E for the timing (Dynamo guards on the deterministic mode
that the checks' poisoning turns on); Triton JIT of tilefuse's kernels (~10-30 s, per
backward route) and of DeePMD-kit's (fp32 ~10-20 s, fp16x3 ~10-30 s; deeper unrolling at
lmax 6 costs more); the float64 check, the full-E checks and ~10 rounds of timing ~20-40 s
(each fwd+bwd is tens of ms: about 3 calls per peer per round). The Triton and Inductor
caches make a second run on the same machine faster. All three shapes cold: ~7-15 minutes:
under a 10-minute command limit run one shape per command (``--shapes 647000:3:32`` etc.,
``--json`` to a file per shape). ``--deepmd-tiles sweep`` adds DeePMD's own sweeps the first
time per key: the pointwise group (72 launches of 3 kernels, each compiled) a few minutes;
fp16x3 (48 candidates x 4 GEMMs, each compiled, then fp64-validated whole-op runs) ~10+
minutes at lmax <= 3 and far more at lmax 6 (DeePMD: "several minutes per candidate" at
lmax >= 5); the results are cached in ``--deepmd-tiles-cache`` and reused.

DeePMD-kit import: the wheel is a cibuildwheel build whose ``deepmd.pt`` package loads the
``mpich`` wheel's MPI library and its C++ op library at import (neither is used by the
Triton mixing stack, and ``mpich`` is not among the carried wheels). ``--deepmd-import auto``
(default) tries the package import and, where it fails, loads DeePMD-kit's own modules
``so2_value_path``, ``so2_stack_fp16x3``, ``tile_configs`` and ``tile_config_data``
(unmodified; and ``deepmd.pt.model.descriptor.sezm_nn.indexing``, which imports torch only)
without executing the ``deepmd.pt`` / ``sezm_nn`` / ``triton.sezm`` package ``__init__``
files; ``isolated`` does that directly. How it was imported is printed.

CPU smoke test (no GPU; tiny shapes; Triton's interpreter runs tilefuse's kernels and, with
``_use_triton`` widened to CPU fp32 tensors, DeePMD-kit's; torch.compile is skipped unless
``--cpu-compile``; the timing is perf_counter and means nothing), in the project's CPU
environment (.venv: Python 3.11, torch 2.13 CPU, triton 3.8; triton 3.6's interpreter stops
in tilefuse's forward gate kernel with "only 0-dimensional arrays can be converted to Python
scalars", an interpreter matter: the GPU path compiles), with DeePMD-kit's pure-Python
wheels (the cp312 lmdb/hypothesis wheels do not install on 3.11 and are not needed):

    .venv/bin/pip install -q --no-index --no-deps --target /tmp/site311 .whl/deepmd_kit-*.whl \
        .whl/array_api_compat-*.whl .whl/wcmatch-*.whl .whl/bracex-*.whl
    TRITON_INTERPRET=1 PYTHONPATH=/tmp/site311:src .venv/bin/python benchmarks/so2_peers.py --tiny --profile
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import importlib
import json
import math
import os
import sys
import time
import types
from pathlib import Path
from typing import Callable

import torch

import tilefuse
from tilefuse import launches, policy, tuning
from tilefuse.check import bench
from tilefuse.check.env import environment
from tilefuse.check.report import _finite
from tilefuse.ops.so2_mixing_stack import configs as tf_configs
from tilefuse.ops.so2_mixing_stack import op as tf_op
from tilefuse.ops.so2_mixing_stack.reference import So2Dims, so2_stack_reference
from tilefuse.ops.so2_mixing_stack.tune import So2Problem
from tilefuse.tuning import timing
from tilefuse.tuning.sweep import poisoned_allocations

F = 2
NL = 3
TOL = 1e-5             # normwise, against float64 at E_c and against eager fp32 at E
DEFAULT_SHAPES = "647000:3:32,300000:6:32,400000:2:64"
TINY_SHAPES = "64:3:32,40:2:64"
SHAPE_NAMES = {"neo": (647000, 3, 32)}
PEER_KINDS = ("tilefuse", "tilefuse-relay", "tilefuse-fused", "tilefuse-l3", "eager", "compile", "deepmd",
              "deepmd-fp16x3")
DEEPMD_PKG = "deepmd.kernels.triton.sezm"
DEEPMD_MODULES = ("so2_value_path", "so2_stack_fp16x3", "tile_configs", "tile_config_data")


def say(*args):
    print(*args, flush=True)


def error_text(exc: BaseException, limit: int = 400) -> str:
    return bench.error_text(exc, limit) if isinstance(exc, Exception) else repr(exc)[:limit]


# --------------------------------------------------------------------------- inputs

@dataclasses.dataclass
class Inputs:
    lmax: int
    cf: int
    u0: torch.Tensor        # (F, E, ROW), requires grad
    alpha: torch.Tensor     # (E, F), positive, requires grad
    w0: torch.Tensor        # (NL, F, M0, M0)
    w1: torch.Tensor        # (NL, F, M1, M1)
    gw: torch.Tensor        # (NL-1, F, Cf, LG)
    grad_out: torch.Tensor  # (E, F, ROW): the cotangent of x_local

    @property
    def edges(self) -> int:
        return self.u0.shape[1]

    def args(self):
        return self.u0, self.alpha, self.w0, self.w1, self.gw

    def grad_args(self):
        """What the step differentiates: (u0, alpha), and the weights when they require grad
        (``--training``)."""
        return self.args() if self.w0.requires_grad else (self.u0, self.alpha)


def make_inputs(n_edges: int, lmax: int, cf: int, device: str, seed: int, training: bool = False) -> Inputs:
    """The scales of tilefuse.check.so2: activations ~0.5, weights ~1/sqrt(fan-in), alpha in
    [0.2, 1.2). Weights are dense random (the model's w1 has a complex-multiplication block
    structure; no kernel here exploits it)."""
    d = So2Dims(lmax, cf)
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape, scale=1.0):
        return torch.randn(shape, generator=gen, device=device) * scale

    u0 = randn(F, n_edges, d.row, scale=0.5).requires_grad_(True)
    alpha = (torch.rand((n_edges, F), generator=gen, device=device) + 0.2).requires_grad_(True)
    w0 = randn(NL, F, d.m0, d.m0, scale=d.m0 ** -0.5)
    w1 = randn(NL, F, d.m1, d.m1, scale=d.m1 ** -0.5)
    gw = randn(NL - 1, F, cf, d.lg, scale=cf ** -0.5)
    grad_out = randn(n_edges, F, d.row)
    for w in (w0, w1, gw):
        w.requires_grad_(training)
    return Inputs(lmax, cf, u0, alpha, w0, w1, gw, grad_out)


# Output names of a step: x_local, then the gradients (grad_args order).
OUT_NAMES = ("x", "du0", "dalpha", "dw0", "dw1", "dgw")


def check_edges_for(n_edges: int, check_edges: int) -> int:
    """E_c: ``check_edges`` rounded down to a multiple of 16 plus E's residue mod 16 (so up to
    15 more than it; Triton specializes integer arguments on divisibility by 16): the kernels
    compiled for the check serve the timing."""
    if n_edges <= check_edges:
        return n_edges
    e_c = check_edges - check_edges % 16 + n_edges % 16
    return e_c if e_c > 0 else n_edges


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    """||got - want|| / ||want|| in float64 on the device (NaN if either holds a NaN)."""
    got, want = got.detach(), want.detach()
    num = torch.linalg.vector_norm(got.double() - want.double()) if got.numel() < 2 ** 27 else \
        torch.linalg.vector_norm((got.float() - want.float()), dtype=torch.float64)
    den = torch.linalg.vector_norm(want, dtype=torch.float64)
    num, den = float(num), float(den)
    return num / den if den else num


# --------------------------------------------------------------------------- DeePMD-kit

@dataclasses.dataclass
class DeePMD:
    vp: types.ModuleType        # so2_value_path
    f3: types.ModuleType        # so2_stack_fp16x3
    tc: types.ModuleType        # tile_configs
    data: types.ModuleType      # tile_config_data
    how: str
    version: str
    interpreted: bool = False   # CPU: _use_triton widened so the interpreter runs its kernels

    def fp32_op(self):
        return self.vp._mixing_stack_op

    def fp16x3_op(self):
        return self.f3.mixing_stack_fp16x3


def _stub_package(name: str, path: Path) -> None:
    """Register ``name`` as a package whose submodules load from ``path``, without running
    its __init__.py."""
    parent, _, leaf = name.rpartition(".")
    if parent not in sys.modules:
        importlib.import_module(parent)
    mod = types.ModuleType(name)
    mod.__path__ = [str(path)]
    mod.__package__ = name
    sys.modules[name] = mod
    setattr(sys.modules[parent], leaf, mod)


def _load_isolated() -> dict[str, types.ModuleType]:
    import deepmd
    root = Path(deepmd.__file__).resolve().parent
    for name, rel in (("deepmd.pt", "pt"), ("deepmd.pt.model", "pt/model"),
                      ("deepmd.pt.model.descriptor", "pt/model/descriptor"),
                      ("deepmd.pt.model.descriptor.sezm_nn", "pt/model/descriptor/sezm_nn"),
                      (DEEPMD_PKG, "kernels/triton/sezm")):
        if name not in sys.modules:
            _stub_package(name, root / rel)
    importlib.import_module("deepmd.pt.model.descriptor.sezm_nn.indexing")
    return {m: importlib.import_module(f"{DEEPMD_PKG}.{m}") for m in DEEPMD_MODULES}


def load_deepmd(mode: str, device: str) -> tuple[DeePMD | None, str]:
    """(DeePMD, how) or (None, why not)."""
    notes = []
    mods = None
    if mode in ("auto", "package"):
        try:
            mods = {m: importlib.import_module(f"{DEEPMD_PKG}.{m}") for m in DEEPMD_MODULES}
            how = "package import"
        except Exception as exc:  # noqa: BLE001 - reported; the isolated load may still work
            notes.append(f"package import failed ({error_text(exc, 200)})")
            if mode == "package":
                return None, "; ".join(notes)
    if mods is None:
        try:
            mods = _load_isolated()
            how = "its kernel modules loaded without the deepmd.pt package __init__ files"
        except Exception as exc:  # noqa: BLE001
            notes.append(f"isolated load failed ({error_text(exc, 300)})")
            return None, "; ".join(notes)
    try:
        from importlib.metadata import version
        ver = version("deepmd-kit")
    except Exception:  # noqa: BLE001
        ver = getattr(sys.modules.get("deepmd"), "__version__", "?")
    dp = DeePMD(mods["so2_value_path"], mods["so2_stack_fp16x3"], mods["tile_configs"],
                mods["tile_config_data"], how + ("; " + "; ".join(notes) if notes else ""), ver)
    if device == "cpu" and policy.interpreter_enabled():
        # DeePMD routes CPU tensors to its eager reference (``_use_triton`` wants CUDA). Under
        # the interpreter its Triton kernels run on CPU tensors, so let them.
        def use_triton(t):
            return dp.vp.SO2_VALUE_PATH_TRITON_AVAILABLE and t.dtype is torch.float32
        dp.vp._use_triton = use_triton
        dp.f3._use_triton = use_triton
        dp.interpreted = True
    return dp, dp.how


@contextlib.contextmanager
def deepmd_tiles(dp: DeePMD, entries: dict):
    """Run with DeePMD's runtime tile tables set to ``entries`` ({family: {key: value}}),
    restored afterwards. A few dict operations: negligible against a call of tens of ms."""
    families = dp.tc.TILE_CONFIG_FAMILIES
    saved = {fam: dict(dp.tc._runtime_tile_configs(fam)) for fam in families}
    try:
        for fam in families:
            table = dp.tc._runtime_tile_configs(fam)
            table.clear()
            table.update(entries.get(fam, {}))
        yield
    finally:
        for fam, old in saved.items():
            table = dp.tc._runtime_tile_configs(fam)
            table.clear()
            table.update(old)


def _tuplify(v):
    return tuple(_tuplify(x) for x in v) if isinstance(v, list) else v


class DeePMDTiles:
    """The tile-table sources of --deepmd-tiles: name -> {family: {(cf, lmax): entry}}."""

    def __init__(self, dp: DeePMD, names: list[str], cache_path: Path, device: str, want_fp16x3: bool):
        self.dp, self.names, self.cache_path, self.device = dp, names, cache_path, device
        self.want_fp16x3 = want_fp16x3
        self.swept: dict[tuple[int, int], dict] = {}
        self.notes: dict[str, str] = {}
        if "sweep" in names:
            self._load_cache()

    def _fingerprint(self) -> dict:
        import triton
        return {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
                "deepmd": self.dp.version, "torch": torch.__version__, "triton": triton.__version__}

    def _load_cache(self):
        try:
            doc = json.loads(self.cache_path.read_text())
        except FileNotFoundError:
            return
        except Exception as exc:  # noqa: BLE001
            say(f"  DeePMD tile cache {self.cache_path} unreadable ({error_text(exc, 120)}): ignored")
            return
        if doc.get("fingerprint") != self._fingerprint():
            say(f"  DeePMD tile cache {self.cache_path} is for {doc.get('fingerprint')}: ignored")
            return
        for key, fams in doc.get("keys", {}).items():
            cf, lmax = (int(x) for x in key.split(","))
            self.swept[(cf, lmax)] = {fam: {(cf, lmax): _tuplify(v)} for fam, v in fams.items()}

    def _save_cache(self):
        doc = {"fingerprint": self._fingerprint(),
               "keys": {f"{cf},{lmax}": {fam: e[(cf, lmax)] for fam, e in fams.items()}
                        for (cf, lmax), fams in self.swept.items()}}
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.cache_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        tmp.replace(self.cache_path)

    def _sweep(self, cf: int, lmax: int) -> dict:
        """DeePMD's own sweeps for the stack's families at (cf, lmax), as its freeze
        auto-tuner runs them (sweep_tile_configs.sweep_pointwise, then sweep_fp16x3 with the
        pointwise winners in place). Their per-candidate lines go to a log, not the screen."""
        import io
        sweeps = importlib.import_module(f"{DEEPMD_PKG}.sweep_tile_configs")
        key = (cf, lmax)
        need_fp16x3 = self.want_fp16x3 and "stack_fp16x3" not in self.swept.get(key, {})
        entries = dict(self.swept.get(key, {}))
        log = io.StringIO()
        say(f"  DeePMD sweep (Cf {cf}, lmax {lmax}): running "
            f"{'pointwise' if 'gate' not in entries else ''}{' + fp16x3' if need_fp16x3 else ''} "
            "(minutes; its per-candidate lines are not shown)")
        t0 = time.time()
        with deepmd_tiles(self.dp, {}), contextlib.redirect_stdout(log):
            if "gate" not in entries:
                for fam, e in sweeps.sweep_pointwise(cf, lmax, n_focus=F, device="cuda").items():
                    entries[fam] = e
            if need_fp16x3:
                for fam, e in entries.items():
                    self.dp.tc.register_tile_configs(fam, e)
                entries.update(sweeps.sweep_fp16x3(cf, lmax, n_focus=F, device="cuda"))
        torch.cuda.empty_cache()
        best = [line for line in log.getvalue().splitlines() if line.startswith("BEST") or "fp32 reference" in line]
        say(f"  DeePMD sweep (Cf {cf}, lmax {lmax}): {time.time() - t0:.0f} s; " + "; ".join(best))
        self.swept[key] = entries
        self._save_cache()
        return entries

    def entries(self, name: str, cf: int, lmax: int) -> dict | None:
        """The tables of source ``name`` for this key, or None (reason in self.notes)."""
        if name == "default":
            return {}
        if name == "h20":
            return {fam: dict(t) for fam, t in self.dp.data.BUILTIN_TILE_CONFIGS.get("NVIDIA H20", {}).items()}
        if name == "sweep":
            if self.device != "cuda":
                self.notes[name] = "DeePMD's sweeps time with CUDA events: skipped without a GPU"
                return None
            have = self.swept.get((cf, lmax), {})
            if "gate" in have and (not self.want_fp16x3 or "stack_fp16x3" in have):
                return have
            try:
                return self._sweep(cf, lmax)
            except Exception as exc:  # noqa: BLE001
                self.notes[name] = f"DeePMD sweep failed: {error_text(exc, 200)}"
                torch.cuda.empty_cache()
                return None
        raise ValueError(f"--deepmd-tiles: unknown source {name!r} (default, h20, sweep)")


# --------------------------------------------------------------------------- peers

@dataclasses.dataclass
class Peer:
    name: str
    kind: str                                   # one of PEER_KINDS
    forward: Callable[[Inputs], Callable]       # inputs -> zero-arg forward returning x_local
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    note: str = ""
    unavailable: str = ""                       # why it cannot run here (then never called)
    expect_route: str = ""                      # tilefuse: the backward route (So2Config.route) whose launches to see


def make_step(peer: Peer, inp: Inputs) -> Callable[[], tuple]:
    """Forward + force backward: (x_local, grad u0, grad alpha), and the weight gradients with
    ``--training``."""
    fwd = peer.forward(inp)

    def step():
        with peer.context():
            x = fwd()
            grads = torch.autograd.grad(x, inp.grad_args(), inp.grad_out)
        return x, *grads
    return step


@contextlib.contextmanager
def tf_registered(problem: So2Problem, value):
    """tilefuse at level 2 with a runtime table entry for the key (a config or "baseline")."""
    with tuning.registered("so2_mixing_stack", {problem: value}), policy.level(2):
        yield


def _reference_fn(lmax: int, cf: int):
    def reference(u0, alpha, w0, w1, gw):
        return so2_stack_reference(u0, alpha, w0, w1, gw, lmax=lmax, focus_dim=cf)
    return reference


def float64_reference(inp: Inputs, lmax: int, cf: int) -> tuple:
    """(x, the gradients make_step returns) of the reference on float64 copies of ``inp``."""
    n_grads = len(inp.grad_args())
    args = [t.detach().double().requires_grad_(i < n_grads) for i, t in enumerate(inp.args())]
    x = so2_stack_reference(*args, lmax=lmax, focus_dim=cf)
    return (x.detach(), *torch.autograd.grad(x, args[:n_grads], inp.grad_out.double()))


def full_e_reference(inp: Inputs, lmax: int, cf: int, training: bool):
    """Check 2's reference outputs at full E: eager fp32 (force backward) or float64 (training
    backward: a weight gradient sums over all E rows, so eager fp32's own error grows with E and
    it cannot be the yardstick). None if it fails (out of memory): finiteness is then checked alone."""
    try:
        if training:
            ref = float64_reference(inp, lmax, cf)
        else:
            x = _reference_fn(lmax, cf)(*inp.args())
            ref = (x.detach(), *torch.autograd.grad(x, inp.grad_args(), inp.grad_out))
            del x
        sync(inp.grad_out.device.type)
        return ref
    except Exception as exc:  # noqa: BLE001
        say(f"  full-E reference failed ({error_text(exc)})")
        free(inp.grad_out.device.type)
        return None


def full_e_bounds(errs: dict, eager: dict) -> dict:
    """Check 2's bound per output: TOL, or for an output whose float64 error eager fp32 (cuBLAS,
    what the model runs today) exceeds TOL at this E, twice eager's error (the weight gradients
    of the training backward at production E)."""
    return {n: max(TOL, 2 * eager.get(n, 0.0)) for n in errs}


def untimed_eager_errors(inp: Inputs, ref: tuple, lmax: int, cf: int) -> dict:
    """Eager fp32's float64 errors at full E when eager is not a timed peer: check 2's bound for
    the training backward is relative to them (``full_e_bounds``), so a run without eager would
    otherwise hold every peer's weight gradients to TOL, which eager fp32 itself misses at Neo.
    Empty (bounds TOL) if the eager call fails."""
    ref_fn = _reference_fn(lmax, cf)
    step = make_step(Peer("eager reference", "eager", lambda i: (lambda: ref_fn(*i.args()))), inp)
    try:
        out = step()
    except Exception as exc:  # noqa: BLE001
        say(f"  eager fp32 at full E failed ({error_text(exc)}): bounds stay {TOL}")
        free(inp.grad_out.device.type)
        return {}
    errs = {n: rel_err(g, r) for n, g, r in zip(OUT_NAMES, out, ref)}
    del out
    say("  eager fp32 at full E (untimed, for the bounds): "
        + ", ".join(f"{n} {v:.2e}" for n, v in errs.items()))
    return errs


def build_peers(args, lmax: int, cf: int, n_edges: int, device: str, dp: DeePMD | None, dp_err: str,
                tiles: DeePMDTiles | None) -> tuple[list[Peer], dict]:
    """The peers of one shape, and facts about them (the tilefuse table pick)."""
    want = set(args.peers)
    peers: list[Peer] = []
    d = So2Dims(lmax, cf)
    with policy.level(2):
        pick = tf_op.backward_config(d, torch.float32, n_edges, F, NL, args.training)
        fwd_pick = tf_op.forward_config(d, torch.float32, n_edges, F, NL) or tf_configs.heuristic(lmax, cf)
    relay_cfg = tf_configs.heuristic(lmax, cf)
    facts = {"table_pick": pick.name, "table_forward_pick": fwd_pick.name, "heuristic_relay": relay_cfg.name}
    problem = So2Problem(lmax, cf, 4)

    def tf_forward(inp):
        return lambda: tilefuse.so2_mixing_stack(*inp.args(), lmax=lmax, focus_dim=cf)

    if "tilefuse" in want:
        peers.append(Peer(f"tilefuse (fwd {fwd_pick.name.removeprefix('relay-')}; bwd {pick.name})", "tilefuse",
                          tf_forward, lambda: policy.level(2),
                          note="level 2, the table's pick", expect_route=pick.route))
    if "tilefuse-relay" in want:
        if pick == relay_cfg:
            facts["tilefuse-relay"] = "same as the table's pick: not repeated"
        else:
            peers.append(Peer(f"tilefuse relay ({relay_cfg.name})", "tilefuse-relay", tf_forward,
                              lambda: tf_registered(problem, tuning.BASELINE), note="forced: baseline entry",
                              expect_route="relay"))
    if "tilefuse-fused" in want:
        fused = pick if pick.fused else tf_configs.So2Config(64, 64, cf, 4, 1, fused=True)
        if not tf_configs.fused_supported(cf, True):
            facts["tilefuse-fused"] = f"Cf {cf}: outside the fused guards (a power of two in [16, 64])"
        elif args.training:
            facts["tilefuse-fused"] = "weight gradients: the fused backward does not apply"
        elif fused == pick:
            facts["tilefuse-fused"] = "the table's pick is fused: not repeated"
        else:
            peers.append(Peer(f"tilefuse fused ({fused.name})", "tilefuse-fused", tf_forward,
                              lambda: tf_registered(problem, fused), note="forced: registered entry",
                              expect_route="fused"))
    if "tilefuse-l3" in want:
        with policy.level(3):
            variant = tf_op.level3_config(d, torch.float32, n_edges, F, NL)
        l3_key = So2Problem(lmax, cf, 4, level3=True)
        if variant is None:
            entry = tuning.get_entry("so2_mixing_stack", l3_key)
            why = ("never swept: run `tilefuse tune --op so2_mixing_stack --shape "
                   f"{lmax}x{cf} --pass level3` first" if entry is None else
                   "the level-3 sweep kept the exact path (no variant passed or beat it)")
            peers.append(Peer("tilefuse level 3", "tilefuse-l3", None, unavailable=f"level-3 key {why}"))
        else:
            facts["tilefuse-l3"] = variant.name
            peers.append(Peer(f"tilefuse level 3 ({variant.name})", "tilefuse-l3", tf_forward,
                              lambda: policy.level(3), note="level 3: the validated level-3 entry",
                              expect_route=variant.route))
    if "eager" in want:
        ref = _reference_fn(lmax, cf)
        peers.append(Peer("eager reference", "eager", lambda inp: (lambda: ref(*inp.args())),
                          note="cuBLAS fp32, TF32 off"))
    if "compile" in want:
        if device != "cuda" and not args.cpu_compile:
            peers.append(Peer("torch.compile", "compile", None,
                              unavailable="skipped on CPU (Inductor's C++ backend; --cpu-compile to try)"))
        else:
            compiled = torch.compile(_reference_fn(lmax, cf), dynamic=False,
                                     mode=None if args.compile_mode == "default" else args.compile_mode)
            peers.append(Peer("torch.compile", "compile", lambda inp: (lambda: compiled(*inp.args())),
                              note=f"of the reference, static shapes, mode {args.compile_mode}"))
    for kind, label in (("deepmd", "deepmd fp32"), ("deepmd-fp16x3", "deepmd fp16x3")):
        if kind not in want:
            continue
        if dp is None:
            peers.append(Peer(label, kind, None, unavailable=f"DeePMD-kit not importable: {dp_err}"))
            continue
        where = " [interpreted]" if dp.interpreted else ""
        for src in args.deepmd_tiles:
            name = f"{label} [{src} tiles]"
            entries = tiles.entries(src, cf, lmax)
            if entries is None:
                peers.append(Peer(name, kind, None, unavailable=tiles.notes.get(src, "no tiles")))
                continue
            ctx = (lambda e=entries: deepmd_tiles(dp, e))
            if kind == "deepmd":
                op = dp.fp32_op()
                if device == "cpu" and not dp.interpreted:
                    where = " [its eager CPU fallback: no TRITON_INTERPRET]"
                with ctx():
                    point = dp.tc.point_config(cf, lmax)
                peers.append(Peer(name, kind, lambda inp, op=op: (lambda: op(*inp.args(), lmax, cf, True)[0]), ctx,
                                  note=f"point tiles {point}{where}"))
            else:
                with ctx():
                    cfgs = dp.tc.stack_fp16x3_configs(cf, lmax)
                if cfgs is None:
                    peers.append(Peer(name, kind, None, unavailable=f"no validated fp16x3 entry for (Cf {cf}, "
                                      f"lmax {lmax}) in the {src} tables: DeePMD keeps the fp32 op"))
                    continue
                if device == "cpu" and not dp.interpreted:
                    peers.append(Peer(name, kind, None, unavailable="CPU without TRITON_INTERPRET: "
                                      "DeePMD runs its fp32 eager fallback (not fp16x3)"))
                    continue
                op = dp.fp16x3_op()
                peers.append(Peer(name, kind, lambda inp, op=op: (lambda: op(*inp.args(), lmax, cf, True)[0]), ctx,
                                  note=f"GEMM tiles {cfgs}{where}"))
    return peers, facts


# --------------------------------------------------------------------------- timing

def sync(device: str):
    if device == "cuda":
        torch.cuda.synchronize()


def free(device: str):
    gc.collect()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


# --------------------------------------------------------------------------- profile

def profile_steps(steps: dict[str, Callable], device: str, n_steps: int, top: int, medians: dict) -> dict:
    """Per-kernel device time per fwd+bwd (CPU: self CPU time per op) under torch.profiler."""
    result = {}
    for name, step in steps.items():
        rows, prof = bench.kernel_times(step, device, n_steps)
        if not rows:   # no per-kernel rows recognized: the profiler's own table instead
            say(f"\n  profile: {name}: no kernel rows recognized; torch.profiler's table:")
            say(prof.key_averages().table(sort_by="self_device_time_total" if device == "cuda"
                                          else "self_cpu_time_total", row_limit=top))
            result[name] = {"total_us": None, "kernels": []}
            continue
        total = sum(r["us"] for r in rows)
        what = "CUDA kernel time" if device == "cuda" else "self CPU time by op"
        say(f"\n  profile: {name}: {what} per fwd+bwd {total / 1e3:.3f} ms in "
            f"{sum(r['calls'] for r in rows):.0f} {'launches' if device == 'cuda' else 'op calls'}"
            + (f" (timed median {medians[name]:.3f} ms)" if name in medians else ""))
        say(f"    {'us/step':>10} {'%':>6} {'calls':>6}  kernel")
        for r in rows[:top]:
            say(f"    {r['us']:10.1f} {100 * r['us'] / total if total else 0:6.1f} {r['calls']:6.1f}  {r['kernel'][:110]}")
        if len(rows) > top:
            rest = sum(r["us"] for r in rows[top:])
            say(f"    {rest:10.1f} {100 * rest / total if total else 0:6.1f} {'':>6}  ({len(rows) - top} others)")
        result[name] = {"total_us": total, "kernels": rows[:max(top, 40)]}
    return result


# --------------------------------------------------------------------------- one shape

def fmt_err(v) -> str:
    return "-" if v is None else (f"{v:.1e}" if math.isfinite(v) else str(v))


def run_shape(args, shape, device, dp, dp_err, tiles, profile_here: bool) -> dict:
    n_edges, lmax, cf = shape
    d = So2Dims(lmax, cf)
    label = f"E {n_edges}, lmax {lmax}, Cf {cf}"
    surface_gb = F * n_edges * d.row * 4 / 1e9
    say(f"\n=== {label} (ROW {d.row}, M0 {d.m0}, M1 {d.m1}, LG {d.lg}; one (F,E,ROW) fp32 surface "
        f"{surface_gb:.2f} GB) ===")
    torch._dynamo.reset()
    peers, facts = build_peers(args, lmax, cf, n_edges, device, dp, dp_err, tiles)
    say(f"  tilefuse table pick (level 2): {facts['table_pick']} (heuristic relay {facts['heuristic_relay']})")
    for k in ("tilefuse-relay", "tilefuse-fused", "tilefuse-l3"):
        if k in facts:
            say(f"  {k}: {facts[k]}")
    rows = {p.name: {"peer": p.name, "kind": p.kind, "note": p.note, "status": "unavailable",
                     "error": p.unavailable} for p in peers}
    live = [p for p in peers if not p.unavailable]

    # 1. float64 check at E_c.
    e_c = check_edges_for(n_edges, args.check_edges)
    inp = make_inputs(e_c, lmax, cf, device, args.seed + 1000 * lmax + cf, args.training)
    ref = float64_reference(inp, lmax, cf)
    say(f"  check 1: float64 reference at E_c = {e_c}")
    passed = []
    for p in live:
        row = rows[p.name]
        t0 = time.time()
        try:
            # Fresh allocations NaN-filled: with the caching allocator a peer run after another
            # gets its freed blocks back, so a row it never wrote could hold the other's answer.
            with poisoned_allocations(), launches.counting() as launched:
                out = make_step(p, inp)()
                sync(device)
        except Exception as exc:  # noqa: BLE001 - a failing peer is reported, not dropped
            row.update(status="failed", error=error_text(exc))
            free(device)
            continue
        row["first_call_s"] = round(time.time() - t0, 2)
        errs = {n: rel_err(g, r) for n, g, r in zip(OUT_NAMES, out, ref)}
        row["f64_errors"] = errs
        del out
        ok = all(math.isfinite(v) and v <= TOL for v in errs.values())
        if p.expect_route:
            counts = {r: launched.get(f"so2_bwd_{r}_layer", 0) for r in ("fused", "compose", "relay")}
            row["route_launches"] = counts
            engaged = all(n == (NL - 1 if r == p.expect_route else 0) for r, n in counts.items())
            if device == "cpu" and not policy.kernels_enabled(torch.device("cpu")):
                engaged, row["note"] = True, (row["note"] + "; the reference ran (no TRITON_INTERPRET)").lstrip("; ")
            if not engaged and p.kind == "tilefuse":
                row["note"] += f"; the pick says {p.expect_route} but the launches were {dict(launched)}"
            elif not engaged:
                row.update(status="not engaged",
                           error=f"expected the {p.expect_route} backward, launches {dict(launched)}")
                continue
        if not ok:
            row.update(status="not equivalent", error=f"float64 errors {errs}, bound {TOL}")
        else:
            passed.append(p)
    del inp, ref
    free(device)

    # 2. Full E: fresh timing inputs; each peer against the eager fp32 reference (training: float64).
    inp = make_inputs(n_edges, lmax, cf, device, args.seed + 1000 * lmax + cf + 1, args.training)
    ref = full_e_reference(inp, lmax, cf, args.training)
    say(f"  check 2: full E = {n_edges} against the {'float64' if args.training else 'eager fp32'} reference"
        + ("" if ref is not None else ": reference failed, finiteness only"))
    steps, eager_errs = {}, {}
    if args.training and ref is not None and not any(p.kind == "eager" for p in passed):
        eager_errs = untimed_eager_errors(inp, ref, lmax, cf)   # the bound needs eager's error
        facts["full_e_eager_f64"] = eager_errs
    for p in sorted(passed, key=lambda p: p.kind != "eager"):   # eager first: its errors set the bound
        row = rows[p.name]
        step = make_step(p, inp)
        t0 = time.time()
        try:
            with poisoned_allocations():   # as in check 1
                out = step()
                sync(device)
        except Exception as exc:  # noqa: BLE001
            row.update(status="failed", error=error_text(exc))
            free(device)
            continue
        row["full_call_s"] = round(time.time() - t0, 2)
        finite = all(bool(torch.isfinite(t).all()) for t in out)
        if ref is not None and (args.training or p.kind != "eager"):
            errs = {n: rel_err(g, r) for n, g, r in zip(OUT_NAMES, out, ref)}
        else:   # the eager peer is the fp32 reference itself; or no reference: finiteness only
            errs = {n: 0.0 for n in OUT_NAMES[:len(out)]} if ref is not None else {}
        row["full_e_vs_eager" if not args.training else "full_e_f64"] = errs
        del out
        if p.kind == "eager":
            eager_errs = errs
        bound = full_e_bounds(errs, eager_errs)
        if not finite or not all(math.isfinite(v) and v <= bound[n] for n, v in errs.items()):
            row.update(status="not equivalent",
                       error=f"full E: {'non-finite output; ' if not finite else ''}errors {errs}, bounds {bound}")
            continue
        row["status"] = "checked"
        steps[p.name] = step
    del ref
    free(device)

    say(f"  {'peer':<52} {'status':<15} {'f64 x / du0 / dalpha':<28} {'full E x / du0 / dalpha':<28} "
        f"{'1st s':>6}  route / note")
    for p in peers:
        r = rows[p.name]
        f64 = r.get("f64_errors", {})
        full = r.get("full_e_vs_eager", r.get("full_e_f64", {}))
        route = r.get("route_launches")
        extra = (", ".join(f"{k} {n}" for k, n in route.items() if n or k != "compose") + "; "
                 if route else "") + (r.get("note") or "")
        if r.get("error"):
            extra += ("; " if extra else "") + r["error"]
        say(f"  {p.name:<52} {r['status']:<15} "
            f"{' / '.join(fmt_err(f64.get(k)) for k in ('x', 'du0', 'dalpha')):<28} "
            f"{' / '.join(fmt_err(full.get(k)) for k in ('x', 'du0', 'dalpha')):<28} "
            f"{r.get('first_call_s', float('nan')):6.1f}  {extra}")

    # 3. Timing.
    medians, timings = {}, {}
    if steps:
        say(f"  timing {len(steps)} peers: {args.rounds} rounds, rotating order, "
            + ("2 s blocks (0.5 s untimed, then 1.5 s timed: --sustained)" if args.sustained
               else f"~{args.target_ms:.0f} ms each a round")
            + (", CUDA-graph replay" if args.graphs else ""))
        # CPU smoke runs: the same rounds on the host's clock (one call per peer a round).
        blocks = timing.SUSTAINED if args.sustained else dict(target_ms=args.target_ms)
        timed = timing.interleaved(steps, rounds=args.rounds, graphs=args.graphs and device == "cuda",
                                   timer=None if device == "cuda" else timing.WallTimer(), **blocks)
        for name, t in timed.items():
            row = rows[name]
            if isinstance(t, Exception):
                row.update(status="failed", error="timing: " + error_text(t))
                continue
            row.update(status="ok", ms=t.median_ms, min_ms=t.min_ms, max_ms=t.max_ms, spread=t.spread, rounds=t.rounds,
                       samples_ms=list(t.samples_ms))
            medians[name], timings[name] = t.median_ms, t
    # The speedups over the fastest DeePMD-kit fp32 peer (by median) and over torch.compile, all
    # of one interleaved call: the median of the per-round ratios (timing.ratio), so that drift
    # between rounds cancels within each ratio.
    dp_fp32 = sorted((rows[p.name]["ms"], p.name) for p in peers
                     if p.kind == "deepmd" and rows[p.name].get("status") == "ok")
    comp = [p.name for p in peers if p.kind == "compile" and rows[p.name].get("status") == "ok"]
    base_dp, base_comp = (timings[dp_fp32[0][1]] if dp_fp32 else None), (timings[comp[0]] if comp else None)
    facts["x_deepmd_fp32_base"] = dp_fp32[0][1] if dp_fp32 else None
    for name, t in timings.items():
        rows[name]["x_deepmd_fp32"] = timing.ratio(base_dp, t) if base_dp else None
        rows[name]["x_compile"] = timing.ratio(base_comp, t) if base_comp else None

    result = {"edges": n_edges, "lmax": lmax, "focus_dim": cf, "check_edges": e_c, "facts": facts,
              "peers": list(rows.values())}
    if profile_here and steps:
        prof_steps = {n: s for n, s in steps.items()
                      if any(p.name == n and p.kind in args.profile_kinds for p in peers)}
        say(f"\n  profile at {label}: {args.profile_steps} fwd+bwd steps per peer")
        result["profile"] = profile_steps(prof_steps, device, args.profile_steps, args.profile_top, medians)
    del steps, inp
    free(device)
    return result


# --------------------------------------------------------------------------- main

def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    shapes = []
    for item in text.split(","):
        item = item.strip().lower()
        if not item:
            continue
        if item in SHAPE_NAMES:
            shapes.append(SHAPE_NAMES[item])
            continue
        try:
            e, lmax, cf = (int(x) for x in item.split(":"))
        except ValueError:
            raise SystemExit(f"--shapes: {item!r} is not EDGES:LMAX:CF (e.g. 647000:3:32) or one of "
                             f"{sorted(SHAPE_NAMES)}") from None
        if e < 1 or lmax < 1 or cf < 1:
            raise SystemExit(f"--shapes: {item!r}: every size must be positive")
        shapes.append((e, lmax, cf))
    return shapes


def meta(device: str, dp: DeePMD | None, dp_how: str) -> dict:
    """The project's environment report (``tilefuse.check.env.environment``: versions, git
    commit, GPU, driver, ...) with this program's own facts; "device" is cuda or cpu here,
    the GPU's name is "gpu"."""
    env = environment()
    m = {**env, "device": device, "commit": env.get("git_commit") or "?",
         "deepmd": dp.version if dp else None, "deepmd_import": dp_how,
         "allow_tf32": torch.backends.cuda.matmul.allow_tf32,
         "float32_matmul_precision": torch.get_float32_matmul_precision(),
         "tilefuse_level_default": policy.get_level(), "interpreter": policy.interpreter_enabled(),
         "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        m.update(gpu=torch.cuda.get_device_name(), capability=f"sm{p.major}{p.minor}",
                 gpu_memory_gib=round(p.total_memory / 2 ** 30, 1), cuda=torch.version.cuda)
        try:
            fp, path = tuning.table_location()
            m["tilefuse_table"] = {"fingerprint": fp, "cache": str(path)}
        except Exception as exc:  # noqa: BLE001
            m["tilefuse_table"] = error_text(exc, 200)
    return m


def final_table(results: list[dict]) -> list[str]:
    lines = ["| shape (E, lmax, Cf) | peer | median ms | spread | x DeePMD fp32 | x compile | status |",
             "|---|---|---|---|---|---|---|"]
    for res in results:
        shape = f"{res['edges']}, {res['lmax']}, {res['focus_dim']}"
        if res.get("aborted"):
            lines.append(f"| {shape} | (all) | - | - | - | - | aborted: {res['aborted'][:160]} |")
        for r in res["peers"]:
            if r.get("status") == "ok":
                xd = f"{r['x_deepmd_fp32']:.2f}" if r.get("x_deepmd_fp32") else "-"
                xc = f"{r['x_compile']:.2f}" if r.get("x_compile") else "-"
                lines.append(f"| {shape} | {r['peer']} | {r['ms']:.3f} | {r['spread']:.1%} | {xd} | {xc} | ok |")
            else:
                lines.append(f"| {shape} | {r['peer']} | - | - | - | - | {r['status']}: {(r.get('error') or '')[:160]} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=None, help=f"EDGES:LMAX:CF,... (default {DEFAULT_SHAPES}; 'neo' = 647000:3:32)")
    ap.add_argument("--rounds", type=int, default=None, help="timing rounds (default 10; --tiny 3)")
    ap.add_argument("--target-ms", type=float, default=100.0, help="time per peer per round (default 100)")
    ap.add_argument("--graphs", action="store_true", help="time CUDA-graph replays (default: plain calls)")
    ap.add_argument("--sustained", action="store_true",
                    help="time each peer in 2 s blocks (0.5 s untimed first) instead of --target-ms samples: "
                         "each at its own clock under the power limit")
    ap.add_argument("--peers", default=",".join(PEER_KINDS), help=f"comma list from {','.join(PEER_KINDS)}")
    ap.add_argument("--check-edges", type=int, default=65536, help="E_c of the float64 check (default 65536)")
    ap.add_argument("--deepmd-tiles", default="h20,default",
                    help="comma list of DeePMD tile sources: default, h20, sweep (default h20,default)")
    ap.add_argument("--deepmd-tiles-cache", default=None,
                    help="JSON cache of --deepmd-tiles sweep (default $TILEFUSE_CACHE_DIR or ~/.cache/tilefuse)")
    ap.add_argument("--deepmd-import", choices=("auto", "package", "isolated"), default="auto")
    ap.add_argument("--compile-mode", default="default",
                    help="torch.compile mode: default, max-autotune-no-cudagraphs, ... (default: default)")
    ap.add_argument("--cpu-compile", action="store_true", help="on CPU, try torch.compile too (Inductor C++)")
    ap.add_argument("--profile", action="store_true", help="torch.profiler per-kernel table at one shape")
    ap.add_argument("--profile-shape", default=None, help="EDGES:LMAX:CF to profile (default: the first shape)")
    ap.add_argument("--profile-peers",
                    default="tilefuse,tilefuse-relay,tilefuse-fused,tilefuse-l3,deepmd,deepmd-fp16x3",
                    help="peer kinds to profile (default: tilefuse's and DeePMD-kit's)")
    ap.add_argument("--profile-steps", type=int, default=3)
    ap.add_argument("--profile-top", type=int, default=15)
    ap.add_argument("--json", default=None, help="write the results as JSON here")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--training", action="store_true",
                    help="training backward: the weights require grad too (dW0, dW1, dGW checked and timed)")
    ap.add_argument("--tiny", action="store_true",
                    help=f"smoke test at tiny shapes ({TINY_SHAPES}); on CPU with TRITON_INTERPRET=1")
    args = ap.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        ap.error(f"--rounds {args.rounds}: at least 1 (no round times nothing)")

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.tiny:
        say("no CUDA GPU: this benchmark is for a GPU; use --tiny (with TRITON_INTERPRET=1) for a CPU smoke test")
        return 2
    args.shapes = parse_shapes(args.shapes or (TINY_SHAPES if args.tiny else DEFAULT_SHAPES))
    if args.rounds is None:
        args.rounds = 3 if args.tiny else 10
    args.peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    bad = sorted(set(args.peers) - set(PEER_KINDS))
    if bad:
        ap.error(f"--peers: unknown {bad}; choose from {PEER_KINDS}")
    args.profile_kinds = [p.strip() for p in args.profile_peers.split(",") if p.strip()]
    args.deepmd_tiles = [s.strip() for s in args.deepmd_tiles.split(",") if s.strip()]
    bad = sorted(set(args.deepmd_tiles) - {"default", "h20", "sweep"})
    if bad or not args.deepmd_tiles:
        ap.error(f"--deepmd-tiles: unknown {bad}; choose from default, h20, sweep")
    profile_shape = (parse_shapes(args.profile_shape)[0] if args.profile_shape else args.shapes[0]) \
        if args.profile else None
    if profile_shape is not None and profile_shape not in args.shapes:
        ap.error(f"--profile-shape {profile_shape} is not among --shapes {args.shapes}")

    # fp32 everywhere in IEEE precision: no TF32 in cuBLAS (eager, torch.compile's extern mm).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    want_dp = {"deepmd", "deepmd-fp16x3"} & set(args.peers)
    dp, dp_how = load_deepmd(args.deepmd_import, device) if want_dp else (None, "not asked for")
    tiles = None
    if dp is not None:
        cache = Path(args.deepmd_tiles_cache) if args.deepmd_tiles_cache else \
            Path(os.environ.get("TILEFUSE_CACHE_DIR") or Path.home() / ".cache" / "tilefuse") / (
                "deepmd-tiles-" + "".join(c if c.isalnum() else "-" for c in
                                          (torch.cuda.get_device_name() if device == "cuda" else "cpu")).lower() + ".json")
        tiles = DeePMDTiles(dp, args.deepmd_tiles, cache, device, "deepmd-fp16x3" in args.peers)

    info = meta(device, dp, dp_how)
    say("so2_mixing_stack peers: forward + " + ("training backward (grad u0, alpha and the weights)"
                                                 if args.training else "force backward (grad u0, alpha)")
        + ", fp32, F 2, NL 3")
    for k, v in info.items():
        say(f"  {k}: {v}")
    if device == "cpu":
        say("  CPU smoke test: " + ("Triton's interpreter runs tilefuse's kernels" +
                                     (" and DeePMD-kit's" if dp is not None and dp.interpreted else "")
                                     if policy.interpreter_enabled() else
                                     "no TRITON_INTERPRET: tilefuse and DeePMD-kit run their eager references")
            + "; torch.compile skipped; timings are perf_counter and mean nothing")
    if policy.get_level() != 2:
        say(f"  note: TILEFUSE_LEVEL is {policy.get_level()}; the tilefuse peers run at level 2 regardless")

    doc = {"meta": info, "args": {k: (v if isinstance(v, (int, float, str, bool, type(None), list)) else str(v))
                                  for k, v in vars(args).items()}, "results": []}
    t_all = time.time()
    for shape in args.shapes:
        t0 = time.time()
        try:
            res = run_shape(args, shape, device, dp, dp_how, tiles, shape == profile_shape)
        except Exception as exc:  # noqa: BLE001 - one shape's crash must not lose the others
            say(f"  shape {shape} aborted: {error_text(exc)}")
            res = {"edges": shape[0], "lmax": shape[1], "focus_dim": shape[2], "aborted": error_text(exc),
                   "peers": []}
            free(device)
        res["wall_s"] = round(time.time() - t0, 1)
        doc["results"].append(res)
        say(f"  shape done in {res['wall_s']:.0f} s")
        for line in final_table([res])[2:]:
            say("  " + line)
        if args.json:
            write_json(args.json, doc)
    what = 'training' if args.training else 'force'
    say(f"\n== so2_mixing_stack forward + {what} backward, fp32, F 2, NL 3 ({info.get('gpu', device)}); "
        f"x DeePMD fp32 = fastest DeePMD-kit fp32 ms / peer ms, x compile = torch.compile ms / peer ms "
        f"(> 1: faster; median of the per-round ratios); {args.rounds} interleaved rounds"
        f"{' of 2 s blocks' if args.sustained else ''}, median; "
        f"{time.time() - t_all:.0f} s in all ==")
    for line in final_table(doc["results"]):
        say(line)
    if args.json:
        write_json(args.json, doc)
        say(f"wrote {args.json}")
    # a shape that aborted measured nothing: the run did not do what it was asked
    return 1 if any(res.get("aborted") for res in doc["results"]) else 0


def write_json(path: str, doc: dict) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    # a NaN error (rel_err's, of an output holding NaN) as "nan": bare NaN is not JSON
    tmp.write_text(json.dumps(_finite(doc), indent=1, default=str, allow_nan=False))
    tmp.replace(p)


if __name__ == "__main__":
    sys.exit(main())
