"""The DEIS staging models, built by the real dbt CLI on hand-made and generated files.

dbt runs in the real project with its committed profile (which registers the plugin of
`infant_mortality.dbt_plugins.deis_files`) and a temporary DuckDB file.
"""

from __future__ import annotations

import gzip
import zipfile
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from conftest import REPO_ROOT, run_dbt
from infant_mortality.dbt_plugins import deis_files
from infant_mortality.tools.generate_deis import Options, expected_calibrated_counts, generate

FIXTURES = REPO_ROOT / "tests" / "data" / "deis"

# The hand-made headerless latin-1 deaths file, line by line (EDAD_TIPO;EDAD_CANT -> class):
# 4;0 4;23 3;6 -> early_neonatal | 3;7 3;27 -> late_neonatal | 3;28 2;1 2;11 -> post_neonatal |
# 2;0 1;0 -> infant_age_unknown | 1;1 1;85 -> not_infant | blank;5 -> age_unit_unknown
HEADERLESS_AGE_CLASSES = {"early_neonatal": 3, "late_neonatal": 2, "post_neonatal": 3,
                          "infant_age_unknown": 2, "not_infant": 2, "age_unit_unknown": 1}


STAGING = ["--select", "+stg_deis__deaths", "+stg_deis__births"]


def build(tmp: Path, deaths: str, births: str, **extra) -> duckdb.DuckDBPyConnection:
    database = tmp / "warehouse.duckdb"  # not staging.duckdb: the catalog would shadow the schema
    run_dbt(["build", *STAGING], database, {"vital_source": "deis_microdata", "deis_deaths_path": deaths,
                                            "deis_births_path": births, "deis_cache_dir": str(tmp / "cache"),
                                            **extra})
    return duckdb.connect(str(database), read_only=True)


@pytest.fixture(scope="module")
def fixtures_built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fixtures")
    con = build(tmp, str(FIXTURES / "deaths_*.csv"), str(FIXTURES / "births_*.csv"))
    yield con
    con.close()


def rows(con, sql: str) -> list[tuple]:
    return con.sql(sql).fetchall()


def test_hand_made_age_edge_cases(fixtures_built):
    classes = rows(fixtures_built, """
        select age_class, count(*) from staging.stg_deis__deaths
        where source_file like '%deaths_headerless_latin1.csv' group by all
    """)
    assert dict(classes) == HEADERLESS_AGE_CLASSES
    # Months 0 is an infant of unknown age, flagged; years 0 is not a record problem.
    flagged = rows(fixtures_built, """
        select age_unit_code, age_amount, record_problem from staging.stg_deis__deaths
        where record_problem is not null order by source_file, source_line
    """)
    assert flagged == [(2, 0, "infant_age_month_zero"), (None, 5, "age_unit_unknown")]


def test_headerless_latin1_and_alternative_header_utf8_both_read(fixtures_built):
    deaths = rows(fixtures_built, """
        select regexp_extract(source_file, '[^/]+$'), source_line, year_of_death, date_of_death::varchar,
               commune_code, commune_name, region_name, cause_icd10
        from staging.stg_deis__deaths
        where source_line in (1, 2) or source_file like '%alternative%' order by all
    """)
    assert deaths == [
        ("deaths_alternative_header_utf8.csv", 2, 2021, "2021-03-14", "13120", "Ñuñoa",
         "Metropolitana de Santiago", "P073"),
        ("deaths_alternative_header_utf8.csv", 3, 2021, "2021-07-01", "16101", "Chillán", "De Ñuble", "J189"),
        ("deaths_alternative_header_utf8.csv", 4, 2021, "2021-09-09", "13122", "Peñalolén",
         "Metropolitana de Santiago", "I219"),
        ("deaths_headerless_latin1.csv", 1, 2015, "2015-01-03", "13120", "Ñuñoa", "Metropolitana de Santiago", "P073"),
        ("deaths_headerless_latin1.csv", 2, 2015, "2015-02-11", "13120", "Ñuñoa", "Metropolitana de Santiago", "P073"),
    ]
    assert rows(fixtures_built, "select count(*) from staging.stg_deis__deaths") == [(16,)]
    # Regions 01-09 lose their leading zero in DEIS files; staging restores it.
    assert ("01101", "Iquique") in rows(fixtures_built, "select commune_code, commune_name from staging.stg_deis__deaths")

    births = rows(fixtures_built, """
        select regexp_extract(source_file, '[^/]+$'), source_line, birth_year, birth_month, birth_day,
               commune_code, region_code, record_problem
        from staging.stg_deis__births order by all
    """)
    assert births == [
        ("births_alternative_header_utf8.csv", 2, 2021, 2, 28, "13122", "13", None),
        ("births_alternative_header_utf8.csv", 3, 2021, 11, 5, "16101", "16", None),
        ("births_headerless_latin1.csv", 1, 2015, 1, 9, "13120", "13", None),
        ("births_headerless_latin1.csv", 2, 2015, 6, 30, "08101", "08", None),
        ("births_headerless_latin1.csv", 3, 2015, 12, 31, "01101", "01", None),
    ]


