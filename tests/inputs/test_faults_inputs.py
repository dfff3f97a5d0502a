"""Input faults of issue 41 (round three): each case a variant of the bundled files (or of the
settings) that once ended in a message without the file or line, a DuckDB binder or constraint
error, a null without a reason, or a silently relabelled result; each is now a stop naming the
file, the real line and the fix, or a published reason (docs/methods/core.md, docs/methods/inputs.md and docs/methods/comparisons.md).

Stopping cases run only the models that read the file (their parents are sources), so each
costs one dbt start; cases in different files share a run (both models stop, each with its
own message).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import REPO_ROOT, build_selected, microdata_warehouse, query, run_dbt
from promise import PROMISE_MODELS

# End to end: a group of its own (`make test-e2e`; `make check` and CI run it with the rest).
pytestmark = pytest.mark.e2e

IGME = "un_igme_chile_2000_2019.csv"
IGME_BOUNDS = "un_igme_2015_round_chile_bounds.csv"
IGME_MODELS = ["run", "--select", "stg_un_igme__estimates_2020_round", "stg_un_igme__bounds_2015_round"]


def copy_raw(destination: Path) -> Path:
    shutil.copytree(REPO_ROOT / "data" / "raw", destination)
    return destination


def edit(path: Path, change) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(change(lines)), encoding="utf-8")


def bad_value_after_a_blank_line(lines):
    """A blank line 21, then a value that is not a number on line 50 (the file's own numbering)."""
    lines = lines[:20] + ["\n"] + lines[20:]
    fields = lines[49].rstrip("\n").split(",")
    fields[-1] = "x9"
    lines[49] = ",".join(fields) + "\n"
    return lines


def swapped_bounds(lines):
    """IMR 1990: Lower (line 2) and Upper (line 4) exchanged."""
    lower, upper = lines[1].split(","), lines[3].split(",")
    lower[3], upper[3] = upper[3], lower[3]
    return [lines[0], ",".join(lower), lines[2], ",".join(upper)] + lines[4:]


IGME_RUNS = {
    "a bad value after a blank line; swapped bounds": (
        {IGME: bad_value_after_a_blank_line, IGME_BOUNDS: swapped_bounds},
        # Before: "line 49" (read_csv skipped the blank line); a CHECK constraint error in
        # fct_external_benchmarks with no file.
        ["Not a number in {dir}/" + IGME + ' line 50: value = "x9" (write it with digits and at most one decimal point)',
         "Bounds out of order in {dir}/" + IGME_BOUNDS + " lines 2, 3, 4 (imr rate_per_1000 1990): Lower = 16.4, "
         "Median = 16.0, Upper = 15.7; the bounds must satisfy Lower <= Median <= Upper"]),
    "a duplicated row; an extra field": (
        # Before: a failed uniqueness test with no line; a DuckDB binder error with no file.
        {IGME: lambda lines: lines[:30] + [lines[29]] + lines[30:],
         IGME_BOUNDS: lambda lines: lines[:10] + [lines[10].rstrip("\n") + ",extra\n"] + lines[11:]},
        ["Duplicated row in {dir}/" + IGME + " line 31: same key as line 30 (indicator=imr measure=rate_per_1000 "
         "sex=female year=2008). Each key must appear once; remove the extra row.",
         "{dir}/" + IGME_BOUNDS + ' line 11: 5 comma-separated fields where the header has 4 ("IMR,Lower,1993,12.4,extra");'
         " write the line as indicator,bound,year,value"]),
    "a renamed header": (
        # Before: Binder Error: Referenced column "units" not found in FROM clause!
        {IGME: lambda lines: ["indicator,age,sex,unit,year,value\n"] + lines[1:]},
        ["Unexpected header in {dir}/" + IGME + " line 1: expected indicator,age,sex,units,year,value, got "
         '"indicator,age,sex,unit,year,value" (write line 1 as the expected header']),
}


@pytest.fixture(scope="module")
def stop_folder(tmp_path_factory):
    """One raw folder and database for the stopping cases: the same vars and database let dbt
    reuse its parse (a folder of its own costs each case a full parse, ~13 s of CPU)."""
    root = tmp_path_factory.mktemp("stops")
    return copy_raw(root / "raw"), root / "stop.duckdb"


@pytest.fixture
def stop_raw(stop_folder):
    """The shared raw folder and database for one stopping case, the bundled files put back after it."""
    raw, database = stop_folder
    yield raw, database
    shutil.copytree(REPO_ROOT / "data" / "raw", raw, dirs_exist_ok=True)


@pytest.mark.parametrize("case", list(IGME_RUNS))
def test_a_broken_un_igme_file_stops_naming_file_real_line_and_fix(stop_raw, case):
    changes, messages = IGME_RUNS[case]
    raw, database = stop_raw
    for name, change in changes.items():
        edit(raw / name, change)
    result = run_dbt(IGME_MODELS, database, {"raw_data_dir": str(raw)}, check=False)
    assert result.returncode != 0
    for message in messages:
        assert message.format(dir=raw) in result.stdout, result.stdout[-3000:]
    assert "Binder Error" not in result.stdout and "Constraint Error" not in result.stdout


INE = "ine_vital_statistics_chile_2010_2019.csv"
DEIS = "deis_deaths_by_commune_year_sex_agegroup_1990_2019.csv"
INE_MODELS = ["run", "--select", "stg_ine__vital_statistics", "stg_deis_aggregates__deaths_by_age_group"]


def test_cr_only_line_ends_and_a_long_header_are_quoted_never_dumped(stop_raw):
    # Before: the CR-only file was one 285,000-character "line", dumped whole into the
    # unexpected-header message (285,165 characters).
    raw, database = stop_raw
    (raw / INE).write_bytes((raw / INE).read_bytes().replace(b"\n", b"\r"))
    edit(raw / DEIS, lambda lines: [lines[0].rstrip("\n") + ",x" * 300 + "\n"] + lines[1:])
    result = run_dbt(INE_MODELS, database, {"raw_data_dir": str(raw)}, check=False)
    assert result.returncode != 0
    assert (f"{raw / INE}: its lines end with a carriage return only (CR, no line feed), so the file reads as a "
            f"single line of 284,985 bytes; save it with LF (or CRLF) line ends") in result.stdout, result.stdout[-3000:]
    assert f"Unexpected header in {raw / DEIS} line 1: expected" in result.stdout
    assert "... (" in result.stdout and "more characters)" in result.stdout
    # No message line quotes more than a few hundred characters of input.
    assert max(len(line) for line in result.stdout.splitlines()) < 1000


@pytest.mark.parametrize("encoding, kind", [("utf-16", "UTF-16 LE"), ("utf-16-be", "UTF-16 BE")])
def test_a_utf16_file_is_named_utf16_not_latin1(tmp_path, encoding, kind):
    # Before: "line 1: byte 0xFF is not UTF-8 text (the file looks latin-1 encoded)". utf-16-be has
    # no byte-order mark: the NUL byte beside every ASCII character tells.
    from infant_mortality.dbt_plugins.deis_files import DeisFileError, read_text_strict

    path = tmp_path / INE
    path.write_bytes((REPO_ROOT / "data" / "raw" / INE).read_text(encoding="utf-8").encode(encoding))
    with pytest.raises(DeisFileError) as raised:
        read_text_strict(str(path))
    assert str(raised.value) == (f"{path}: the file is {kind} encoded (byte-order mark or a NUL byte beside every "
                                 f"character), not UTF-8; save it as UTF-8")


def test_a_utf16_ine_file_stops_the_build_saying_utf16(stop_raw):
    raw, database = stop_raw
    (raw / INE).write_bytes((raw / INE).read_text(encoding="utf-8").encode("utf-16"))
    result = run_dbt(["run", "--select", "stg_ine__vital_statistics"], database, {"raw_data_dir": str(raw)}, check=False)
    assert result.returncode != 0
    assert f"{raw / INE}: the file is UTF-16 LE encoded" in result.stdout, result.stdout[-3000:]
    assert "latin-1" not in result.stdout


def test_a_utf16_deis_microdata_file_is_named_utf16(tmp_path):
    from infant_mortality.dbt_plugins.deis_files import DeisFileError, sniff_file

    path = tmp_path / "deaths.csv"
    path.write_bytes("ANO_DEF;FECHA_DEF\n2019;2019-01-01\n".encode("utf-16"))
    with pytest.raises(DeisFileError, match="UTF-16 LE encoded"):
        sniff_file(str(path), "deaths")


BIRTHS_HEADER = (b"ANO_NAC;MES_NAC;DIA_NAC;SEXO;PESO;TALLA;SEMANAS;EDAD_M;COMUNA;GLOSA_COMUNA;REGION\n"
                 b"2019;1;1;1;3000;50;39;30;15101;Arica;15\n")


@pytest.fixture(scope="module")
def blank_line_bomb(tmp_path_factory) -> Path:
    """A births .csv.gz of 2 GiB of blank lines after one record: 2.2 MB on disk."""
    from isal import igzip

    path = tmp_path_factory.mktemp("bomb") / "nacimientos_2019.csv.gz"
    with igzip.open(path, "wb", compresslevel=1) as handle:
        handle.write(BIRTHS_HEADER)
        block = b"\n" * (1 << 20)
        for _ in range(2048):
            handle.write(block)
    return path


def test_a_gzip_that_expands_without_end_is_refused_in_seconds(blank_line_bomb):
    # Before: read, scanned and listed blank line by blank line; killed after 17 minutes (here the
    # old inspection gave no answer within 120 s).
    import time

    from infant_mortality.dbt_plugins.deis_files import inspect_json

    started = time.monotonic()
    answer = json.loads(inspect_json(str(blank_line_bomb), "births"))
    size = blank_line_bomb.stat().st_size
    assert answer["error"] == (
        f"DEIS births input: {blank_line_bomb}: the compressed file ({size:,} bytes) expands to more than "
        f"{200 * size:,} bytes, over 200 times its size (dbt var deis_gzip_max_ratio): not a plausible text file "
        f"(blank lines or a decompression bomb?); refused before reading on. Decompress it and check its content, "
        f"or raise deis_gzip_max_ratio if the file is genuine")
    assert time.monotonic() - started < 60


def test_the_gzip_bound_follows_the_var_and_spares_ordinary_files(tmp_path):
    from isal import igzip

    from infant_mortality.dbt_plugins.deis_files import inspect_json

    path = tmp_path / "nacimientos_2019.csv.gz"
    records = BIRTHS_HEADER + b"2019;2;1;2;3100;49;40;31;15101;Arica;15\n" * 200_000   # 8 MB, ~100:1
    with igzip.open(path, "wb") as handle:
        handle.write(records)
    assert "error" not in json.loads(inspect_json(str(path), "births", "auto", str(tmp_path / "c"), "{}"))
    tight = json.loads(inspect_json(str(path), "births", "auto", str(tmp_path / "c"), json.dumps({"gzip_max_ratio": 20})))
    assert "over 20 times its size (dbt var deis_gzip_max_ratio)" in tight["error"]


def test_the_build_stops_on_a_gzip_bomb_naming_the_file(tmp_path, blank_line_bomb):
    from infant_mortality.tools.generate_deis import Options, generate

    generate(Options(out_dir=tmp_path / "files", regions=("15",), years=(2019,), project_dir=REPO_ROOT))
    deaths = next((tmp_path / "files").glob("synthetic_deis_deaths_*.csv"))
    result = run_dbt(["run", "--select", "+stg_deis__births"], tmp_path / "bomb.duckdb",
                     {"vital_source": "deis_microdata", "deis_deaths_path": str(deaths),
                      "deis_births_path": str(blank_line_bomb), "deis_cache_dir": str(tmp_path / "cache")},
                     check=False)
    assert result.returncode != 0
    assert f"DEIS births input: {blank_line_bomb}: the compressed file" in result.stdout, result.stdout[-3000:]
    assert "(dbt var deis_gzip_max_ratio)" in result.stdout


# --- The year window does what it says (item 5 of issue 41) ----------------------------------
# Before: input_year_min 2005 made all 3,460 commune-years deis_row_unattributable (the DEIS
# lines of 1990-2004 had a year "out of range", so they could belong to any year); max 2015 and
# min 2000 left 344 and 342 communes a year unattributable. Now a line of a real year outside
# the window is counted outside it (one audit row per file and year), and the build holds
# exactly the years inside, each equal to the clean build.

YEARS_SQL = ("select area_level, area_code, year, indicator, deaths, live_births, rate_per_1000, unavailable_reason "
             "from marts.fct_area_year_rates where year between ? and ? order by all")


def missing_igme_deaths_2015(lines):
    return [line for line in lines if not (line.startswith("sh_dyn_imrtn,") and ",bothsex,number,2015," in line)]


@pytest.fixture(scope="module")
def window_2005_2015(tmp_path_factory):
    """One build for two window cases and the missing UN IGME row: vars input_year_min 2005 and
    input_year_max 2015, on a copy of data/raw without UN IGME's 2015 infant deaths line."""
    root = tmp_path_factory.mktemp("window")
    raw = copy_raw(root / "raw")
    edit(raw / IGME, missing_igme_deaths_2015)
    database = root / "window.duckdb"
    # The marts the tests read (fct_external_benchmarks is among the audit's parents).
    run_dbt(build_selected(*PROMISE_MODELS, "+fct_external_benchmarks"), database,
            {"raw_data_dir": str(raw), "input_year_min": 2005, "input_year_max": 2015})
    return database, raw


def test_a_narrowed_window_builds_exactly_the_years_inside(bundled_warehouse, window_2005_2015):
    database, raw = window_2005_2015
    assert query(database, "select min(year), max(year) from marts.fct_area_year_rates") == [(2010, 2015)]
    assert query(database, YEARS_SQL, [2010, 2015]) == query(bundled_warehouse, YEARS_SQL, [2010, 2015])
    assert query(database, "select count(*) from intermediate.int_ine__commune_year_counts "
                           "where input_problem = 'deis_row_unattributable'") == [(0,)]
    outside = query(database, "select source, year, records_affected, affects_results from marts.audit_data_quality "
                              "where check_name = 'year_outside_window' order by source, year")
    assert [(s, y) for s, y, *_ in outside] == (
        [("deis_deaths_aggregated", y) for y in [*range(1990, 2005), *range(2016, 2020)]]
        + [("ine_vital_statistics", y) for y in range(2016, 2020)])
    assert all(n > 0 and not affects for *_, n, affects in outside)
    # Every line of the files is either inside (read) or outside the window: none is lost.
    deis_lines = len((raw / DEIS).read_text(encoding="utf-8").splitlines()) - 1
    inside = query(database, "select count(*) from staging.stg_deis_aggregates__deaths_by_age_group "
                             "where parse_problem is null")[0][0]
    assert inside + sum(n for s, _, n, _ in outside if s == "deis_deaths_aggregated") == deis_lines


def test_a_missing_un_igme_value_is_published_with_its_reason(window_2005_2015):
    # Before: igme_deaths null for 2015 with no reason anywhere.
    database, raw = window_2005_2015
    assert query(database, "select igme_deaths, deaths_difference from marts.fct_external_benchmarks "
                           "where year = 2015 and indicator = 'imr'") == [(None, None)]
    assert query(database, "select source_file, year, indicator, observed_value, consequence from marts.audit_data_quality "
                           "where check_name = 'igme_value_missing'") == [
        (str(raw / IGME), 2015, "imr", "no bothsex deaths line for imr 2015 (the file covers imr 2000-2019)",
         "fct_external_benchmarks.igme_deaths and the difference are null for that year; add the line to the file")]


def test_input_year_min_2000_changes_no_published_number(bundled_warehouse, tmp_path):
    database = tmp_path / "from_2000.duckdb"
    run_dbt(build_selected(*PROMISE_MODELS), database, {"input_year_min": 2000})
    assert query(database, YEARS_SQL, [1990, 2030]) == query(bundled_warehouse, YEARS_SQL, [1990, 2030])
    assert query(database, "select year from marts.audit_data_quality where check_name = 'year_outside_window' "
                           "order by year") == [(y,) for y in range(1990, 2000)]


def test_a_narrowed_window_in_microdata_mode_counts_records_outside_never_stops(tmp_path):
    # Before: the records of 2018 were year_out_of_range, a malformed value: the build stopped
    # (deis_malformed_records: stop) naming the first of them.
    database = microdata_warehouse(tmp_path, ("15",), (2018, 2019), list(PROMISE_MODELS),
                                   input_year_min=2019).path
    assert query(database, "select distinct year from marts.fct_area_year_rates") == [(2019,)]
    totals = dict(query(database, "select source, records_affected from marts.audit_data_quality "
                                  "where check_name = 'year_outside_window' and record_key = 'all records'"))
    assert totals["deis_deaths_microdata"] > 0 and totals["deis_births_microdata"] > 0
    assert query(database, "select count(*) from marts.audit_data_quality "
                           "where check_name = 'year_outside_window' and record_key <> 'all records'") == [(0,)]
