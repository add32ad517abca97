# The two commands a person types: `make run` and `make test`. Each does its own set-up.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test bench lint typecheck setup clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
	rm -f $(VENV)/.installed-* && touch $(STAMP)

setup: $(STAMP)

run: setup ## The main job: a guided demo of the CLI on the embedded SQLite default
	$(BIN)/turnkeeper demo

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: setup
	$(BIN)/mypy

test: lint typecheck ## Lint, type-check and run the whole test suite
	$(BIN)/python -m pytest -q

bench: setup ## Benchmarks; results go to bench/results/ and the README table
	$(BIN)/python bench/bench_sqlite.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
