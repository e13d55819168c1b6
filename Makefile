# make demo : a real local CPU sweep of the tiny model on 4 gloo ranks (README command 1)
# make test : the whole test suite (README command 2; what CI runs)
PY ?= python3
VENV ?= .venv
# A machine without torch gets this CPU-capable release; a machine whose venv already has torch >= 2.6 (a GPU
# cluster: VENV_FLAGS=--system-site-packages) keeps it. Nothing here ever pulls a CUDA build onto a CPU box.
TORCH_VERSION ?= 2.13.0
VENV_FLAGS ?=
STAMP := $(VENV)/.autotune-installed
BIN := $(VENV)/bin

.PHONY: venv demo test test-fast clean-demo

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV_FLAGS) $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "torch==$(TORCH_VERSION)"
	$(BIN)/python -m pip install -q -e ".[ray,test]"
	touch $@

venv: $(STAMP)

demo: venv
	$(BIN)/autotune sweep --gpus 4 experiment=demo --sweep-id demo --resume-if-exists
	$(BIN)/autotune report results/demo --plots
	$(BIN)/autotune export results/demo --best -o results/demo/best.yaml

test: venv
	$(BIN)/python -m pytest -x -q tests

test-fast: venv
	$(BIN)/python -m pytest -x -q tests/unit
