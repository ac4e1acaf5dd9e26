"""Compiling kernels for sm_90 on any machine: Triton's bundled NVIDIA toolchain, run in a
subprocess without the interpreter (the test process may have TRITON_INTERPRET=1 set). The
subprocess scripts import ``compile_sm90`` from here.

Which ptxas assembles a kernel depends on the process, not only on Triton: once torch.compile
has compiled a Triton kernel, inductor puts torch's own ptxas (torch/bin/ptxas in CUDA builds of
torch; CUDA 13.0 in torch 2.11+cu130) in TRITON_PTXAS_PATH for the rest of the process
(torch/_inductor/runtime/compile_tasks.py, _set_triton_ptxas_path), so every tilefuse kernel
compiled after that is assembled by it instead of Triton's bundled one (CUDA 12.8 in triton
3.6). The two allocate registers differently (so2's level-3 wgmma kernel: 239 registers and no
stack against 255 and 24 bytes, benchmarks/results/2026-12-04-h200-ah). The compile tests name
the ptxas they check (``PTXAS``); their subprocesses never inherit TRITON_PTXAS_PATH.
"""

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import pytest
import torch
import triton

import tilefuse


def nvidia_compiler_available() -> bool:
    if importlib.util.find_spec("triton.backends.nvidia.compiler") is None:
        return False
    return (pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").exists()


# The ptxas builds a compile test checks: Triton's bundled one and torch's (see above).
PTXAS = ("triton", "torch")


def torch_ptxas() -> str | None:
    """The ptxas torch.compile hands Triton: TILEFUSE_TEST_TORCH_PTXAS where set (to check a CPU
    machine against a CUDA build's ptxas), else torch/bin/ptxas where this torch build has one."""
    path = os.environ.get("TILEFUSE_TEST_TORCH_PTXAS") or str(pathlib.Path(torch.__file__).parent / "bin" / "ptxas")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def run_compile_script(script: str, timeout: int = 900, ptxas: str = "triton") -> dict:
    """Run ``script`` (which prints a JSON object on its last line) with ``ptxas`` ("triton":
    Triton's bundled one; "torch": ``torch_ptxas()``, the test skipped where there is none) and
    return that object."""
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TRITON_PTXAS_PATH")}
    if ptxas == "torch":
        path = torch_ptxas()
        if path is None:
            pytest.skip("this torch build has no ptxas of its own (a CPU build)")
        env["TRITON_PTXAS_PATH"] = path
    elif ptxas != "triton":
        raise ValueError(f"ptxas must be one of {PTXAS}, got {ptxas!r}")
    # Triton's shared cache is safe here: Triton keys it on the ptxas version it read first in a
    # process (get_ptxas_version is lru-cached), so a process whose TRITON_PTXAS_PATH changed
    # after its first compile can store one ptxas's cubins under the other's key, but this
    # fresh subprocess reads the ptxas named above, and no test process launches these
    # scripts' signatures (bare integers and pointers: a launch adds the divisibility of its
    # aligned tensors).
    src = os.path.dirname(os.path.dirname(tilefuse.__file__))
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, here, env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def compile_sm90(fn, signature: dict, constexprs: dict, *, divisible=(), **options):
    """(compiled kernel, {"regs", "stack"} from cuobjdump) of ``fn`` for sm_90: ``constexprs``
    join the signature as constexpr, the arguments named in ``divisible`` are 16-divisible."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    names = fn.arg_names
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in divisible}
    src = ASTSource(fn=fn, signature={**signature, **{k: "constexpr" for k in constexprs}}, constexprs=constexprs,
                    attrs=attrs)
    c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
    usage = cubin_report(c)
    return c, {"regs": usage["regs"], "stack": usage["stack"]}


def cubin_report(compiled) -> dict:
    """{"regs", "stack", "sass"} of a compiled kernel, from Triton's bundled cuobjdump."""
    cuobjdump = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        usage = subprocess.run([str(cuobjdump), "--dump-resource-usage", f.name], capture_output=True,
                               text=True).stdout
        sass = subprocess.run([str(cuobjdump), "-sass", f.name], capture_output=True, text=True).stdout
    regs, stack = re.search(r"REG:(\d+) STACK:(\d+)", usage).groups()
    return {"regs": int(regs), "stack": int(stack), "sass": sass}


_SASS_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);")
_BRANCH = re.compile(r"\bBRA\s+0x([0-9a-f]+)")
_LOCAL = re.compile(r"\b(?:LDL|STL)\b")


def loop_local_memory(sass: str) -> int:
    """How many local-memory instructions (LDL / STL: spills) of ``sass`` (cuobjdump -sass) sit
    inside the loop that issues the wgmma (HGMMA): from the target of the first backward branch
    after the last HGMMA that goes back to or before the first one (the K loop's back edge:
    out-of-line blocks placed after the body, e.g. mbarrier wait retries, branch back from
    further on) to that branch. A spill there costs every K tile; one after the loop, once a
    tile. 0 where no loop holds the HGMMA."""
    ins = [(int(at, 16), text) for at, text in _SASS_LINE.findall(sass)]
    hgmma = [at for at, text in ins if "HGMMA" in text]
    if not hgmma:
        return 0
    edges = [(at, int(m.group(1), 16)) for at, text in ins if (m := _BRANCH.search(text))]
    back = [(at, target) for at, target in edges if target <= hgmma[0] and at >= hgmma[-1]]
    if not back:
        return 0
    end, start = min(back)
    return sum(1 for at, text in ins if start <= at <= end and _LOCAL.search(text))
