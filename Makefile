# mmlocat developer entry points. Each target sets up .venv first (idempotent).
VENV ?= .venv
PY := $(VENV)/bin/python
LINT_PATHS := mmlocat tools tests configs setup.py
PYTEST_ARGS ?=

.PHONY: setup lint test demo clean-venv

setup:
	bash tools/setup_env.sh $(VENV)

lint: setup
	$(PY) -m flake8 $(LINT_PATHS)
	$(PY) -m isort --check-only --diff $(LINT_PATHS)
	$(PY) -m yapf --diff --recursive $(LINT_PATHS)

# pytest exits 5 when it collects no test: reported, and a failure here
# (a green run must have run the suite).
test: setup lint
	@OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} PATH="$(abspath $(VENV))/bin:$$PATH" \
		$(PY) -m pytest tests -q $(PYTEST_ARGS); rc=$$?; \
		if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests"; fi; \
		exit $$rc

demo: setup
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) tools/demo.py

clean-venv:
	rm -rf $(VENV)
