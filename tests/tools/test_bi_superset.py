"""A real BI tool end to end, as `make superset` runs it: bi/superset/start.py creates Superset
6.1's own environment (`.venv-superset/`, created once and cached; needs PyPI the first time,
about 4 minutes), writes a configuration with a generated key, migrates, runs `superset init`,
creates the admin, imports the database (read-only, on the published warehouse) and the
dashboard, and serves it on 127.0.0.1. Superset then lists the schemas and every mart's columns
with types and runs each chart's query; a headless Chromium logs in, renders the dashboard and
reads a chart's data back through Superset's chart data API. What a Superset user can do with the
warehouse, through the engine Superset builds for the database and through SQL Lab's API: read
the marts, and no file, no extension, no setting; nothing of the setup readable by other users.

And the project's own environment: SQLAlchemy reflection (what a BI tool does when a dataset is
added) works on every mart with the pinned SQLAlchemy and duckdb-engine.
"""

from __future__ import annotations

import base64
import http.cookiejar
import importlib.util
import json
import os
import re
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import duckdb
import yaml
from sqlalchemy import create_engine, inspect
from sqlalchemy.pool import NullPool

from conftest import REPO_ROOT, query

# End to end: a group of its own (`make test-e2e`; `make check` and CI run it with the rest).
pytestmark = pytest.mark.e2e

BI = REPO_ROOT / "bi" / "superset"
SCREENSHOTS = BI / "screenshots"
RM = "Región Metropolitana de Santiago"  # the dashboard's default region
# DuckDB's settings for the Superset database's connections: no external access, no extension
# loaded on demand, configuration locked (disabled_filesystems alone settable, only further).
LOCKED_DOWN = {"enable_external_access": False, "autoinstall_known_extensions": False,
               "autoload_known_extensions": False, "lock_configuration": True,
               "allowed_configs": ["disabled_filesystems"]}


def marts_with_columns(path: Path) -> dict[str, list[tuple[str, str]]]:
    """The independent answer: DuckDB's own catalog. Tables only: the one view, the deprecated
    alias fct_rates_commune_year, is not a table to SQLAlchemy or Superset."""
    rows = query(path, "select table_name, column_name, data_type from duckdb_columns() "
                       "where schema_name = 'marts' and table_name in "
                       "(select table_name from duckdb_tables() where schema_name = 'marts') "
                       "order by table_name, column_index")
    marts: dict[str, list[tuple[str, str]]] = {}
    for table, column, data_type in rows:
        marts.setdefault(table, []).append((column, data_type))
    return marts


def test_sqlalchemy_reflection_works_on_every_mart(published_warehouse):
    expected = marts_with_columns(published_warehouse.path)
    primary_keys = {table: sorted(column for column, in query(
        published_warehouse.path,
        "select unnest(constraint_column_names) from duckdb_constraints() "
        "where schema_name = 'marts' and table_name = ? and constraint_type = 'PRIMARY KEY'", [table]))
        for table in expected}
    comments = dict(query(published_warehouse.path,
                          "select table_name, comment from duckdb_tables() where schema_name = 'marts'"))
    engine = create_engine(f"duckdb:///{published_warehouse.path}", poolclass=NullPool,
                           connect_args={"read_only": True})
    try:
        inspector = inspect(engine)
        # duckdb-engine names schemas with their catalog, as Superset lists them.
        assert "infant_mortality.marts" in inspector.get_schema_names()
        assert sorted(inspector.get_table_names(schema="marts")) == sorted(expected)
        for table, columns in expected.items():
            reflected = inspector.get_columns(table, schema="marts")
            assert [c["name"] for c in reflected] == [name for name, _ in columns], table
            for column, (name, data_type) in zip(reflected, columns):
                type_name = str(column["type"]).upper()
                assert type_name.split("(")[0] in {
                    "VARCHAR": {"VARCHAR", "STRING", "TEXT"}, "INTEGER": {"INTEGER"}, "BIGINT": {"BIGINT"},
                    "DOUBLE": {"DOUBLE", "DOUBLE PRECISION", "FLOAT"}, "FLOAT": {"FLOAT", "REAL"},
                    "BOOLEAN": {"BOOLEAN"}, "DATE": {"DATE"}, "TIMESTAMP": {"TIMESTAMP", "DATETIME"},
                    "TIMESTAMP WITH TIME ZONE": {"TIMESTAMP", "TIMESTAMP WITH TIME ZONE"},
                }.get(data_type, {data_type}), (table, name, data_type, type_name)
            assert all(column.get("comment") for column in reflected), f"{table}: a column without its description"
            # DuckDB's pg_catalog emulation does not expose primary-key indexes: SQLAlchemy 2.0.54
            # answers [] (SQLAlchemy 2.0.55+ and 2.1 raise on REGCLASS; 2.0.30-2.0.36 return wrong
            # columns). Never wrong columns: the key, or nothing.
            pk = inspector.get_pk_constraint(table, schema="marts")
            assert sorted(pk["constrained_columns"] or []) in ([], primary_keys[table]), (table, pk)
            assert inspector.get_table_comment(table, schema="marts")["text"] == comments[table], table
    finally:
        engine.dispose()
    assert any(primary_keys.values()), "the contracts declare primary keys; none was found"


