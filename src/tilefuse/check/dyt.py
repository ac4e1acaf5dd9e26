"""`tilefuse check` section for DyT: verification of each path and dtype combination, and on
a GPU the benchmark against eager PyTorch, torch.compile and Liger-Kernel."""

from __future__ import annotations

import contextlib
import math
import statistics
from pathlib import Path
from typing import Callable

import torch

from .. import launches, tuning
from ..ops import triton_common
from ..ops.dyt import api, launch
from ..ops.dyt.verify import compare_to_reference, poisoned
from ..tuning import timing
from . import bench
from .report import cell

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _inputs(shape, dtype, param_dtype, bias, channels_last, device, layout="", alpha=None):
    c = shape[-1] if channels_last else shape[1]
    x = torch.randn(shape, device=device).mul_(2).to(dtype)
    if layout == "nhwc":
        x = x.to(memory_format=torch.channels_last)
    a = torch.tensor([alpha if alpha is not None else 0.3 + torch.rand(1).item()], device=device)
    w = torch.randn(c, device=device)
    b = torch.randn(c, device=device) if bias else None
    dy = torch.randn_like(x)
    p = [t if t is None else t.to(param_dtype).requires_grad_(True) for t in (a, w, b)]
    return x.requires_grad_(True), p[0], p[1], p[2], dy


def _run_api(x, a, w, b, dy, channels_last):
    y = api.dyt(x, a, w, b, channels_last=channels_last)
    y.backward(dy)
    return y.detach(), x.grad, a.grad, w.grad, None if b is None else b.grad


def verification_cases(quick: bool, device: str) -> list[dict]:
    """(name, callable) cases; each callable returns a list of Comparisons and launch counts."""
    gpu = device == "cuda"
    clast_shapes = [(65537, 16), (4099, 100), (1025, 1000), (33, 8192)] if gpu else [(129, 16), (37, 100), (5, 1000)]
    cfirst_shapes = [(8, 96, 28, 28), (4, 64, 3, 3)] if gpu else [(2, 6, 5, 7)]
    if quick:
        clast_shapes, cfirst_shapes = clast_shapes[:2], cfirst_shapes[:1]
    cases = []
    for dname, dtype in DTYPES.items():
        for pname in sorted({"fp32", dname}):
            for bias in (True, False):
                tag = f"{dname}-{pname}params-{'bias' if bias else 'nobias'}"
                for shape in clast_shapes:
                    cases.append(dict(path="channels-last", shape=shape, dtype=dtype, param_dtype=DTYPES[pname],
                                      bias=bias, channels_last=True, layout="", name=f"{'x'.join(map(str, shape))}-{tag}"))
                for shape in cfirst_shapes:
                    for layout in ("", "nhwc"):
                        cases.append(dict(path="channels-first" + ("-nhwc" if layout else ""), shape=shape,
                                          dtype=dtype, param_dtype=DTYPES[pname], bias=bias, channels_last=False,
                                          layout=layout, name=f"{'x'.join(map(str, shape))}-{tag}"))
    # The other (x, parameter) dtype pairs the op takes (16-bit parameters with another x): one
    # channels-last shape each, so that every pair is verified.
    for dname, pname in sorted((d, q) for d in DTYPES for q in DTYPES if q not in ("fp32", d)):
        shape = clast_shapes[0]
        cases.append(dict(path="channels-last", shape=shape, dtype=DTYPES[dname], param_dtype=DTYPES[pname],
                          bias=True, channels_last=True, layout="",
                          name=f"{'x'.join(map(str, shape))}-{dname}-{pname}params-bias"))
    return cases


def _verify_case(case, device) -> dict:
    inputs = _inputs(case["shape"], case["dtype"], case["param_dtype"], case["bias"], case["channels_last"],
                     device, case["layout"])
    with poisoned(), launches.counting() as launched:
        outs = _run_api(*inputs, case["channels_last"])
    comps = compare_to_reference(*inputs, case["channels_last"], outs)
    engaged = launched["dyt_fwd"] == 1 and launched["dyt_bwd"] == 1
    return _result("dyt", case["path"], case["name"], comps, engaged)


