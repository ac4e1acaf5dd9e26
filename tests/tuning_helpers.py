"""Helpers for tuning tests (importable by worker processes: no side effects at import)."""


class FakeTimer:
    """A sweep timer for CPU tests: ``fast_s`` per call for the choice named ``fast``, 1 s for
    every other choice."""

    def __init__(self, fast, fast_s=0.9):
        self.fast, self.fast_s = fast, fast_s

    def buffers(self, input_bytes):
        return 2

    def prepare(self, label, call, n_buffers):
        return lambda: self.fast_s if label == self.fast else 1.0


def so2_candidates(monkeypatch, fused=(), relay=(), compose=()):
    """Restrict the so2 sweep's candidates of each route to these configs (None: the real ones)."""
    from tilefuse.ops.so2_mixing_stack import tune as so2_tune
    for name, configs in (("fused_candidates", fused), ("relay_candidates", relay), ("compose_candidates", compose)):
        if configs is not None:
            monkeypatch.setattr(so2_tune, name, lambda lmax, cf, configs=tuple(configs): list(configs))


class LaunchSpy:
    """Wraps a Triton kernel (``kernel[grid](...)``), recording one keyword launch argument of
    each launch in ``seen``."""

    def __init__(self, kernel, field):
        self.kernel, self.field, self.seen = kernel, field, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.seen.append(kwargs[self.field])
            return self.kernel[grid](*args, **kwargs)
        return launch


def perturb_so2_runs(monkeypatch, applies, perturb):
    """The so2 sweep's runs with ``perturb(name, tensor, inputs)`` replacing each output of
    every choice for which ``applies(choice)`` (a broken candidate the sweep must reject)."""
    from tilefuse.ops.so2_mixing_stack import tune as so2_tune
    real_run = so2_tune.So2Family.run

    def run(self, problem, choice, inputs):
        out = real_run(self, problem, choice, inputs)
        return {name: perturb(name, t, inputs) for name, t in out.items()} if applies(choice) else out

    monkeypatch.setattr(so2_tune.So2Family, "run", run)


def level3_record(key, config, edges=None, weight_grads=True):
    """A passed so2 level-3 validation record of ``config`` at ``key`` as So2Family.validate
    writes it (what So2Family.check_entry accepts): its key and config, every output's errors
    within the limit, the full range sets, ``edges`` (default the minimum it accepts)."""
    from tilefuse.ops.so2_mixing_stack import tune as so2_tune
    names = (*so2_tune.LEVEL3_OUTPUTS, *(so2_tune.WEIGHT_GRADS if weight_grads else ()))
    return {"passed": True, "key": key, "config": config.name,
            "edges": so2_tune.LEVEL3_MIN_EDGES if edges is None else edges, "limit_ratio": 1.5,
            "errors": {n: {"error": 1.0e-7, "exact_error": 1.2e-7, "ratio": 0.833} for n in names},
            "range_sets": sorted(so2_tune.RANGE_SETS), **({"weight_grads": True} if weight_grads else {})}
