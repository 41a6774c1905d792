# Two commands do all the set-up on a fresh machine:
#   make repro   create .venv, install the project (CPU torch), run `dvc repro` on params.yaml
#   make test    create .venv, install the project with test extras, run the test suite (2 workers)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip

.PHONY: setup setup-dev repro test experiment bench clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

$(VENV)/.core: $(BIN)/python pyproject.toml requirements/cpu.txt
	$(PIP) install -r requirements/cpu.txt
	$(PIP) install -c requirements/cpu.txt -e .
	touch $@

# llama.cpp compiled for a baseline x86-64-v3 CPU (AVX2, FMA, F16C), not for this machine: the default
# -march=native build of llama-cpp-python crashes (SIGSEGV in decode) on CPUs with AVX-512 / AMX.
# --no-cache-dir: pip's wheel cache is keyed by version, not by CMAKE_ARGS, so it would hand back an
# old native wheel; --force-reinstall: replaces a native build already in the venv (no marker yet).
LLAMACPP_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF
LLAMACPP_SPEC       := llama-cpp-python>=0.3.7

$(VENV)/.llamacpp-portable: $(VENV)/.core
	CMAKE_ARGS="$(LLAMACPP_CMAKE_ARGS)" $(PIP) install --no-cache-dir --no-binary llama-cpp-python \
		--force-reinstall --no-deps -c requirements/cpu.txt "$(LLAMACPP_SPEC)"
	touch $@

$(VENV)/.dev: $(VENV)/.core $(VENV)/.llamacpp-portable pyproject.toml
	CMAKE_ARGS="$(LLAMACPP_CMAKE_ARGS)" $(PIP) install -c requirements/cpu.txt -e ".[dev,llamacpp]"
	touch $@

setup: $(VENV)/.core
setup-dev: $(VENV)/.dev

repro: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/dvc repro

# TEST_WORKERS: pytest-xdist processes (tests/conftest.py keeps each module and each shared DAG on one)
TEST_WORKERS ?= 2
test: setup-dev
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# One real-answers experiment through the one DAG: make experiment NAME=routellm_gsm8k
experiment:
	@test -n "$(NAME)" -a -f "experiments/$(NAME)/params.yaml" || { echo "make experiment NAME=<one of: $$(ls experiments)>"; exit 2; }
	$(MAKE) setup
	cd experiments/$(NAME) && PATH="$(abspath $(BIN)):$$PATH" $(abspath $(BIN))/dvc repro

bench: setup-dev
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m benchmarks

clean-venv:
	rm -rf $(VENV)