def _start_module():
    spec = importlib.util.spec_from_file_location("superset_start", BI / "start.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _other_address() -> str | None:
    """This machine's address on its network (no packet is sent), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") else address


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def superset(published_warehouse, tmp_path_factory):
    """`make superset`'s command on a fresh home and a free port, with the admin given by
    environment variables; yields once Superset answers its health check."""
    start = _start_module()
    started = time.monotonic()
    python = start.ensure_environment()
    installed = time.monotonic()
    home = tmp_path_factory.mktemp("superset") / "home"
    port = _free_port()
    env = {**os.environ, "IMR_SUPERSET_ADMIN": "analyst", "IMR_SUPERSET_PASSWORD": "test-only-password-3f9c"}
    log = home.parent / "start.log"
    with open(log, "w") as out:
        server = subprocess.Popen([sys.executable, str(BI / "start.py"), "--home", str(home), "--port", str(port),
                                   "--warehouse", str(published_warehouse.path)], env=env, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 900
        while True:
            assert server.poll() is None, f"start.py exited {server.returncode}:\n{log.read_text()[-4000:]}"
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"Superset did not answer in 15 minutes:\n{log.read_text()[-4000:]}"
            time.sleep(2)
        ready = time.monotonic()
        print(f"\nSuperset: environment {installed - started:.0f} s, setup and start {ready - installed:.0f} s")
        yield {"url": url, "home": home, "python": python, "env": start.superset_environment(
            home, home / "superset_config.py"), "log": log.read_text(), "user": env["IMR_SUPERSET_ADMIN"],
            "password": env["IMR_SUPERSET_PASSWORD"]}
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_start_writes_a_private_config_with_a_key_of_its_own_and_serves_on_localhost_quietly(superset):
    config = superset["home"] / "superset_config.py"
    assert config.stat().st_mode & 0o777 == 0o600  # the key is a secret
    key = re.search(r"^SECRET_KEY = '([^']+)'$", config.read_text(), re.M).group(1)
    assert len(key) >= 50 and key not in (BI / "start.py").read_text()
    # Superset listens on the loopback interface only: this machine's other address gets no answer.
    other = _other_address()
    if other is not None:
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://{other}:{superset['url'].rsplit(':', 1)[1]}/health", timeout=5)
    # One line per step (the migrations' hundreds of lines are in setup.log), and the admin's name.
    lines = superset["log"].strip().splitlines()
    steps = [line for line in lines if line.startswith("Superset: ")]
    assert [s.split(" ...")[0] for s in steps[:4]] == [
        "Superset: migrating its metadata database (superset db upgrade)",
        "Superset: roles and permissions (superset init)", "Superset: the admin user",
        "Superset: the warehouse (read-only) and the dashboard"]
    assert "Log in as 'analyst' with the password from IMR_SUPERSET_PASSWORD." in superset["log"]
    assert "test-only-password" not in superset["log"]
    assert len(lines) < 20, lines


EN, ES = "infant-mortality-chile", "mortalidad-infantil-chile"  # the dashboards' slugs


@pytest.fixture(scope="module")
def checked(superset) -> dict:
    """`superset_setup.py check`: what Superset sees and each chart's rows, as JSON (run once)."""
    started = time.monotonic()
    result = subprocess.run([str(superset["python"]), str(BI / "superset_setup.py"), "check"],
                            cwd=superset["home"], env=superset["env"], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    check = json.loads(result.stdout[result.stdout.index("{\n"):])
    print(f"\nSuperset check: {time.monotonic() - started:.0f} s")
    return check


def _seed(name: str) -> list[dict]:
    import csv

    return list(csv.DictReader((REPO_ROOT / "seeds" / f"{name}.csv").open(encoding="utf-8")))


def _report_messages() -> dict:
    from infant_mortality.report.i18n import MESSAGES

    return MESSAGES


def test_superset_lists_every_mart_and_runs_each_chart_with_the_marts_numbers(published_warehouse, checked):
    check = checked
    # The database, read-only, on the stable published path (not today's release folder).
    assert check["database"] == "Infant mortality (DuckDB)" and check["backend"] == "duckdb"
    assert check["uri"] == f"duckdb:///{published_warehouse.path}"
    assert check["engine_params"] == {"connect_args": {"read_only": True, "config": LOCKED_DOWN}}
    assert "infant_mortality.marts" in check["schemas"]
    # Every mart with every column and a type, as DuckDB's catalog has them.
    expected = marts_with_columns(published_warehouse.path)
    assert sorted(check["marts"]) == sorted(expected)
    for table, columns in expected.items():
        assert [name for name, _ in check["marts"][table]] == [name for name, _ in columns], table
        assert all(type_name and type_name != "NullType" for _, type_name in check["marts"][table]), table
    assert sorted(check["dashboards"]) == sorted([EN, ES])
    english = check["dashboards"][EN]
    assert english["title"] == "Infant mortality by commune (Chile)"
    charts = english["charts"]
    assert sorted(charts) == ["ranking", "table", "trend", "trend table"]

    # The ranking: the default region's communes only, by rank, each RT with its own interval.
    ranking = charts["ranking"]
    rm = query(published_warehouse.path, "select rank_in_region, commune_name, rate_ratio, rate_ratio_ci95_lower, "
               "rate_ratio_ci95_upper from marts.fct_commune_vs_region where indicator = 'imr' "
               "and period_label = '2010-2019' and region_name = ? order by rank_in_region", [RM])
    assert ranking["rows"] == len(rm) == 52
    assert [(r["rank_in_region"], r["commune_name"], r["rate_ratio"], r["rate_ratio_ci95_lower"],
             r["rate_ratio_ci95_upper"]) for r in ranking["first_rows"]] == [tuple(row) for row in rm[:3]]
    assert "region_name" not in ranking["colnames"]  # the filter's: not repeated on every row
    assert "rest_rate_ratio_ci95_lower" not in ranking["first_rows"][0]
    # The region's trend by year, with Chile's rate beside it.
    trend = charts["trend"]
    yearly = query(published_warehouse.path, "select region.year, region.rate_per_1000, country.rate_per_1000 "
                   "from marts.fct_area_year_rates as region join marts.fct_area_year_rates as country "
                   "using (year, indicator) where region.area_level = 'region' and region.area_name = ? "
                   "and country.area_level = 'country' and indicator = 'imr' order by year", [RM])
    assert trend["rows"] == len(yearly) == 10
    for row, (year, rate, chile) in zip(trend["first_rows"], yearly):
        assert row["Region"] == pytest.approx(rate) and row["Chile"] == pytest.approx(chile)
    # The region's APC over each period, from fct_trends, by the headline method, each p with its test.
    apc = charts["trend table"]
    trends = query(published_warehouse.path, "select t.period_start, t.period_end, t.apc, d.p_value_test_en "
                   "from marts.fct_trends as t join marts.dim_trend_method as d using (method) where "
                   "t.area_level = 'region' and t.area_name = ? and t.indicator = 'imr' "
                   "and t.method = (select trend_method from marts.meta_build) order by period_start, period_end desc",
                   [RM])
    assert apc["rows"] == len(trends) == 3
    assert [(r["period_start"], r["period_end"], r["apc"], r["p_value_test"]) for r in apc["first_rows"]] == \
        [tuple(t) for t in trends]
    # Against the rest of the region: every period of the region's communes.
    table = charts["table"]
    assert table["rows"] == 52 * 3
    assert {"rest_rate_ratio", "rest_rate_ratio_ci95_lower", "comparison"} <= set(table["first_rows"][0])
    # Each p-value labelled by its test, as Superset shows the datasets' columns.
    assert check["datasets"]["fct_commune_vs_region"]["p_value"] == "p (mid-p, conditional binomial)"
    assert check["datasets"]["region_trends"]["p_value"] == "p (of the test beside it)"
    print(f"\nSuperset: marts {len(check['marts'])}; chart rows "
          + ", ".join(f"{n!r}: {c['rows']}" for n, c in charts.items()))


def test_the_spanish_dashboard_shows_the_marts_numbers_with_spanish_labels(published_warehouse, checked):
    spanish = checked["dashboards"][ES]
    assert spanish["title"] == "Mortalidad infantil por comuna (Chile)"
    charts = spanish["charts"]
    assert sorted(charts) == ["ranking", "table", "trend", "trend table"]
    english = checked["dashboards"][EN]["charts"]
    # The same numbers as the English dashboard and the marts, row for row.
    for key in ("ranking", "table"):
        assert charts[key]["rows"] == english[key]["rows"]
        numeric = [c for c in english[key]["colnames"] if isinstance(english[key]["first_rows"][0][c], (int, float))
                   and not isinstance(english[key]["first_rows"][0][c], bool)]
        assert numeric and [[r[c] for c in numeric] for r in charts[key]["first_rows"]] == \
            [[r[c] for c in numeric] for r in english[key]["first_rows"]], key
    first = query(published_warehouse.path, "select commune_name, rate_per_1000, is_unreliable from "
                  "marts.fct_commune_vs_region where indicator = 'imr' and period_label = '2010-2019' "
                  "and region_name = ? and rank_in_region = 1", [RM])[0]
    row = charts["ranking"]["first_rows"][0]
    assert (row["commune_name"], row["rate_per_1000"], row["is_unreliable"]) == \
        (first[0], first[1], "sí" if first[2] else "no")
    for ours, theirs in zip(charts["trend"]["first_rows"], english["trend"]["first_rows"]):
        assert (ours["Región"], ours["Chile"]) == (theirs["Region"], theirs["Chile"])
    # Method, p's test and class in Spanish: from dim_trend_method and the report's own catalogue.
    messages = _report_messages()
    trends = query(published_warehouse.path, "select t.apc, t.p_value, d.label_es, d.p_value_test_es, t.trend "
                   "from marts.fct_trends as t join marts.dim_trend_method as d using (method) where "
                   "t.area_level = 'region' and t.area_name = ? and t.indicator = 'imr' and t.fitter = d.fitter "
                   "and t.method = (select trend_method from marts.meta_build) order by period_start, period_end desc",
                   [RM])
    assert [(r["apc"], r["p_value"], r["method_label"], r["p_value_test"], r["trend"])
            for r in charts["trend table"]["first_rows"]] == \
        [(apc, p, method, test, messages[f"trend.{code}"][0]) for apc, p, method, test, code in trends]
    comparison = {code: messages[f"comparison.short.{code}"][0] for code in ("higher", "lower", "similar")}
    codes = dict(((r[0], r[1]), r[2]) for r in query(
        published_warehouse.path, "select commune_code, period_label, comparison from marts.fct_commune_vs_region "
        "where indicator = 'imr'"))
    for row in charts["table"]["rows_every_region"]:
        assert row["comparison"] == comparison[codes[(row["commune_code"], row["period_label"])]]
    # Headers, names and descriptions in Spanish; no English code or word of the marts on show.
    headers = checked["datasets"]
    for dataset in ("comunas_vs_region", "tasas_anuales_region", "tendencias_region"):
        shown = {c for key, chart in charts.items() if chart["dataset"] == dataset and key != "trend"  # metrics
                 for c in chart["colnames"]}
        assert all(headers[dataset][c] for c in shown), dataset
    assert headers["comunas_vs_region"]["p_value"] == "p (p medio, binomial condicional)"
    assert headers["tendencias_region"]["p_value"] == "p (de la prueba al lado)"
    assert headers["comunas_vs_region"]["rate_per_1000"] == "Tasa por 1.000 NV"
    english_words = {"increasing", "decreasing", "stationary", "not_confirmed", "not_estimable", "insufficient_data",
                     "higher", "lower", "true", "false", *(r["label_en"] for r in _seed("trend_methods")),
                     *(r["method"] for r in _seed("trend_methods"))}
    for key, chart in charts.items():
        words = {part.strip() for row in chart["rows_every_region"] for value in row.values()
                 if isinstance(value, str) for part in value.split(",")}
        assert not words & english_words, (key, words & english_words)
        assert "(" in chart["name"] and chart["description"] and "the " not in chart["description"], key


# Each label of a chart and the interval that must agree with it: above `null` (the interval
# excludes it upwards), below it, or containing it. The labels in English (the marts' codes) and
# in Spanish (the report's words).
LABEL_RULES = {
    "comparison": {"interval": ("rest_rate_ratio_ci95_lower", "rest_rate_ratio_ci95_upper"), "null": 1.0,
                   "above": {"higher", "mayor"}, "below": {"lower", "menor"}, "neutral": {"similar"}},
    "trend": {"interval": ("apc_ci95_lower", "apc_ci95_upper"), "null": 0.0,
              "above": {"increasing", "Creciente"}, "below": {"decreasing", "Decreciente"},
              "neutral": {"stationary", "Estacionaria"}},
}


def test_no_chart_shows_a_label_that_contradicts_the_interval_beside_it(checked):
    """Every row of every chart's query on the published warehouse, every region, both
    dashboards: a label (higher, increasing, ...) stands beside the interval of its own test, and
    that interval says the same (issue 44: 13 rows said "higher" beside an interval with 1 in it)."""
    rows_checked, contradictions = 0, []
    for slug, dashboard in checked["dashboards"].items():
        for key, chart in dashboard["charts"].items():
            for column, rule in LABEL_RULES.items():
                if column not in chart["colnames"]:
                    continue
                lower, upper = rule["interval"]
                # The label's own interval is the one shown, and no other ratio interval beside it.
                assert {lower, upper} <= set(chart["colnames"]), (slug, key)
                assert not any("exact" in c for c in chart["colnames"]), (slug, key)
                for row in chart["rows_every_region"]:
                    low, high, label = row[lower], row[upper], row[column]
                    low = None if low is None or low != low else low  # a null reaches JSON as NaN
                    high = float("inf") if high is None or high != high else high  # unbounded
                    rows_checked += 1
                    wrong = ((label in rule["above"] and not (low is not None and low > rule["null"]))
                             or (label in rule["below"] and not high < rule["null"])
                             or (label in rule["neutral"] and not (low is not None and low <= rule["null"] <= high)))
                    if wrong:
                        contradictions.append((slug, key, row.get("commune_name") or row.get("period_start"), label,
                                               low, high))
    assert rows_checked > 2 * 346 * 3
    assert contradictions == [], contradictions[:20]


def _evaluate(page, expression: str):
    """A script's value in the page, promises awaited (the page's own fetch, with its session)."""
    answer = page.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True},
                       timeout=120)
    assert "exceptionDetails" not in answer, answer
    return answer["result"].get("value")


