# Two commands on a fresh machine: `make run` (the whole local stack) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup run test test-fast bench clean

setup:
	@bash scripts/bootstrap.sh

run: setup
	$(PY) -m ragctl.cli up

test: setup
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not e2e"

clean:
	rm -rf var .pytest_cache

bench: setup
	$(PY) bench/chat_latency.py
