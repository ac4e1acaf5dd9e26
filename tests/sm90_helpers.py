"""Compiling kernels for sm_90 on any machine: Triton's bundled NVIDIA toolchain, run in a
subprocess without the interpreter (the test process may have TRITON_INTERPRET=1 set). The
subprocess scripts import ``compile_sm90`` from here."""

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import triton

import tilefuse


def nvidia_compiler_available() -> bool:
    if importlib.util.find_spec("triton.backends.nvidia.compiler") is None:
        return False
    return (pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").exists()


def run_compile_script(script: str, timeout: int = 900) -> dict:
    """Run ``script`` (which prints a JSON object on its last line) and return that object."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
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