def _wait_for(page, expression: str, what: str, timeout: float = 240):
    deadline = time.monotonic() + timeout
    while not page.eval(expression):
        assert time.monotonic() < deadline, f"{what} not seen in {timeout:.0f} s"
        time.sleep(0.5)


PAGE_STATE = "location.href + ' | ' + document.body.innerText.slice(0, 400)"


def _log_in(page, user: str, password: str, timeout: float = 240):
    """Type the credentials as a user does, and submit only once both fields hold them. The form
    is in the page before the page's scripts have settled, and a field typed into then can lose
    its text (seen once in CI: the login never happened, 240 s). A failure says what the page showed."""
    fields = (("input#username", user), ("input#password", password))
    _wait_for(page, "document.readyState == 'complete' && " + " && ".join(
        f"!!document.querySelector('{selector}')" for selector, _ in fields), "the login form", 120)
    typed = " && ".join(f"document.querySelector('{selector}').value == {json.dumps(text)}" for selector, text in fields)
    logged_in = "location.pathname.indexOf('/login') < 0 && document.readyState == 'complete'"
    deadline = time.monotonic() + timeout
    while True:  # type, check, submit; again while the page is still the login form after a minute
        while not page.eval(typed):
            assert time.monotonic() < deadline, f"the credentials did not stay typed: {page.eval(PAGE_STATE)}"
            for selector, text in fields:
                page.click(selector)
                page.eval(f"document.querySelector('{selector}').select()")  # typing replaces what is there
                page.send("Input.insertText", {"text": text})
            time.sleep(0.5)
        page.click("button[type=submit]")
        submitted = time.monotonic()
        while not page.eval(logged_in) and time.monotonic() - submitted < 60:
            time.sleep(0.5)
        if page.eval(logged_in):
            return
        assert time.monotonic() < deadline, f"the login not seen in {timeout:.0f} s: {page.eval(PAGE_STATE)}"
        _wait_for(page, f"!!document.querySelector('input#username') || ({logged_in})", "the login form again", 60)
        if page.eval(logged_in):
            return


