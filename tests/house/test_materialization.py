"""The project's `table` materialization (macros/materializations/table.sql) against dbt-duckdb's
own, on a small project of its own: the same tables, columns, types, comments, constraints and
rows; a rebuild replaces a table (or a view of the same name); a failed rebuild, or one that
breaks the contract, leaves the old table as it was and nothing else behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import duckdb
import pytest

from conftest import DBT, REPO_ROOT

MODELS = {
    "people.sql": """
        {{ config(materialized=var('people_as', 'table')) }}
        select * from (values (1, 'Ñuñoa', {{ var('size', 10) }}), (2, 'Arica', 20)) as t(id, commune, size)
        {% if var('fail', false) %} where error('this rebuild fails') is null {% endif %}
        """,
    "sizes.sql": """
        select id, {{ 'null' if var('break_contract', false) else 'size' }}::bigint as size, 'x' as label
        from {{ ref('people') }}
        """,
    "scored.py": """
        def model(dbt, session):
            frame = dbt.ref("sizes").df()
            frame["score"] = frame["size"] * 1.5
            return frame
        """,
    "schema.yml": """
        version: 2
        models:
          - name: people
            description: "People, one row each (it's a test)."
            columns:
              - {name: id, description: The key.}
              - {name: commune, description: Where they live.}
              - {name: not_a_column, description: Documented but absent from the table.}
          - name: sizes
            description: Contracted.
            config: {contract: {enforced: true}}
            constraints:
              - {type: primary_key, columns: [id]}
              - {type: check, expression: "size > 0 or size is null"}
            columns:
              - {name: id, data_type: integer, description: The key., constraints: [{type: not_null}]}
              - {name: size, data_type: bigint, description: A size., constraints: [{type: not_null}]}
              - {name: label, data_type: varchar}
          - name: scored
            description: A Python model.
            columns:
              - {name: score, description: Size times 1.5.}
        """,
}


def _project(folder: Path, with_override: bool) -> Path:
    (folder / "models").mkdir(parents=True)
    (folder / "macros").mkdir()
    (folder / "dbt_project.yml").write_text(textwrap.dedent("""
        name: materialization_check
        version: "1.0.0"
        config-version: 2
        profile: materialization_check
        models:
          materialization_check:
            +materialized: table
            +persist_docs: {relation: true, columns: true}
        """))
    (folder / "profiles.yml").write_text(textwrap.dedent(f"""
        materialization_check:
          target: dev
          outputs:
            dev: {{type: duckdb, path: "{folder / 'check.duckdb'}", threads: 1}}
        """))
    for name, text in MODELS.items():
        (folder / "models" / name).write_text(textwrap.dedent(text))
    if with_override:
        shutil.copy(REPO_ROOT / "macros" / "materializations" / "table.sql", folder / "macros" / "table.sql")
        # duckdb_escape_comment comes from dbt-duckdb; the project's materialization needs nothing else.
    return folder


def _dbt(folder: Path, *args: str, **dbt_vars) -> subprocess.CompletedProcess:
    command = [str(DBT), "run", "--profiles-dir", str(folder), "--project-dir", str(folder), *args]
    if dbt_vars:
        command += ["--vars", str(dbt_vars)]
    env = {**os.environ, "DBT_USE_COLORS": "false", "DBT_LOG_PATH": str(folder / "logs"),
           "DBT_TARGET_PATH": str(folder / "target")}
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)


def _catalog(database: Path) -> dict:
    with duckdb.connect(str(database), read_only=True) as con:
        def rows(sql):
            return con.execute(sql).fetchall()
        return {
            "tables": rows("select table_name, comment from duckdb_tables() order by all"),
            "views": rows("select view_name from duckdb_views() where not internal order by all"),
            "columns": rows("select table_name, column_name, data_type, is_nullable, comment from duckdb_columns() "
                            "where table_name in (select table_name from duckdb_tables()) order by all"),
            "constraints": rows("select table_name, constraint_type, constraint_text from duckdb_constraints() "
                                "order by all"),
            "rows": {t: rows(f'select * from "{t}" order by all')
                     for (t,) in rows("select table_name from duckdb_tables() order by all")},
        }


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The small project built twice from scratch: with the project's materialization and with
    dbt-duckdb's own."""
    ours = _project(tmp_path_factory.mktemp("ours"), with_override=True)
    theirs = _project(tmp_path_factory.mktemp("theirs"), with_override=False)
    for folder in (ours, theirs):
        result = _dbt(folder)
        assert result.returncode == 0, result.stdout[-3000:]
    return ours, theirs


def test_a_fresh_build_equals_dbt_duckdbs_own_materialization(built):
    ours, theirs = built
    mine, reference = _catalog(ours / "check.duckdb"), _catalog(theirs / "check.duckdb")
    assert mine == reference
    assert ("people", "People, one row each (it's a test).") in mine["tables"]
    assert ("sizes", "PRIMARY KEY", "PRIMARY KEY(id)") in mine["constraints"]
    assert mine["rows"]["scored"] == [(1, 10, "x", 15.0), (2, 20, "x", 30.0)]


def test_a_rebuild_replaces_tables_and_a_view_of_the_same_name(built):
    ours, _ = built
    database = ours / "check.duckdb"
    result = _dbt(ours, people_as="view", size=11)
    assert result.returncode == 0, result.stdout[-3000:]
    assert _catalog(database)["views"] == [("people",)]
    result = _dbt(ours, size=12)  # the view becomes a table again, every model rebuilt over the old
    assert result.returncode == 0, result.stdout[-3000:]
    catalog = _catalog(database)
    assert catalog["views"] == [] and [t for t, _ in catalog["tables"]] == ["people", "scored", "sizes"]
    assert catalog["rows"]["people"] == [(1, "Ñuñoa", 12), (2, "Arica", 20)]
    assert catalog["rows"]["scored"] == [(1, 12, "x", 18.0), (2, 20, "x", 30.0)]
    assert ("people", "id", "INTEGER", True, "The key.") in catalog["columns"]


@pytest.mark.e2e  # fault injection
@pytest.mark.parametrize("damage", [{"fail": True}, {"break_contract": True}])
def test_a_failed_rebuild_leaves_the_old_table_and_nothing_else(built, damage):
    ours, _ = built
    database = ours / "check.duckdb"
    assert _dbt(ours, size=13).returncode == 0
    before = _catalog(database)
    result = _dbt(ours, "--select", "people" if "fail" in damage else "sizes", size=14, **damage)
    assert result.returncode != 0
    assert ("this rebuild fails" if "fail" in damage else "NOT NULL constraint failed") in result.stdout
    assert _catalog(database) == before  # no __dbt_tmp table, the old rows and comments kept
