"""`tilefuse check` end to end on this machine (interpreter without a GPU)."""

import json

from tilefuse.cli import main


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