def _result(op, path, name, comps, engaged, extra=""):
    ok = engaged and all(c.ok for c in comps)
    worst = max((c.worst_over_bound for c in comps), default=0.0)
    detail = "; ".join(f"{c.name}: {c.first_failure}" for c in comps if not c.ok)
    if not engaged:
        detail = "kernels did not launch; " + detail
    return {"op": op, "path": path, "case": name, "ok": ok,
            "errors": {c.name: c.rel_err for c in comps}, "worst_error_over_bound": worst,
            "detail": (detail + extra).strip("; ")}


def _verify_special(device) -> list[dict]:
    """Infinite alpha on ragged rows (vs eager), run-to-run determinism, an empty input, and the
    custom op (torch.ops.tilefuse.dyt and its backward, what torch.compile runs) against the
    eager call."""
    out = []
    for alpha in (math.inf, -math.inf):
        x, a, w, b, dy = _inputs((37, 100), torch.float32, torch.float32, True, True, device, alpha=alpha)
        # An exact zero in x makes alpha * x = inf * 0 = NaN, in eager as in the kernels, and its
        # gradients NaN: torch.randn gives one in about 6e-8 of its values (2e-4 of these draws).
        with torch.no_grad():
            x.masked_fill_(x == 0, 1.0)
        got = _run_api(x, a, w, b, dy, True)
        xe, ae, we, be = (t.detach().clone().requires_grad_(True) for t in (x, a, w, b))
        ye = we * torch.tanh(ae * xe) + be
        ye.backward(dy)
        grads_ok = all(torch.isfinite(g).all() and torch.allclose(g, r, rtol=1e-6, atol=1e-5)
                       for g, r in zip(got[2:], (ae.grad, we.grad, be.grad)))
        # y is +-weight + bias exactly, in eager as in the kernels: bitwise (tests/test_dyt.py's
        # rule); dx is alpha * 0 = NaN wherever eager's is (equal_nan), else equal
        y_ok = torch.isfinite(got[0]).all() and torch.equal(got[0], ye.detach())
        dx_ok = torch.allclose(got[1], xe.grad, rtol=1e-6, atol=1e-6, equal_nan=True)
        ok = bool(grads_ok and y_ok and dx_ok)
        out.append({"op": "dyt", "path": "alpha=inf", "case": f"37x100-alpha={alpha}", "ok": ok,
                    "errors": {"y": float((got[0] - ye.detach()).abs().max()),
                               "dweight": float((got[3] - we.grad).abs().max())},
                    "worst_error_over_bound": 0.0 if ok else math.inf,
                    "detail": "" if ok else "y, dx or the parameter gradients differ from eager (or are not finite)"})
    inputs = _inputs((301, 48), torch.bfloat16, torch.float32, True, True, device)
    first = _run_api(*inputs, True)
    for t in inputs[:4]:
        t.grad = None
    second = _run_api(*inputs, True)
    same = all(torch.equal(f, s) for f, s in zip(first, second))
    out.append({"op": "dyt", "path": "determinism", "case": "301x48-bf16 two runs", "ok": same, "errors": {},
                "worst_error_over_bound": 0.0 if same else math.inf,
                "detail": "" if same else "two runs differ bitwise"})
    # The custom ops (what a compiled model runs), bitwise the eager call (the same plan).
    x, a, w, b, dy = (t.detach() for t in inputs)
    y_op = torch.ops.tilefuse.dyt(x, a, w, b, True)
    grads_op = torch.ops.tilefuse.dyt_backward(dy, x, a, w, b, True)
    same_op = torch.equal(y_op, first[0]) and all(torch.equal(g, f) for g, f in zip(grads_op, first[1:]))
    out.append({"op": "dyt", "path": "custom op (tilefuse::dyt, dyt_backward) vs the eager call",
                "case": "301x48-bf16", "ok": same_op, "errors": {},
                "worst_error_over_bound": 0.0 if same_op else math.inf,
                "detail": "" if same_op else "the custom op's outputs differ from the eager call's"})
    # An empty input: an empty y and zero parameter gradients.
    x, a, w, b, dy = _inputs((0, 48), torch.float32, torch.float32, True, True, device)
    y, dx, da, dw, db = _run_api(x, a, w, b, dy, True)
    empty_ok = (y.shape == (0, 48) and dx.shape == (0, 48)
                and all(g is not None and not g.any() for g in (da, dw, db)))
    out.append({"op": "dyt", "path": "empty input", "case": "0x48-fp32", "ok": bool(empty_ok), "errors": {},
                "worst_error_over_bound": 0.0 if empty_ok else math.inf,
                "detail": "" if empty_ok else "an empty input gave a non-empty result or non-zero gradients"})
    return out


