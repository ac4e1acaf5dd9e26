"""The sm_90 compile tests' harness: each names the ptxas it checks (sm90_helpers.PTXAS), whatever
an earlier test of the process left in TRITON_PTXAS_PATH (torch.compile's inductor sets it to
torch's ptxas once it compiles a kernel)."""

import stat

import pytest
from sm90_helpers import run_compile_script

_SHOW = 'import json, os; print(json.dumps({"ptxas": os.environ.get("TRITON_PTXAS_PATH")}))'


def test_the_triton_ptxas_ignores_a_path_left_in_the_environment(monkeypatch):
    monkeypatch.setenv("TRITON_PTXAS_PATH", "/left/by/inductor/ptxas")
    assert run_compile_script(_SHOW, ptxas="triton") == {"ptxas": None}


def test_the_torch_ptxas_is_the_one_named(monkeypatch, tmp_path):
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("TRITON_PTXAS_PATH", "/left/by/inductor/ptxas")
    monkeypatch.setenv("TILEFUSE_TEST_TORCH_PTXAS", str(fake))
    assert run_compile_script(_SHOW, ptxas="torch") == {"ptxas": str(fake)}


def test_an_unknown_ptxas_is_refused():
    with pytest.raises(ValueError, match="ptxas"):
        run_compile_script(_SHOW, ptxas="system")


def test_no_torch_ptxas_skips(monkeypatch, tmp_path):
    monkeypatch.setenv("TILEFUSE_TEST_TORCH_PTXAS", str(tmp_path / "missing"))
    with pytest.raises(pytest.skip.Exception):
        run_compile_script(_SHOW, ptxas="torch")
