"""The promise of issue 18, checked cell by cell between two built warehouses.

Every published rate of a build on faulted input either equals what the clean input gives, or
is unavailable with an audit row that names the cell; otherwise the build must have stopped
(which the caller checks: there is then no faulted warehouse to compare).

A cell is one row of `marts.fct_area_year_rates` (area_level, area_code, year, indicator).
An audit row names a cell when its `record_key` starts with `<area_level>=<area_code> year=<year>`
(the count-problem rows: `commune=13123 year=2018 indicator=imr`, `region=13 year=2019 ...`)
or, for a commune cell, when it carries that commune code and year (record-level rows).
"""

from __future__ import annotations

import math
from pathlib import Path

import duckdb

CELLS_SQL = """
    select area_level, area_code, year, indicator, deaths, live_births, rate_per_1000
    from marts.fct_area_year_rates
"""
AUDIT_SQL = "select record_key, commune_code, year from marts.audit_data_quality"

Cell = tuple[str, str, int, str]

# The marts check_promise reads, as dbt selectors with what they need: a build made only to be
# checked against the promise builds these (about a sixth of the bundled build's model time).
PROMISE_MODELS = ("+fct_area_year_rates", "+audit_data_quality")


def _read(path: Path | str) -> tuple[dict[Cell, tuple], list[tuple]]:
    with duckdb.connect(str(path), read_only=True) as con:
        cells = {tuple(row[:4]): tuple(row[4:]) for row in con.execute(CELLS_SQL).fetchall()}
        audit = con.execute(AUDIT_SQL).fetchall()
    return cells, audit


def _is_audited(cell: Cell, audit: list[tuple]) -> bool:
    area_level, area_code, year, _ = cell
    prefix = f"{area_level}={area_code} year={year}"
    for record_key, commune_code, audit_year in audit:
        if record_key == prefix or record_key.startswith(prefix + " "):
            return True
        if area_level == "commune" and commune_code == area_code and audit_year == year:
            return True
    return False


def _same(clean: tuple, faulted: tuple) -> bool:
    (c_deaths, c_births, c_rate), (f_deaths, f_births, f_rate) = clean, faulted
    return (c_deaths, c_births) == (f_deaths, f_births) and math.isclose(c_rate, f_rate, rel_tol=1e-12)


def check_promise(clean_db: Path | str, faulted_db: Path | str, years: range | None = None) -> list[str]:
    """Violations of the promise, one sentence each (an empty list: the promise holds). `years`:
    compare only the cells of these years (a valid setting such as input_year_max narrows them)."""
    clean, _ = _read(clean_db)
    faulted, audit = _read(faulted_db)
    violations = []
    cells = set(clean) | set(faulted)
    for cell in sorted((c for c in cells if years is None or c[2] in years), key=lambda c: tuple(map(str, c))):
        name = "{}={} year={} {}".format(*cell)
        clean_value, faulted_value = clean.get(cell), faulted.get(cell)
        faulted_published = faulted_value is not None and faulted_value[2] is not None
        clean_published = clean_value is not None and clean_value[2] is not None
        if faulted_published and not clean_published:
            violations.append(f"{name}: published {faulted_value[2]!r} from faulted input, "
                              "but the clean input gives no rate")
        elif faulted_published and not _same(clean_value, faulted_value):
            violations.append(f"{name}: published deaths/births/rate {faulted_value} differ from "
                              f"the clean build's {clean_value}")
        elif clean_published and not faulted_published and not _is_audited(cell, audit):
            violations.append(f"{name}: rate {clean_value[2]!r} became unavailable with no audit row naming the cell")
    return violations


def differing_marts(clean_db: Path | str, other_db: Path | str,
                    ignore: tuple[str, ...] = ("meta_build", "audit_input_files")) -> dict[str, int]:
    """Every mart compared cell by cell (as whole rows, both ways): {mart: rows that differ} for
    the marts that are not identical. meta_build (build time, vars) and audit_input_files (paths)
    name the build, not its numbers; so does the folder of a `source_file` (raw_data_dir), which
    is compared by the file's name."""
    with duckdb.connect() as con:
        con.execute("attach ? as clean (read_only)", [str(clean_db)])
        con.execute("attach ? as other (read_only)", [str(other_db)])
        names = [row[0] for row in con.execute(
            "select table_name from duckdb_tables() where database_name = 'clean' and schema_name = 'marts' "
            "order by table_name").fetchall()]
        differing = {}
        for name in names:
            if name in ignore:
                continue
            columns = [row[0] for row in con.execute(
                "select column_name from duckdb_columns() where database_name = 'clean' and schema_name = 'marts' "
                "and table_name = ? order by column_index", [name]).fetchall()]
            select = ", ".join(f"regexp_extract(\"{c}\", '[^/\\\\]+$') as \"{c}\"" if c == "source_file" else f'"{c}"'
                               for c in columns)
            a, b = f"(select {select} from clean.marts.{name})", f"(select {select} from other.marts.{name})"
            (rows,) = con.execute(f"select (select count(*) from (from {a} except all from {b})) "
                                  f"+ (select count(*) from (from {b} except all from {a}))").fetchone()
            if rows:
                differing[name] = rows
    return differing
