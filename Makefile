# Entry points. Every target creates the virtual environment first if it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SUPERSET_PORT ?= 8088
# QUIET=1: the install and the build print their steps and failures only (uv, pip and dbt quiet).
QUIET ?=
QUIET_FLAG := $(if $(QUIET),--quiet)
# FORCE=1: `make warehouse` rebuilds even when the published release is up to date.
FORCE ?=

.PHONY: help warehouse check test test-e2e docs report superset calibrate calibrate-clusters bench bench-compare clean

## Show the targets and what each one does.
help:
	@awk '/^## /{doc = doc (doc ? " " : "") substr($$0, 4); next} /^[a-z0-9-]+:/{if (doc) printf "  make %-13s %s\n", substr($$1, 1, length($$1) - 1), doc} {doc = ""}' $(MAKEFILE_LIST)

# The environment, with the system Python only: .venv holding exactly what requirements.lock pins,
# installed by uv (pinned there too; pip when uv cannot be installed, saying why), and this
# project editable (`pip install --no-deps -e .` semantics), each step announced with how far it
# is (python/infant_mortality/tools/install_env.py). The activate script also exports
# DBT_PROFILES_DIR, so `source .venv/bin/activate && dbt build` finds the committed profile from
# the repository root with no flag.
$(STAMP): requirements.lock pyproject.toml
	@$(PYTHON) python/infant_mortality/tools/install_env.py --venv $(VENV) $(QUIET_FLAG)
	@touch $(STAMP)

## Build and test the warehouse on the bundled data; publish warehouse/infant_mortality.duckdb, its Parquet files and the GeoPackage as one release.
## Every step says what it does and how far it is; QUIET=1 prints only the steps and the summary.
## Nothing to do when the release was built from the same sources and is intact; FORCE=1 rebuilds.
warehouse: $(STAMP)
	$(BIN)/python -m infant_mortality.publish $(QUIET_FLAG) $(if $(FORCE),,--if-changed)

## The whole test suite, as CI runs it (builds its own temporary warehouses; needs no `make warehouse`):
## the everyday loop, then the end-to-end group, each one pytest session with one worker per core
## and each test file on one worker; each prints its slowest steps.
check: test test-e2e

## The everyday loop: every test but the end-to-end group (`make check` runs both).
## One room alone: `pytest tests/<room>` (after `dbt build -s tag:<room>` if you changed its models).
test: $(STAMP)
	$(BIN)/pytest -n auto --dist loadfile -m "not e2e" --durations=20

## Only the end-to-end group, marked e2e: a real browser, Superset, the input fuzz, fault
## injection (a damaged input, a bad setting, a killed publish that must stop or be audited), and
## whole user commands on a full build (a hand `dbt build` in a copy of the checkout, `make docs`).
test-e2e: $(STAMP)
	$(BIN)/pytest -n auto --dist loadfile -m e2e --durations=20

## The dbt documentation site, generated offline as static HTML under target/.
docs: $(STAMP)
	$(BIN)/python -m infant_mortality.publish --docs-only

## The HTML report from the published warehouse.
report: $(STAMP)
	$(BIN)/python -m infant_mortality.report

## Apache Superset with the study's dashboard on http://127.0.0.1:8088/ (this machine only; SUPERSET_PORT=... for another), on the
## published warehouse (`make warehouse` first); its own environment in .venv-superset/ (created on the first run).
superset:
	@$(PYTHON) bi/superset/start.py --port $(SUPERSET_PORT)

## The trend rules' error rate and power by simulation on the build's own births (not part of
## `make warehouse`; durations: BENCHMARKS.md): builds the development warehouse without the
## test that reads the old calibration (rerun this after changing a trend rule or var), writes
## seeds/trend_calibration.csv, then publishes marts.fct_trend_calibration.
## Quick run: make calibrate ARGS='--null-replicates 40 --power-replicates 20'.
calibrate: $(STAMP)
	DBT_PROFILES_DIR=profiles $(BIN)/dbt build --quiet --exclude assert_headline_trend_rule_holds_its_size
	$(BIN)/python -m infant_mortality.tools.calibrate --warehouse warehouse/dev/infant_mortality.duckdb $(ARGS)
	$(BIN)/python -m infant_mortality.publish

## The cluster rule's error rate and power by simulation on the build's own births and neighbours
## (not part of `make warehouse`; about 20 min on two cores): builds the development warehouse
## without the test that reads the old calibration (rerun this after changing cluster_fdr_alpha or
## cluster_permutations), writes seeds/cluster_calibration.csv, then publishes
## marts.fct_cluster_calibration. Quick run: make calibrate-clusters ARGS='--null-replicates 40 --power-replicates 20'.
calibrate-clusters: $(STAMP)
	DBT_PROFILES_DIR=profiles $(BIN)/dbt build --quiet --exclude assert_published_cluster_rule_holds_its_level
	$(BIN)/python -m infant_mortality.tools.calibrate_clusters --warehouse warehouse/dev/infant_mortality.duckdb $(ARGS)
	$(BIN)/python -m infant_mortality.publish

## The scale benchmark (not a test). It builds generated national microdata at six sizes and writes
## BENCHMARKS.md and benchmarks/scale.{json,png}; needs ~25 GB of disk (its duration: BENCHMARKS.md).
bench: $(STAMP)
	$(BIN)/pip install --quiet -r requirements-bench.lock
	$(BIN)/python benchmarks/bench.py

## The warehouse against an analyst's pandas and DuckDB scripts (not a test): whole processes in turns,
## medians and ratios, each whole and above dbt's no-op floor (a `dbt ls` timed in the same turns);
## writes benchmarks/compare.json and a section of BENCHMARKS.md.
## Quick run: make bench-compare ARGS='--repeat 1 --scale 0.25' (or --cases bundled).
bench-compare: $(STAMP)
	$(BIN)/python benchmarks/bench_compare.py $(ARGS)

## Remove dbt's artefacts, the development database and leftovers of interrupted builds (never the published release).
clean:
	rm -rf target logs warehouse/.build warehouse/dev/*.duckdb warehouse/dev/*.duckdb.wal
