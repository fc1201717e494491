# The two entry points of README.md. Both work on a fresh machine with Python >= 3.10.
VENV ?= .venv

.PHONY: demo test setup setup-dev lint

setup:
	bash scripts/setup.sh run

setup-dev:
	bash scripts/setup.sh dev

## demo: set up and run the probe on the embedded SmolLM2 and the built-in demo set (offline, CPU)
demo: setup
	$(VENV)/bin/userturn run

## test: set up with test dependencies and run the whole test suite
test: setup-dev
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider

lint:
	$(VENV)/bin/ruff check src tests benchmarks
