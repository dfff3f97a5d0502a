"""Settings (dbt vars): declared once, checked before anything runs, never pasted into SQL.

Static checks read the project files; the behaviour checks run the real dbt CLI, as a user
would, with bad settings, and assert that each run stops before the costly models with a message naming
the var and what it may hold, and that nothing was built or written.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pytest
import yaml

from conftest import DBT, REPO_ROOT, var_rules

PROJECT = yaml.safe_load((REPO_ROOT / "dbt_project.yml").read_text(encoding="utf-8"))
DECLARED = PROJECT["vars"]
SPEC_MACRO = (REPO_ROOT / "macros" / "validate_vars.sql").read_text(encoding="utf-8")
SPEC = var_rules()
SOURCES = [p for d in ("models", "macros", "tests/dbt") for p in (REPO_ROOT / d).rglob("*")
           if p.suffix in (".sql", ".yml", ".py")]

# A var is read with var('x'), or through the checking macros of macros/vars.sql.
VAR_CALL = re.compile(r"""\b(?:var|setting|checked_var|int_var|number_var|bool_var|string_var)\(\s*['"]([a-z_0-9]+)['"]\s*[,)]""")


def test_every_var_used_is_declared_and_every_declared_var_is_used():
    used = {name for path in SOURCES for name in VAR_CALL.findall(path.read_text(encoding="utf-8"))}
    # deis_read.sql builds the two path names from the file kind.
    used |= {"deis_deaths_path", "deis_births_path"}
    assert used - set(DECLARED) == set(), "used but not declared in dbt_project.yml"
    assert set(DECLARED) - used == set(), "declared but never used"


def test_no_inline_var_defaults_in_models_macros_or_tests():
    inline = [(str(p.relative_to(REPO_ROOT)), m.group(0)) for p in SOURCES
              for m in re.finditer(r"""\bvar\(\s*['"][a-z_0-9]+['"]\s*,[^)]*\)""", p.read_text(encoding="utf-8"))]
    assert inline == []


def test_every_declared_var_has_a_comment_line_above_it():
    lines = (REPO_ROOT / "dbt_project.yml").read_text(encoding="utf-8").splitlines()
    start = lines.index("vars:")
    for name in DECLARED:
        at = next(i for i in range(start, len(lines)) if lines[i].startswith(f"  {name}:"))
        assert lines[at - 1].strip().startswith("# "), f"{name} has no comment line above it"


def test_the_spec_lists_exactly_the_declared_vars_and_every_default_passes_it():
    assert set(SPEC) == set(DECLARED)
    for name, rule in SPEC.items():
        if "values" in rule:
            assert DECLARED[name] in rule["values"], name


def test_the_input_mode_default_in_the_folder_switch_is_the_declared_default():
    # dbt 1.11 renders dbt_project.yml with the --vars only, so the +enabled lines repeat it.
    text = (REPO_ROOT / "dbt_project.yml").read_text(encoding="utf-8")
    defaults = set(re.findall(r"var\('vital_source', '([a-z_]+)'\)", text))
    assert defaults == {DECLARED["vital_source"]}


def test_enumerated_values_are_the_ones_the_python_code_accepts():
    from infant_mortality.dbt_plugins import deis_files
    from infant_mortality.statistics import joinpoint, prais_winsten, trends

    assert set(SPEC["trend_rhotype"]["values"]) == set(prais_winsten.RHOTYPES)
    from infant_mortality.statistics.trend_fitters import FITTERS

    # The headline picks one of fct_trends' methods; the study's method takes its estimator
    # from the fitter registry.
    assert set(SPEC["trend_method"]["values"]) == set(trends.MART_METHODS)
    assert set(SPEC["trend_prais_variant"]["values"]) <= set(FITTERS)
    assert set(SPEC["trend_joinpoint_selection"]["values"]) == set(joinpoint.SELECTIONS)
    assert set(SPEC["trend_gaps"]["values"]) == set(prais_winsten.GAP_POLICIES)
    assert set(SPEC["trend_zero_rate_policy"]["values"]) == set(trends.ZERO_RATE_POLICIES)
    assert set(SPEC["trend_ci_critical"]["values"]) == set(trends.CI_CRITICAL)
    assert set(SPEC["deis_encoding"]["values"]) == set(deis_files.ENCODINGS) | {"auto"}


def test_the_trend_floors_checked_at_run_start_are_the_fitters_own():
    # validate_vars refuses trend_min_years below the floor of a fitted method (issue 41: 3
    # passed the check and failed inside fct_trends); its copy of the floors must be the fitters'.
    from infant_mortality.statistics.trend_fitters import FITTERS, get_fitter

    copied = yaml.safe_load(re.search(r"macro trend_fitter_floors\(\).*?return\((\{.*?\})\)", SPEC_MACRO, re.S).group(1))
    assert copied == {name: get_fitter(name).min_years_floor for name in FITTERS}


# --- behaviour: the real dbt CLI with bad settings ------------------------------------------

INJECTED = "x'); COPY (select 42 as pwned) TO '{target}' (format csv); --"

CASES = {
    # name: (vars, expected message parts)
    "bad_enum": ({"trend_method": "prias"}, ["dbt var trend_method must be one of prais_winsten, poisson", "'prias'"]),
    # A trend class must agree with the interval beside it: the two levels go together.
    "mismatched_trend_levels": ({"trend_ci_level": 0.9},
                                ["dbt var trend_ci_level (0.9) must be 1 - trend_p_threshold (0.05)"]),
    "bad_number": ({"comparison_alpha": 1.5}, ["dbt var comparison_alpha must be a number > 0 and < 1", "1.5"]),
    "unknown_var": ({"scope_year_strat": 2015},
                    ["dbt var scope_year_strat is not a setting of this project (did you mean scope_year_start?)"]),
    # The bundled input covers all of Chile: the message lists the 16 regions it does have.
    "empty_scope": ({"scope_regions": [99]},
                    ["no data for region 99 (the input has regions "
                     + ", ".join(f"{r:02d}" for r in range(1, 17)) + ", years 2010-2019)"]),
    "sql_in_custom_period": ({"custom_period": {"start": INJECTED, "end": 2016}},
                             ["dbt var custom_period must be {start: YYYY, end: YYYY}"]),
    "sql_in_raw_data_dir": ({"raw_data_dir": INJECTED}, ["dbt var raw_data_dir: no files in folder"]),
    # Issue 41: each passed the check at run start and failed later (inside fct_trends), or
    # published 2008-2012 pooling 3 years under a 5-year label with no audit.
    "trend_min_years_below_the_fitters_floor": (
        {"trend_min_years": 3},
        ["dbt var trend_min_years (3) must be at least 4: fct_trends fits the Prais-Winsten rows with "
         "trend_prais_variant prais, which needs 4 usable years"]),
    "custom_period_outside_the_data": (
        {"custom_period": {"start": 2008, "end": 2012}},
        ["dbt var custom_period {start: 2008, end: 2012} reaches outside the years of the data (2010-2019",
         "its rates would pool only 3 of its 5 years under the label 2008-2012. Set it to {start: 2010, end: 2012}"]),
    # Issue 41: the bound on how far a .gz input may expand.
    "gzip_ratio_below_one": ({"deis_gzip_max_ratio": 0.5}, ["dbt var deis_gzip_max_ratio must be a number >= 1", "0.5"]),
    "bad_memory_limit": ({"duckdb_memory_limit": "2 gigs"},
                         ["dbt var duckdb_memory_limit must be a size such as '2GB' or '1500MB', got '2 gigs'"]),
}


# The models that make a whole build take long (the trend fits, BYM2, the permutations).
COSTLY_MODELS = {"intermediate.int_trends", "intermediate.int_bym2_rates", "intermediate.int_spatial_clusters"}


def _created(result: subprocess.CompletedProcess) -> set[str]:
    """The tables this dbt run made, as dbt's log names them (schema.model)."""
    return set(re.findall(r" OK created \S+ table model (\S+) ", result.stdout))


def _run(workdir: Path, dbt_vars: dict) -> tuple[subprocess.CompletedProcess, float]:
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "IMR_DUCKDB_PATH": str(workdir / "w.duckdb"),
           "DBT_TARGET_PATH": str(workdir / "target"), "DBT_LOG_PATH": str(workdir / "logs")}
    command = [str(DBT), "build", "--profiles-dir", "profiles", "--vars", json.dumps(dbt_vars)]
    started = time.monotonic()
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    return result, time.monotonic() - started


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory):
    """Every case built once, two at a time (each is a separate dbt build into its own file)."""
    root = tmp_path_factory.mktemp("bad_settings")

    def one(name):
        dbt_vars = json.loads(json.dumps(CASES[name][0]).replace("{target}", str(root / f"{name}_pwned.csv")))
        result, seconds = _run(root / name, dbt_vars)
        return name, (result, seconds, root / name / "w.duckdb", root / f"{name}_pwned.csv")

    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(pool.map(one, CASES))
    for name, (result, seconds, _, _) in runs.items():
        print(f"{name}: stopped after {seconds:.1f} s, {len(_created(result))} models made")
    return runs