READ_BACK = """(async function () {
  const token = (await (await fetch('/api/v1/security/csrf_token/')).json()).result;
  const charts = (await (await fetch('/api/v1/dashboard/SLUG/charts')).json()).result;
  const ranking = charts.find(c => c.slice_name.endsWith('RANKING'));
  const chart = (await (await fetch('/api/v1/chart/' + ranking.id)).json()).result;
  const context = JSON.parse(chart.query_context);
  context.queries[0].filters = [{col: 'region_name', op: 'IN', val: [REGION]}];
  const answer = await fetch('/api/v1/chart/data', {method: 'POST', body: JSON.stringify(context),
    headers: {'Content-Type': 'application/json', 'X-CSRFToken': token}});
  return {status: answer.status, body: await answer.json()};
})()"""
CHARTS_DRAWN = ("document.querySelectorAll('.dashboard-chart table tbody tr').length > 20 && "
                "!!document.querySelector('.dashboard-chart canvas') && "
                "document.querySelectorAll('.dashboard-chart table').length >= 3")
TABLE_CELLS = ("Array.from(document.querySelectorAll('.dashboard-chart table tbody td'))"
               ".map(c => c.textContent.trim())")
HEADERS = ("Array.from(document.querySelectorAll('.dashboard-chart table thead th'))"
           ".map(c => c.textContent.trim())")