def test_staging_keeps_only_the_fields_the_warehouse_uses(fixtures_built):
    # Sex, weight, length, weeks, the mother's age, the place of death: no model reads them, so
    # they are read only as part of their line (its column count and encoding), never parsed or
    # stored (issue 45: a third of the births staging's time at 61 million records).
    def columns(table):
        return {name for (name,) in rows(fixtures_built, f"select column_name from information_schema.columns "
                                                         f"where table_schema = 'staging' and table_name = '{table}'")}
    unused = {"sex", "weight_g", "length_cm", "gestational_weeks", "mother_age", "birth_date", "place_of_death",
              "is_date_year_mismatch"}
    assert columns("stg_deis__births") == {
        "source_file", "source_line", "source_layout", "birth_year", "year_as_read", "birth_month", "birth_day",
        "commune_code_as_read", "commune_code", "commune_code_mapping", "region_code", "record_problem"}
    assert not columns("stg_deis__deaths") & unused
    assert {"age_unit_code", "age_amount", "cause_icd10", "region_name", "commune_name"} <= columns("stg_deis__deaths")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """RM 2010-2019 with the bad records, deaths as a published ZIP with the alternative header."""
    tmp = tmp_path_factory.mktemp("generated")
    manifest = generate(Options(out_dir=tmp / "deis", regions=("13",), years=tuple(range(2010, 2020)),
                                seed=11, zip_deaths=True, deaths_header="alternative",
                                deaths_encoding="utf-8", inject_bad_records=True))
    con = build(tmp, str(tmp / "deis" / manifest["deaths_file"]), str(tmp / "deis" / "nacimientos"),
                deis_malformed_records="audit")
    yield con, manifest, tmp
    con.close()


def test_each_bad_record_carries_its_problem(generated):
    con, manifest, tmp = generated
    found = {}
    for model in ("stg_deis__deaths", "stg_deis__births"):
        extra = ", age_class" if model.endswith("deaths") else ", null"
        for source_file, line, problem, age_class in rows(con, f"""
                select source_file, source_line, record_problem{extra} from staging.{model}
                where record_problem is not null"""):
            found[(source_file.rsplit("/", 1)[-1], line)] = (problem, age_class)
    expected = {(Path(r["file"]).name, r["line"]): (r["record_problem"], r.get("age_class"))
                for r in manifest["bad_records"]}
    assert found == expected
    assert len(expected) == 20


def test_zip_input_is_read_whole_and_named_by_its_member(generated):
    con, manifest, tmp = generated
    zip_path = tmp / "deis" / manifest["deaths_file"]
    member = manifest["deaths_file"].replace(".zip", ".csv")
    files = rows(con, "select source_file, count(*), min(source_line), max(source_line) "
                      "from staging.stg_deis__deaths group by all")
    n = manifest["records"]["deaths"] + 15
    assert files == [(f"{zip_path}/{member}", n, 2, n + 1)]  # line 1 is the header
    # Kept once in deis_cache_dir as gzip around the member's own deflate stream, not unpacked:
    # the copy decompresses to exactly the member's bytes.
    assert not list((tmp / "cache").rglob(member))
    (kept,) = (tmp / "cache").rglob(member + ".gz")
    with zipfile.ZipFile(zip_path) as archive:
        assert gzip.decompress(kept.read_bytes()) == archive.read(member)
        assert kept.stat().st_size == archive.getinfo(member).compress_size + 18


def test_births_shards_take_whole_files_sized_to_end_with_the_deaths(generated):
    """The two births shards read whole files, together every births record once, and shard 1
    holds the files whose middle record lies in its share of the records: (1 - 2.25 x deaths /
    births) / 2 on the profile's two threads (macros/deis_read.sql, deis_shard_shares), so that
    the first shard and then the deaths read take about as long as the second shard. The share
    is computed again here from the staged counts; RM has a third as many deaths as births, so
    equal halves would differ."""
    con, manifest, tmp = generated
    files = rows(con, "select source_file, count(*) from staging.stg_deis__births group by all order by 1")
    owner = {}
    for shard in (1, 2):
        for source_file, records in rows(con, f"select source_file, count(*) from staging.stg_deis__births_shard_{shard} "
                                              "group by all"):
            assert source_file not in owner
            owner[source_file] = shard
            assert (source_file, records) in files   # whole files
    assert set(owner) == {f for f, _ in files}
    (deaths,) = rows(con, "select count(*) from staging.stg_deis__deaths")[0]
    births = sum(n for _, n in files)
    share = max(0.0, min(0.5, (1 - 2.25 * deaths / births) / 2))
    before, expected = 0, {}
    for source_file, records in files:   # the inspection lists a folder's files in sorted order
        expected[source_file] = 1 if (before + records / 2) / births < share else 2
        before += records
    assert owner == expected
    assert 0.05 < share < 0.3 and 0 < list(expected.values()).count(1) < len(files) / 2


