"""The Python models read their inputs in one fixed order (infant_mortality.dbt_plugins.model_inputs)."""

import duckdb
import numpy as np
import pandas as pd
from conftest import REPO_ROOT

from infant_mortality.dbt_plugins.model_inputs import ordered_frame
from infant_mortality.dbt_plugins.model_outputs import typed_frame


def test_the_same_rows_stored_in_any_order_are_read_in_one_order():
    rng = np.random.default_rng(15)
    rows = [(int(rng.integers(0, 4)), None if i % 7 == 0 else float(rng.normal()), f"c{i % 3}") for i in range(200)]
    con = duckdb.connect()
    frames = []
    for order in (rows, rows[::-1], [rows[i] for i in rng.permutation(len(rows))]):
        con.execute('create or replace table t (k integer, "odd ""name""" double, c varchar)')
        con.executemany("insert into t values (?, ?, ?)", order)
        frames.append(ordered_frame(con.table("t")))
    assert frames[0].equals(frames[1]) and frames[0].equals(frames[2])
    first = frames[0]
    assert list(first["k"]) == sorted(first["k"]) and len(first) == 200
    # Within equal keys the next column decides, NULLs last.
    block = first[first["k"] == first["k"].iloc[0]]["odd \"name\""]
    assert block.isna().sum() > 0 and block.iloc[-block.isna().sum():].isna().all()
    # A float sum over the frame no longer depends on how the table was stored.
    assert len({float(f["odd \"name\""].sum()) for f in frames}) == 1


# Columns that say which build this is, not what it computed.
BUILD_IDENTITY = {"build_id", "built_at"}


def test_two_builds_of_the_same_data_publish_identical_tables(bundled_warehouse, published_warehouse):
    """The session's two builds of the bundled data (dbt build, and the publishing command)
    hold the same rows in every table they both publish, compared with EXCEPT ALL both ways: no
    statistic depends on the order in which DuckDB happened to return a model's inputs."""
    con = duckdb.connect(str(bundled_warehouse), read_only=True)
    con.execute(f"attach '{published_warehouse.path}' as published (read_only)")
    here = con.execute("select current_database()").fetchone()[0]
    tables = con.execute(
        "select table_schema, table_name from information_schema.tables where table_catalog = ? "
        "intersect select table_schema, table_name from information_schema.tables where table_catalog = 'published'",
        [here]).fetchall()
    assert len([t for t in tables if t[0] == "marts"]) >= 17 and len(tables) > 35
    differing = {}
    for schema, table in tables:
        columns = [c for (c,) in con.execute(
            "select column_name from information_schema.columns where table_catalog = ? and table_schema = ? "
            "and table_name = ?", [here, schema, table]).fetchall() if c not in BUILD_IDENTITY]
        listed = ", ".join(f'"{c}"' for c in columns)
        for left, right in ((here, "published"), ("published", here)):
            extra = con.execute(f"select count(*) from (select {listed} from {left}.{schema}.{table} "
                                f"except all select {listed} from {right}.{schema}.{table})").fetchone()[0]
            if extra:
                differing[f"{schema}.{table} ({left} only)"] = extra
    assert differing == {}


def test_the_frame_is_what_duckdb_df_gives_for_every_column_type():
    """Arrow builds the frame (faster, mostly outside the interpreter lock); it must equal
    DuckDB's own `.df()` of the ordered rows in dtypes and values, NULLs included, and a type the
    Arrow path does not know (a date, a decimal) is read by `.df()` itself."""
    import pandas as pd

    con = duckdb.connect()
    con.execute("""create table t as select
        i::bigint as b, case when i % 5 = 0 then null else i end::bigint as b_null,
        i::integer as i32, case when i % 4 = 0 then null else i end::integer as i32_null,
        i::smallint as i16, (i % 100)::tinyint as i8,
        i % 3 = 0 as flag, case when i % 6 = 0 then null else i % 2 = 0 end as flag_null,
        i / 7.0 as d, case when i % 9 = 0 then null else sqrt(i) end as d_null, (i / 3)::float as f,
        sum(i::hugeint) over (order by i) as huge, case when i % 8 = 0 then null else i::hugeint end as huge_null,
        'c' || (i % 13) as s, case when i % 10 = 0 then null else 'é' || i end as s_null
        from range(1, 400) r(i)""")
    rel = con.table("t")
    expected = rel.order(", ".join(f'"{c}" nulls last' for c in rel.columns)).df()
    got = ordered_frame(rel)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert str(got["b_null"].dtype) == "Int64" and str(got["b"].dtype) == "int64"
    assert str(got["flag_null"].dtype) == "boolean" and str(got["huge"].dtype) == "float64"
    with_date = con.sql("select date '2020-01-01' + i::integer as day, i::decimal(9, 2) / 3 as amount from range(5) r(i)")
    pd.testing.assert_frame_equal(ordered_frame(with_date), with_date.order('"day", "amount"').df(), check_exact=True)


def test_a_text_column_with_no_value_is_stored_as_text():
    # An empty result, and a note that is NULL on every row: DuckDB types both NULL, which the
    # marts' contracts refuse; through typed_frame they are VARCHAR and the NULLs stay NULLs.
    empty = typed_frame(pd.DataFrame({"note": pd.Series([], dtype=object), "rate": pd.Series([], dtype=float)}))
    assert [str(t) for t in duckdb.sql("select * from empty").types] == ["VARCHAR", "DOUBLE"]
    rows = typed_frame(pd.DataFrame({"note": [None, None], "label": ["a", None], "converged": [True, None]}))
    stored = duckdb.sql("select * from rows")
    assert [str(t) for t in stored.types] == ["VARCHAR", "VARCHAR", "BOOLEAN"]
    assert stored.fetchall() == [(None, "a", True), (None, None, None)]


def test_every_python_model_returns_through_typed_frame():
    models = sorted(REPO_ROOT.joinpath("models").rglob("*.py"))
    returning_frames = [path for path in models if "ordered_frame(" in path.read_text()]
    assert len(returning_frames) >= 10
    untyped = [path.name for path in returning_frames if "return typed_frame(" not in path.read_text()]
    assert untyped == []
