"""The sm_90 compile tests' harness: each names the ptxas it checks (sm90_helpers.PTXAS), whatever
an earlier test of the process left in TRITON_PTXAS_PATH (torch.compile's inductor sets it to
torch's ptxas once it compiles a kernel)."""

import stat

import pytest
from sm90_helpers import loop_local_memory, run_compile_script

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


def _sass(*lines):
    return "\n".join(f"        /*{at:04x}*/                   {text} ;   /* 0x0000000000000000 */"
                     for at, text in lines)


# A K loop (0x0100-0x0300) holding the wgmma, an out-of-line mbarrier wait retry after the body
# that branches back into the loop, and an epilogue between them.
_KERNEL = [(0x0100, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2"), (0x0110, "@!P0 BRA 0x0500"),
           (0x0120, "HGMMA.64x128x16.F32 R24, R88, gdesc[UR20].tnspB, RZ, !UPT"),
           (0x0130, "WARPGROUP.DEPBAR.LE gsb0, 0x0"), (0x0140, "FADD R3, R3, R4"), (0x0300, "@P0 BRA 0x0100"),
           (0x0310, "STL [R1], R5"), (0x0320, "LDL R5, [R1]"), (0x0400, "EXIT"),
           (0x0500, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2"), (0x0510, "@!P0 BRA 0x0500"),
           (0x0520, "BRA 0x0120")]


def test_loop_local_memory_counts_spills_in_the_wgmma_loop_only():
    assert loop_local_memory(_sass(*_KERNEL)) == 0                     # epilogue spills: after the loop
    inside = [(at, "STL [R1+0x8], R6" if at == 0x0140 else text) for at, text in _KERNEL]
    assert loop_local_memory(_sass(*inside)) == 1
    assert loop_local_memory(_sass((0x0100, "STL [R1], R5"), (0x0110, "@P0 BRA 0x0100"))) == 0   # no wgmma
