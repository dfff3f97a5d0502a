"""The tools of the people who read the warehouse, run for real on a published warehouse: the
DuckDB command line from the environment, R (base R reading the CSV export; the Parquet files
through R's arrow package is not installable here, so their types are checked against what
arrow maps to R), and the commands the README gives."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import REPO_ROOT, query

DUCKDB_CLI = Path(sys.executable).with_name("duckdb")


def test_the_duckdb_cli_comes_with_the_environment_and_reads_the_published_file(published_warehouse, tmp_path):
    assert DUCKDB_CLI.exists(), "duckdb-cli is in requirements.lock: .venv/bin/duckdb"
    # From another folder, read-only, as the README shows it.
    result = subprocess.run(
        [str(DUCKDB_CLI), "-readonly", "-csv", str(published_warehouse.path), "-c",
         "select count(*) as communes from marts.dim_commune; "
         "select round(rate_per_1000, 2) as tmi from marts.fct_area_year_rates "
         "where area_level = 'region' and area_code = '13' and indicator = 'imr' and year = 2010; "
         "select round(rate_per_1000, 2) as tmi_chile from marts.fct_area_year_rates "
         "where area_level = 'country' and indicator = 'imr' and year = 2010"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    # Region 13 (Metropolitana) 7.14 and Chile 7.44 per 1000 in 2010 (INE/DEIS publish 7.4 for Chile).
    assert result.stdout.split() == ["communes", "346", "tmi", "7.14", "tmi_chile", "7.44"]
    # And the Parquet files, with no database at all.
    parquet = published_warehouse.parquet / "fct_area_year_rates.parquet"
    rows = subprocess.run([str(DUCKDB_CLI), "-csv", "-c", f"select count(*) as n from '{parquet}'"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert rows.stdout.split() == ["n", str(query(published_warehouse.path,
                                                  "select count(*) from marts.fct_area_year_rates")[0][0])]
    # Read-only means read-only.
    write = subprocess.run([str(DUCKDB_CLI), "-readonly", str(published_warehouse.path), "-c",
                            "create table marts.x as select 1"], capture_output=True, text=True, timeout=60)
    assert write.returncode != 0 and "read-only" in (write.stdout + write.stderr)


# What R's arrow package makes of each Parquet type (arrow's R type mapping, "Arrow to R" table
# of https://arrow.apache.org/docs/r/articles/data_types.html). A timestamp without time zone
# (meta_build.built_at, written in UTC) becomes POSIXct, the instant read as UTC.
R_ARROW_TYPES = {"string": "character", "large_string": "character", "int32": "integer", "int64": "integer64/numeric",
                 "double": "numeric", "float": "numeric", "bool": "logical", "date32[day]": "Date",
                 "timestamp[us]": "POSIXct"}


def test_parquet_exports_use_only_types_r_reads(published_warehouse):
    """`arrow::read_parquet()` in R (documented in docs/using/querying.md) maps these types; no
    unsigned, decimal or nested column that R would read as something surprising."""
    files = sorted(published_warehouse.parquet.glob("*.parquet"))
    assert files
    for path in files:
        schema = pq.read_schema(path)
        odd = [f"{field.name}: {field.type}" for field in schema if str(field.type) not in R_ARROW_TYPES]
        assert not odd, f"{path.name}: {odd}"
        # Text is UTF-8 with the accents intact.
    names = pq.read_table(published_warehouse.parquet / "dim_commune.parquet", columns=["commune_name"])
    assert "Ñuñoa" in names.column("commune_name").to_pylist()


RSCRIPT = shutil.which("Rscript")


@pytest.mark.skipif(RSCRIPT is None, reason="R is not installed (.ci/run installs r-base-core)")
def test_r_reads_the_csv_export_with_accents_and_numbers(published_warehouse, tmp_path):
    csv_path = tmp_path / "comparison.csv"
    excel_path = tmp_path / "comparison_excel.csv"
    sql = ("select commune_code, commune_name, deaths, live_births, rate_per_1000, comparison "
           "from marts.fct_commune_vs_region where indicator = 'imr' and period_label = '2010-2019' order by commune_code")
    for target, extra in ((csv_path, []), (excel_path, ["--excel"])):
        made = subprocess.run([sys.executable, "-m", "infant_mortality.query", "--warehouse",
                               str(published_warehouse.path), "--csv", str(target), *extra, sql],
                              capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
    script = textwrap.dedent("""
        args <- commandArgs(trailingOnly = TRUE)
        d <- read.csv(args[1], encoding = "UTF-8", colClasses = c(commune_code = "character"))
        e <- read.csv(args[2], fileEncoding = "UTF-8-BOM", colClasses = c(commune_code = "character"))
        stopifnot(identical(names(d), names(e)))
        cat(nrow(d), names(d)[1], class(d$rate_per_1000), class(d$deaths), "\\n")
        cat(d$commune_name[d$commune_code == "13120"], sprintf("%.4f", sum(d$deaths) / sum(d$live_births) * 1000), "\\n")
    """)
    result = subprocess.run([RSCRIPT, "-e", script, str(csv_path), str(excel_path)],
                            capture_output=True, text=True, timeout=120, env={**os.environ, "LANG": "C.UTF-8"})
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.strip().splitlines()
    # Every commune of the 346 in the reference list (the whole country is bundled).
    assert first.split() == ["346", "commune_code", "numeric", "integer"]
    expected = query(published_warehouse.path, "select sum(deaths) * 1000.0 / sum(live_births) "
                                               "from marts.fct_commune_vs_region "
                                               "where indicator = 'imr' and period_label = '2010-2019'")[0][0]
    name, rate = second.rsplit(" ", 1)
    assert name == "Ñuñoa" and float(rate) == pytest.approx(expected, abs=1e-4)


@pytest.mark.skipif(RSCRIPT is None, reason="R is not installed (.ci/run installs r-base-core)")
def test_r_runs_the_generated_reader_and_gets_codes_as_text_and_flags_as_logical(published_warehouse, tmp_path):
    csv_path = tmp_path / "comparison.csv"
    made = subprocess.run([sys.executable, "-m", "infant_mortality.query", "--warehouse", str(published_warehouse.path),
                           "--csv", str(csv_path), "--readers", "select * from marts.fct_commune_vs_region order by all"],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    script = textwrap.dedent("""
        source("comparison.R")
        for (name in names(comparison)) cat(name, class(comparison[[name]]), "\\n")
        cat("VALUES", comparison$commune_code[1], comparison$region_code[1], sum(comparison$is_unreliable),
            sum(is.na(comparison$rest_rate_ratio_ci95_upper)), "\\n")
    """)
    result = subprocess.run([RSCRIPT, "-e", script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "LANG": "C.UTF-8"})
    assert result.returncode == 0, result.stderr
    *classes, values = result.stdout.strip().splitlines()
    got = dict(line.split() for line in classes)
    catalog = query(published_warehouse.path, "select column_name, data_type from duckdb_columns() where "
                                              "schema_name = 'marts' and table_name = 'fct_commune_vs_region' order by column_index")
    expected = {name: {"VARCHAR": "character", "BOOLEAN": "logical"}.get(kind, "numeric") for name, kind in catalog}
    assert got == expected
    first_code, first_region = query(published_warehouse.path, "select commune_code, region_code from "
                                                               "marts.fct_commune_vs_region order by all limit 1")[0]
    unreliable, open_limits = query(published_warehouse.path, "select count(*) filter (where is_unreliable), "
                                    "count(*) filter (where rest_rate_ratio_ci95_upper is null) from marts.fct_commune_vs_region")[0]
    assert first_code == "01101" and first_region == "01"  # the leading zeros R must keep
    assert values.split() == ["VALUES", first_code, first_region, str(unreliable), str(open_limits)]
