# The two commands a person types: `make run` and `make test`. Each installs what it needs:
# `make run` only the service (the `server` extra), `make test` the test tooling as well.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HASH   := $(shell cat pyproject.toml | cksum | cut -d' ' -f1)
RUN_STAMP  := $(VENV)/.installed-run-$(HASH)
TEST_STAMP := $(VENV)/.installed-test-$(HASH)
BENCH_STAMP := $(VENV)/.installed-bench-$(HASH)
# Packages are installed by uv, which pip installs into the virtualenv first (uv>=0.5, 38 MB): it
# sets up the test tooling in about 15 s where pip took 47-65 s on this machine, most of that
# pip weighing every file PyPI lists for each of the 140 packages (`make run`'s 38: 7 s, not
# 18 s). It compiles the packages' bytecode, on every core, as pip did on one.
UV      := $(BIN)/uv
INSTALL := $(UV) pip install --quiet --python $(BIN)/python --compile-bytecode

PORT ?= 8000
DB   ?= sqlite:///$(CURDIR)/demo.db
TEST_WORKERS ?= 5

.PHONY: run test test-long bench lint typecheck docs setup services chromium clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(UV): | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "uv>=0.5"

$(RUN_STAMP): pyproject.toml | $(UV)
	$(INSTALL) -e ".[server]"
	rm -f $(VENV)/.installed-run-* && touch $(RUN_STAMP)

$(TEST_STAMP): pyproject.toml | $(UV)
	$(INSTALL) -e ".[test]"
	rm -f $(VENV)/.installed-* && touch $(TEST_STAMP) $(RUN_STAMP)

setup: $(TEST_STAMP)

# The benchmarks' own packages (the `bench` extra: the anchors' libraries, matplotlib), on top of
# the test set-up; `make test` and `make run` never install them.
$(BENCH_STAMP): $(TEST_STAMP)
	$(INSTALL) -e ".[test,bench]"
	touch $(BENCH_STAMP)

run: $(RUN_STAMP) ## The demo in its own database ($(DB)), then the service on it: make run PORT=9000
	$(BIN)/turnkeeper demo --db $(DB)
	$(BIN)/turnkeeper serve --no-auth --db $(DB) --port $(PORT)

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: setup
	$(BIN)/mypy

docs: setup ## The documentation site in site/; --strict: a broken link or anchor fails the build
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

services: ## Start PostgreSQL and Redis if they are installed and down (tolerates their absence)
	@sh scripts/services.sh

chromium: ## The system Chromium the browser tests drive (installed with apt-get when missing)
	@sh scripts/chromium.sh

# The suite runs on TEST_WORKERS processes (pytest-xdist; `make test TEST_WORKERS=1` for one).
# Five, on two cores: most of a test's time is spent waiting on the servers and subprocesses it
# starts. Four workers took 9:17 where two took 12:00 on this machine (same suite); on fresh
# clones of one commit, `CI=true make test` took 8:04 and 8:02 with four workers and 7:42 with
# five, run between those two (four left the cores 15% idle). The machine is shared: on a
# slower day the same kind of run took 9:26-10:00 (and the code before uv 12:07).
# Bytecode is written for the run even where PYTHONDONTWRITEBYTECODE is set: the tests start
# `turnkeeper` as a subprocess hundreds of times, and each would compile the package anew.
# The checks (lint, typecheck, docs) run at the same time as the tests, one after another in
# the background (the tests wait on servers and subprocesses often enough to leave them the
# CPU): their output is kept in $(CHECKS_LOG) and printed once the tests have ended, and
# `make test` fails when the tests or any check failed.
CHECKS_LOG := $(VENV)/checks.log
test: setup services chromium ## Lint, type-check, build the docs, run the tests
	@$(MAKE) --no-print-directory --keep-going lint typecheck docs >$(CHECKS_LOG) 2>&1 & \
	checks=$$!; \
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --durations=30; tests=$$?; \
	wait $$checks; checked=$$?; \
	echo "--- lint, typecheck, docs ---"; cat $(CHECKS_LOG); \
	if [ $$checked -ne 0 ]; then echo "make test: a check failed (see above)"; fi; \
	[ $$tests -eq 0 ] && [ $$checked -eq 0 ]

test-long: setup services ## The model-based test of the public API, long random profile, every backend
	TK_STATEFUL_PROFILE=long $(BIN)/python -m pytest -q tests/promise/test_stateful.py

bench: $(BENCH_STAMP) services ## Benchmarks; results go to bench/results/ and docs/benchmarks.md
	$(BIN)/python bench/bench_sqlite.py
	$(BIN)/python bench/bench_shared.py
	$(BIN)/python bench/bench_replicas.py
	$(BIN)/python bench/bench_http.py --workers 1,2
	$(BIN)/python bench/bench_http.py --seconds 15 --workers 1,2,4 --name http-scaling
	$(BIN)/python bench/layers_http.py
	$(BIN)/python bench/bench_tracing.py
	$(BIN)/python bench/bench_windows.py

clean:
	rm -f demo.db demo.db-wal demo.db-shm
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis test-artifacts site