def _draw(page, url: str, width: int, shot: Path) -> float:
    """Open a dashboard in `page`, wait for its four charts, save the viewport as `shot`."""
    started = time.monotonic()
    page.send("Page.navigate", {"url": url})
    _wait_for(page, "document.readyState == 'complete'", "the page")
    _wait_for(page, CHARTS_DRAWN, f"the dashboard's charts at {width} px")
    time.sleep(2)  # the last chart's animation
    assert not page.eval("document.querySelectorAll('.dashboard-chart .alert, .dashboard-chart [role=alert]').length")
    # The viewport as it is (a capture beyond it makes Superset lay the grid out again, blank).
    shot.parent.mkdir(parents=True, exist_ok=True)
    shot.write_bytes(base64.b64decode(page.send("Page.captureScreenshot", {"format": "png"})["data"]))
    assert shot.stat().st_size > 60_000  # drawn charts (the blank grid is about 40 kB)
    return time.monotonic() - started


def _visible_numbers(page) -> list[str]:
    """Table cells holding a number that a person sees: inside the viewport horizontally (a
    table that scrolls sideways hides the others) and not clipped to nothing."""
    return page.eval(
        "Array.from(document.querySelectorAll('.dashboard-chart table tbody td')).filter(c => {"
        " const r = c.getBoundingClientRect(); return r.width > 8 && r.left >= 0 && r.right <= innerWidth"
        " && /^-?[0-9][0-9.,]*$/.test(c.textContent.trim()); }).map(c => c.textContent.trim())")


def test_a_browser_logs_in_renders_both_dashboards_and_reads_a_chart_back(published_warehouse, superset, tmp_path):
    from infant_mortality.report.browser import Browser, find_chromium

    if find_chromium() is None:
        pytest.skip("Chromium is not installed (.ci/run installs it)")
    shots = Path(os.environ.get("IMR_SUPERSET_SCREENSHOTS") or tmp_path)
    first = query(published_warehouse.path, "select commune_name, rate_per_1000 from marts.fct_commune_vs_region "
                  "where indicator = 'imr' and period_label = '2010-2019' and region_name = ? "
                  "and rank_in_region = 1", [RM])[0]
    messages = _report_messages()
    started = time.monotonic()
    times = {}
    with Browser() as browser:
        page = browser.open(superset["url"] + "/login/", 1400, 2200)  # the whole dashboard in view
        _log_in(page, superset["user"], superset["password"])
        for slug, name in ((EN, "dashboard"), (ES, "dashboard-es")):
            times[name] = _draw(page, f"{superset['url']}/superset/dashboard/{slug}/", 1400, shots / f"{name}-1400.png")
            # What the page shows: the RM's first-ranked commune and its rate rounded as the report rounds.
            cells = page.eval("Array.from(document.querySelector('.dashboard-chart table tbody tr').cells)"
                              ".map(c => c.textContent.trim())")
            assert cells[:2] == ["1", first[0]] and f"{first[1]:.2f}" in cells
            numbers = [n for n in page.eval(TABLE_CELLS) if re.fullmatch(r"-?[0-9][0-9.,]*", n)]
            assert numbers and all(not re.search(r"\.\d{4,}", n) for n in numbers)  # no 15 decimals
            text, headers = page.eval("document.body.innerText"), page.eval(HEADERS)
            if slug == ES:
                assert "Mortalidad infantil por comuna (Chile)" in text and "Región" in text
                assert {"Tasa por 1.000 NV", "RT IC 95% inf.", "Prueba de p", "Tendencia",
                        "p (p medio, binomial condicional)"} <= set(headers), headers
                shown = set(page.eval(TABLE_CELLS))
                assert shown & {messages[f"comparison.short.{c}"][0] for c in ("higher", "lower", "similar")}
                assert shown & {messages[f"trend.{c}"][0] for c in ("increasing", "decreasing", "stationary")}
                assert not shown & {"increasing", "decreasing", "stationary", "higher", "lower", "true", "false",
                                    "Poisson regression", "poisson", "prais_winsten"}, shown
        # Another region through the chart data API, in the logged-in page.
        region = "Región de Valparaíso"
        answers = {slug: _evaluate(page, READ_BACK.replace("SLUG", slug).replace("RANKING", ending).replace(
            "REGION", json.dumps(region))) for slug, ending in ((EN, "(ranking)"), (ES, "(clasificación)"))}
        # On a phone: every chart draws, and the ranking's first numbers are in view.
        for slug, name in ((EN, "dashboard"), (ES, "dashboard-es")):
            phone = browser.open("about:blank", 420, 3000)
            times[f"{name}-420"] = _draw(phone, f"{superset['url']}/superset/dashboard/{slug}/", 420,
                                         shots / f"{name}-420.png")
            visible = _visible_numbers(phone)
            assert "1" in visible and len(visible) >= 10, visible
    expected = query(published_warehouse.path, "select rank_in_region, commune_name, rate_ratio, rate_ratio_ci95_lower, "
                     "rate_ratio_ci95_upper from marts.fct_commune_vs_region where indicator = 'imr' "
                     "and period_label = '2010-2019' and region_name = ? order by rank_in_region", [region])
    for slug, answer in answers.items():
        assert answer["status"] == 200, answer
        rows = answer["body"]["result"][0]["data"]
        assert len(rows) == len(expected) == 38
        assert [(r["rank_in_region"], r["commune_name"]) for r in rows] == [tuple(e[:2]) for e in expected]
        for row, (*_, ratio, lower, upper) in zip(rows, expected):
            assert (row["rate_ratio"], row["rate_ratio_ci95_lower"], row["rate_ratio_ci95_upper"]) == \
                pytest.approx((ratio, lower, upper), nan_ok=True)
    print(f"\nSuperset in Chromium: {time.monotonic() - started:.0f} s; "
          + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()) + f"; {region}: {len(expected)} communes read back")


