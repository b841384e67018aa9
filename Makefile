# The commands of README.md and CONTRIBUTING.md.
#   make setup   .venv with the pinned Python packages (constraints.txt) + npm ci (Pyodide)
#   make serve   setup, then the site at http://127.0.0.1:8000, rebuilt when an entry changes
#   make check   the quick lane for an entry author (about 30 s): the validator, every entry's
#                examples diagnosed as that entry, signature variants, the scoring rules, coverage
#   make test    every test (what CI runs), on up to 4 cores (pytest-xdist; tests/conftest.py says how)
#   make build   the site into site/, as CI builds it (fails on any entry problem)
#   make wheel   the faildex wheel into dist/ (setuptools, offline, the index inside)

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export NO_MKDOCS_2_WARNING := 1

.PHONY: setup serve check test build wheel bench-site clean

setup: $(VENV)/.faildex-setup node_modules/.faildex-setup

$(VENV)/.faildex-setup: pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "faildex needs Python 3.11 or newer: make setup PYTHON=python3.11"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[site,test,fast]'
	touch $@

node_modules/.faildex-setup: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

serve: setup
	$(BIN)/mkdocs serve -a 127.0.0.1:8000

check: setup
	$(BIN)/faildex validate
	$(BIN)/pytest -q tests/test_examples.py tests/test_variants.py tests/test_rules.py tests/test_coverage.py

test: setup
	$(BIN)/faildex validate
	$(BIN)/pytest -q -n auto --maxprocesses 4 --durations=15

build: setup
	$(BIN)/mkdocs build --strict

wheel: setup
	$(BIN)/python -m generator.wheel --out dist

bench-site: setup
	$(BIN)/python bench/site.py --entries 100 1000 3000

clean:
	rm -rf site .cache dist
