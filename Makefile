# The two commands of the README are `make run` and `make test`; the rest are for developers.
SHELL := /bin/bash
PY := .venv/bin/python

.PHONY: run setup test test-full test-smoke lint format bench screenshots openapi migrations-check clean

run:            ## set up everything, seed the demo and start the console on :8000
	@scripts/bootstrap.sh
	@$(PY) manage.py migrate --no-input -v 0
	@$(PY) manage.py demo seed
	@exec $(PY) manage.py up

setup:          ## install Python/npm dependencies, Debian packages (as root) and build the frontend
	@scripts/bootstrap.sh --test

test:           ## the whole suite: production mode on PostgreSQL + Redis, then the embedded smoke subset
	@scripts/bootstrap.sh --test
	@scripts/test.sh

lint:
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	.venv/bin/lint-imports
	$(PY) manage.py makemigrations --check --dry-run
	$(PY) -m mypy

format:
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

bench:          ## benchmarks (not part of `make test`); each prints one JSON line
	@scripts/bootstrap.sh --test
	@scripts/bench.sh

screenshots:    ## 1600×1000 Chromium screenshots of every page per demo account into docs/screenshots/ (not in `make test`)
	@scripts/bootstrap.sh --test
	@$(PY) scripts/screenshots.py

openapi:        ## regenerate the committed OpenAPI snapshot
	$(PY) manage.py spectacular --file docs/openapi.yaml --validate

clean:
	rm -rf var test-artifacts console/web/dist