def verify(quick: bool, device: str, progress: Callable) -> list[dict]:
    cases = verification_cases(quick, device)
    results = [_verify_case(c, device) for c in progress(cases, desc="dyt verify")]
    return results + _verify_special(device)


# --------------------------------------------------------------------------- benchmark

WIDTHS = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
QUICK_WIDTHS = [16, 256, 4096]


def _eager(x, a, w, b):
    return w * torch.tanh(a * x) + b


def _providers(x, a, w, b, dy, with_backward: bool, compiled: Callable) -> dict[str, Callable]:
    """Each provider's call (forward, or forward + backward of every input). Every one computes
    y in x's dtype from x and reads dy in it: eager and torch.compile take the parameters in
    x's dtype, as a model cast to bf16 holds them (with the fp32 parameters they would promote
    y to fp32 and read an fp32 dy, other bytes than tilefuse's and Liger-Kernel's)."""
    pa, pw, pb = (t if t.dtype == x.dtype else t.detach().to(x.dtype).requires_grad_(t.requires_grad)
                  for t in (a, w, b))
    fns = {"tilefuse": (lambda: api.dyt(x, a, w, b), (x, a, w, b)),
           "eager": (lambda: _eager(x, pa, pw, pb), (x, pa, pw, pb)),
           "torch.compile": (lambda: compiled(x, pa, pw, pb), (x, pa, pw, pb))}
    liger = _liger_dyt()
    if liger is not None:
        fns["liger"] = (lambda: liger.apply(x, a, w, b), (x, a, w, b))
    if not with_backward:
        return {k: f for k, (f, _) in fns.items()}

    def fwd_bwd(f, inputs):
        def run():
            return torch.autograd.grad(f(), inputs, dy)
        return run
    return {k: fwd_bwd(f, inputs) for k, (f, inputs) in fns.items()}


# --- host cost per call (issue 17) ---------------------------------------------------------

HOST_SHAPE = (64, 256)   # fp32: the GPU work is negligible, what is timed is the host's


def _host_sampler(fn: Callable, calls: int) -> Callable[[], float]:
    """A sampler of ``fn``'s host seconds per call: each sample is ``calls`` back-to-back calls,
    synchronised before and after (the harness's WallTimer), after 20 warm-up calls here:
    issue 17's measurement."""
    for _ in range(min(20, calls)):
        fn()
    return timing.WallTimer(warmup=0).prepare("host", lambda i: fn(), calls)


def median_per_call_us(fn: Callable, calls: int = 300, rounds: int = 5) -> float:
    """Host microseconds per call of one callable timed alone: the median over ``rounds``
    samples of ``calls`` synchronised calls. Comparisons between callables go through
    ``host_cost``, which times them in the same rounds."""
    sample = _host_sampler(fn, calls)
    return statistics.median(sample() for _ in range(rounds)) * 1e6


# host_providers' names of the providers timed under triton_common.jit_launches (every tilefuse
# launch through Triton's JIT: the route the lean path saves)
JIT_PROVIDERS = frozenset({"tilefuse.dyt, JIT launches"})