def test_staged_rm_counts_equal_the_calibration(generated):
    con, manifest, tmp = generated
    staged = rows(con, """
        with births as (
            select commune_code, birth_year as year, count(*) as births from staging.stg_deis__births
            where record_problem is null group by all
        ),
        infant_deaths as (
            select commune_code, year_of_death as year, count(*) as infant_deaths from staging.stg_deis__deaths
            where record_problem is null
              and age_class in ('early_neonatal', 'late_neonatal', 'post_neonatal', 'infant_age_unknown')
            group by all
        )
        select commune_code, year, births, coalesce(infant_deaths, 0)
        from births left join infant_deaths using (commune_code, year) order by all
    """)
    expected = expected_calibrated_counts(REPO_ROOT).sort_values(["codigo_comuna", "anio"])
    assert staged == list(expected[["codigo_comuna", "anio", "births", "infant_deaths"]].itertuples(index=False, name=None))
    shares = dict(rows(con, """
        select age_class, count(*) from staging.stg_deis__deaths
        where record_problem is null and age_class <> 'not_infant' group by all
    """))
    neonatal = shares["early_neonatal"] + shares["late_neonatal"]
    assert 0.60 <= neonatal / sum(shares.values()) <= 0.70


@pytest.mark.e2e  # fault injection
def test_a_file_that_is_not_deis_stops_the_build(tmp_path):
    malformed = FIXTURES / "malformed" / "deaths_by_commune_aggregated.csv"
    result = run_dbt(["build", *STAGING], tmp_path / "x.duckdb",
                     {"vital_source": "deis_microdata", "deis_deaths_path": str(malformed),
                      "deis_births_path": str(FIXTURES / "births_headerless_latin1.csv")}, check=False)
    assert result.returncode != 0
    assert (f"{malformed}: the header does not name the DEIS deaths column(s) EDAD_TIPO, EDAD_CANT, "
            "CODIGO_COMUNA_RESIDENCIA") in result.stdout


def test_the_default_build_reads_no_deis_file(tmp_path):
    result = run_dbt(["ls"], tmp_path / "x.duckdb", check=False)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "stg_deis__" not in result.stdout


@pytest.mark.parametrize("content, message", [
    (b"", "the file is empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary content (NUL bytes)"),
    (b"anio,codigo_comuna,evento\n2010,13101,nacimiento\n", "the separator looks like ',' or a tab"),
    ("ANO_DEF;FECHA_DEF\n2019;2019-01-01\n".encode(), "the header does not name the DEIS deaths column(s) EDAD_TIPO"),
])
def test_non_deis_deaths_files_are_refused(tmp_path, content, message):
    path = tmp_path / "input.csv"
    path.write_bytes(content)
    with pytest.raises(deis_files.DeisFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        deis_files.inspect(str(path), "deaths")


def test_births_need_only_the_year_and_the_commune(tmp_path):
    path = tmp_path / "births.csv"
    path.write_text("ANO_NAC;SEXO;COMUNA\n2019;1;13101\n")
    (found,) = deis_files.inspect(str(path), "births")
    assert (found.columns, found.layout, found.records_expected) == (("ANO_NAC", "SEXO", "COMUNA"), "births_compact", 1)
    path.write_text("ANO_NAC;MES_NAC;REGION\n2019;1;13\n")
    with pytest.raises(deis_files.DeisFileError, match="names no commune column .* per-year DEIS births bases"):
        deis_files.inspect(str(path), "births")


def test_the_open_births_series_is_refused_with_what_to_use_instead(tmp_path):
    path = tmp_path / "Serie_Nacimientos_2001_2019.csv"
    path.write_text("AÑO;REGION;SEXO;NACIMIENTOS\n2019;13;1;45000\n")
    with pytest.raises(deis_files.DeisFileError) as refused:
        deis_files.inspect(str(path), "births")
    message = str(refused.value)
    assert str(path) in message and "region only" in message and "per-year DEIS births bases" in message


def test_encoding_is_detected_and_counted_lines_are_checked(tmp_path):
    assert [f.encoding for f in deis_files.inspect(str(FIXTURES / "deaths_*.csv"), "deaths")] == ["utf-8", "latin-1"]
    ragged = tmp_path / "ragged.csv"
    lines = (FIXTURES / "deaths_headerless_latin1.csv").read_bytes().splitlines(keepends=True)
    ragged.write_bytes(lines[0] + lines[1].replace(b";", b"", 1))
    with pytest.raises(deis_files.DeisFileError, match="line 2 has 26 column"):
        deis_files.inspect(str(ragged), "deaths")
    assert Counter(deis_files.expand_paths(str(FIXTURES))) == Counter(
        str(p) for p in FIXTURES.iterdir() if p.is_file())
