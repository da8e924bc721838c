# Set-up and the project's commands. Every target creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEMO_OUT ?= runs/demo

.PHONY: demo test lint bench system-deps clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[dev]'
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

test: $(VENV)/.installed-dev system-deps
	$(PY) -m pytest -q

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(VENV)/.installed-dev
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) runs build *.egg-info
