"""The parts of tuning only a GPU can check: the CUDA timer and a real sweep (skipped on CPU)."""

import statistics

import pytest
import torch

from tilefuse import tuning
from tilefuse.ops.dyt.configs import DyTProblem
from tilefuse.tuning.sweep import REJECTED, SKIPPED, TIMED
from tilefuse.tuning.timing import CudaTimer

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("graph_below_s", [1.0, 0.0], ids=["graph", "eager"])
def test_cuda_timer_measures_a_plausible_copy_bandwidth(graph_below_s):
    n = 1 << 22
    timer = CudaTimer(torch.device("cuda"), graph_below_s=graph_below_s)
    buffers = [torch.randn(n, device="cuda") for _ in range(timer.buffers(4 * n))]
    assert 4 * n * len(buffers) > torch.cuda.get_device_properties(0).L2_cache_size
    sample = timer.prepare("clone", lambda i: buffers[i].clone(), len(buffers))
    seconds = statistics.median(sample() for _ in range(5))
    bandwidth = 2 * 4 * n / seconds        # read + write
    assert 1e11 < bandwidth < 2e13, f"{bandwidth / 1e9:.0f} GB/s"


def test_cuda_timer_settles_untimed_before_each_sample():
    """settle_s: each sample runs the step for about that long before its timed repetitions,
    and the untimed calls stay out of the sample (it still measures one call)."""
    n = 1 << 22
    src = torch.randn(n, device="cuda")
    calls = []

    def call(i):
        calls.append(i)
        return src.clone()

    plain = CudaTimer(torch.device("cuda"), graph_below_s=0.0, min_sample_s=2e-3, warmup=1)
    settled = CudaTimer(torch.device("cuda"), graph_below_s=0.0, min_sample_s=2e-3, warmup=1, settle_s=0.05)
    sample_plain = plain.prepare("clone", call, 1)
    before = len(calls)
    t_plain = statistics.median(sample_plain() for _ in range(5))
    per_sample_plain = (len(calls) - before) / 5
    sample_settled = settled.prepare("clone", call, 1)
    before = len(calls)
    t_settled = statistics.median(sample_settled() for _ in range(5))
    per_sample_settled = (len(calls) - before) / 5
    assert per_sample_settled > 5 * per_sample_plain   # 50 ms of settling against 2 ms samples
    assert 0.5 < t_settled / t_plain < 2.0              # per call either way


def test_real_sweep_of_a_small_dyt_key(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", str(tmp_path))
    tuning.reload()
    try:
        problem = DyTProblem("bwd", 16384, 256, 2, False)
        result = tuning.sweep_key("dyt", problem, rounds=3)
        assert not result.with_status(REJECTED), [c.reason for c in result.with_status(REJECTED)]
        timed = result.with_status(TIMED)
        assert len(timed) + len(result.with_status(SKIPPED)) == len(result.candidates) > 0
        assert all(0.1 < c.speedup < 10 for c in timed), [(c.name, c.speedup) for c in timed]
        assert tuning.is_covered("dyt", problem)
    finally:
        tuning.reload()
