# Two commands do all the set-up on a fresh machine:
#   make repro   create .venv, install the project (CPU torch), run `dvc repro` on params.yaml
#   make test    create .venv, install the project with test extras, run the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip

.PHONY: setup setup-dev repro test bench clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

$(VENV)/.core: $(BIN)/python pyproject.toml requirements/cpu.txt
	$(PIP) install -r requirements/cpu.txt
	$(PIP) install -c requirements/cpu.txt -e .
	touch $@

$(VENV)/.dev: $(VENV)/.core pyproject.toml
	$(PIP) install -c requirements/cpu.txt -e ".[dev,llamacpp]"
	touch $@

setup: $(VENV)/.core
setup-dev: $(VENV)/.dev

repro: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/dvc repro

test: setup-dev
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest $(PYTEST_ARGS)

bench: setup-dev
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m benchmarks

clean-venv:
	rm -rf $(VENV)
