"""`tilefuse check` end to end on this machine (interpreter without a GPU)."""

import json
import re

import pytest

from tilefuse.cli import main

from benchmark_helpers import load_benchmark


def test_check_quick_writes_report(tmp_path):
    out = tmp_path / "rep"
    rc = main(["check", "--quick", "--no-progress", "--no-bench", "--out", str(out)])
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert report["environment"]["torch"] and report["environment"]["tilefuse"]
    ver = report["verification"]
    assert len(ver) > 20 and all(r["ok"] for r in ver)
    assert {r["path"] for r in ver} >= {"channels-last", "channels-first", "channels-first-nhwc",
                                        "alpha=inf", "determinism"}
    md = (out / "report.md").read_text()
    assert "## Verification" in md and "FAIL" not in md


def test_report_renders_every_benchmark_section(tmp_path):
    """The benchmark tables are only filled on a GPU; render synthetic rows of each op here
    (including a failed provider) so a formatting bug cannot wait for the device."""
    from tilefuse.check import report as rep
    ok = {"status": "ok", "ms": 2.0, "spread": 0.01}
    so2_common = {"lmax": 3, "focus_dim": 32, "edges": 1000, "table_picks": "relay-M32-N64-K32-w4-s2",
                  "relay_layer_bytes": 7e8, "fused_layer_bytes": 3e8, "copy_ceiling_gbs": 4000.0}
    report = {
        "environment": {"gpu": "fake"},
        "verification": [],
        "benchmarks": {
            "so2_mixing_stack": {"copy_ceiling_gbs": 4000.0, "rows": [
                {"scope": "layer", "provider": "relay layer", **so2_common, **ok},
                {"scope": "layer", "provider": "fused layer X", **so2_common, **ok, "ms": 1.0,
                 "fused_floor_fraction_of_copy": 0.75},
                {"scope": "backward", "provider": "relay", **so2_common, **ok},
                {"scope": "backward", "provider": "torch.compile", **so2_common, "status": "failed",
                 "error": "RuntimeError: boom"}]},
            "grouped_glu_mlp": {"rows": [
                {"experts": 8, "tokens": 64, "hidden": 32, "ffn": 16, "provider": "tilefuse", **ok,
                 "tflops": 500.0, "host_p50_us_fwd": 40.0, "host_p50_us_fwd_bwd": 95.0},
                {"experts": 8, "tokens": 64, "hidden": 32, "ffn": 16, "provider": "loop", "status": "failed",
                 "error": "OOM"}]},
        },
    }
    path = tmp_path / "report.md"
    rep.write_markdown(path, report)
    md = path.read_text()
    assert "| layer | 3 | 32 | 1000 | fused layer X | 1.000 | 1.0% | 2.00 | 75% |" in md
    assert "| backward | 3 | 32 | 1000 | torch.compile | failed |" in md and "RuntimeError: boom" in md
    assert "| 8 | 64 | 32 | 16 | tilefuse | 2.000 | 1.0% | 500 | 40 | 95 |" in md


