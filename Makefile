# `make check` and `make test` build the pinned virtual environment on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# `make test` runs the suite in JOBS pytest-xdist workers: one a core, at most 8 (each worker
# imports torch; CI's 2 cores run 2). JOBS=0 runs it in this process.
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 8 ] && n=8; echo $$n)

.PHONY: check test venv clean

$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

venv: $(STAMP)

check: $(STAMP)
	$(VENV)/bin/tilefuse check $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -q -n $(JOBS) $(ARGS)

clean:
	rm -rf $(VENV) tilefuse-report .pytest_cache