def _ours(name: str) -> bool:
    """Whether host_providers' ``name`` times tilefuse's code (its eager path, JIT route, custom
    op): an error there ends host_cost, where a peer's is recorded in its row."""
    return name.startswith(("tilefuse", "torch.ops.tilefuse"))


def _liger_dyt():
    """Liger-Kernel's LigerDyTFunction, or None where it does not import."""
    try:
        from liger_kernel.ops.dyt import LigerDyTFunction
    except ImportError:
        return None
    return LigerDyTFunction


def host_providers(rows: int, cols: int, device) -> dict[str, tuple[Callable, Callable | None]]:
    """name -> (forward, forward + backward) zero-argument calls at (rows, cols) fp32: tilefuse's
    eager path (also through the JIT, and without grad), its custom op, eager DyT, F.layer_norm,
    torch.tanh and Liger-Kernel's DyT when it imports."""
    x, a, w, b, dy = _inputs((rows, cols), torch.float32, torch.float32, True, True, device)
    leaves = (x, a, w, b)
    fwd = {
        "tilefuse.dyt": lambda: api.dyt(x, a, w, b),
        "tilefuse.dyt, JIT launches": lambda: api.dyt(x, a, w, b),
        "torch.ops.tilefuse.dyt (custom op)": lambda: torch.ops.tilefuse.dyt(x, a, w, b, True),
        "eager DyT (3 ATen ops)": lambda: _eager(x, a, w, b),
        "F.layer_norm": lambda: torch.nn.functional.layer_norm(x, (cols,), w, b),
        "torch.tanh": lambda: torch.tanh(x),
    }
    liger = _liger_dyt()
    if liger is not None:
        fwd["Liger-Kernel LigerDyTFunction"] = lambda: liger.apply(x, a, w, b)
    used = {"torch.tanh": (x,), "F.layer_norm": (x, w, b)}

    def fwd_bwd(f, inputs):
        return lambda: torch.autograd.grad(f(), inputs, dy)
    out = {name: (f, fwd_bwd(f, used.get(name, leaves))) for name, f in fwd.items()}
    xd, ad, wd, bd = (t.detach() for t in leaves)
    out["tilefuse.dyt, no grad"] = (lambda: api.dyt(xd, ad, wd, bd), None)
    return out


# host_cost's row keys, in host_providers' tuple order: forward, forward + backward
HOST_PASSES = ("fwd_us", "fwd_bwd_us")


def _sample_in(block: Callable, sample: Callable[[], float]) -> Callable[[], float]:
    """``sample`` taken inside ``block()``, which is opened and closed outside its timed calls."""
    def run() -> float:
        with block():
            return sample()
    return run


# HOST_PASSES' names in the table and in a failed row's error
PASS_LABELS = {"fwd_us": "fwd", "fwd_bwd_us": "fwd+bwd"}


def _abort_if_ours(sampler: tuple[str, str], exc: Exception):
    """``interleave``'s on_error for host_cost: tilefuse's own provider failing ends the rounds
    (a bug of tilefuse's, not a row); a peer's failure stays in its entry and the others go on."""
    if _ours(sampler[0]):
        raise exc


def _error_field(errors: dict[str, Exception], passes: int) -> str:
    """A failed row's error: the text once where every pass the provider has failed alike,
    else each failed pass's own."""
    texts = {PASS_LABELS[key]: bench.error_text(exc) for key, exc in errors.items()}
    if len(texts) == passes and len(set(texts.values())) == 1:
        return next(iter(texts.values()))
    return "; ".join(f"{label}: {text}" for label, text in texts.items())


