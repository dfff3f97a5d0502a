"""A real BI tool end to end: Apache Superset 6.1 (its own environment, `.venv-superset/`,
created once and cached; needs PyPI the first time, about 3 minutes) connects to a published
warehouse through duckdb-engine, read-only, lists the schemas and every mart's columns with
types, imports the dashboard shipped in bi/superset/export/ and runs each chart's query.

And the project's own environment: SQLAlchemy reflection (what a BI tool does when a dataset is
added) works on every mart with the pinned SQLAlchemy and duckdb-engine.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect
from sqlalchemy.pool import NullPool

from conftest import REPO_ROOT, query

SUPERSET_HOME = REPO_ROOT / ".venv-superset"
BI = REPO_ROOT / "bi" / "superset"


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


def _stamp() -> str:
    digest = hashlib.sha256()
    for name in ("requirements.txt", "constraints.txt"):
        digest.update((BI / name).read_bytes())
    return digest.hexdigest()[:16]


@pytest.fixture(scope="session")
def superset_python() -> Path:
    """Superset's interpreter, in an environment of its own (its pins are not the project's)."""
    venv = SUPERSET_HOME / "venv"
    python = venv / "bin" / "python"
    stamp = SUPERSET_HOME / f"ready-{_stamp()}"
    SUPERSET_HOME.mkdir(exist_ok=True)
    with open(SUPERSET_HOME / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists():
            for old in SUPERSET_HOME.glob("ready-*"):
                old.unlink()
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            started = time.monotonic()
            install = subprocess.run(
                [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                 "-r", str(BI / "requirements.txt"), "-c", str(BI / "constraints.txt")],
                capture_output=True, text=True, timeout=1800,
            )
            assert install.returncode == 0, f"installing Superset failed (needs PyPI):\n{install.stderr[-4000:]}"
            print(f"\nSuperset environment installed in {time.monotonic() - started:.0f} s")
            stamp.touch()
    return python


def test_superset_connects_lists_columns_imports_the_dashboard_and_runs_its_charts(
        published_warehouse, superset_python, tmp_path):
    config = tmp_path / "superset_config.py"
    config.write_text(
        'SECRET_KEY = "test-only-not-a-secret-8c1f0e"\n'
        f'SQLALCHEMY_DATABASE_URI = "sqlite:///{tmp_path / "superset.db"}"\n'
        "WTF_CSRF_ENABLED = False\n"
    )
    env = {**os.environ, "SUPERSET_CONFIG_PATH": str(config), "SUPERSET_HOME": str(tmp_path / "home")}
    env.pop("PYTHONPATH", None)
    started = time.monotonic()
    result = subprocess.run(
        [str(superset_python), str(BI / "superset_setup.py"), "import-and-check",
         "--warehouse", str(published_warehouse.path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    report = json.loads(result.stdout[result.stdout.index("{\n"):])
    check = report["check"]

    # The database, read-only, on the stable published path (not today's release folder).
    assert check["database"] == "Infant mortality (DuckDB)" and check["backend"] == "duckdb"
    assert check["uri"] == f"duckdb:///{published_warehouse.path}"
    assert check["read_only"] == {"connect_args": {"read_only": True}}
    assert "infant_mortality.marts" in check["schemas"]
    # Every mart with every column and a type, as DuckDB's catalog has them.
    expected = marts_with_columns(published_warehouse.path)
    assert sorted(check["marts"]) == sorted(expected)
    for table, columns in expected.items():
        assert [name for name, _ in check["marts"][table]] == [name for name, _ in columns], table
        assert all(type_name and type_name != "NullType" for _, type_name in check["marts"][table]), table
    # The dashboard and its three charts, each query answered with the marts' own numbers.
    assert report["imported"]["dashboard"] == "Infant mortality by commune (Chile)"
    charts = check["dashboard"]["charts"]
    assert len(charts) == 3
    ranking = next(c for name, c in charts.items() if "(ranking)" in name)
    n_communes = query(published_warehouse.path, "select count(*) from marts.fct_commune_vs_region "
                                                 "where indicator = 'imr' and period_label = '2010-2019'")[0][0]
    assert ranking["rows"] == n_communes == 346  # every commune of Chile
    top = query(published_warehouse.path, "select commune_name, rate_ratio from marts.fct_commune_vs_region "
                                          "where indicator = 'imr' and period_label = '2010-2019' and rank_in_region = 1")
    assert len(top) == 16  # the first-ranked commune of each region
    # The chart orders by rank_in_region only, so its first rows are first-ranked communes, of any region.
    assert len(ranking["first_rows"]) == 3
    assert all((r["commune_name"], r["rate_ratio"]) in top for r in ranking["first_rows"])
    trend = next(c for name, c in charts.items() if "(trend)" in name)
    regional = query(published_warehouse.path, "select year, rate_per_1000 from marts.fct_area_year_rates "
                                               "where area_level = 'region' and indicator = 'imr' order by year")
    assert trend["rows"] == len(regional) == 16 * 10  # one line per region, 2010-2019
    # Ordered by year only: the first rows are regions' 2010 rates, in any region order.
    assert len(trend["first_rows"]) == 3
    assert all((r["year"], r["rate_per_1000"]) in regional[:16] for r in trend["first_rows"])
    table = next(c for name, c in charts.items() if "(table)" in name)
    assert table["rows"] == query(published_warehouse.path, "select count(*) from marts.fct_commune_vs_region "
                                                            "where indicator = 'imr'")[0][0]
    print(f"\nSuperset {check['database']}: schemas {check['schemas']}; marts "
          + ", ".join(f"{t} ({len(c)} columns)" for t, c in check["marts"].items())
          + f"; dashboard {report['imported']['dashboard']!r} imported; chart rows "
          + ", ".join(f"{n!r}: {c['rows']}" for n, c in charts.items())
          + f"; {elapsed:.0f} s")
