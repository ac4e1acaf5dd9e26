"""GPU probe: where the fp8 quantizer's second (transposed) copy differs from separate launches
and from reference.py (with_transposed, the weight pair), on data with and without NaN / inf,
and the kernels' TTGIR from the Triton cache.

    PYTHONPATH=src:tests python3 benchmarks/results/2026-11-30-h200-f/quant_second_probe.py OUTDIR

(The one-off of runs 2b, 3b and 4, moved here from benchmarks/.)
"""
import glob
import os
import shutil
import sys

import torch

from quant_helpers import mixed
from tilefuse.quant import launch, reference

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"   # cpu: TRITON_INTERPRET=1


def diff(name, got, want):
    g, w = got.view(torch.uint8).cpu(), want.view(torch.uint8).cpu()
    bad = (g != w).nonzero()
    print(f"    {name}: {len(bad)} of {g.numel()} bytes differ", end="")
    if len(bad):
        idx = tuple(bad[:6].t())
        print(f"; first at {bad[:6].tolist()}: got {[hex(v) for v in g[idx].tolist()]} "
              f"want {[hex(v) for v in w[idx].tolist()]}", end="")
    print()


def main(out):
    launch.POISON_OUTPUTS = True
    for nonfinite in (False, True):
        for batched in (False, True):
            x = mixed(3 * 256, 128, 128, seed=6, dtype=torch.bfloat16, nonfinite=nonfinite)
            xd = (x.reshape(3, 256, 128) if batched else x).to(DEVICE)
            print(f"nonfinite {nonfinite} batched {batched}")
            (data, scales), (data_t, scales_t) = launch.fp8_block(xd, (128, 128), False, with_transposed=True)
            want = launch.fp8_block(xd, (128, 128), False)
            want_t = launch.fp8_block(xd, (128, 128), False, transpose=True, scales_transposed=True)
            rdata, rscales = reference.quantize_fp8_block(x.float(), (128, 128), False)
            diff("first copy vs launch", data, want[0])
            diff("first copy vs reference", data.reshape(rdata.shape), rdata)
            diff("first scales vs launch", scales, want[1])
            diff("second copy vs launch", data_t, want_t[0])
            diff("second scales vs launch", scales_t, want_t[1])
            diff("launch (transposed) vs reference", want_t[0].transpose(-1, -2).reshape(rdata.shape), rdata)
    cache = os.environ.get("TRITON_CACHE_DIR", os.path.expanduser("~/.triton/cache"))
    for i, f in enumerate(sorted(glob.glob(f"{cache}/**/fp8_block_kernel.ttgir", recursive=True))):
        shutil.copy(f, f"{out}/fp8_block_kernel-{i}.ttgir")
        js = f[:-len("ttgir")] + "json"
        if os.path.exists(js):
            shutil.copy(js, f"{out}/fp8_block_kernel-{i}.json")


if __name__ == "__main__":
    main(sys.argv[1])