def host_cost(device, shape=HOST_SHAPE, calls: int = 300, rounds: int = 5) -> dict:
    """Host microseconds per call, forward and forward + backward, of every ``host_providers``
    entry, in interleaved rounds (the harness's ``interleave``): each round takes one sample
    (``calls`` synchronised calls) of every provider's forward and forward + backward, in an
    order rotated by one each round, so a host whose speed drifts moves every provider alike
    instead of the ones timed last. One of tilefuse's own providers that raises ends the
    measurement (an error there is a bug, not a row); a peer that raises (in its warm-up or a
    round) is a failed row and the others are timed on.

    Returns {"shape", "calls", "rounds", "rows": [{provider, fwd_us, fwd_us_rounds, fwd_bwd_us,
    fwd_bwd_us_rounds}]}: per pass the median per call over the rounds and the per-round values
    in round order (None where the provider has no such pass or it failed; a failed peer's row
    also has ``error``, bench.error_text of each failed pass, and ``failed``, those passes'
    keys); ``host_ratio`` compares two providers within rounds."""
    providers = host_providers(*shape, device)
    samplers, failed = {}, {}
    for name, fns in providers.items():
        # The JIT route's block is opened around each of its own samples only, so that the
        # providers sampled beside it in a round launch as they do outside it.
        block = triton_common.jit_launches if name in JIT_PROVIDERS else contextlib.nullcontext
        for key, fn in zip(HOST_PASSES, fns):
            if fn is None:
                continue
            try:
                with block():
                    samplers[(name, key)] = _sample_in(block, _host_sampler(fn, calls))
            except Exception as exc:   # noqa: BLE001  a peer's failure is its row's
                _abort_if_ours((name, key), exc)
                failed[(name, key)] = exc
    seconds = {**timing.interleave(samplers, rounds, on_error=_abort_if_ours), **failed}
    rows = []
    for name, fns in providers.items():
        row, errors = {"provider": name}, {}
        for key in HOST_PASSES:
            got = seconds.get((name, key))
            if isinstance(got, Exception):
                errors[key], got = got, None
            us = None if got is None else [s * 1e6 for s in got]
            row[key] = None if us is None else statistics.median(us)
            row[key + "_rounds"] = us
        if errors:
            row["error"] = _error_field(errors, sum(fn is not None for fn in fns))
            row["failed"] = list(errors)
        rows.append(row)
    return {"shape": list(shape), "calls": calls, "rounds": rounds, "rows": rows}


def host_ratio(h: dict, provider: str, base: str, key: str) -> float | None:
    """``provider``'s host time per call over ``base``'s in a ``host_cost`` result, for ``key``
    (one of HOST_PASSES): the median of the per-round ratios, both having been timed in the
    same rounds; the medians' ratio where the rows carry no per-round values (rows written
    by hand); None where either has no time for that pass (a failed peer's row)."""
    rows = {r["provider"]: r for r in h["rows"]}
    mine, ref = rows.get(provider), rows.get(base)
    if mine is None or ref is None or mine.get(key) is None or not ref.get(key):
        return None
    mine_rounds, ref_rounds = mine.get(key + "_rounds"), ref.get(key + "_rounds")
    if mine_rounds and ref_rounds and len(mine_rounds) == len(ref_rounds) and all(ref_rounds):
        return statistics.median(a / b for a, b in zip(mine_rounds, ref_rounds))
    return mine[key] / ref[key]


def host_cost_markdown(h: dict) -> list[str]:
    """The host-cost table, each time also as a multiple of F.layer_norm's (``host_ratio``); a
    failed peer's pass reads "failed", its error in a last column (there where a row failed)."""
    failures = any(r.get("error") for r in h["rows"])
    lines = [f"Host microseconds per call at {h['shape'][0]}x{h['shape'][1]} fp32 (device work negligible): "
             f"median of {h['rounds']} interleaved rounds (every provider once a round, in rotating order) "
             f"of {h['calls']} synchronised calls; 'x layer_norm' is the median over the rounds of the time "
             "over F.layer_norm's in the same round.", "",
             "| provider | fwd us | x layer_norm | fwd+bwd us | x layer_norm |" + (" error |" if failures else ""),
             "|---|---|---|---|---|" + ("---|" if failures else "")]
    for r in h["rows"]:
        cells = []
        for key in HOST_PASSES:
            v = r.get(key)
            ratio = host_ratio(h, r["provider"], "F.layer_norm", key)
            shown = "failed" if v is None and r.get("error") and key in r.get("failed", HOST_PASSES) else ""
            cells += [shown if v is None else f"{v:.1f}", "" if ratio is None else f"{ratio:.2f}x"]
        if failures:
            cells.append(cell(r.get("error", "")))
        lines.append(f"| {r['provider']} | " + " | ".join(cells) + " |")
    return lines


