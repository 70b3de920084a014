# mmlocat developer entry points. Each target sets up .venv first (idempotent).
VENV ?= .venv
PY := $(VENV)/bin/python
LINT_PATHS := mmlocat tools tests configs setup.py
PYTEST_ARGS ?=

.PHONY: setup lint test test-fast demo clean-venv

setup:
	bash tools/setup_env.sh $(VENV)

lint: setup
	$(PY) -m flake8 $(LINT_PATHS)
	$(PY) -m isort --check-only --diff $(LINT_PATHS)
	$(PY) -m yapf --diff --recursive $(LINT_PATHS)

# pytest exits 5 when it collects no test: reported, and a failure here
# (a green run must have run the suite). `test` runs every tier (CI runs
# it) and lists the 15 slowest tests; `test-fast` leaves out the tests
# marked e2e, env or slow (setup.cfg) and no lint: the tier to run while
# working (CONTRIBUTING.md). JOBS pytest processes (pytest-xdist) share
# the tests file by file, one thread each; JOBS=1: one process, 2 threads.
FAST_TIER := not e2e and not env and not slow
JOBS ?= 2
ifeq ($(JOBS),1)
XDIST :=
THREADS := 2
else
XDIST := -n $(JOBS) --dist loadfile
THREADS := 1
endif

define run_pytest
	@OMP_NUM_THREADS=$${OMP_NUM_THREADS:-$(THREADS)} PATH="$(abspath $(VENV))/bin:$$PATH" \
		$(PY) -m pytest tests -q $(XDIST) $(1) $(PYTEST_ARGS); rc=$$?; \
		if [ $$rc -eq 5 ]; then echo "make $@: pytest collected no tests"; fi; \
		exit $$rc
endef

test: setup lint
	$(call run_pytest,--durations=15)

test-fast: setup
	$(call run_pytest,-m "$(FAST_TIER)")

demo: setup
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) tools/demo.py

clean-venv:
	rm -rf $(VENV)
