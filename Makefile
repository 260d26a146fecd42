# Two commands set everything up on a fresh machine (each creates .venv on first use):
#   make demo   - factorize a small planted matrix with a local annealer; print U, V, error
#   make test   - lint, type-check, run the whole test suite and build the API reference
#   make docs   - the API reference alone (build/docs/index.html; warnings are errors)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test docs bench clean clean-kernels

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/python examples/quickstart.py

test: $(VENV)/.installed
	$(BIN)/ruff check bmfdsl models backends tests examples bench
	$(BIN)/ruff format --check --quiet bmfdsl models backends tests examples bench
	$(BIN)/mypy bmfdsl models backends
	$(BIN)/pytest
	$(BIN)/mkdocs build --strict --quiet

docs: $(VENV)/.installed
	$(BIN)/mkdocs build --strict

bench: $(VENV)/.installed
	$(BIN)/python bench/bench_compile.py

clean: clean-kernels
	rm -rf $(VENV) build dist *.egg-info

# numba keys a cached kernel on its own file only: a kernel that calls one from another file
# keeps the old callee's code until its cache goes
clean-kernels:
	find bmfdsl backends models -name '*.nbi' -delete -o -name '*.nbc' -delete
