# H200 run 4 of 2026-11-29-h200-c (see this folder's README.md), on two GPUs: the dyt keys whose
# heuristic changed with the per-width fit (forced re-sweeps: the heuristic is each sweep's
# baseline, so a winner within 5% of it meets issue 3's target) and the three grid keys not
# swept before; then the grouped whole steps (GPU 0) beside the quantizer and dyt benchmarks
# (GPU 1).
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
nvidia-smi -L; python3 -c "import torch,triton;print(torch.__version__,triton.__version__)"
tune() { timeout "$1" python3 -m tilefuse.cli tune --op dyt --force --no-progress --devices 0,1 "${@:2}"; }
tune 70 --dtype bf16 --pass fwd --shape 2097152x32 --shape 524288x128 --shape 131072x512 --shape 32768x2048 \
  --shape 16384x4096 > $OUT/tune-fwd-bf16.txt 2>&1
tune 150 --dtype fp32 --pass bwd --shape 4194304x16 --shape 2097152x32 --shape 1048576x64 --shape 262144x256 \
  --shape 131072x512 --shape 65536x1024 --shape 32768x2048 --shape 16384x4096 > $OUT/tune-bwd-fp32.txt 2>&1
tune 100 --dtype bf16 --pass bwd --shape 2097152x32 --shape 524288x128 --shape 131072x512 --shape 32768x2048 \
  --shape 16384x4096 > $OUT/tune-bwd-bf16.txt 2>&1
python3 -m tilefuse.cli tune --export-builtin $OUT > /dev/null 2>&1
(CUDA_VISIBLE_DEVICES=0 timeout 170 python3 benchmarks/grouped_profile_fp8.py --steps-only --shapes 1,2,3 \
  > $OUT/grouped-steps.txt 2>&1) &
(CUDA_VISIBLE_DEVICES=1 timeout 90 python3 benchmarks/quant_bench.py > $OUT/quant.txt 2>&1;
 CUDA_VISIBLE_DEVICES=1 timeout 80 python3 -m tilefuse.cli bench --quick --no-progress --ops dyt --out $OUT/dyt \
  > $OUT/bench-dyt.txt 2>&1) &
wait
grep -h "^swept" $OUT/tune-*.txt; cat $OUT/grouped-steps.txt; tail -25 $OUT/quant.txt; tail -5 $OUT/bench-dyt.txt