# ---------------------------------------------------------------------------------------------
# Input you can trust: a Superset user reads the marts, and nothing else.

EXPORT = BI / "export"


def _export_files(kind: str) -> dict[str, dict]:
    return {path.stem: yaml.safe_load(path.read_text()) for path in (EXPORT / kind).rglob("*.yaml")}


def test_the_export_labels_each_p_value_by_its_test_and_locks_the_database_down():
    datasets = {config["table_name"]: config for config in _export_files("datasets").values()}
    labels = {name: {c["column_name"]: c["verbose_name"] for c in config["columns"]} for name, config in datasets.items()}
    # Every p-value column of every dataset says which test gave it; none of them is just "mid-p".
    p_columns = {(name, column): label for name, columns in labels.items() for column, label in columns.items()
                 if re.search(r"(^|_)p(_value)?$", column)}
    assert {(d, "p_value") for d in ("fct_commune_vs_region", "region_trends", "comunas_vs_region",
                                     "tendencias_region")} <= set(p_columns)
    assert all(label and label.startswith("p (") and label.endswith(")") for label in p_columns.values()), p_columns
    assert labels["fct_commune_vs_region"]["p_value"] == "p (mid-p, conditional binomial)"
    assert labels["comunas_vs_region"]["p_value"] == "p (p medio, binomial condicional)"
    # The trend tables' rows are the headline method's fits, named on every row with the test of
    # their p (dim_trend_method): never "mid-p", which is the comparison's test.
    for name, language in (("region_trends", "en"), ("tendencias_region", "es")):
        sql = datasets[name]["sql"]
        assert "t.method = (select trend_method from marts.meta_build)" in sql
        assert f"m.p_value_test_{language}" in sql and "join marts.dim_trend_method" in sql
        assert "mid-p" not in labels[name]["p_value"] and "medio" not in labels[name]["p_value"]
    assert labels["region_trends"]["method_label"] == "Method" and labels["tendencias_region"]["method_label"] == "Método"
    # RR's interval: ci95 is the mid-p one (the test's own), the exact one beside it is conservative.
    commune = labels["fct_commune_vs_region"]
    for side, word in (("lower", "low"), ("upper", "high")):
        assert commune[f"rest_rate_ratio_ci95_{side}"] == f"RR 95% CI (mid-p) {word}"
        assert commune[f"rest_rate_ratio_exact_{side}"] == f"RR exact CI (conservative) {word}"
    text = "".join(path.read_text() for path in EXPORT.rglob("*.yaml"))
    assert "rest_rate_ratio_midp" not in text and "classes_agree" not in text and "mid-p\n" not in text
    # The database: read-only, no file access, no extension, settings locked, no DML or upload.
    (database,) = _export_files("databases").values()
    assert database["extra"] == {"engine_params": {"connect_args": {"read_only": True, "config": LOCKED_DOWN}}}
    assert not any(database[flag] for flag in ("allow_dml", "allow_ctas", "allow_cvas", "allow_file_upload"))


