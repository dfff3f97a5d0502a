"""Shared fixtures: real dbt builds into temporary DuckDB files.

Building runs the real dbt CLI from the repository root, exactly as a user would, with
IMR_DUCKDB_PATH pointing at a temporary file so the published warehouse is never touched.
"""

from __future__ import annotations

import ast
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DBT = Path(sys.executable).with_name("dbt")


def run_dbt(args: list[str], duckdb_path: Path, dbt_vars: dict | None = None, check: bool = True):
    """Run `dbt <args>` against `duckdb_path`; return the completed process. A `build` leaves
    out the unit tests, as `make warehouse` does: they test the models' code, not the data, and
    run once per input mode (test_warehouse_bundled.py, test_multi_region.py)."""
    if args[:1] == ["build"]:
        args = [*args, "--exclude-resource-type", "unit_test"]
    command = [str(DBT), *args, "--profiles-dir", "profiles"]
    if dbt_vars:
        command += ["--vars", json.dumps(dbt_vars)]
    target = duckdb_path.parent / "dbt_target"
    # Each build gets its own target dir so parallel or repeated builds do not share state.
    env = {**os.environ, "IMR_DUCKDB_PATH": _through_worker_slot(duckdb_path, dbt_vars, target),
           "DBT_TARGET_PATH": str(target), "DBT_LOG_PATH": str(duckdb_path.parent / "dbt_logs")}
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    _keep_parse(target, duckdb_path, dbt_vars)
    if check and result.returncode != 0:
        raise AssertionError(f"dbt {' '.join(args)} failed:\n{result.stdout[-6000:]}\n{result.stderr[-3000:]}")
    return result


# dbt parses the whole project again (about 15 s of CPU) unless it finds the saved parse of a run
# with the same command-line vars and the same connection details, the warehouse's path
# included. So each pytest-xdist worker gives dbt one path for every warehouse it builds: a
# symlink (<run>/shared/dbt_slots/<worker>/db) pointed at the build's own folder just before dbt
# starts, and the saved parse of each (vars, file name) is kept there and handed to the next
# build with the same ones. dbt still checks every file it parsed: the parse is reused only
# when nothing changed, so a test sees exactly what a fresh parse would give.
WORKER_SLOT: Path | None = None   # set for the run by the `dbt_worker_slot` fixture


def _saved_parse(duckdb_path: Path, dbt_vars: dict | None) -> Path:
    """Where this worker keeps the parse of builds with these vars and this file name."""
    text = json.dumps([duckdb_path.name, dbt_vars or {}], sort_keys=True)
    return WORKER_SLOT / "parses" / f"{hashlib.sha256(text.encode()).hexdigest()[:24]}.msgpack"


def _through_worker_slot(duckdb_path: Path, dbt_vars: dict | None, target: Path) -> str:
    """The path dbt is given for `duckdb_path` (through this worker's slot), with the saved
    parse of the same vars put in `target`; outside pytest, the path itself."""
    duckdb_path.parent.mkdir(parents=True, exist_ok=True)
    if WORKER_SLOT is None:
        return str(duckdb_path)
    link, fresh = WORKER_SLOT / "db", WORKER_SLOT / "db.new"
    fresh.unlink(missing_ok=True)
    fresh.symlink_to(duckdb_path.parent.resolve())
    os.replace(fresh, link)
    saved = _saved_parse(duckdb_path, dbt_vars)
    if saved.exists() and not (target / "partial_parse.msgpack").exists():
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(saved, target / "partial_parse.msgpack")
    return str(link / duckdb_path.name)


def _keep_parse(target: Path, duckdb_path: Path, dbt_vars: dict | None) -> None:
    made = target / "partial_parse.msgpack"
    if WORKER_SLOT is None or not made.exists():
        return
    saved = _saved_parse(duckdb_path, dbt_vars)
    saved.parent.mkdir(exist_ok=True)
    shutil.copyfile(made, saved)


@pytest.fixture(scope="session", autouse=True)
def dbt_worker_slot(tmp_path_factory) -> Iterator[Path]:
    """This worker's slot for run_dbt (above): one per worker, as a worker runs one test at a time."""
    global WORKER_SLOT
    WORKER_SLOT = run_shared_folder(tmp_path_factory) / "dbt_slots" / os.environ.get("PYTEST_XDIST_WORKER", "main")
    WORKER_SLOT.mkdir(parents=True, exist_ok=True)
    yield WORKER_SLOT
    WORKER_SLOT = None