@bench.compile_limits()
def benchmark(quick: bool, progress: Callable) -> dict:
    """Forward and forward+backward time of each provider at 2**26 elements (2**24 quick) per
    width, fp32 and bf16 x (fp32 parameters; eager and torch.compile take them in x's dtype:
    _providers), as fractions of the copy ceiling measured now."""
    numel = 2 ** 24 if quick else 2 ** 26
    widths = QUICK_WIDTHS if quick else WIDTHS
    rows = []
    ceilings = {}
    for dname in ("fp32", "bf16"):
        dtype = DTYPES[dname]
        ceilings[dname] = bench.copy_ceiling_gbs(numel, dtype)
        for width in progress(widths, desc=f"dyt bench {dname}"):
            x, a, w, b, dy = _inputs((numel // width, width), dtype, torch.float32, True, True, "cuda")
            problems = {p: launch.problem_for(x, True, p) for p in ("fwd", "bwd")}
            config = {p: launch.pick_config(pr).name + ("" if tuning.is_covered("dyt", pr) else " (untuned)")
                      for p, pr in problems.items()}
            compiled = torch.compile(_eager, dynamic=False)
            for pass_name, with_bwd, nbytes in (("fwd", False, 2), ("fwd+bwd", True, 5)):
                providers = _providers(x, a, w, b, dy, with_bwd, compiled)
                # Device time (CUDA-graph replay) for every provider, and tilefuse's eager
                # per-call loop too, which includes the host's Python and launch costs.
                timings = {(p, "graph"): t for p, t in timing.interleaved(providers, graphs=True).items()}
                # the same calls in a plain Python loop: what a training loop without CUDA graphs gets
                timings.update({(p, "eager loop"): t for p, t in timing.interleaved(providers).items()})
                for (provider, mode), t in timings.items():
                    row = {"dtype": dname, "width": width, "rows": numel // width, "pass": pass_name,
                           "provider": provider, "mode": mode}
                    if provider == "tilefuse":
                        row["config"] = config["fwd"] if pass_name == "fwd" else f"{config['fwd']} / {config['bwd']}"
                    row.update(bench.timing_fields(t))
                    if row["status"] == "ok":
                        gbs = nbytes * numel * x.element_size() / (t.median_ms * 1e-3) / 1e9
                        row.update(gbs=gbs, fraction_of_copy=gbs / ceilings[dname])
                        base = timings.get(("tilefuse", mode))   # against tilefuse in the same mode and rounds
                        if isinstance(base, timing.Timing):
                            row["tilefuse_speedup"] = timing.ratio(t, base)
                    rows.append(row)
            del x, a, w, b, dy
    return {"numel": numel, "copy_ceiling_gbs": ceilings, "rows": rows,
            "host": host_cost("cuda", calls=100 if quick else 300, rounds=3 if quick else 5)}


def benchmark_markdown(b: dict) -> list[str]:
    ceil = ", ".join(f"{k} {v:.0f} GB/s" for k, v in b["copy_ceiling_gbs"].items())
    lines = [f"{b['numel']} elements per tensor. Device-to-device copy ceiling measured in this run: {ceil}. "
             "Mode 'graph': CUDA-graph replay (device time); 'eager loop': per-call Python calls "
             "(adds host overhead). Time is the median over interleaved rounds (spread = (max-min)/median); "
             "'vs tilefuse' is the provider's time over tilefuse's in the same mode and rounds (> 1: "
             "tilefuse is faster). The config "
             "column names the tilefuse config that ran (fwd / bwd); '(untuned)' marks a shape the tuning "
             "table does not cover, where the heuristic default ran.", "",
             "| dtype | width | pass | provider | mode | ms | spread | GB/s | of copy | vs tilefuse | config / error |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in b["rows"]:
        head = f"| {r['dtype']} | {r['width']} | {r['pass']} | {r['provider']} | {r.get('mode', '')} | "
        if r["status"] != "ok":
            lines.append(head + f"failed | | | | | {cell(r['error'])} |")
            continue
        lines.append(head + f"{r['ms']:.4f} | {r['spread']:.1%} | {r['gbs']:.0f} | {r['fraction_of_copy']:.1%} | "
                     f"{r.get('tilefuse_speedup', float('nan')):.2f} | {r.get('config', '')} |")
    if b.get("host"):
        lines += ["", *host_cost_markdown(b["host"])]
    return lines


def benchmark_summary(b: dict) -> list[str]:
    ours = [r for r in b["rows"] if r["provider"] == "tilefuse" and r["status"] == "ok" and r.get("mode") == "graph"]
    lines = []
    for pass_ in ("fwd", "fwd+bwd"):
        for dtype in ("fp32", "bf16"):
            fr = [r["fraction_of_copy"] for r in ours if r["pass"] == pass_ and r["dtype"] == dtype]
            if fr:
                lines.append(f"dyt {pass_} {dtype}: {min(fr):.0%}-{max(fr):.0%} of the copy ceiling (graph replay)")
    loops = [r for r in b["rows"] if r["provider"] == "torch.compile" and r.get("mode") == "eager loop"
             and r["pass"] == "fwd+bwd" and r["status"] == "ok" and "tilefuse_speedup" in r]
    if loops:
        sp = [r["tilefuse_speedup"] for r in loops]
        lines.append(f"dyt fwd+bwd eager loop: torch.compile's time over tilefuse's {min(sp):.2f}-{max(sp):.2f} "
                     "across widths (> 1: tilefuse faster)")
    host = {r["provider"]: r for r in (b.get("host") or {}).get("rows", [])}
    if "tilefuse.dyt" in host:
        t, ln = host["tilefuse.dyt"], host.get("F.layer_norm")
        if ln and any(ln.get(key) is None for key in HOST_PASSES):   # F.layer_norm failed here
            ln = None
        lines.append(f"dyt host per call: {t['fwd_us']:.1f} us fwd, {t['fwd_bwd_us']:.1f} us fwd+bwd"
                     + (f" (F.layer_norm {ln['fwd_us']:.1f} / {ln['fwd_bwd_us']:.1f})" if ln else ""))
    return lines


def plots(out_dir, b: dict) -> list[str]:
    """The bandwidth plot's file name, written into out_dir (none without matplotlib)."""
    name = "dyt_bandwidth.png"
    return [name] if plot_bandwidth(Path(out_dir) / name, b) else []


def plot_bandwidth(path: Path, bench: dict) -> bool:
    """Fraction of the copy ceiling against width, one line per provider, one panel per
    (dtype, pass). Returns False when matplotlib is unavailable."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [r for r in bench["rows"] if r["status"] == "ok"]
    panels = [(d, p) for d in ("fp32", "bf16") for p in ("fwd", "fwd+bwd")]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharex=True, sharey=True)
    for ax, (dtype, pass_) in zip(axes.flat, panels):
        for provider in sorted({r["provider"] for r in bench["rows"]}):
            for mode in ("graph", "eager loop"):
                pts = sorted((r["width"], r["fraction_of_copy"]) for r in rows if r["dtype"] == dtype
                             and r["pass"] == pass_ and r["provider"] == provider and r.get("mode") == mode)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                            ls="-" if mode == "graph" else ":", label=f"{provider} ({mode})")
        ax.set_xscale("log", base=2)
        ax.set_title(f"dyt {pass_}, x {dtype}, fp32 params")
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.grid(alpha=0.3)
        ax.set_xlabel("width (columns)")
        ax.set_ylabel("fraction of copy ceiling")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
