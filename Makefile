# The two commands a newcomer needs: `make demo` and `make test`.
# Everything else (the Python venv, maturin, pytest) is installed here, into .venv/.

SHELL := /bin/bash
CARGO ?= cargo
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python

.PHONY: test demo lint test-rust test-c test-python venv clean

test: lint test-rust test-c test-python

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# The Python extension crate is tested through pytest (its lib needs libpython).
test-rust:
	$(CARGO) test --workspace --exclude inboxlog-python

# C and C++ hosts against the built library (section owned by the C ABI).
test-c:
	@echo "C hosts: coming with the C ABI"

venv: $(VENV)/.ready

$(VENV)/.ready: python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet "maturin>=1.5,<2" "pytest>=8" "hypothesis>=6" "mypy>=1.10"
	touch $@

# Python package and its tests (section owned by the Python layer).
test-python:
	@echo "Python tests: coming with the Python package"

demo:
	@echo "make demo: coming with the Python package (issue: Python package)"

clean:
	$(CARGO) clean
	rm -rf $(VENV) demo-sessions tests/build