@pytest.fixture
def tmp_path(request, dbt_worker_slot) -> Iterator[Path]:
    """Each test's own empty folder, at the same path for every test of a worker
    (<slot>/test), so that the builds of two tests whose vars name files the same way in their
    folders reuse one dbt parse (above). pytest's tmp_path differs per test, and so would every
    path var. Afterwards the folder is moved aside (<slot>/kept/<n>-<test>), kept as pytest keeps
    its own."""
    folder = dbt_worker_slot / "test"
    if folder.exists():  # a test interrupted before its teardown
        _move_aside(folder, "interrupted")
    folder.mkdir()
    yield folder
    _move_aside(folder, request.node.name)


def _move_aside(folder: Path, name: str) -> None:
    kept = folder.parent / "kept"
    kept.mkdir(exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:80]
    folder.rename(kept / f"{sum(1 for _ in kept.iterdir()):04d}-{safe}")


def build_selected(*models: str) -> list[str]:
    """`dbt build` of `models` (selectors such as `+fct_area_year_rates`) and nothing else: a data
    test runs only when every model it reads is selected (cautious), so no test fails for a
    parent that was left out. A test that reads a few marts builds their closure, not the DAG."""
    return ["build", "--indirect-selection", "cautious", "--select", *models]


MODE_FOLDERS = {"ine_aggregates": "models/inputs/ine_aggregates", "deis_microdata": "models/inputs/deis_microdata"}


def unit_test_names(vital_source: str) -> set[str]:
    """The unit tests declared in the models' YAML that an input mode runs (another mode's folder
    is disabled), read from the files: a second account beside dbt's own."""
    import yaml

    names = set()
    for path in (REPO_ROOT / "models").rglob("*.yml"):
        relative = path.relative_to(REPO_ROOT).as_posix()
        if any(relative.startswith(folder) for mode, folder in MODE_FOLDERS.items() if mode != vital_source):
            continue
        names |= {test["name"] for test in (yaml.safe_load(path.read_text()) or {}).get("unit_tests", [])}
    return names


def run_unit_tests(duckdb_path: Path, dbt_vars: dict | None = None) -> tuple[set[str], str]:
    """`dbt test --select test_type:unit` on a built warehouse (the models' parents must exist):
    the names of the unit tests that passed (dbt's run_results.json), and dbt's output."""
    result = run_dbt(["test", "--select", "test_type:unit"], duckdb_path, dbt_vars, check=False)
    results = json.loads((duckdb_path.parent / "dbt_target" / "run_results.json").read_text())["results"]
    passed = {r["unique_id"].rsplit(".", 1)[-1] for r in results
              if r["unique_id"].startswith("unit_test.") and r["status"] == "pass"}
    return passed, result.stdout


def var_rules() -> dict:
    """The var rules of macros/validate_vars.sql (vars_spec's dict, also a Python literal)."""
    macro = (REPO_ROOT / "macros" / "validate_vars.sql").read_text(encoding="utf-8")
    return ast.literal_eval(re.search(r"\{%- set spec = (\{.*?\n\}) -%\}", macro, re.S).group(1))


def seed_column(seed: str, column: str) -> list[str]:
    """One column of a seed, in its order: the lists (indicators, stratifiers, trend methods)
    that tests loop over instead of spelling them (tests/house/test_one_home.py)."""
    return [row[column] for row in seed_rows(seed)]


def stratifier_communes(duckdb_path: Path) -> dict[str, dict[str, str]]:
    """Per stratifier of seeds/stratifiers.csv, the communes its file gives a usable value, each
    with its region (the staged values, read before any measure). Tests derive their expected
    rows and audit lines from this instead of spelling today's stratifiers."""
    found: dict[str, dict[str, str]] = {s: {} for s in seed_column("stratifiers.csv", "stratifier")}
    for stratifier, commune, region in query(duckdb_path, "select stratifier, commune_code, region_code "
                                                          "from intermediate.int_stratifier_values where value is not null"):
        found[stratifier][commune] = region
    return found


def stratifier_regions(duckdb_path: Path) -> dict[str, set[str]]:
    """Per stratifier, the regions where its file gives at least one commune a value: where a
    build can measure it, and the country only when every region of the build is among them."""
    return regions_of(stratifier_communes(duckdb_path))


def regions_of(valued: dict[str, dict[str, str]]) -> dict[str, set[str]]:
    """stratifier_regions from stratifier_communes' answer (for a test that needs both)."""
    return {s: set(communes.values()) for s, communes in valued.items()}