def _tables(path: Path) -> list[str]:
    if not path.exists():
        return []
    with duckdb.connect(str(path), read_only=True) as con:
        return [r[0] for r in con.execute("select table_schema || '.' || table_name from information_schema.tables").fetchall()]


@pytest.mark.e2e  # fault injection
@pytest.mark.parametrize("name", list(CASES))
def test_a_bad_setting_stops_the_build_with_a_message_naming_the_var(bad_runs, name):
    result, seconds, _, _ = bad_runs[name]
    output = result.stdout + result.stderr
    assert result.returncode != 0
    for part in CASES[name][1]:
        assert part in output, output[-3000:]
    # A stop, not a build: none of the costly statistical models ran (a check on what was built,
    # not on the seconds it took: a loaded machine is slow).
    assert not _created(result) & COSTLY_MODELS, (name, sorted(_created(result)))


# Values are checked while dbt parses the project: nothing runs. (raw_data_dir's folder can only
# be checked once the hooks execute; dbt 1.11 then goes on with the nodes that do not read it.)
@pytest.mark.parametrize("name", ["bad_enum", "bad_number", "unknown_var", "sql_in_custom_period",
                                  "trend_min_years_below_the_fitters_floor"])
@pytest.mark.e2e  # fault injection
def test_a_bad_setting_stops_before_any_model_is_built(bad_runs, name):
    result, _, database, _ = bad_runs[name]
    assert "START" not in result.stdout
    assert _tables(database) == []


