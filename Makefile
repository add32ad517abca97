# The two commands a person types: `make run` and `make test`. Each does its own set-up.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test test-long bench lint typecheck setup services chromium clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
	rm -f $(VENV)/.installed-* && touch $(STAMP)

setup: $(STAMP)

run: setup ## The main job: the CLI demo, then the HTTP service on the embedded SQLite default
	$(BIN)/turnkeeper demo
	$(BIN)/turnkeeper serve --no-auth

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: setup
	$(BIN)/mypy

services: ## Start PostgreSQL and Redis if they are installed and down (tolerates their absence)
	@sh scripts/services.sh

chromium: ## The system Chromium the browser tests drive (installed with apt-get when missing)
	@sh scripts/chromium.sh

test: lint typecheck services chromium ## Lint, type-check and run the whole test suite
	$(BIN)/python -m pytest -q

test-long: setup services ## The model-based test of the public API, long random profile, every backend
	TK_STATEFUL_PROFILE=long $(BIN)/python -m pytest -q tests/promise/test_stateful.py

bench: setup services ## Benchmarks; results go to bench/results/ and the README table
	$(BIN)/python bench/bench_sqlite.py
	$(BIN)/python bench/bench_shared.py
	$(BIN)/python bench/bench_http.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis test-artifacts
