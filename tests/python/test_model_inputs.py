"""The Python models read their inputs in one fixed order (infant_mortality.dbt_plugins.model_inputs)."""

import duckdb
import numpy as np

from infant_mortality.dbt_plugins.model_inputs import ordered_frame


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