COUNT_MARTS = {"marts.fct_area_year_rates", "marts.fct_commune_vs_region", "marts.fct_trends", "marts.audit_data_quality"}


@pytest.mark.e2e  # fault injection
def test_sql_in_a_var_writes_nothing(bad_runs):
    for name in ("sql_in_custom_period", "sql_in_raw_data_dir"):
        assert not bad_runs[name][3].exists(), f"{name}: the injected COPY ran"


@pytest.mark.e2e  # fault injection
def test_an_empty_scope_stops_at_the_scope_check_before_any_mart(bad_runs):
    result, _, database, _ = bad_runs["empty_scope"]
    assert "Runtime Error in test assert_scope_selects_data" in result.stdout
    failed = re.findall(r"\d+ of \d+ (?:ERROR|FAIL(?: \d+)?) (\S+)", result.stdout)
    assert failed and set(failed) == {"assert_scope_selects_data"}, failed  # not a not_null far downstream
    assert COUNT_MARTS & set(_tables(database)) == set()


@pytest.mark.e2e  # fault injection
def test_a_raw_data_dir_without_files_is_named_and_no_rate_is_built(bad_runs):
    result, _, database, _ = bad_runs["sql_in_raw_data_dir"]
    assert "ERROR hook: infant_mortality.on-run-start" in result.stdout
    assert COUNT_MARTS & set(_tables(database)) == set()


def test_every_macro_is_documented_with_its_arguments():
    documented = {m["name"]: [a["name"] for a in m.get("arguments", [])]
                  for m in yaml.safe_load((REPO_ROOT / "macros" / "_macros.yml").read_text(encoding="utf-8"))["macros"]}
    defined = {}
    for path in (REPO_ROOT / "macros").rglob("*.sql"):
        for kind, name, args in re.findall(r"\{%-? (macro|test) ([a-z_0-9]+)\(([^)]*)\)", path.read_text(encoding="utf-8")):
            key = f"test_{name}" if kind == "test" else name
            # A quoted default may hold a comma (whole_number's digits='1,18'): blank it first.
            args = re.sub(r"'[^']*'|\"[^\"]*\"", "''", args)
            defined[key] = [a.split("=")[0].strip() for a in args.split(",") if a.strip()]
    assert documented == defined
