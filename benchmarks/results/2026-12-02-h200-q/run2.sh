#!/bin/bash
# Run 2: so2 L3-C32 / L6-C32 level-3 keys re-swept with the 128x64 8-warp 3xfp16 tile (run 1);
# the dyt fp32 backward keys not re-swept after 9231166 (16-128, 512, 2048, 8192 columns at
# 2**26 elements); both exported; then run2_fp16x3_variants.py (two restructurings of the
# 3xfp16 GEMM, a probe) and so2_peers.py at Neo on the swept table, each as far as the call's
# time allows. Carry .whl (DeePMD-kit 3.2.0 and its dependencies).
#   OUT=... bash benchmarks/results/2026-12-02-h200-q/run2.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-q2
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run2/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run2/gpu.txt
for s in 3x32 6x32; do
  timeout 100 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape $s --pass level3 --force --no-progress \
    >> $OUT/run2/tune-so2.txt 2>&1; echo "tune $s level3 exit $?" >> $OUT/run2/tune-so2.txt
done
shapes=""; for w in 16 32 64 128 512 2048 8192; do shapes="$shapes --shape $((67108864 / w))x$w"; done
timeout 230 python3 -m tilefuse.cli tune --op dyt --dtype fp32 --pass bwd $shapes --force --no-progress \
  > $OUT/run2/tune-dyt.txt 2>&1; echo "tune exit $?" >> $OUT/run2/tune-dyt.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run2 >> $OUT/run2/tune-dyt.txt 2>&1
grep -hE "^(so2_mixing_stack|dyt)  |exit" $OUT/run2/tune-so2.txt $OUT/run2/tune-dyt.txt
timeout 120 python3 benchmarks/results/2026-12-02-h200-q/run2_fp16x3_variants.py > $OUT/run2/fp16x3_variants.txt 2>&1
echo "variants exit $?" >> $OUT/run2/fp16x3_variants.txt; grep -E "##|vs kernel|exit" $OUT/run2/fp16x3_variants.txt
PYTHONPATH=/tmp/site:$PWD/src timeout 110 python3 benchmarks/so2_peers.py --shapes 647000:3:32 --rounds 2 \
  --deepmd-tiles h20 --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 2>&1 \
  | grep -v Warn | tail -14 > $OUT/run2/peers.txt
tail -14 $OUT/run2/peers.txt
