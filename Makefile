# Set-up and the project's commands. Every target creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEMO_OUT ?= runs/demo

.PHONY: demo test lint bench system-deps clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# pip compiles the installed files one at a time (38 of its 101 s for torch's 5.5 GB); compileall
# does it on every core (20 s on two), and the bytecode stays: without it each start of Python
# recompiles torch's modules where PYTHONDONTWRITEBYTECODE is set (12 s instead of 5 s to import).
# As with pip, a file that does not compile is skipped (torch ships one in Python 3.12 syntax).
INSTALL = $(PY) -m pip install --quiet --no-compile
COMPILE = $(PY) -m compileall -q -j 0 $(VENV)/lib > /dev/null || true

$(VENV)/.installed: pyproject.toml | $(PY)
	$(INSTALL) -e .
	$(COMPILE)
	touch $@

# The tests use the optional peers too (.[compare]: scikit-learn, pandas; .[distributed]: Dask;
# .[fast]: numba); without them those tests skip.
$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(INSTALL) -e '.[dev,compare,distributed,fast]'
	$(COMPILE)
	touch $@ $(VENV)/.installed

# Debian packages the tests use (Fashion-MNIST). Installed when running as root; otherwise the
# tests that need them skip and say what to install.
system-deps:
	@if dpkg -s dataset-fashion-mnist >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist; \
	else echo "note: dataset-fashion-mnist is not installed (sudo apt-get install dataset-fashion-mnist); the tests that need it will skip"; fi

demo: $(VENV)/.installed
	$(VENV)/bin/mitool toy demo --out $(DEMO_OUT)

# One worker per core (pytest-xdist): on the 2-core CI the tests took 5 min, against 9-17 min in one
# process. The tests size torch's threads to their share of the cores (tests/conftest.py).
test: $(VENV)/.installed-dev system-deps
	$(PY) -m pytest -q -n auto

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(VENV)/.installed-dev
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) runs build *.egg-info