def test_the_spanish_dashboard_s_words_come_from_one_home_each():
    """Two dashboards, the same four charts; the Spanish one's headers, names, filter and
    descriptions in Spanish, its method names and p tests joined from dim_trend_method, and its
    trend classes and comparison labels the report's own words (report/i18n.py), not a copy."""
    dashboards = {d["slug"]: d for d in _export_files("dashboards").values()}
    assert sorted(dashboards) == sorted([EN, ES])
    spanish = dashboards[ES]
    assert spanish["dashboard_title"] == "Mortalidad infantil por comuna (Chile)"
    (region_filter,) = spanish["metadata"]["native_filter_configuration"]
    assert region_filter["name"] == "Región" and region_filter["description"].startswith("La región")
    charts = {c["uuid"]: c for c in _export_files("charts").values()}
    in_spanish = [charts[p["meta"]["uuid"]] for p in spanish["position"].values()
                  if isinstance(p, dict) and p.get("type") == "CHART"]
    in_english = [charts[p["meta"]["uuid"]] for p in dashboards[EN]["position"].values()
                  if isinstance(p, dict) and p.get("type") == "CHART"]
    assert len(in_spanish) == len(in_english) == 4
    datasets = {c["uuid"]: c for c in _export_files("datasets").values()}
    for chart in in_spanish:
        dataset = datasets[chart["dataset_uuid"]]
        assert dataset["table_name"] in ("comunas_vs_region", "tasas_anuales_region", "tendencias_region")
        assert chart["description"] and " de la " in chart["description"], chart["slice_name"]
        headers = {c["column_name"]: c["verbose_name"] for c in dataset["columns"]}
        for column in chart["params"].get("all_columns", []):
            assert headers[column], (chart["slice_name"], column)
        for metric in chart["params"].get("metrics", []):
            assert metric["label"] in ("Región", "IC 95% inf.", "IC 95% sup.", "Chile")
    messages = _report_messages()
    by_name = {d["table_name"]: d["sql"] for d in datasets.values()}
    for prefix, dataset in (("trend.", "tendencias_region"), ("comparison.short.", "comunas_vs_region")):
        pairs = dict(re.findall(r"\('([a-z_]+)', '([^']+)'\)", by_name[dataset]))
        catalogue = {k[len(prefix):]: v[0] for k, v in messages.items()
                     if k.startswith(prefix) and re.fullmatch(r"[a-z_]+", k[len(prefix):]) and k != "trend.none"}
        assert pairs == catalogue, dataset
    from infant_mortality.statistics.trends import TREND_CLASSES

    assert set(TREND_CLASSES) <= set(re.findall(r"\('([a-z_]+)', '", by_name["tendencias_region"]))
    # Method names come from data, never typed into a chart or a dataset.
    text = "".join(path.read_text() for path in EXPORT.rglob("*.yaml"))
    for row in _seed("trend_methods"):
        assert row["label_es"] not in text, row["label_es"]
        assert row["p_value_test_en"] not in text and row["p_value_test_es"] not in text


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_start_makes_a_home_left_readable_by_an_earlier_version_private_and_keeps_its_key(tmp_path):
    start = _start_module()
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    (home / "superset_config.py").write_text("SECRET_KEY = 'an-old-key-of-the-first-run'\nLOG_LEVEL = 30\n")
    (home / "setup.log").write_text("Log in as 'admin' with the password 'old-password' (printed this once)\n")
    (home / "superset.db").write_bytes(b"SQLite format 3\0")
    for path in home.iterdir():
        path.chmod(0o644)
    config = start.write_config(home)
    assert _mode(home) == 0o700
    assert {path.name: _mode(path) for path in home.iterdir()} == {
        "superset_config.py": 0o600, "setup.log": 0o600, "superset.db": 0o600}
    text = config.read_text()
    assert "SECRET_KEY = 'an-old-key-of-the-first-run'\n" in text  # what it encrypted stays readable
    assert "duckdb_lockdown.install()" in text and "LOG_LEVEL = 30" not in text
    assert start.write_config(home) == config and config.read_text() == text  # stable from then on


def test_setup_leaves_nothing_readable_by_others_and_no_password_in_a_file(superset):
    home = superset["home"]
    readable = {str(path.relative_to(home.parent)): oct(_mode(path)) for path in [home, *home.rglob("*")]
                if not path.is_symlink() and _mode(path) & 0o077}
    assert not readable, f"readable by others: {readable}"
    assert {"superset_config.py", "superset.db", "setup.log"} <= {path.name for path in home.iterdir()}
    # A second admin with a generated password: said once, on the terminal, and in no file.
    env = {**superset["env"], "IMR_SUPERSET_ADMIN": "second-admin"}
    env.pop("IMR_SUPERSET_PASSWORD", None)
    said: list[str] = []
    line = _start_module().add_admin(superset["python"], env, home / "setup.log",
                                     say=lambda text="", **_: said.append(text))
    password = re.search(r"with the password '([^']+)' \(printed this once", line).group(1)
    assert len(password) >= 12
    for path in home.rglob("*"):
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path
            assert _mode(path) & 0o077 == 0, path
    assert superset["password"] not in (home / "setup.log").read_text()


PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import superset_setup
from superset.utils.core import QuerySource


app = superset_setup._app()
with app.app_context():
    from superset import db
    from superset.models.core import Database

    database = db.session.query(Database).filter_by(database_name=superset_setup.DATABASE_NAME).one()
    results = {}
    for name, sql in json.loads(sys.argv[2]).items():
        try:  # each statement on a connection of its own, as SQL Lab runs a query
            with database.get_sqla_engine(source=QuerySource.SQL_LAB) as engine, engine.connect() as connection:
                rows = connection.exec_driver_sql(sql).fetchall()
            results[name] = {"rows": [[str(value)[:200] for value in row] for row in rows[:20]]}
        except Exception as error:
            results[name] = {"error": f"{type(error).__name__}: {error}"[:400]}
