# Entry points. Every target creates the virtual environment first if it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: warehouse test docs report bench clean

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.lock
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

## Build the warehouse on the bundled real data and publish warehouse/infant_mortality.duckdb.
warehouse: $(STAMP)
	$(BIN)/python -m infant_mortality.publish

## The whole test suite (builds its own temporary warehouses; needs no `make warehouse`).
test: $(STAMP)
	$(BIN)/pytest

## The dbt documentation site, generated offline as static HTML under target/.
docs: $(STAMP)
	$(BIN)/python -m infant_mortality.publish --docs-only

## The HTML report from the published warehouse.
report: $(STAMP)
	$(BIN)/python -m infant_mortality.report

## The scale benchmark (not a test): builds generated national microdata at six sizes; writes
## BENCHMARKS.md and benchmarks/scale.{json,png}. About 30 minutes on 2 cores; needs ~25 GB of disk.
bench: $(STAMP)
	$(BIN)/pip install --quiet -r requirements-bench.lock
	$(BIN)/python -m infant_mortality.bench

clean:
	rm -rf target logs warehouse/.build warehouse/parquet
