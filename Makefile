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

.PHONY: venv demo test test-fast lint clean-demo

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV_FLAGS) $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "torch==$(TORCH_VERSION)"
	$(BIN)/python -m pip install -q -e ".[ray,test]"
	# torchao for plan.fp8 (bench_model float8 training and its tests): --no-deps, it must never pull a torch
	$(BIN)/python -m pip install -q --no-deps "torchao==0.18.0"
	# megatron-core for the megatron profile's probe (autotune/validation/megatron_probe.py,
	# tests/unit/test_frameworks_megatron_probe.py): 0.16.1 is the newest on the index; --no-deps, it must never pull
	# a torch (its import needs only numpy and packaging, already here)
	$(BIN)/python -m pip install -q --no-deps "megatron-core==0.16.1"
	# Schema validators for `autotune export` (tests/unit/test_interop_schemas.py; a missing one is an unexpected skip: fails):
	# --no-deps so their torch pins never touch this venv's torch; "-" = a failed install is not a failed venv.
	# tokenizers torchdata tensorboard datasets triton: torchtitan imports them at import time (its memory probe,
	# autotune/validation/torchtitan_probe.py, needs them; tests/unit/test_torchtitan_probe.py fails without them);
	# triton is a ~285 MB wheel, installed --no-deps.
	-$(BIN)/python -m pip install -q tyro hjson py-cpuinfo pydantic msgpack einops tokenizers torchdata tensorboard datasets && \
	  $(BIN)/python -m pip install -q --no-deps triton && \
	  $(BIN)/python -m pip install -q --no-deps torchtitan==0.2.2 && \
	  DS_BUILD_OPS=0 $(BIN)/python -m pip install -q --no-deps --no-build-isolation deepspeed==0.19.8
	touch $@

venv: $(STAMP)

demo: venv
	# --strategy random: the demo shows the space (5 of the 4-GPU dp/tp/pp/cp layouts, 4 TP x PP heatmap cells);
	# topk would run the 8 predicted best, all dp4 or dp2.cp2 on the cpu preset (tests/unit/test_demo_space.py)
	$(BIN)/autotune sweep --gpus 4 experiment=demo --strategy random --sweep-id demo --resume-if-exists
	$(BIN)/autotune report results/demo --plots
	$(BIN)/autotune export results/demo --best -o results/demo/best.yaml

test: venv
	# two workers on the 2-core CI box: much of the suite waits on daemons and process start-up; tests sharing a
	# session resource (SLURM, Ray, the distributed LayoutPool) stay on one worker (tests/xdist_groups.py)
	$(BIN)/python -m pytest -x -q -n 2 --dist loadgroup --durations=25 tests

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test-fast: venv
	$(BIN)/python -m pytest -x -q tests/unit

clean-demo:  # what `make demo` wrote
	rm -rf results/demo