def test_check_ops_selects_sections(tmp_path):
    out = tmp_path / "rep"
    assert main(["check", "--quick", "--no-progress", "--no-bench", "--ops", "dyt", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["ops"] == ["dyt"] and list(report["benchmarks"]) == ["dyt"]
    assert report["verification"] and {r["op"] for r in report["verification"]} == {"dyt"}


def test_check_ops_rejects_unknown_names(tmp_path, capsys):
    assert main(["check", "--no-bench", "--ops", "dyt,layernorm", "--out", str(tmp_path)]) == 2
    assert "comma-separated subset" in capsys.readouterr().err


def test_failed_provider_error_keeps_the_cause():
    from tilefuse.check.bench import error_text
    wrapped = RuntimeError("backend='inductor' raised:\n\n  frames...\nAssertionError: the cause")
    assert error_text(wrapped) == "RuntimeError: backend='inductor' raised: ... AssertionError: the cause"
    assert error_text(ValueError("one line")) == "ValueError: one line"


def test_timing_fields_of_a_row():
    from tilefuse.check.bench import Timing, timing_fields
    t = Timing(2.0, 1.5, 2.5, 5)
    assert timing_fields(t) == {"status": "ok", "ms": 2.0, "spread": t.spread} and t.spread == 0.5
    assert timing_fields(ValueError("bad")) == {"status": "failed", "error": "ValueError: bad"}


def test_environment_builds_on_collect_env_with_one_driver_source():
    import inspect

    from tilefuse import device
    from tilefuse.check import env
    from tilefuse.tuning import store
    e = env.environment()
    assert "collect_env_error" not in e, e.get("collect_env_error")
    assert e["os"] and e["platform"] and e["python"] and e["torch"]
    assert all("\n" not in str(v) for v in e.values())                # one line each in report.md
    # The driver: one function (NVML / libcuda in-process) for the report and the fingerprint.
    assert store.driver_version is device.driver_version
    for module in (env, store):   # no second source: no nvidia-smi call, no other libcuda/NVML query
        code = inspect.getsource(module).split('"""', 2)[-1]
        assert '"nvidia-smi"' not in code and "cuDriverGetVersion" not in code and "nvmlSystem" not in code
    v = device.driver_version()
    assert v is None or isinstance(v, str)


def test_grouped_section_renders_dense_ceilings_and_recipe_ratios(tmp_path):
    from tilefuse.check import report as rep
    row = {"experts": 8, "tokens": 64, "hidden": 32, "ffn": 16, "status": "ok", "ms": 1.0, "spread": 0.0,
           "tflops": 10.0, "host_p50_us_fwd": None, "host_p50_us_fwd_bwd": None}
    report = {"environment": {}, "verification": [], "benchmarks": {"grouped_glu_mlp": {
        "rows": [{**row, "provider": "tilefuse fused"},
                 {**row, "provider": "tilefuse fp8_block", "speedup_vs_tilefuse_bf16": 1.17},
                 {**row, "provider": "torch._grouped_mm GEMMs only (no glue)", "speedup_vs_compiled": 1.07}],
        "dense_tflops": {"bf16 matmul": 790.0, "fp8 _scaled_mm": "RuntimeError: no fp8"},
        "dense_shape": [16384, 4096, 7168]}}}
    path = tmp_path / "report.md"
    rep.write_markdown(path, report)
    md = path.read_text()
    assert "Dense cuBLAS ceilings measured in this run (16384x4096x7168): bf16 matmul 790 TFLOP/s, " \
           "fp8 _scaled_mm failed (RuntimeError: no fp8)." in md
    assert "| tilefuse fp8_block | 1.000 | 0.0% | 10 |  |  | 1.17x |  |" in md
    assert "| torch._grouped_mm GEMMs only (no glue) | 1.000 | 0.0% | 10 |  |  |  | 1.07x |" in md
    assert "| vs tilefuse bf16 | vs compile |" in md


def test_grouped_bench_rates_the_halves_layout_against_its_own_compiled_peer():
    """The bench's halves-layout row (glu_interleave=None, as called) takes its 'vs compile' from
    the compiled composition of the same layout, in the same rounds; the interleave-32 rows
    from the interleave-32 one; the compiled peers themselves get none, a failed provider no
    ratio and an error, the per-expert loop (its own interleaved call) none."""
    from tilefuse.check import grouped as check_grouped
    from tilefuse.tuning.timing import Timing

    def t(*ms):
        return Timing(sorted(ms)[len(ms) // 2], min(ms), max(ms), len(ms), ms)

    timings = {"tilefuse fused": t(2.0, 2.0, 2.0), "tilefuse (as called)": t(1.0, 1.0, 1.0),
               "torch._grouped_mm + compile": t(1.2, 1.1, 1.3),
               check_grouped.HALVES: t(1.0, 2.0, 1.0), check_grouped.HALVES_COMPILED: t(1.5, 3.0, 1.5),
               "torch._grouped_mm": RuntimeError("no _grouped_mm"),
               # timed eagerly in rounds of their own, beside the op as called eagerly
               check_grouped.EAGER_AS_CALLED: t(2.0, 2.0, 3.0),
               check_grouped.PER_EXPERT_LOOP: t(20.0, 30.0, 24.0),
               check_grouped.LIGER_MOE: t(4.0, 2.0, 4.0)}
    rows = {r["provider"]: r for r in check_grouped.provider_rows(8, 64, 32, 16, 6e9, timings, {})}
    for name in (check_grouped.PER_EXPERT_LOOP, check_grouped.LIGER_MOE, check_grouped.EAGER_AS_CALLED):
        assert "speedup_vs_compiled" not in rows[name], name
    # the eager rows' 'vs tilefuse bf16' is over the eager op as called, round by round
    assert rows[check_grouped.PER_EXPERT_LOOP]["speedup_vs_tilefuse_bf16"] == 0.1     # 0.1, 0.067, 0.125
    assert rows[check_grouped.LIGER_MOE]["speedup_vs_tilefuse_bf16"] == 0.75         # 0.5, 1, 0.75
    assert "speedup_vs_tilefuse_bf16" not in rows[check_grouped.EAGER_AS_CALLED]
    assert rows["tilefuse (as called)"]["speedup_vs_compiled"] == 1.2      # median of 1.2, 1.1, 1.3
    assert rows[check_grouped.HALVES]["speedup_vs_compiled"] == 1.5        # 1.5, 1.5, 1.5: its own peer
    assert "speedup_vs_compiled" not in rows[check_grouped.HALVES_COMPILED]
    assert rows["torch._grouped_mm + compile"]["speedup_vs_compiled"] == 1.0
    # 'vs tilefuse bf16' is over the bf16 op as called (1, 1, 1 ms), not the fused kernels' step
    assert rows[check_grouped.HALVES]["speedup_vs_tilefuse_bf16"] == 1.0     # 1, 0.5, 1
    assert rows["tilefuse fused"]["speedup_vs_tilefuse_bf16"] == 0.5
    assert "speedup_vs_tilefuse_bf16" not in rows["tilefuse (as called)"]
    assert rows["torch._grouped_mm"]["status"] != "ok" and "speedup_vs_compiled" not in rows["torch._grouped_mm"]
    md = "\n".join(check_grouped.benchmark_markdown({"rows": list(rows.values())}))
    assert f"| 8 | 64 | 32 | 16 | {check_grouped.HALVES} | 1.000 |" in md and "| 1.00x | 1.50x |" in md


def test_grouped_section_renders_the_gemm_roles():
    from tilefuse.check import grouped as check_grouped
    base = {"experts": 8, "tokens": 64, "hidden": 32, "ffn": 16, "config": "M128-N128-K64-w8-s4-p1-tma"}
    b = {"rows": [], "roles": [
        {**base, "role": "fc2", "tilefuse_ms": 1.1, "tilefuse_tflops": 500.0, "grouped_mm_ms": 1.0,
         "grouped_mm_tflops": 550.0, "time_vs_grouped_mm": 1.1},
        {**base, "role": "fc1 dgrad", "tilefuse_ms": None, "tilefuse_error": "OutOfResources: shared memory",
         "grouped_mm_ms": 1.0, "grouped_mm_tflops": 550.0}]}
    md = "\n".join(check_grouped.benchmark_markdown(b))
    assert "| 8 | 64 | 32 | 16 | fc2 | M128-N128-K64-w8-s4-p1-tma | 1.100 | 500 | 1.000 | 550 | 1.10x |" in md
    assert "| fc1 dgrad | M128-N128-K64-w8-s4-p1-tma | failed (OutOfResources: shared memory) |  | 1.000 | 550 |  |" in md
    assert check_grouped.benchmark_summary(b) == ["grouped E8 T64 fc2: 1.10x the time of torch._grouped_mm"]


def test_a_gemm_role_that_computes_something_else_is_not_timed(device):
    """check.grouped.role_mismatch (run before a role is timed, by the bench's role rows and by
    grouped_profile.py): a launch whose products differ from torch._grouped_mm's, or which
    leaves rows unwritten (NaN in poisoned memory), fails its check, and its row reads
    "check failed" with no timing taken; a right one passes; the GLU and dGLU epilogues are
    not compared."""
    import torch
    from tilefuse.check import grouped as check_grouped
    from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
    i = random_inputs([5, 0, 37, 22], 64, 32, torch.bfloat16, bias=False, device=device,
                      generator=torch.Generator().manual_seed(5))
    roles = check_grouped.gemm_roles(i["counts"], i["x"], i["probs"], i["w1"], i["w2"], i["dy"])
    ours, theirs, flop = roles["fc2"]
    cfg = check_grouped.SMALL
    assert check_grouped.role_mismatch("fc2", ours, theirs, cfg) is None
    half = i["x"].shape[0] // 2
    broken = {"scaled": lambda c: ours(c) * 1.5,
              "unwritten": lambda c: torch.cat([ours(c)[:half], torch.empty_like(ours(c)[half:])])}
    for name, fn in broken.items():
        assert "differs from torch._grouped_mm" in check_grouped.role_mismatch("fc2", fn, theirs, cfg), name
        (row,) = check_grouped._role_rows(4, 64, 64, 32, {"fc2": (fn, theirs, flop)})
        assert row["tilefuse_ms"] is None and row["tilefuse_error"].startswith("check failed"), row
    assert check_grouped.role_mismatch("fc1 + GLU", lambda c: None, theirs, cfg) is None


def test_a_gemm_role_check_poisons_the_buffers_and_compares_every_output(device):
    """role_mismatch: a launch that writes nothing into a buffer an earlier launch filled with
    the right products fails (the buffer is NaN-poisoned before the checked launch; gemm_roles'
    launches write into buffers made once), and a role with several outputs fails on a NaN in
    any of them, not only the first (Python's max drops a NaN that is not first)."""
    import torch
    from tilefuse.check import grouped as check_grouped
    from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
    i = random_inputs([5, 0, 37, 22], 64, 32, torch.bfloat16, bias=False, device=device,
                      generator=torch.Generator().manual_seed(6))
    roles = check_grouped.gemm_roles(i["counts"], i["x"], i["probs"], i["w1"], i["w2"], i["dy"])
    cfg = check_grouped.SMALL
    ours, theirs, _ = roles["fc2"]
    done = ours(cfg).clone()
    assert check_grouped.role_mismatch("fc2", lambda c: done, theirs, cfg) is not None
    ours, theirs, _ = roles["wgrads (dW1 + dW2)"]
    assert check_grouped.role_mismatch("wgrads (dW1 + dW2)", ours, theirs, cfg) is None
    for second_only in (False, True):
        def nan_in_one(c, second_only=second_only):
            dw1, dw2 = ours(c)
            (dw2 if second_only else dw1).fill_(float("nan"))
            return dw1, dw2
        assert "differs" in check_grouped.role_mismatch("wgrads (dW1 + dW2)", nan_in_one, theirs, cfg), second_only


def test_grouped_gemm_roles_compute_the_products_of_their_cutlass_gemms(device):
    """check.grouped.gemm_roles (the bench's and grouped_profile.py's per-role timing): each
    fused launch computes what its torch._grouped_mm peer does (the store GEMMs and the weight
    gradients the same products, each bf16 output one rounding of its fp32 sum on either side:
    at most an ulp, 2**-7 relative, apart; the GLU h from the peer's z: h's own rounding (2**-8)
    plus, where the two z roundings differ by an ulp, the GLU's response to it (at most ~2.3
    ulps of h): 1.6e-2 normwise),
    at small tiles with ragged experts, one without tokens, through pointers and through TMA;
    the Gluon wgrads and row GEMMs at a compose tile (torch._grouped_mm where the kernels
    cannot run)."""
    import dataclasses

    import torch
    from tilefuse.check import grouped as check_grouped
    from tilefuse.ops.grouped_glu_mlp.reference import glu_activation, random_inputs, split_glu
    from tilefuse.utils import normwise_rel_error as rel
    i = random_inputs([5, 0, 37, 22], 64, 32, torch.bfloat16, bias=False, device=device,
                      generator=torch.Generator().manual_seed(4))
    roles = check_grouped.gemm_roles(i["counts"], i["x"], i["probs"], i["w1"], i["w2"], i["dy"])
    assert list(roles) == ["fc1 + GLU", "fc2", "fc2 dgrad + dGLU", "fc1 dgrad", "wgrads (dW1 + dW2)",
                           check_grouped.GLUON_WGRADS, check_grouped.GLUON_ROWS]
    gluon = (check_grouped.GLUON_WGRADS, check_grouped.GLUON_ROWS)
    for cfg in (check_grouped.SMALL, dataclasses.replace(check_grouped.SMALL, tma=True), check_grouped.GLUON_TILE):
        for role, (ours, theirs, flop) in roles.items():
            if cfg.compose != (role in gluon):   # a compose tile is the Gluon roles' only, and theirs
                continue
            got, want = ours(cfg), theirs()
            assert flop > 0
            if role == "fc1 + GLU":
                gate, up = split_glu(want.float(), 32)
                want = i["probs"][:, None] * glu_activation(gate, up, "swiglu").flatten(-2)
            if role == "fc2 dgrad + dGLU":   # its epilogue's dz, from the random z: written, finite
                assert got.shape == (want.shape[0], 2 * want.shape[1]) and bool(got.isfinite().all())
                continue
            bound = 1.6e-2 if role == "fc1 + GLU" else 2.0 ** -7
            for g, w in zip(got, want) if isinstance(got, tuple) else ((got, want),):
                assert rel(g.float(), w.float()) <= bound, (role, cfg.name)
    # The bench's "GEMMs only" row: one step's six torch._grouped_mm GEMMs (the Gluon roles'
    # peers repeat them)
    calls = []
    real = torch._grouped_mm

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    torch._grouped_mm = counting
    try:
        for theirs in check_grouped.step_cutlass_gemms(roles):
            theirs()
    finally:
        torch._grouped_mm = real
    assert len(calls) == 6


def test_dyt_host_cost_and_its_tables(device):
    """The dyt section's host cost per call (issue 17): measured on this machine's test device
    for every provider (the interpreter's numbers mean nothing, the rows and their shape do;
    on a GPU machine the device is the GPU: Liger-Kernel's Triton kernels, where installed,
    cannot take CPU tensors outside the interpreter), then the table and the summary lines from
    synthetic rows."""
    from tilefuse.check import dyt as check_dyt
    host = check_dyt.host_cost(device, shape=(4, 16), calls=1, rounds=1)
    names = [r["provider"] for r in host["rows"]]
    assert {"tilefuse.dyt", "F.layer_norm", "eager DyT (3 ATen ops)", "torch.tanh",
            "torch.ops.tilefuse.dyt (custom op)", "tilefuse.dyt, no grad"} <= set(names)
    for r in host["rows"]:
        assert r["fwd_us"] > 0 and (r["fwd_bwd_us"] is None) == (r["provider"] == "tilefuse.dyt, no grad")
    synthetic = {"rows": [
        {"provider": "tilefuse.dyt", "fwd_us": 22.0, "fwd_bwd_us": 180.0},
        {"provider": "F.layer_norm", "fwd_us": 11.0, "fwd_bwd_us": 90.0},
        {"provider": "tilefuse.dyt, no grad", "fwd_us": 16.5, "fwd_bwd_us": None}],
        "shape": [64, 256], "calls": 300, "rounds": 5}
    md = check_dyt.host_cost_markdown(synthetic)
    assert "| tilefuse.dyt | 22.0 | 2.00x | 180.0 | 2.00x |" in md
    assert "| tilefuse.dyt, no grad | 16.5 | 1.50x |  |  |" in md
    bench = {"numel": 1, "copy_ceiling_gbs": {"fp32": 1.0}, "host": synthetic, "rows": [
        {"provider": "torch.compile", "mode": "eager loop", "pass": "fwd+bwd", "status": "ok", "dtype": "fp32",
         "tilefuse_speedup": s, "width": w} for s, w in ((1.4, 16), (1.1, 8192))]}
    summary = check_dyt.benchmark_summary(bench)
    assert any("eager loop" in line and "1.10-1.40" in line for line in summary)
    assert any("22.0 us fwd, 180.0 us fwd+bwd (F.layer_norm 11.0 / 90.0)" in line for line in summary)
    tables = check_dyt.benchmark_markdown({"numel": 1, "copy_ceiling_gbs": {"fp32": 1.0}, "rows": [], "host": synthetic})
    assert check_dyt.host_cost_markdown(synthetic)[0] in tables


# Host microseconds per call of fake providers, per round, where the median of the per-round
# ratios to F.layer_norm (2.0) differs from the ratio of the medians (3.0 forward, 4.0 forward +
# backward) as it does on a host whose speed drifts between rounds.
HOST_ROUNDS_US = {
    ("tilefuse.dyt", "fwd_us"): (20.0, 40.0, 30.0), ("F.layer_norm", "fwd_us"): (10.0, 10.0, 30.0),
    ("tilefuse.dyt", "fwd_bwd_us"): (100.0, 300.0, 200.0), ("F.layer_norm", "fwd_bwd_us"): (50.0, 50.0, 200.0),
    ("Liger-Kernel LigerDyTFunction", "fwd_us"): (25.0, 45.0, 25.0),
    ("Liger-Kernel LigerDyTFunction", "fwd_bwd_us"): (150.0, 350.0, 150.0),
}


def test_dyt_host_cost_interleaves_providers_and_takes_ratios_within_rounds(monkeypatch):
    """host_cost samples every provider's forward and forward + backward once a round, in an
    order rotated by one each round (the harness's interleave), the JIT route alone under
    triton_common.jit_launches; the table's 'x layer_norm' is the median of per-round ratios.
    Fake providers advance a fake clock by their per-round cost and log their calls."""
    from types import SimpleNamespace

    from tilefuse.check import dyt as check_dyt
    from tilefuse.ops import triton_common
    from tilefuse.tuning import timing
    calls, rounds = 2, 3
    now = [0.0]
    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    log = []       # (provider, pass, Triton's direct launches on) per timed call
    made = {}

    def provider(name, key):
        made[name, key] = 0

        def call():
            n, made[name, key] = made[name, key], made[name, key] + 1
            if n < calls:       # host_cost's warm-up calls (min(20, calls))
                return
            log.append((name, key, triton_common.DIRECT_LAUNCH))
            cost = HOST_ROUNDS_US.get((name, key), (5.0,) * rounds)[(n - calls) // calls]
            now[0] += cost * 1e-6
        return call

    names = ["tilefuse.dyt", "tilefuse.dyt, JIT launches", "F.layer_norm", "torch.tanh"]
    fake = {n: (provider(n, "fwd_us"), provider(n, "fwd_bwd_us")) for n in names}
    fake["tilefuse.dyt, no grad"] = (provider("tilefuse.dyt, no grad", "fwd_us"), None)
    monkeypatch.setattr(check_dyt, "host_providers", lambda rows, cols, device: fake)
    host = check_dyt.host_cost("cpu", shape=(4, 16), calls=calls, rounds=rounds)

    samples = [log[i][:2] for i in range(0, len(log), calls)]
    assert all(log[i][:2] == log[i + 1][:2] for i in range(0, len(log), calls))   # a sample's calls
    per_round = len(fake) * 2 - 1
    assert len(samples) == rounds * per_round
    first = samples[:per_round]
    assert len(set(first)) == per_round                  # every provider and pass once a round
    for r in range(1, rounds):                           # ... in an order rotated by one each round
        assert samples[r * per_round:(r + 1) * per_round] == first[r:] + first[:r]
    assert all(direct == (name != "tilefuse.dyt, JIT launches") for name, _, direct in log)
    assert triton_common.DIRECT_LAUNCH

    assert host["rounds"] == rounds and host["calls"] == calls
    rows = {r["provider"]: r for r in host["rows"]}
    assert list(rows) == list(fake)
    assert rows["tilefuse.dyt, no grad"]["fwd_bwd_us"] is None
    ours = rows["tilefuse.dyt"]
    assert ours["fwd_us"] == pytest.approx(30.0) and ours["fwd_bwd_us"] == pytest.approx(200.0)
    assert ours["fwd_us_rounds"] == pytest.approx([20.0, 40.0, 30.0])
    for key in check_dyt.HOST_PASSES:
        assert check_dyt.host_ratio(host, "tilefuse.dyt", "F.layer_norm", key) == pytest.approx(2.0)
    assert "| tilefuse.dyt | 30.0 | 2.00x | 200.0 | 2.00x |" in check_dyt.host_cost_markdown(host)


def test_host_overhead_checks_ratios_within_rounds(monkeypatch, capsys):
    """benchmarks/host_overhead.py's regression check takes tilefuse's host cost over
    F.layer_norm's and over Liger-Kernel's as the median of per-round ratios: here 2.0x
    F.layer_norm's (under --fail-over 2.5, where the medians' ratio is 3.0x and 4.0x) and
    below Liger's (whose medians are the lower)."""
    import argparse
    import importlib.util
    from pathlib import Path

    from tilefuse.check import dyt as check_dyt
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "host_overhead.py"
    spec = importlib.util.spec_from_file_location("host_overhead_under_test", path)
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    providers = ["tilefuse.dyt", "F.layer_norm", "Liger-Kernel LigerDyTFunction"]
    passes = ("fwd_us", "fwd_bwd_us")
    rows = [{"provider": p, **{k: sorted(HOST_ROUNDS_US[p, k])[1] for k in passes},
             **{k + "_rounds": list(HOST_ROUNDS_US[p, k]) for k in passes}} for p in providers]
    host = {"shape": [64, 256], "calls": 1, "rounds": 3, "rows": rows}
    monkeypatch.setattr(check_dyt, "host_cost", lambda device, shape, calls, rounds: host)
    monkeypatch.setattr(program, "bitwise_check", lambda: [])
    monkeypatch.setattr(program, "DEVICE", "cuda")     # the regression check runs on a GPU only
    args = argparse.Namespace(shape=(64, 256), peer_calls=1, rounds=3, fail_over=2.5)
    assert program.peers(args) == 0
    out = capsys.readouterr().out
    assert "fwd: tilefuse 30.0 us, 2.00x F.layer_norm's 10.0 us, 0.89x Liger's 25.0 us" in out
    assert "fwd+bwd: tilefuse 200.0 us, 2.00x F.layer_norm's 50.0 us, 0.86x Liger's 150.0 us" in out
    assert "FAIL" not in out


def test_so2_step_providers_compute_each_pass(tuning_table):
    """The so2 bench's whole-op steps (issue 15's table) on this machine at a tiny shape: each
    provider of each pass returns the pass's outputs, tilefuse's equal to the reference's."""
    import torch
    from tilefuse.check import so2 as check_so2
    from tilefuse.utils import normwise_rel_error
    steps, facts = check_so2.step_providers(1, 16, 9, with_compile=False, device="cpu")
    assert [p for p, _ in check_so2.PASSES] == list(steps)
    assert facts["level3"] == "exact: no validated level-3 entry for the key" and facts["exact"].startswith("relay")
    assert facts["forward"] == "M32-N64-K16-w4-s2"    # no forward entry: the heuristic's tiles
    for pass_name, providers in steps.items():
        assert set(providers) == {"tilefuse", "eager reference"}
        got, want = providers["tilefuse"](), providers["eager reference"]()
        if pass_name == "forward":
            got, want = (got,), (want,)
        assert len(got) == {"forward": 1, "fwd + force bwd": 2, "fwd + training bwd": 5}[pass_name]
        for g, w in zip(got, want):   # both fp32, each within check/so2's TOL of float64
            assert normwise_rel_error(g, w) <= 2 * check_so2.TOL[torch.float32], pass_name


def test_compiled_peers_compile_every_shape_and_pass_or_fail(monkeypatch):
    """The so2 bench compiles one reference function (one code object) for three passes at each
    shape; past Dynamo's default recompile limit (8) the ninth would run eager code under its
    "torch.compile" row. Inside check.bench.compile_limits (each section's benchmark) every
    pass of every shape compiles a graph of its own, a limit that is hit raises instead of
    falling back, and the caller's limit comes back after."""
    import torch
    import torch._dynamo
    from tilefuse.check import bench, so2 as check_so2
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: real(fn, backend=counting, dynamic=kw.get("dynamic")))
    torch._dynamo.reset()
    before = torch._dynamo.config.recompile_limit
    new_graph = []
    with bench.compile_limits():
        for lmax, focus_dim in check_so2.SHAPES:
            steps, _ = check_so2.step_providers(lmax, focus_dim, 4, with_compile=True, device="cpu")
            for pass_name, _ in check_so2.PASSES:
                n = len(graphs)
                steps[pass_name]["torch.compile"]()
                new_graph.append(len(graphs) > n)
    assert len(new_graph) > 8 and all(new_graph), new_graph
    assert torch._dynamo.config.recompile_limit == before
    torch._dynamo.reset()
    with bench.compile_limits(limit=2), pytest.raises(Exception, match="recompile_limit|cache_size_limit"):
        for focus_dim in (16, 32, 64):
            steps, _ = check_so2.step_providers(1, focus_dim, 4, with_compile=True, device="cpu")
            steps["forward"]["torch.compile"]()
    torch._dynamo.reset()


def test_so2_step_table_and_plot(tmp_path):
    from tilefuse.check import so2 as check_so2
    ok = {"status": "ok", "spread": 0.02, "tflops": 30.0, "fraction_of_gemm_ceiling": 0.6,
          "fraction_of_fma_peak": 0.45, "table_picks": "relay-X", "level3": "none", "gemm_ceiling_tflops": 50.0,
          "fma_peak_tflops": 66.7}
    rows = [{"scope": "step", "pass": p, "lmax": 3, "focus_dim": 32, "edges": 1000, "provider": prov, "ms": ms,
             **ok, "vs_tilefuse": ms / 2.0} for p, _ in check_so2.PASSES for prov, ms in (("tilefuse", 2.0),
                                                                                          ("torch.compile", 3.0))]
    rows.append({"scope": "step", "pass": "forward", "lmax": 3, "focus_dim": 32, "edges": 1000,
                 "provider": "eager reference", "status": "failed", "error": "OOM", "table_picks": "relay-X",
                 "level3": "none"})
    b = {"rows": rows, "copy_ceiling_gbs": 4000.0, "gemm_ceiling_tflops": 50.0, "fma_peak_tflops": 66.7}
    md = "\n".join(check_so2.benchmark_markdown(b))
    assert "| fwd + training bwd | 3 | 32 | 1000 | torch.compile | 3.000 | 2.0% | 30.0 | 45% | 60% | 1.50 |  |" in md
    assert "FMA peak (66.7 TFLOP/s" in md
    assert "| forward | 3 | 32 | 1000 | tilefuse | 2.000 |" in md and "relay-X; level 3: none" in md
    assert "| forward | 3 | 32 | 1000 | eager reference | failed |" in md and "(50.0 TFLOP/s)" in md
    names = check_so2.plots(tmp_path, b)
    assert names == ["so2_step.png"] and (tmp_path / "so2_step.png").stat().st_size > 1000


def test_grouped_check_verifies_the_compose_route_and_can_fail_it(monkeypatch, device):
    """The compose route (the default path) has its own verification row per case; a route off
    by 1e-3 fails it and nothing else. On the test device: the fused path launches the Triton
    kernels, which outside the interpreter take GPU tensors only."""
    import torch

    from tilefuse.check import grouped

    def case():
        return grouped._case([5, 0, 9], 48, 40, "swiglu", 8, True, torch.float32, device, grouped.SMALL)

    rows = {r["path"]: r for r in case()}
    assert rows["compose route vs float64 reference"]["ok"]
    real = grouped.compose_apply
    monkeypatch.setattr(grouped, "compose_apply", lambda *a: real(*a) * (1 + 1e-3))
    rows = {r["path"]: r for r in case()}
    assert not rows["compose route vs float64 reference"]["ok"]
    assert rows["fused vs float64 reference"]["ok"] and rows["fused vs unfused composition"]["ok"]


def test_grouped_check_verifies_the_op_as_called_and_can_fail_it(monkeypatch, device):
    """The public call (its call plans and autograd.Functions, not the launchers the other
    rows call) has its own row per case; a plan off by 1e-3 fails it and nothing else."""
    import torch

    from tilefuse.check import grouped
    from tilefuse.ops.grouped_glu_mlp import compose

    def case():
        return grouped._case([5, 0, 9], 48, 40, "swiglu", 8, True, torch.float32, device, grouped.SMALL)

    path = "as called (compose route) vs float64 reference"
    assert {r["path"]: r for r in case()}[path]["ok"]
    real = compose.ForwardPlan.run

    def off(self, *args):
        y, z, h, ends = real(self, *args)
        return y * (1 + 1e-3), z, h, ends

    monkeypatch.setattr(compose.ForwardPlan, "run", off)
    rows = {r["path"]: r for r in case()}
    assert not rows[path]["ok"] and rows["compose route vs float64 reference"]["ok"]


def test_grouped_check_compares_the_quantizers_bitwise_and_can_fail_them(monkeypatch, device):
    """Each recipe's quantizer has a row: its kernels against its reference (level 0), data,
    scales and amax bit for bit, on rows and K that leave partial tiles. A kernel whose mxfp8
    scales are one exponent off (a valid encoding, as accurate, which the recipes' normwise GEMM
    rows pass) fails its rows and no other; so does a kernel that launches nothing."""
    from tilefuse.check import grouped
    from tilefuse.quant import api as quant_api

    def rows():
        return {r["case"]: r for r in grouped._quantizer_rows(device, quick=False)}

    clean = rows()
    assert len(clean) == 8 and all(r["ok"] for r in clean.values()), clean
    assert {c.split("-")[0] for c in clean} == {"fp8_block", "mxfp8", "nvfp4"}
    real = quant_api.launch.mxfp8

    def off_by_one_exponent(x, swizzle):
        data, scales = real(x, swizzle)
        return data, scales + 1
    monkeypatch.setattr(quant_api.launch, "mxfp8", off_by_one_exponent)
    broken = rows()
    failed = {c for c, r in broken.items() if not r["ok"]}
    assert failed == {c for c in clean if c.startswith("mxfp8")} and len(failed) == 2
    assert all(broken[c]["detail"] == "bits differ" for c in failed)
    monkeypatch.setattr(quant_api, "_use_kernels", lambda x: False)   # the reference on both sides
    assert all(r["detail"] == "kernels did not launch" for r in rows().values())


def test_grouped_check_verifies_float16_at_its_own_bound(monkeypatch, device):
    """float16 inputs have their rows (the fused kernels, the compose route, the op as called)
    under float16's bound, 2e-3 normwise, not bfloat16's 1.6e-2: a fused result off by 4e-3
    passes under bf16's bound and fails here."""
    import torch

    from tilefuse.check import grouped

    assert grouped.TOL[torch.float16] == 2e-3

    def case():
        return {r["path"]: r for r in grouped._case([5, 0, 9], 48, 40, "geglu", None, True, torch.float16, device,
                                                    grouped.SMALL)}

    rows = case()
    assert all(r["ok"] for r in rows.values()), rows
    assert all(r["case"].endswith("-float16") for r in rows.values())
    assert "compose route vs float64 reference" in rows and "as called (compose route) vs float64 reference" in rows
    real = grouped._fused
    monkeypatch.setattr(grouped, "_fused", lambda *a, **k: [t * (1 + 4e-3) for t in real(*a, **k)])
    rows = case()
    assert not rows["fused vs float64 reference"]["ok"]
    assert rows["compose route vs float64 reference"]["ok"]


def _hopper():
    import torch

    from tilefuse.ops import gluon_hopper
    return torch.cuda.is_available() and gluon_hopper.available_here()


def test_grouped_check_gluon_rows_need_their_launches(monkeypatch, device):
    """Where Gluon's Hopper kernels run, the grouped check adds a row for the compose route at
    a tuned config's Gluon tiles and one for fp8_block's warp-specialised GEMMs; each passes
    only if those kernels launched (ws_rows 4x and ws_wgrad 2x; the fp8 ws GEMM 2x and its
    fc1 + GLU). Told that they run where they cannot (the CPU: every launch falls back), both
    rows appear and fail as not launched, while the others pass."""
    import torch

    from tilefuse.check import grouped
    if _hopper():
        pytest.skip("the Gluon kernels run here: test_grouped_check_gluon_rows_pass_on_hopper")
    monkeypatch.setattr(grouped.gluon_hopper, "available", lambda dev: True)
    rows = {r["path"]: r for r in grouped._case([5, 0, 9], 128, 64, "swiglu", 8, False, torch.bfloat16, device,
                                                grouped.SMALL)}
    gluon = rows["compose route, Gluon GEMMs vs float64 reference"]
    assert not gluon["ok"] and gluon["detail"].startswith("kernels did not launch")
    assert all(r["ok"] for path, r in rows.items() if path != gluon["path"])
    fp32 = grouped._case([5, 0, 9], 128, 64, "swiglu", 8, False, torch.float32, device, grouped.SMALL)
    assert gluon["path"] not in {r["path"] for r in fp32}   # the Gluon GEMMs take 16-bit operands only
    # widths whose GEMMs the Gluon kernels cannot take (dW1's 2F = 80 rows, H = 48) get no row
    narrow = grouped._case([5, 0, 9], 48, 40, "swiglu", 8, False, torch.bfloat16, device, grouped.SMALL)
    assert gluon["path"] not in {r["path"] for r in narrow} and all(r["ok"] for r in narrow)
    recipe = grouped._recipe_case([13, 0, 37, 3], 128, 128, "swiglu", 32, True, "fp8_block", device,
                                  grouped.SMALL_RECIPE["fp8_block"])
    by_path = {r["path"]: r for r in recipe}
    ws = by_path["recipe fp8_block, warp-specialised GEMMs vs its float64 rendering"]
    assert not ws["ok"] and ws["detail"].startswith("kernels did not launch")
    assert by_path["recipe fp8_block vs its float64 rendering"]["ok"]


@pytest.mark.gpu
def test_grouped_check_gluon_rows_pass_on_hopper(device):
    import torch

    from tilefuse.check import grouped
    if not _hopper():
        pytest.skip("needs a Hopper GPU (Gluon's wgmma kernels)")
    rows = grouped._case([300, 0, 211, 17], 256, 192, "swiglu", 8, False, torch.bfloat16, device, grouped.GemmConfig())
    rows += grouped._case([300, 0, 211, 17], 256, 192, "geglu", None, True, torch.float16, device, grouped.GemmConfig())
    rows += grouped._recipe_case([300, 0, 211, 17], 256, 256, "swiglu", 32, True, "fp8_block", device, None)
    rows += grouped._recipe_case([300, 0, 211, 17], 256, 256, "geglu", None, False, "fp8_block", device, None)
    paths = [r["path"] for r in rows]
    assert paths.count("compose route, Gluon GEMMs vs float64 reference") == 2
    # at interleave 32 and in the halves layout, each with its ws GLU and dGLU launched
    assert paths.count("recipe fp8_block, warp-specialised GEMMs vs its float64 rendering") == 2
    assert all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]


@pytest.mark.usefixtures("tuning_table")   # the picks of this test's entries, not the device's shipped table
def test_grouped_check_verifies_each_table_pick_as_called(monkeypatch, device):
    """Each config the tuning table hands out (once per config, activation, interleave, bias
    and recipe) is verified through the public op with that config registered for the
    check's own size: a fused winner must run the fused kernels, a compose winner the compose
    route, an fp8_block winner its kernels against the recipe's rendering. Where the pick does
    not engage (here: registration made a no-op), its row fails."""
    import contextlib

    import torch

    from tilefuse import tuning
    from tilefuse.check import grouped
    from tilefuse.ops.grouped_glu_mlp.tune import FAMILY

    def candidate(key, name):   # the table takes configs of the key's sweep space only
        return next(c for c in FAMILY.candidates(FAMILY.problem_for_key(key)) if c.name == name)

    fused = candidate("H2048-F1408-E64-x2-T32768-swiglu-s32", "M64-N64-K64-w4-s4-p2-tma")
    composed = candidate("H2048-F1408-E64-x2-T32768-geglu-s0-bias", "M256-N128-K64-w4-s3-p1-compose-rows128s5")
    fp8 = candidate("H4096-F3584-E8-x2-T16384-swiglu-s32-fp8_block", "M64-N64-K128-w4-s4-p2")
    mapping = {FAMILY.problem_for_key("H2048-F1408-E64-x2-T32768-swiglu-s32"): fused,
               FAMILY.problem_for_key("H2048-F1408-E64-x2-T32768-geglu-s0-bias"): composed,
               FAMILY.problem_for_key("H2048-F768-E128-x2-T65536-swiglu-s32"): fused,   # the same pick again
               FAMILY.problem_for_key("H4096-F3584-E8-x2-T16384-swiglu-s32-fp8_block"): fp8}
    with tuning.registered("grouped_glu_mlp", mapping):
        picks = grouped.table_picks()
        assert [(k, w) for k, w, _ in picks] == [
            ("H2048-F1408-E64-x2-T32768-geglu-s0-bias", composed), ("H2048-F1408-E64-x2-T32768-swiglu-s32", fused),
            ("H4096-F3584-E8-x2-T16384-swiglu-s32-fp8_block", fp8)]
        assert len(grouped.table_picks(quick=True)) == 3   # (recipe, compose) kinds: fused, compose, fp8
        counts = [13, 0, 37, 3]
        rows = [grouped._table_pick_case(counts, k, w, p, device) for k, w, p in picks]
        assert all(r["ok"] for r in rows), rows
        assert rows[2]["path"] == "tuning table's pick as called vs its float64 rendering"
        assert rows[0]["case"].startswith("H2048-F1408-E64-x2-T32768-geglu-s0-bias: M256-N128-K64-w4-s3-p1-compose")
        monkeypatch.setattr(grouped.tuning, "registered", lambda *a: contextlib.nullcontext())
        key, winner, p = picks[1]   # the fused pick: unregistered, the call takes the compose route
        row = grouped._table_pick_case(counts, key, winner, p, device)
        assert not row["ok"] and row["detail"].startswith("kernels did not launch")


def test_alpha_inf_check_tolerates_an_exact_zero_in_x(monkeypatch):
    """torch.randn returns an exact 0.0 in about 6e-8 of its values; with alpha = inf that
    element's alpha * x is NaN (inf * 0) in eager and in the kernels alike. The check's
    alpha = inf cases must not report a correct kernel as failing for such a draw."""
    import torch

    from tilefuse.check import dyt as check_dyt
    real = torch.randn

    def randn_with_zero(*args, **kwargs):
        t = real(*args, **kwargs)
        if tuple(t.shape) == (37, 100):
            t[0, 0] = 0.0
        return t
    monkeypatch.setattr(torch, "randn", randn_with_zero)
    rows = [r for r in check_dyt._verify_special("cpu") if r["path"] == "alpha=inf"]
    assert len(rows) == 2 and all(r["ok"] for r in rows), rows


def test_so2_fused_check_forces_the_relay_whatever_the_table_picks(tuning_table):
    """The check's fused-vs-relay row forces both routes: on a table whose entry for the key is
    already the fused route (the H200 table's L1-C32 entry is), the relay side still runs the
    relay, so the row compares the two routes (taking the relay from the table, both sides
    would run fused and the launch check would fail); the entry registered before is there
    after the check."""
    import torch

    from tilefuse import tuning
    from tilefuse.check import so2 as check_so2
    from tilefuse.ops.so2_mixing_stack import configs
    from tilefuse.ops.so2_mixing_stack.tune import So2Problem
    device = "cuda" if torch.cuda.is_available() else "cpu"   # CPU tensors run kernels in the interpreter only
    problem = So2Problem(1, 16, 4)
    table_pick = configs.So2Config(64, 64, 16, 4, 1, fused=True, sigma_pass=True)
    for sigma_pass in (False, True):
        tuning.register("so2_mixing_stack", {problem: table_pick})
        try:
            row = check_so2._check_fused(1, 1, 16, 9, device, sigma_pass=sigma_pass)
            assert tuning.get_entry("so2_mixing_stack", problem) == table_pick
        finally:
            tuning.unregister("so2_mixing_stack")
        assert row["ok"], row
        assert row["errors"] == {"max|fused-relay|": 0.0}


def test_environment_names_the_ptxas_triton_would_use_now(monkeypatch, tmp_path):
    """torch.compile's inductor points TRITON_PTXAS_PATH at torch's ptxas mid-process; the report
    names the ptxas in use at the time it is made, not Triton's bundled one."""
    pytest.importorskip("triton.backends.nvidia.compiler")
    from tilefuse.check import env
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("TRITON_PTXAS_PATH", str(fake))
    assert env.ptxas() == f"13.0 ({fake})"
    assert env.environment()["ptxas"] == f"13.0 ({fake})"
    monkeypatch.delenv("TRITON_PTXAS_PATH")
    bundled = env.ptxas()
    assert bundled is None or "backends" in bundled and str(fake) not in bundled


def test_the_report_says_when_torch_compile_switched_the_ptxas(monkeypatch, tmp_path):
    import tilefuse.check as check
    monkeypatch.setattr(check, "environment", lambda: {"ptxas": "12.8 (triton's)"})   # at the start
    monkeypatch.setattr(check, "ptxas", lambda: "13.0 (torch's)")                        # at the end
    result = check.run_check(tmp_path / "rep", quick=True, bench=False, verify=False, show_progress=False,
                             ops=("dyt",))
    assert result["environment"]["ptxas"] == "12.8 (triton's), then 13.0 (torch's) once torch.compile ran"
    monkeypatch.setattr(check, "ptxas", lambda: "12.8 (triton's)")
    result = check.run_check(tmp_path / "rep2", quick=True, bench=False, verify=False, show_progress=False,
                             ops=("dyt",))
    assert result["environment"]["ptxas"] == "12.8 (triton's)"


def test_a_section_that_raises_is_a_failed_row_and_the_old_report_goes(tmp_path, monkeypatch):
    """One op's verification raising: a failed row naming the error, the other ops still
    verified, and no report from an earlier run left behind to be read as this one's."""
    import json
    from tilefuse import check
    from tilefuse.check import sections
    (tmp_path / "report.json").write_text('{"verification": [{"ok": true}]}')
    real = sections.section

    class Broken:
        @staticmethod
        def verify(quick, device, progress):
            raise RuntimeError("an illegal memory access was encountered")

    monkeypatch.setattr(check, "section", lambda op: Broken if op == "so2_mixing_stack" else real(op))
    monkeypatch.setattr(check, "_progress", lambda show: (lambda items, desc=None: items))
    seen = {}
    monkeypatch.setattr(real("dyt"), "verify", lambda quick, device, progress: seen.setdefault("dyt", [
        {"op": "dyt", "path": "p", "case": "c", "ok": True, "errors": {}, "worst_error_over_bound": 0.0,
         "detail": ""}]))
    result = check.run_check(tmp_path, quick=True, bench=False, show_progress=False,
                             ops=("dyt", "so2_mixing_stack"))
    rows = result["verification"]
    assert [r["ok"] for r in rows] == [True, False] and "dyt" in seen
    assert rows[1]["op"] == "so2_mixing_stack" and "RuntimeError: an illegal memory access" in rows[1]["detail"]
    doc = json.loads((tmp_path / "report.json").read_text())
    assert [r["ok"] for r in doc["verification"]] == [True, False]


def test_a_benchmark_section_that_cannot_load_or_plot_is_a_failed_row(tmp_path, monkeypatch):
    """On a (faked) GPU a benchmark section whose module fails to import, or whose plots raise,
    is a failed row and the report is still written (before, the import ran outside the try:
    a traceback and no report; a plot's error lost the whole run's report)."""
    import json
    from tilefuse import check
    from tilefuse.check import sections
    import torch
    real = sections.section

    class Plots:
        @staticmethod
        def benchmark(quick, progress):
            return {"rows": []}

        @staticmethod
        def benchmark_markdown(b):
            return ["plotted"]

        @staticmethod
        def plots(out, b):
            raise OSError("no space left on device")

    def section(op):
        if op == "dyt":
            raise ModuleNotFoundError("No module named 'triton'")
        return Plots if op == "so2_mixing_stack" else real(op)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(check, "section", section)
    monkeypatch.setattr("tilefuse.check.report.section", section)
    monkeypatch.setattr(check, "tuning_coverage", lambda ops: {"error": "not read in this test"})
    monkeypatch.setattr(check, "environment", lambda: {"ptxas": "-", "tilefuse": "-", "device": "a faked GPU",
                                                        "torch": "-", "triton": "-", "cuda_available": True})
    monkeypatch.setattr(check, "failed_tilefuse_rows", lambda op, b: [])
    result = check.run_check(tmp_path, quick=True, verify=False, show_progress=False,
                             ops=("dyt", "so2_mixing_stack"))
    rows = result["verification"]
    assert [(r["op"], r["path"], r["ok"]) for r in rows] == [("dyt", "the benchmark section", False),
                                                            ("so2_mixing_stack", "the plots section", False)]
    assert "ModuleNotFoundError" in rows[0]["detail"] and "OSError: no space left" in rows[1]["detail"]
    doc = json.loads((tmp_path / "report.json").read_text())
    assert [r["ok"] for r in doc["verification"]] == [False, False]
    assert "plotted" in (tmp_path / "report.md").read_text()


def test_a_bar_in_a_cell_does_not_split_the_markdown_table(tmp_path):
    """report.md's cells escape ``|``: so2's ``max|fused-relay|`` error name and an exception's
    ``int | None`` stay in their cells (before, a fused row had 9 cells under a 7-cell header
    and a renderer dropped the worst/bound and the reason); on the CPU the report says which
    rows it does not hold, and whether --quick ran."""
    from tilefuse.check import report as rep
    row = rep.verification_row("so2_mixing_stack", "fused backward (forced entry)", "L1-F1-C32-E37",
                               {"max|fused-relay|": 3e-7}, 0.0, over_bound="fused differs | relay")
    path = tmp_path / "report.md"
    rep.write_markdown(path, {"environment": {"cuda_available": False}, "ops": ["so2_mixing_stack"], "quick": True,
                              "verification": [row]})
    md = path.read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith("| so2_mixing_stack"))
    header = next(ln for ln in md.splitlines() if ln.startswith("| op |"))
    split = lambda ln: [c for c in re.split(r"(?<!\\)\|", ln)[1:-1]]   # noqa: E731  cells, escaped bars kept
    assert len(split(line)) == len(split(header)) == 7
    assert "max\\|fused-relay\\|" in line and "fused differs \\| relay" in line
    assert "--quick" in md and "not in this report" in md
    assert rep.cell("int | None\nnext") == "int \\| None next"


def test_the_report_says_which_standard_keys_the_tuning_table_covers(tuning_table, tmp_path, monkeypatch):
    """`tilefuse check` reports, per op, how many keys of its standard grid have an entry on
    this device (built-in, cache, runtime) and which command sweeps the rest: on a GPU without
    a built-in table every key runs its baseline, and the report must say so."""
    from tilefuse import tuning
    from tilefuse.check import coverage_lines, report as rep, summary, tuning_coverage
    from tilefuse.tuning import BASELINE, store, table

    grid = [tuning.get_family("dyt").key(p) for p in tuning.get_family("dyt").default_problems()]
    cov = tuning_coverage(("dyt", "so2_mixing_stack", "grouped_glu_mlp"))
    assert cov["builtin"] is None and all(f["covered"] == 0 and len(f["missing"]) == f["grid"]
                                          for f in cov["families"].values())
    assert "`tilefuse tune --all-defaults` sweeps them" in coverage_lines(cov)[0]

    table.record("dyt", {grid[0]: {"winner": BASELINE, "measured": {}}})          # the cache layer
    tuning.register("dyt", {grid[1]: BASELINE})                                    # the runtime layer
    builtin = tmp_path / "builtin"
    builtin.mkdir()
    tuning.table.export_builtin(builtin)                                          # grid[0] as a built-in
    store.cache_path(table.table_location()[0]).unlink()
    monkeypatch.setattr(store, "builtin_dir", lambda: builtin)
    tuning.reload()
    cov = tuning_coverage(("dyt",))
    with pytest.raises(TypeError, match=r"coverage: family_names must be a list of family names, got the str 'dyt'"):
        tuning.coverage("dyt")
    dyt = cov["families"]["dyt"]
    assert cov["builtin"] == store.builtin_name(table.table_location()[0])
    assert (dyt["covered"], dyt["builtin"], dyt["cache"], dyt["runtime"]) == (2, 1, 0, 1)
    assert dyt["missing"] == grid[2:] and dyt["grid"] == len(grid)
    line = coverage_lines(cov)[0]
    assert f"built-in {cov['builtin']}" in line and f"dyt 2/{len(grid)}" in line
    assert "`tilefuse tune --all-defaults --op dyt` sweeps them" in line

    path = tmp_path / "report.md"
    rep.write_markdown(path, {"environment": {"cuda_available": True}, "ops": ["dyt"], "tuning": cov,
                              "verification": []})
    md = path.read_text()
    assert "## Tuning table" in md and f"| dyt | 2/{len(grid)} | 1 / 0 / 1 | {grid[2]}," in md
    assert "`tilefuse tune --all-defaults --op dyt` sweeps them" in md
    # Without CUDA the report names no command that would refuse to run there.
    rep.write_markdown(path, {"environment": {"cuda_available": False}, "ops": ["dyt"], "tuning": cov,
                              "verification": []})
    md = path.read_text()
    assert "tune --all-defaults" not in md and "no CUDA device here" in md
    result = {"environment": {"tilefuse": "0", "device": "d", "torch": "t", "triton": "t"},
              "tuning": cov, "verification": [], "benchmarks": {}, "wall_seconds": 0.0}
    assert "tuning table" not in summary(result, tmp_path)                 # no GPU: the table picks nothing
    result["environment"]["cuda_available"] = True
    assert line in summary(result, tmp_path)
    assert coverage_lines({"error": "ValueError: bad"}) == ["tuning table: could not be read (ValueError: bad)"]


def test_bench_exits_nonzero_when_a_benchmark_raised(tmp_path, monkeypatch, capsys):
    """`tilefuse bench` (benchmarks only): a benchmark that raised is a failed row of the
    report, and the exit status is 1, as `tilefuse check`'s is for a failed row (a CUDA device
    faked: the sections' benchmarks are replaced by one that raises, in this process)."""
    import torch
    import tilefuse.check as check
    from tilefuse.check.sections import OPS, section

    def boom(quick, progress):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(check, "tuning_coverage", lambda ops: {"error": "not read in this test"})
    monkeypatch.setattr(check, "environment", lambda: {"ptxas": "-", "tilefuse": "-", "device": "a faked GPU",
                                                        "torch": "-", "triton": "-"})
    for op in OPS:
        monkeypatch.setattr(section(op), "benchmark", boom)
    assert main(["bench", "--out", str(tmp_path / "rep"), "--no-progress", "--in-process"]) == 1
    assert "illegal memory access" in capsys.readouterr().out


def test_a_failed_tilefuse_benchmark_row_fails_the_check_and_a_failed_peer_does_not(tmp_path, monkeypatch, capsys):
    """A benchmark that returns (does not raise) with one of tilefuse's own rows failed: that
    row becomes a failed verification row, so `tilefuse bench` exits 1; a peer's failed row
    (Liger-Kernel's, say) stays in its table only (a CUDA device faked, the benchmarks
    replaced by one returning rows, the markdown writer skipped)."""
    import torch
    import tilefuse.check as check
    from tilefuse.check import report
    from tilefuse.check.sections import OPS, section

    rows = {"bf16": [{"provider": "tilefuse (as called)", "experts": 8, "status": "failed",
                      "error": "RuntimeError: CUDA error: an illegal memory access was encountered"},
                     {"provider": "Liger-Kernel fused MoE", "experts": 8, "status": "failed", "error": "ImportError"},
                     {"provider": "tilefuse fused", "experts": 8, "status": "ok", "ms": 1.0}]}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(check, "tuning_coverage", lambda ops: {"error": "not read in this test"})
    monkeypatch.setattr(check, "environment", lambda: {"ptxas": "-", "tilefuse": "-", "device": "a faked GPU",
                                                        "torch": "-", "triton": "-"})
    monkeypatch.setattr(report, "write_markdown", lambda path, result: open(path, "w").write("report\n"))
    for op in OPS:
        monkeypatch.setattr(section(op), "benchmark", lambda quick, progress: rows)
        monkeypatch.setattr(section(op), "plots", lambda out, b: [], raising=False)
    assert main(["bench", "--out", str(tmp_path / "rep"), "--no-progress", "--ops", "grouped_glu_mlp",
                 "--in-process"]) == 1
    failed = check.failed_tilefuse_rows("grouped_glu_mlp", rows)
    assert [r["path"] for r in failed] == ["benchmark: tilefuse (as called)"]
    assert not failed[0]["ok"] and "illegal memory access" in failed[0]["detail"] and failed[0]["case"] == "experts 8"
    rows["bf16"][0]["status"] = "ok"
    assert check.failed_tilefuse_rows("grouped_glu_mlp", rows) == []
    assert main(["bench", "--out", str(tmp_path / "rep2"), "--no-progress", "--ops", "grouped_glu_mlp",
                 "--in-process"]) == 0


def test_failed_rows_of_tilefuse_kernels_count_whatever_their_names():
    """The so2 benchmark's own kernel rows ("relay", "fused ...", "table pick": ``ours``) and a
    grouped GEMM role whose tilefuse timing failed (``tilefuse_error``) fail the check; the
    so2 peers' rows (``ours`` False) and a role whose torch._grouped_mm side failed do not."""
    import tilefuse.check as check
    from tilefuse.check import so2 as check_so2
    err = "RuntimeError: CUDA error: an illegal memory access was encountered"
    failed = {"status": "failed", "error": err}
    so2_rows = {"rows": [check_so2._bench_row("layer", 3, 32, 64, "relay layer", RuntimeError(err), {}),
                         check_so2._bench_row("backward", 3, 32, 64, "table pick", RuntimeError(err), {}),
                         check_so2._bench_row("backward", 3, 32, 64, "eager (no graph)", RuntimeError(err), {},
                                              ours=False),
                         {"scope": "step", "provider": "torch.compile", **failed}]}
    assert [r["status"] for r in so2_rows["rows"][:3]] == ["failed"] * 3
    got = check.failed_tilefuse_rows("so2_mixing_stack", so2_rows)
    assert sorted(r["path"] for r in got) == ["benchmark: relay layer", "benchmark: table pick"]
    roles = {"roles": [{"experts": 8, "role": "fc1 + GLU", "tilefuse_ms": None, "tilefuse_error": err,
                        "grouped_mm_ms": 1.0, "grouped_mm_error": None},
                       {"experts": 8, "role": "fc2", "tilefuse_ms": 1.0, "tilefuse_error": None,
                        "grouped_mm_ms": None, "grouped_mm_error": err}]}
    got = check.failed_tilefuse_rows("grouped_glu_mlp", roles)
    assert [r["path"] for r in got] == ["benchmark: tilefuse fc1 + GLU"] and err in got[0]["detail"]


def test_dyt_verification_poisons_every_gradient(monkeypatch, device):
    """Under the dyt check's poisoning (verify.poisoned) a backward that writes nothing leaves
    dx and each parameter's gradient NaN (dalpha, dweight and dbias are allocated outside the
    launchers' poisoned outputs), so its row fails."""
    import torch
    from tilefuse.check import dyt as check_dyt
    from tilefuse.ops.dyt import plan as plans
    from tilefuse.ops.dyt.verify import poisoned
    monkeypatch.setattr(plans.Plan, "_backward_launch", lambda self, dy, key: (lambda *args: None, False))
    plans.clear()
    x, a, w, b, dy = check_dyt._inputs((37, 100), torch.float32, torch.float32, True, True, device, "")
    with poisoned():
        _, *grads = check_dyt._run_api(x, a, w, b, dy, True)
    plans.clear()
    assert len(grads) == 4 and all(bool(g.isnan().all()) for g in grads)
    assert not torch.are_deterministic_algorithms_enabled()


def test_grouped_and_so2_verification_run_with_poisoned_allocations(monkeypatch):
    """The grouped_glu_mlp and so2_mixing_stack checks allocate NaN-filled memory, as dyt's
    does: an output element a kernel leaves unwritten is NaN and fails its row, where the
    memory torch.empty hands out could hold a value within the normwise bound. The state is
    restored after."""
    import torch
    from tilefuse.check import grouped, so2

    def probe(quick, device, progress):
        return [bool(torch.empty(64).isnan().all()), bool(torch.empty(4, dtype=torch.int32).eq(2 ** 31 - 1).all())]

    for mod in (grouped, so2):
        monkeypatch.setattr(mod, "_verify", probe)
        assert mod.verify(True, "cpu", None) == [True, True], mod.__name__
    assert not torch.are_deterministic_algorithms_enabled()


def test_grouped_row_with_a_nan_error_reports_an_infinite_worst_over_bound():
    """A row failed by a NaN output shows worst/bound inf, whatever the outputs' order (max()
    over a list holding NaN depends on where the NaN is)."""
    import torch
    from tilefuse.check import grouped as check_grouped
    ok, nan = torch.ones(4), torch.full((4,), float("nan"))
    for got in ([nan] + [ok] * 6, [ok] * 6 + [nan]):
        row = check_grouped._row("p", "c", got, [ok] * 7, True, 1e-3)
        assert not row["ok"] and row["worst_error_over_bound"] == float("inf")


def test_dyt_bench_providers_do_the_same_work_in_bf16(device):
    """With bf16 x and fp32 parameters every dyt benchmark provider writes a bf16 y and reads a
    bf16 dy (eager and torch.compile take the parameters in x's dtype: with fp32 ones y would
    be fp32, other bytes than tilefuse's), and the forward + backward calls run. (On the GPU
    where there is one: Liger-Kernel's provider, where it imports, launches Triton kernels,
    which take CPU tensors only in the interpreter.)"""
    import torch
    from tilefuse.check import dyt as check_dyt
    x, a, w, b, dy = check_dyt._inputs((8, 32), torch.bfloat16, torch.float32, True, True, device, "")
    fwd = check_dyt._providers(x, a, w, b, dy, False, check_dyt._eager)
    assert {"tilefuse", "eager", "torch.compile"} <= set(fwd)
    assert all(f().dtype == torch.bfloat16 for f in fwd.values())
    for run in check_dyt._providers(x, a, w, b, dy, True, check_dyt._eager).values():
        grads = run()
        assert grads[0].dtype == torch.bfloat16 and len(grads) == 4


def test_so2_table_gives_no_relay_ratio_to_the_peers_timed_without_graphs():
    """'vs relay' divides graph-replay times of the same rounds; the '(no graph)' peers (eager,
    torch.compile: plain calls, other rounds) get none."""
    from tilefuse.check import so2 as check_so2

    def row(provider, ms, ours=True):
        return {"scope": "backward", "lmax": 3, "focus_dim": 32, "edges": 64, "provider": provider, "ours": ours,
                "status": "ok", "ms": ms, "spread": 0.01, "table_picks": "relay"}
    md = check_so2.benchmark_markdown({"copy_ceiling_gbs": 1.0, "rows": [
        row("relay", 2.0), row("table pick", 1.0), row("eager (no graph)", 4.0, ours=False)]})
    cells = {line.split("|")[5].strip(): line.split("|")[8].strip() for line in md if "| backward |" in line}
    assert cells == {"relay": "1.00", "table pick": "2.00", "eager (no graph)": ""}


def _fake_host_providers(failing: dict):
    """host_providers' shape with calls that cost nothing: ``failing`` maps (provider, pass)
    to the sampled call (0 = the first warm-up call) from which that call raises."""
    made = {}

    def provider(name, key):
        made[name, key] = 0

        def call():
            n, made[name, key] = made[name, key], made[name, key] + 1
            if (name, key) in failing and n >= failing[name, key]:
                raise RuntimeError(f"{name} broke")
        return call
    names = ["tilefuse.dyt", "torch.ops.tilefuse.dyt (custom op)", "F.layer_norm", "torch.tanh",
             "Liger-Kernel LigerDyTFunction"]
    fake = {n: (provider(n, "fwd_us"), provider(n, "fwd_bwd_us")) for n in names}
    fake["tilefuse.dyt, no grad"] = (provider("tilefuse.dyt, no grad", "fwd_us"), None)
    return fake


def test_dyt_host_cost_records_a_failing_peer_and_aborts_on_tilefuse(monkeypatch):
    """A peer that raises (Liger-Kernel's DyT in its warm-up, torch.tanh's backward in a later
    round) is a failed row with its error, the others timed; the table marks it failed, the
    ratios and the summary skip it. One of tilefuse's own providers raising ends host_cost."""
    from tilefuse.check import dyt as check_dyt
    liger = "Liger-Kernel LigerDyTFunction"
    failing = {(liger, "fwd_us"): 0, (liger, "fwd_bwd_us"): 0, ("torch.tanh", "fwd_bwd_us"): 3}
    monkeypatch.setattr(check_dyt, "host_providers", lambda rows, cols, device: _fake_host_providers(failing))
    host = check_dyt.host_cost("cpu", shape=(4, 16), calls=1, rounds=3)
    rows = {r["provider"]: r for r in host["rows"]}
    assert rows[liger]["error"] == f"RuntimeError: {liger} broke"        # both passes alike: said once
    assert rows[liger]["fwd_us"] is None and rows[liger]["fwd_bwd_us"] is None
    assert rows["torch.tanh"]["fwd_us"] is not None and rows["torch.tanh"]["fwd_bwd_us"] is None
    assert rows["torch.tanh"]["error"] == "fwd+bwd: RuntimeError: torch.tanh broke"
    for name in ("tilefuse.dyt", "F.layer_norm", "tilefuse.dyt, no grad"):
        assert "error" not in rows[name] and len(rows[name]["fwd_us_rounds"]) == 3
    assert check_dyt.host_ratio(host, liger, "F.layer_norm", "fwd_us") is None
    assert check_dyt.host_ratio(host, "tilefuse.dyt", liger, "fwd_bwd_us") is None
    assert check_dyt.host_ratio({"rows": [{"provider": "p", "error": "E"}, {"provider": "q", "fwd_us": 1.0}]},
                                "p", "q", "fwd_us") is None      # a row without timings at all
    md = check_dyt.host_cost_markdown(host)
    assert md[2].endswith("| x layer_norm | error |")
    assert f"| {liger} | failed |  | failed |  | RuntimeError: {liger} broke |" in md
    assert any(line.startswith("| torch.tanh | ") and "| failed |  | fwd+bwd: RuntimeError" in line for line in md)
    assert check_dyt.benchmark_summary({"rows": [], "host": host})[0].startswith("dyt host per call: ")
    host["rows"] = [r for r in host["rows"] if r["provider"] != "F.layer_norm"] + [
        {"provider": "F.layer_norm", "error": "RuntimeError: no"}]      # the reference failed too
    assert check_dyt.host_ratio(host, "tilefuse.dyt", "F.layer_norm", "fwd_us") is None
    assert "F.layer_norm" not in check_dyt.benchmark_summary({"rows": [], "host": host})[0]
    for ours in ("tilefuse.dyt", "torch.ops.tilefuse.dyt (custom op)"):
        fake = _fake_host_providers({(ours, "fwd_bwd_us"): 2})        # in the rounds, after its warm-up
        monkeypatch.setattr(check_dyt, "host_providers", lambda rows, cols, device: fake)
        with pytest.raises(RuntimeError, match="broke"):
            check_dyt.host_cost("cpu", shape=(4, 16), calls=1, rounds=3)


def test_a_failing_dyt_peer_keeps_the_bench_report_and_its_exit_status(tmp_path, monkeypatch, capsys):
    """`tilefuse bench --ops dyt` (a CUDA device faked; the benchmark's bandwidth rows
    synthetic, its host cost measured with a Liger-Kernel that raises): exit 0, every row in
    report.json (valid JSON) and report.md, the Liger row marked failed with its error."""
    import torch
    import tilefuse.check as check
    from tilefuse.check import dyt as check_dyt

    class BrokenLiger:
        @staticmethod
        def apply(*args):
            raise TypeError("LigerDyTFunction.forward() missing 1 required positional argument: 'beta'")
    fake = _fake_host_providers({})
    fake["Liger-Kernel LigerDyTFunction"] = (lambda: BrokenLiger.apply(), lambda: BrokenLiger.apply())
    monkeypatch.setattr(check_dyt, "host_providers", lambda rows, cols, device: fake)
    host = check_dyt.host_cost("cpu", shape=(4, 16), calls=1, rounds=1)
    row = {"dtype": "fp32", "width": 16, "rows": 4, "pass": "fwd", "mode": "graph", "status": "ok", "ms": 1.0,
           "spread": 0.0, "gbs": 1.0, "fraction_of_copy": 0.5}
    bench = {"numel": 64, "copy_ceiling_gbs": {"fp32": 2.0}, "host": host,
             "rows": [{**row, "provider": "tilefuse", "config": "c"}, {**row, "provider": "eager"}]}
    monkeypatch.setattr(check_dyt, "benchmark", lambda quick, progress: bench)
    monkeypatch.setattr(check_dyt, "plots", lambda out, b: [])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(check, "tuning_coverage", lambda ops: {"error": "not read in this test"})
    monkeypatch.setattr(check, "environment", lambda: {"ptxas": "-", "tilefuse": "-", "device": "a faked GPU",
                                                        "torch": "-", "triton": "-"})
    out = tmp_path / "rep"
    assert main(["bench", "--ops", "dyt", "--out", str(out), "--no-progress", "--in-process"]) == 0
    report = json.loads((out / "report.json").read_text(),
                        parse_constant=lambda c: pytest.fail(f"{c} in report.json"))
    assert report["verification"] == [] and len(report["benchmarks"]["dyt"]["rows"]) == 2
    liger = {r["provider"]: r for r in report["benchmarks"]["dyt"]["host"]["rows"]}["Liger-Kernel LigerDyTFunction"]
    assert liger["fwd_us"] is None and "missing 1 required positional argument" in liger["error"]
    md = (out / "report.md").read_text()
    assert "| Liger-Kernel LigerDyTFunction | failed |  | failed |  | TypeError: " in md
    assert "| fp32 | 16 | fwd | tilefuse | graph | 1.0000 |" in md and "FAIL" not in md
    assert "| Liger-Kernel LigerDyTFunction | failed |" in capsys.readouterr().out    # bench prints report.md


@pytest.mark.parametrize("errors", [{"x": 1.6e-07, "du0": 1.6e-07, "dalpha": float("nan")},
                                    {"x": float("nan"), "du0": 1.6e-07}, {"x": float("inf"), "du0": 1.6e-07}])
def test_so2_row_with_a_non_finite_error_fails_with_an_infinite_worst_and_says_why(errors):
    """so2's verification rows take grouped's rule (one helper, report.verification_row): a
    NaN or inf error makes worst/bound inf wherever it is, and a failed row whose kernels
    launched still says why."""
    from tilefuse.check import so2 as check_so2
    row = check_so2._row("forward + relay backward", "L1-F1-C32-E37-float32-alpha", errors, 1e-5)
    assert not row["ok"] and row["worst_error_over_bound"] == float("inf") and row["detail"]
    over = check_so2._row("p", "c", {"x": 2e-5, "du0": 1e-6}, 1e-5)
    assert not over["ok"] and over["worst_error_over_bound"] == pytest.approx(2.0) and over["detail"]
    idle = check_so2._row("p", "c", {"x": 1e-6}, 1e-5, False, "kernels did not launch as expected: {}")
    assert not idle["ok"] and idle["detail"] == "kernels did not launch as expected: {}"
    good = check_so2._row("p", "c", {"x": 1e-6}, 1e-5)
    assert good["ok"] and good["detail"] == "" and good["worst_error_over_bound"] == pytest.approx(0.1)


def test_the_verification_row_helper_is_shared_and_bitwise_rows_use_a_zero_bound():
    from tilefuse.check import grouped as check_grouped, report, so2 as check_so2
    assert check_grouped.verification_row is report.verification_row is check_so2.verification_row
    same = report.verification_row("o", "p", "c", {"d": 0.0}, 0.0)
    assert same["ok"] and same["worst_error_over_bound"] == 0.0
    differs = report.verification_row("o", "p", "c", {"d": 1e-9}, 0.0, over_bound="fused differs from relay")
    assert not differs["ok"] and differs["worst_error_over_bound"] == float("inf")
    assert differs["detail"] == "fused differs from relay"


def test_host_overhead_shows_a_failed_peer_and_fails_nothing_for_it(monkeypatch, capsys):
    """benchmarks/host_overhead.py with Liger-Kernel's row failed (and then F.layer_norm's):
    the regression check compares with what was timed and its verdict is not FAIL."""
    from tilefuse.check import dyt as check_dyt
    program = load_benchmark("host_overhead")
    ok = {"fwd_us": 10.0, "fwd_us_rounds": [10.0], "fwd_bwd_us": 50.0, "fwd_bwd_us_rounds": [50.0]}
    failed = {"fwd_us": None, "fwd_us_rounds": None, "fwd_bwd_us": None, "fwd_bwd_us_rounds": None,
              "error": "TypeError: beta", "failed": ["fwd_us", "fwd_bwd_us"]}
    host = {"shape": [64, 256], "calls": 1, "rounds": 1, "rows": [
        {"provider": "tilefuse.dyt", **ok}, {"provider": "F.layer_norm", **ok},
        {"provider": program.LIGER, **failed}]}
    monkeypatch.setattr(check_dyt, "host_cost", lambda device, shape, calls, rounds: host)
    monkeypatch.setattr(program, "bitwise_check", lambda: [])
    monkeypatch.setattr(program, "DEVICE", "cuda")
    args = program.argparse.Namespace(shape=(64, 256), peer_calls=1, rounds=1, fail_over=2.5)
    assert program.peers(args) == 0
    out = capsys.readouterr().out
    assert "Liger-Kernel failed" in out and "fwd: tilefuse 10.0 us, 1.00x F.layer_norm's 10.0 us\n" in out
    assert "FAIL" not in out
    host["rows"][1] = {"provider": "F.layer_norm", **failed}
    assert program.peers(args) == 0
    out = capsys.readouterr().out
    assert "F.layer_norm failed" in out and "fwd: tilefuse 10.0 us\n" in out and "FAIL" not in out


@pytest.mark.parametrize("bad", [["--shape", "64"], ["--shape", "64x0"], ["--shape", "axb"], ["--rounds", "0"],
                                 ["--peer-calls", "0"], ["--calls", "0"], ["--rounds", "-1"]])
def test_host_overhead_refuses_a_malformed_shape_or_count(bad, monkeypatch, capsys):
    program = load_benchmark("host_overhead")
    monkeypatch.setattr(program, "peers", lambda args: pytest.fail("the peers section ran"))
    monkeypatch.setattr(program, "layers", lambda args: pytest.fail("the layers section ran"))
    with pytest.raises(SystemExit) as exc:
        program.main(bad)
    assert exc.value.code == 2 and bad[0] in capsys.readouterr().err


@pytest.mark.parametrize("rounds", ["0", "-1"])
def test_so2_peers_refuses_rounds_below_one(rounds, capsys):
    program = load_benchmark("so2_peers")
    with pytest.raises(SystemExit) as exc:
        program.main(["--tiny", "--rounds", rounds])
    assert exc.value.code == 2 and "--rounds" in capsys.readouterr().err


def test_so2_peers_exits_nonzero_when_a_shape_aborted_and_writes_valid_json(tmp_path, monkeypatch):
    """A shape that aborted makes the exit status 1 (the other shapes still run); --json is
    valid JSON with a NaN error (rel_err's, of an output holding NaN) written as "nan"."""
    import torch
    program = load_benchmark("so2_peers")
    err = program.rel_err(torch.tensor([float("nan"), 1.0]), torch.tensor([1.0, 1.0]))
    assert err != err
    nan_row = {"edges": 16, "lmax": 1, "focus_dim": 32, "peers": [
        {"peer": "deepmd fp16x3", "status": "not equivalent", "f64_errors": {"x": err, "du0": 1e-7}}]}

    def run_shape(args, shape, *rest):
        if shape[0] == 9:
            raise RuntimeError("out of memory")
        return dict(nan_row)
    monkeypatch.setattr(program, "run_shape", run_shape)
    monkeypatch.setattr(program, "meta", lambda *a: {"device": "cpu"})
    out = tmp_path / "p.json"
    assert program.main(["--tiny", "--peers", "eager", "--shapes", "16:1:32,9:1:32", "--json", str(out)]) == 1
    doc = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in --json"))
    assert doc["results"][0]["peers"][0]["f64_errors"]["x"] == "nan"
    assert "out of memory" in doc["results"][1]["aborted"]
    assert program.main(["--tiny", "--peers", "eager", "--shapes", "16:1:32"]) == 0
