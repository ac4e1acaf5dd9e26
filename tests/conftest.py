"""Test set-up: without CUDA the real Triton kernels run in Triton's interpreter.

TRITON_INTERPRET must be set before Triton decorates the kernels, i.e. before the first
tilefuse launcher runs, so it is set here, at collection time.
"""

import os
import tempfile

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

DEVICE = "cuda" if HAS_CUDA else "cpu"

# In pytest-xdist workers (`make test` runs one a core) each worker's intra-op threads share
# the cores with the other workers': more threads than a worker's share only add barriers that
# wait on descheduled threads (see one_intra_op_thread).
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    # the cores this process may run on (as the Makefile's nproc counts them), not the host's
    torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // _WORKERS))

# Tests never read or write a developer's tuning cache: a session-private, empty one.
os.environ["TILEFUSE_CACHE_DIR"] = tempfile.mkdtemp(prefix="tilefuse-test-cache-")


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    # Large shapes take minutes in the interpreter: run them on a GPU, or with TILEFUSE_SLOW=1.
    run_slow = HAS_CUDA or os.environ.get("TILEFUSE_SLOW") == "1"
    skip_slow = pytest.mark.skip(reason="large interpreter run; set TILEFUSE_SLOW=1 (always runs on a GPU)")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip)
        if "slow" in item.keywords and not run_slow:
            item.add_marker(skip_slow)


@pytest.fixture
def device():
    return DEVICE


@pytest.fixture(autouse=True)
def _fresh_level():
    """Each test starts at the default policy (no set_level left over from another test)."""
    import tilefuse
    tilefuse.set_level(None)
    yield
    tilefuse.set_level(None)


@pytest.fixture
def one_intra_op_thread():
    """For tests on tiny tensors: intra-op threads only add barriers, and while another process
    holds a core each barrier waits for a descheduled thread (measured: finite-difference tests
    took 40 s instead of 0.2 s on 2 busy cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def tuning_table(tmp_path, monkeypatch):
    """An empty tuning table of the test's own: its own cache folder and no built-in tables (on
    an H200 the shipped table would otherwise cover some of the tests' keys); runtime
    registrations are dropped afterwards."""
    from tilefuse import tuning
    from tilefuse.tuning import store
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(store, "builtin_dir", lambda: tmp_path / "no-builtin")
    tuning.reload()
    yield
    for name in tuning.family_names():
        tuning.unregister(name)
    tuning.reload()