print("PROBE " + json.dumps(results))
"""
REFUSED = re.compile(r"Permission Error|disabled by configuration|configuration has been locked|cannot be re-enabled")


def _released_files(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


def _publish_check(published: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infant_mortality.publish", "--check"], cwd=REPO_ROOT,
                          env={**os.environ, "IMR_DUCKDB_PATH": str(published)}, capture_output=True, text=True,
                          timeout=300)


def test_superset_s_own_engine_reads_the_marts_and_no_file_no_extension_no_setting(
        published_warehouse, superset, tmp_path):
    home, release = superset["home"], published_warehouse.path.resolve().parent
    secret = "imr-outside-7d41"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.csv").write_text(f"word\n{secret}\n")
    with duckdb.connect() as con:
        con.execute(f"copy (select '{secret}' as word) to '{outside / 'notes.parquet'}' (format parquet)")
    wal = release / (published_warehouse.path.name + ".wal")
    written = [outside / "copied.csv", release / "copied.csv", wal, outside / "attached.duckdb"]
    statements = {
        "a mart": "select count(*) from marts.fct_commune_vs_region",
        "read_csv of a file outside": f"select * from read_csv('{outside / 'notes.csv'}')",
        "read_csv of /etc/passwd": "select * from read_csv('/etc/passwd', sep = ':', header = false)",
        "a file by its name": f"select * from '{outside / 'notes.csv'}'",
        "read_text of Superset's config": f"select content from read_text('{home / 'superset_config.py'}')",
        "read_blob of the metadata database": f"select size from read_blob('{home / 'superset.db'}')",
        "read_parquet outside": f"select * from read_parquet('{outside / 'notes.parquet'}')",
        "glob": f"select * from glob('{outside}/*')",
        "COPY to a temporary folder": f"copy (select 1 as x) to '{written[0]}'",
        "COPY into the release": f"copy (select 1 as x) to '{written[1]}'",
        "COPY onto the database's WAL": f"copy (select 1 as x) to '{wal}'",
        "ATTACH a new file": f"attach '{written[3]}' as other",
        "INSTALL an extension": "install spatial",
        "SET external access back": "set enable_external_access = true",
        "unlock the configuration": "set lock_configuration = false",
        "re-enable the file system": "set disabled_filesystems = ''",
        "widen the allowed paths": f"set allowed_directories = ['{outside}']",
    }
    before = _released_files(release)
    try:
        started = time.monotonic()
        result = subprocess.run([str(superset["python"]), "-c", PROBE, str(BI), json.dumps(statements)],
                                cwd=home, env=superset["env"], capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
        answers = json.loads(result.stdout[result.stdout.index("PROBE ") + 6:])
        (count,) = query(published_warehouse.path, "select count(*) from marts.fct_commune_vs_region")[0]
        assert answers.pop("a mart") == {"rows": [[str(count)]]}
        allowed = {name: answer for name, answer in answers.items()
                   if "error" not in answer or not REFUSED.search(answer["error"])}
        assert not allowed, f"not refused by DuckDB's settings: {json.dumps(allowed, indent=1)[:3000]}"
        assert secret not in result.stdout and "SECRET_KEY" not in result.stdout and "root:" not in result.stdout
        assert not [path for path in written if path.exists()]
        assert _released_files(release) == before
        check = _publish_check(published_warehouse.path)
        assert check.returncode == 0, check.stdout + check.stderr
        print(f"\nSuperset's engine: a mart read, {len(answers)} attempts refused ({time.monotonic() - started:.0f} s)")
    finally:  # never leave the shared published warehouse damaged for the other tests
        for path in written[1:3]:
            path.unlink(missing_ok=True)


def _api(opener, url: str, body: dict | None = None, headers: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with opener.open(request, timeout=300) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def test_a_sql_lab_session_that_tries_leaves_files_and_the_release_alone(published_warehouse, superset):
    """SQL Lab's own API, logged in as the admin: the marts answer, a file does not, and the
    published release is still the one its manifest lists."""
    url, home, release = superset["url"], superset["home"], published_warehouse.path.resolve().parent
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    status, login = _api(opener, url + "/api/v1/security/login", {
        "username": superset["user"], "password": superset["password"], "provider": "db", "refresh": False})
    assert status == 200, login
    auth = {"Authorization": f"Bearer {login['access_token']}"}
    status, csrf = _api(opener, url + "/api/v1/security/csrf_token/", headers=auth)
    assert status == 200, csrf
    headers = {**auth, "X-CSRFToken": csrf["result"], "Referer": url}
    status, databases = _api(opener, url + "/api/v1/database/", headers=auth)
    assert status == 200, databases
    database_id = next(d["id"] for d in databases["result"] if d["database_name"] == "Infant mortality (DuckDB)")
    wal = release / (published_warehouse.path.name + ".wal")
    before = _released_files(release)

    def sql_lab(sql: str) -> tuple[int, dict]:
        return _api(opener, url + "/api/v1/sqllab/execute/", {
            "database_id": database_id, "sql": sql, "runAsync": False, "schema": "marts",
            "client_id": os.urandom(5).hex(), "tab": "test", "queryLimit": 100}, headers)

    try:
        status, answer = sql_lab("select count(*) as n from marts.fct_trends")
        assert status == 200 and answer.get("status") == "success", answer
        (count,) = query(published_warehouse.path, "select count(*) from marts.fct_trends")[0]
        assert answer["data"] == [{"n": count}]
        for sql in (f"select content from read_text('{home / 'superset_config.py'}')",
                    "select * from read_csv('/etc/passwd', sep = ':', header = false)",
                    f"copy (select 1 as x) to '{wal}'", f"copy (select 1 as x) to '{release / 'copied.csv'}'",
                    "set enable_external_access = true"):
            status, answer = sql_lab(sql)
            assert status != 200 or answer.get("status") != "success", (sql, answer)
            assert "SECRET_KEY" not in json.dumps(answer) and "root:" not in json.dumps(answer), sql
        assert _released_files(release) == before
        check = _publish_check(published_warehouse.path)
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        wal.unlink(missing_ok=True)
        (release / "copied.csv").unlink(missing_ok=True)


def _lightness(colour: str) -> float:
    """CIE L* of an sRGB colour: what a reader who cannot tell the hues apart still sees."""
    linear = [(c / 12.92) if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
              for c in (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))]
    y = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    return 116 * y ** (1 / 3) - 16 if y > 216 / 24389 else 24389 / 27 * y


def test_the_trend_chart_s_series_differ_in_lightness_not_only_in_hue():
    dashboards = {d["slug"]: d for d in _export_files("dashboards").values()}
    charts = {c["slice_name"]: c for c in _export_files("charts").values()}
    for slug in (EN, ES):
        colours = dashboards[slug]["metadata"]["label_colors"]
        trend = next(c for c in charts.values() if c["viz_type"] == "echarts_timeseries_line"
                     and {m["label"] for m in c["params"]["metrics"]} <= set(colours))
        region, low, high, chile = (colours[m["label"]] for m in trend["params"]["metrics"])
        assert low == high  # the interval's two bounds: one style, told apart by position
        levels = sorted(_lightness(c) for c in (region, low, chile))
        assert min(b - a for a, b in zip(levels, levels[1:])) >= 15, (slug, levels)
        # The description says which line is which, in the dashboard's language.
        assert ("Black line" if slug == EN else "Línea negra") in trend["description"]