def query(duckdb_path: Path, sql: str, params=None):
    """Rows of a query on a built warehouse, opened read-only and closed at once."""
    with duckdb.connect(str(duckdb_path), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def microdata_vars(deaths, births=None, cache=None, **extra) -> dict:
    """The vars of a build on DEIS microdata files: the deaths file, the births (a folder or a
    file; none: the bundled births), a cache folder of its own, and any other var."""
    chosen = {"vital_source": "deis_microdata", "deis_deaths_path": str(deaths), **extra}
    if births is not None:
        chosen["deis_births_path"] = str(births)
    if cache is not None:
        chosen["deis_cache_dir"] = str(cache)
    return chosen


def microdata_warehouse(folder: Path, regions: tuple[str, ...], years, select: list[str] | None = None,
                        births: str = "generated", generator: dict | None = None, **dbt_vars) -> SimpleNamespace:
    """The one recipe for a warehouse of generated DEIS microdata: files for `regions` and
    `years` written by infant_mortality.tools.generate_deis (with the `generator` options, e.g.
    `{"zip_deaths": True}`) into `folder/files`, then `dbt build` (of `select` and what it needs, or of everything) into
    `folder/micro.duckdb`. `births="bundled"` leaves the births path unset, so the build takes
    the bundled births; `dbt_vars` are passed on. Returns path, files, deaths, births, dbt_vars."""
    from infant_mortality.tools.generate_deis import Options, generate

    files = folder / "files"
    manifest = generate(Options(out_dir=files, regions=tuple(regions), years=tuple(years), project_dir=REPO_ROOT,
                                **(generator or {})))
    deaths = files / manifest["deaths_file"]
    births_path = files / manifest["births_folder"] if births == "generated" else None
    chosen = microdata_vars(deaths, births_path, folder / "cache", **dbt_vars)
    path = folder / "micro.duckdb"
    arguments = build_selected(*select) if select else ["build"]
    run_dbt(arguments, path, chosen)
    return SimpleNamespace(path=path, files=files, deaths=deaths, births=births_path, dbt_vars=chosen)


def copy_of(warehouse: Path, folder: Path) -> Path:
    """A private copy of a shared warehouse, for a test that writes into it (or runs dbt on it,
    which opens the file read-write and would lock the other workers out)."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / warehouse.name
    shutil.copyfile(warehouse, copy)
    return copy


def run_shared_folder(tmp_path_factory) -> Path:
    """<run>/shared: the folder every pytest-xdist worker of this run sees (each worker's
    basetemp is <run>/popen-gwN)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    shared = base / "shared"
    shared.mkdir(exist_ok=True)
    return shared


def built_once(tmp_path_factory, name: str, build) -> Path:
    """The folder of a build that every pytest-xdist worker of this run shares: the first worker
    to ask runs `build(folder)` while holding a lock, the others wait for it and read the result.
    A failed build is not repeated by the next worker: each one fails with its message."""
    shared = run_shared_folder(tmp_path_factory)
    folder = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        failed, done = shared / f"{name}.failed", shared / f"{name}.done"
        if failed.exists():
            raise AssertionError(f"the shared build {name} failed in another worker:\n{failed.read_text()}")
        if not done.exists():
            folder.mkdir()
            try:
                build(folder)
            except BaseException as error:
                failed.write_text(str(error)[-8000:])
                raise
            done.touch()
    return folder


@pytest.fixture(scope="session")
def bundled_warehouse(tmp_path_factory) -> Path:
    """`dbt build` of the whole project on the bundled real data (built once per test run and
    shared by the workers, read-only: a test that writes takes `copy_of` it)."""
    folder = built_once(tmp_path_factory, "bundled", lambda f: run_dbt(["build"], f / "infant_mortality.duckdb"))
    return folder / "infant_mortality.duckdb"


@pytest.fixture(scope="session")
def ols_trends_warehouse(tmp_path_factory) -> Path:
    """The trend mart and meta_build (and what they need) with vars passed on the command line:
    the OLS fitter, and a non-default declared var."""
    def build(folder):
        run_dbt(["build", "--select", "+fct_trends", "+meta_build"], folder / "infant_mortality.duckdb",
                {"trend_prais_variant": "ols", "unreliable_below_deaths": 25})
    return built_once(tmp_path_factory, "ols_trends", build) / "infant_mortality.duckdb"


@pytest.fixture(scope="session")
def published_warehouse(tmp_path_factory):
    """`python -m infant_mortality.publish` into a temporary folder, as `make warehouse` does
    (built once per test run; readers' tests use it, none writes into it)."""
    def build(work):
        path = work / "warehouse" / "infant_mortality.duckdb"
        env = {**os.environ, "IMR_DUCKDB_PATH": str(path), "DBT_TARGET_PATH": str(work / "dbt_target"),
               "DBT_LOG_PATH": str(work / "dbt_logs")}
        result = subprocess.run([sys.executable, "-m", "infant_mortality.publish", "--quiet"], cwd=REPO_ROOT,
                                env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"publish failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        (work / "publish_output.txt").write_text(result.stdout)

    work = built_once(tmp_path_factory, "published", build)
    path = work / "warehouse" / "infant_mortality.duckdb"
    return SimpleNamespace(path=path, parquet=path.parent / "parquet", target=work / "dbt_target",
                           output=(work / "publish_output.txt").read_text())


STUDY_PERIOD = {"start": 2005, "end": 2014}   # González et al. 2020: the RM, 2005-2014


@pytest.fixture(scope="session")
def rm_study_period(tmp_path_factory) -> Path:
    """Generated RM deaths 2005-2019 (synthetic, UTF-8) with the bundled births 2001-2016 and the
    study's period as `custom_period`, built once per run for test_study_births.py and
    test_study_findings.py (the marts both read). Only int_analysis_periods reads custom_period,
    and none of the marts the births tests read is built on it: one build serves both."""
    def build(folder):
        microdata_warehouse(folder, ("13",), range(2005, 2020),
                            ["+fct_area_year_rates", "+audit_data_quality", "+audit_births_sources",
                             "assert_bundled_births_continuous_across_recodes", "+fct_study_findings"],
                            births="bundled", generator={"deaths_encoding": "utf-8"}, custom_period=STUDY_PERIOD)
    return built_once(tmp_path_factory, "rm_study_period", build) / "micro.duckdb"


THREE_REGIONS = ("11", "12", "15")   # Aysén, Magallanes (with Antártica, 12202, absent from the 2022 file), Arica
COVARIATE_DROPPED = "11201"          # Aysén: its income_poverty_2022 line is removed
COVARIATE_UNPARSEABLE = "15101"      # Arica: its multidimensional_poverty_2022 value becomes "n/d"


@pytest.fixture(scope="session")
def three_regions(tmp_path_factory):
    """`dbt build` of generated microdata for three small regions, 2015-2019 (the country path),
    built once for test_multi_region.py and test_inequality_warehouse.py: births files without
    a header and deaths in UTF-8 (layouts the staging must take), covariate files that lack one
    commune's value and carry one unparseable value, and `benchmark_communes` set. The covariate
    damage and the benchmark touch only the inequity marts and their audit rows."""
    tmp = built_once(tmp_path_factory, "three_regions", _build_three_regions)
    return SimpleNamespace(path=tmp / "three_regions.duckdb", files=tmp / "files",
                           dbt_vars=json.loads((tmp / "dbt_vars.json").read_text()),
                           poverty=tmp / "raw" / "covariates" / "poverty_2022_communes.csv")


def _build_three_regions(tmp: Path) -> None:
    import csv

    from infant_mortality.tools.generate_deis import Options, generate

    source = REPO_ROOT / "data" / "raw"
    raw = tmp / "raw"
    (raw / "covariates").mkdir(parents=True)
    for item in source.iterdir():
        if item.is_file():
            (raw / item.name).symlink_to(item)
    for item in (source / "covariates").iterdir():
        shutil.copy(item, raw / "covariates" / item.name)
    poverty = raw / "covariates" / "poverty_2022_communes.csv"
    with open(poverty, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    kept = []
    for row in rows:
        if row[1] == COVARIATE_DROPPED and row[4] == "ingresos":
            continue
        if row[1] == COVARIATE_UNPARSEABLE and row[4] == "multidimensional":
            row[5] = "n/d"
        kept.append(row)
    with open(poverty, "w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(kept)
    files = tmp / "files"
    manifest = generate(Options(out_dir=files, regions=THREE_REGIONS, years=tuple(range(2015, 2020)),
                                births_header="none", deaths_encoding="utf-8", project_dir=REPO_ROOT))
    path = tmp / "three_regions.duckdb"
    dbt_vars = {"vital_source": "deis_microdata", "raw_data_dir": str(raw),
                "deis_deaths_path": str(files / manifest["deaths_file"]),
                "deis_births_path": str(files / manifest["births_folder"]), "deis_cache_dir": str(tmp / "cache"),
                "benchmark_communes": ["12101"]}
    run_dbt(["build"], path, dbt_vars)
    (tmp / "dbt_vars.json").write_text(json.dumps(dbt_vars))


def seed_rows(seed: str) -> list[dict[str, str]]:
    """Every row of a seed, in its order (the columns as text, as the CSV holds them)."""
    import csv

    with open(REPO_ROOT / "seeds" / seed, encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def aggregate_indicators() -> list[str]:
    """The indicators a build on the bundled aggregates counts: the rows of seeds/indicators.csv
    with `in_aggregates` (the aggregates give one count, infant deaths, and every such indicator
    reads it). A test on the bundled build expects its rows per indicator from this, not a count."""
    return [row["indicator"] for row in seed_rows("indicators.csv") if row["in_aggregates"] == "true"]


def indicator_multipliers() -> dict[str, int]:
    """Each indicator's multiplier (rate per 1000, per 100,000, ...) from seeds/indicators.csv."""
    return {row["indicator"]: int(row["multiplier"]) for row in seed_rows("indicators.csv")}
