"""The whole warehouse built from DEIS-layout microdata by the real dbt CLI.

Generated RM 2010-2019 files are calibrated to the bundled counts, so both input modes must
give the same infant mortality; hand-made files give counts worked out by hand.
"""

from __future__ import annotations

import csv

import pytest

from conftest import REPO_ROOT, microdata_vars, microdata_warehouse, query, run_dbt
from infant_mortality.tools.generate_deis import Options, generate

FIXTURES = REPO_ROOT / "tests" / "data" / "deis"


@pytest.fixture(scope="module")
def generated_rm_warehouse(tmp_path_factory):
    """RM 2010-2019 as published: deaths in a ZIP, latin-1, no header; births per year. Built up
    to the marts the tests below read (the smoothing, clusters and inequity marts of the
    microdata mode: the three-region build of conftest)."""
    return microdata_warehouse(tmp_path_factory.mktemp("rm_microdata"), ("13",), range(2010, 2020),
                               ["+fct_area_year_rates", "+fct_commune_vs_region", "+fct_trends", "+audit_data_quality"],
                               generator={"zip_deaths": True}).path


def test_source_lines_point_at_the_records_in_a_large_zipped_file(generated_rm_warehouse):
    # DuckDB reads in parallel; every staged record must still name its own line of the file.
    import zipfile

    (zip_name,), = query(generated_rm_warehouse, "select distinct source_file from staging.stg_deis__deaths")
    archive, member = zip_name.split(".zip/")
    with zipfile.ZipFile(archive + ".zip") as z:
        lines = z.read(member).decode("latin-1").split("\n")
    rows = query(
        generated_rm_warehouse,
        "select source_line, cast(date_of_death as varchar), age_unit_code, age_amount "
        "from staging.stg_deis__deaths using sample 3000 rows (reservoir, 7)")
    assert len(rows) == 3000
    for line, date, unit, amount in rows:
        fields = lines[line - 1].split(";")
        assert (fields[1], fields[3], fields[4]) == (date, str(unit), str(amount)), line



def test_source_lines_point_at_the_records_across_many_births_files(generated_rm_warehouse):
    # Ten yearly files of one layout are read together: lines must restart in every file. Every
    # record is checked against its line: neighbouring lines often share day, month and commune,
    # so a shift of the numbering shows where those change, which only a full check is sure to
    # meet. One file at a time, so that the test's own memory stays small.
    from pathlib import Path

    names = [name for (name,) in query(generated_rm_warehouse,
                                       "select distinct source_file::varchar from staging.stg_deis__births order by 1")]
    assert len(names) == 10
    for name in names:
        lines = Path(name).read_text(encoding="latin-1").split("\n")
        rows = query(generated_rm_warehouse,
                     "select source_line, birth_day, birth_month, commune_code_as_read from staging.stg_deis__births "
                     "where source_file = ?", [name])
        assert sorted(line for line, *_ in rows) == [n for n in range(2, len(lines) + 1) if lines[n - 1]]
        for line, day, month, commune in rows:
            fields = lines[line - 1].split(";")
            assert (int(fields[2]), int(fields[1]), fields[8].zfill(5)) == (day, month, commune), (name, line)


def test_imr_equals_the_aggregate_mode_for_every_commune_year(generated_rm_warehouse, bundled_warehouse):
    micro = {row[:2]: row[2:] for row in query(
        generated_rm_warehouse,
        "select area_code, year, deaths, live_births from marts.fct_area_year_rates "
        "where area_level = 'commune' and indicator = 'imr'")}
    aggregate = query(
        bundled_warehouse,
        "select area_code, year, deaths, live_births, unavailable_reason from marts.fct_area_year_rates "
        "where area_level = 'commune' and indicator = 'imr' and region_code = '13'")  # the RM of the national build
    assert len(micro) == len(aggregate) == 520
    compared = 0
    for code, year, deaths, births, reason in aggregate:
        assert micro[(code, year)][1] == births
        if reason is None:
            assert micro[(code, year)][0] == deaths, (code, year)
            compared += 1
    assert compared == 519  # all but Providencia 2018, unavailable in the aggregate mode


def test_all_four_indicators_and_the_component_identities(generated_rm_warehouse):
    rows = query(
        generated_rm_warehouse,
        "select indicator, sum(deaths) from marts.fct_area_year_rates where area_level = 'commune' "
        "group by indicator")
    totals = dict(rows)
    with open(REPO_ROOT / "seeds" / "indicators.csv", encoding="utf-8") as handle:
        seed = {row["indicator"]: row["count_column"] for row in csv.DictReader(handle)}
    causes = {indicator for indicator, count in seed.items() if count.endswith("_cause_deaths")}
    assert set(totals) == set(seed) and len(causes) >= 5  # the microdata give every indicator
    # Every infant death is in one cause group or has an unknown or invalid cause (audited).
    (uncoded,), = query(
        generated_rm_warehouse,
        "select sum(cause_unknown_deaths + cause_invalid_deaths) from intermediate.int_deis__commune_year_counts "
        "where indicator = 'imr'")
    assert totals["imr"] == sum(totals[c] for c in causes) + uncoded
    assert 0 < uncoded < 0.02 * totals["imr"]
    (audited,), = query(generated_rm_warehouse, "select sum(records_affected) from marts.audit_data_quality "
                                                "where check_name in ('cause_unknown', 'cause_invalid') "
                                                "and record_key <> 'all records'")
    assert audited == uncoded
    assert totals["nmr"] <= totals["imr"] and totals["enmr"] <= totals["nmr"]
    (age_unknown,), = query(
        generated_rm_warehouse,
        "select sum(age_unknown_infant_deaths) from intermediate.int_deis__commune_year_counts where indicator = 'imr'")
    assert totals["imr"] == totals["nmr"] + totals["pnmr"] + age_unknown
    assert 0 < age_unknown < 0.02 * totals["imr"]  # a few infant deaths with years 0 / months 0
    assert 0.60 <= totals["nmr"] / totals["imr"] <= 0.70
    bad = query(
        generated_rm_warehouse,
        "select count(*) from intermediate.int_deis__commune_year_counts where "
        "infant_deaths <> neonatal_deaths + post_neonatal_deaths + age_unknown_infant_deaths "
        "or neonatal_deaths <> early_neonatal_deaths + late_neonatal_deaths")
    assert bad == [(0,)]


def test_late_infant_mortality_is_compared_for_the_52_communes(generated_rm_warehouse):
    rows = query(
        generated_rm_warehouse,
        "select count(*), count(distinct commune_code), min(rate_per_1000) >= 0, "
        "min(count_basis_ok::int) from (select *, true as count_basis_ok from marts.fct_commune_vs_region) "
        "where indicator = 'pnmr' and period_label = '2010-2019'")
    assert rows == [(52, 52, True, 1)]
    basis = query(generated_rm_warehouse, "select distinct count_basis from marts.fct_area_year_rates")
    # Files written by imr-generate-deis say so wherever count_basis is shown.
    assert basis == [("GENERATED DEIS-layout microdata (synthetic): death and birth records, not official figures",)]
    trends = query(
        generated_rm_warehouse,
        "select count(*) from marts.fct_trends where indicator = 'pnmr' and area_level = 'commune' "
        "and period_start = 2010 and period_end = 2019 and method = 'prais_winsten'")
    assert trends == [(52,)]


def test_records_reconcile_with_the_input_row_counts(generated_rm_warehouse):
    totals = dict(((source, check), n) for source, check, n in query(
        generated_rm_warehouse,
        "select source, check_name, records_affected from marts.audit_data_quality "
        "where record_key = 'all records'"))
    assert totals[("deis_deaths_microdata", "records_read")] == 387_586  # generator manifest
    assert totals[("deis_births_microdata", "records_read")] == 979_124
    assert totals[("deis_deaths_microdata", "records_assigned")] == 387_586


# Hand-made headerless latin-1 file (tests/data/deis/deaths_headerless_latin1.csv), 2015:
# Ñuñoa 4h0, 4h23 | Iquique 3d6, 3d7 | Valparaíso 3d27, 3d28 | Concepción 2m0, 2m1 |
# La Pintana 2m11, 1y0 | Peñalolén 1y1, blank unit 5, 1y85.
HAND_COUNTS = {  # commune: deaths (infant, neonatal, early neonatal, post-neonatal, infant of unknown age), unknown_age_unit_policy infant_age_unknown
    "13120": (2, 2, 2, 0, 0),
    "01101": (2, 2, 1, 0, 0),
    "05101": (2, 1, 0, 1, 0),
    "08101": (2, 0, 0, 1, 1),
    "13112": (2, 0, 0, 1, 1),
    "13122": (1, 0, 0, 0, 1),  # the blank age unit, only with policy infant_age_unknown (default: none)
}


@pytest.mark.parametrize("policy", ["infant_age_unknown", "exclude"])
def test_hand_made_edge_cases_give_the_counts_worked_out_by_hand(tmp_path, policy):
    path = tmp_path / "hand.duckdb"
    run_dbt(["build", "--indirect-selection", "cautious", "--select", "+int_deis__commune_year_counts", "+audit_data_quality"], path,
            microdata_vars(FIXTURES / "deaths_headerless_latin1.csv", FIXTURES / "births_headerless_latin1.csv",
                           tmp_path / "cache", unknown_age_unit_policy=policy))
    rows = query(
        path,
        "select commune_code, infant_deaths, neonatal_deaths, early_neonatal_deaths, post_neonatal_deaths, "
        "age_unknown_infant_deaths from intermediate.int_deis__commune_year_counts "
        "where indicator = 'imr' and infant_deaths > 0")
    expected = dict(HAND_COUNTS)
    if policy == "exclude":
        del expected["13122"]
    assert {code: counts for code, *counts in rows} == {k: list(v) for k, v in expected.items()}
    # Valparaíso has deaths but no births in the births file: no rate, and audited.
    audit = query(
        path,
        "select check_name from marts.audit_data_quality where commune_code = '05101' and indicator = 'imr'")
    assert audit == [("no_live_births",)]
    names = query(path, "select commune_name from staging.stg_deis__deaths where commune_code = '13120' limit 1")
    assert names == [("Ñuñoa",)]


@pytest.mark.e2e  # fault injection
def test_each_kind_of_bad_record_is_audited_with_file_and_line(tmp_path):
    out = tmp_path / "files"
    generate(Options(out_dir=out, regions=("13",), years=(2019,), inject_bad_records=True, project_dir=REPO_ROOT))
    deaths = next(out.glob("synthetic_deis_deaths_*"))
    path = tmp_path / "bad.duckdb"
    run_dbt(["build", "--indirect-selection", "cautious", "--select", "+audit_data_quality"], path,
            microdata_vars(deaths, out / "nacimientos", tmp_path / "cache", deis_malformed_records="audit"))
    checks = query(
        path,
        "select source, check_name, count(*) from marts.audit_data_quality "
        "where record_key <> 'all records' and source like 'deis_%' and source_line is not null group by all")
    found = {(source, check) for source, check, _ in checks}
    for expected in [
        ("deis_deaths_microdata", "commune_unknown"),
        ("deis_deaths_microdata", "commune_missing"),
        ("deis_deaths_microdata", "age_unit_unknown"),
        ("deis_deaths_microdata", "age_out_of_range"),
        ("deis_deaths_microdata", "unparseable_date"),
        ("deis_births_microdata", "commune_missing"),
    ]:
        assert expected in found, expected
    # Reconciliation: every record read is either assigned or in an unassignable total.
    for source in ("deis_deaths_microdata", "deis_births_microdata"):
        totals = dict(query(
            path,
            "select check_name, records_affected from marts.audit_data_quality "
            "where record_key = 'all records' and source = ?", [source]))
        unassigned = sum(n for check, n in totals.items()
                         if check in ("year_unparseable", "year_out_of_range", "commune_missing", "commune_unparseable",
                                      "commune_code_unmapped", "commune_unknown", "age_unparseable"))
        assert totals["records_read"] == totals["records_assigned"] + unassigned
        assert unassigned > 0


@pytest.mark.e2e  # fault injection
def test_a_file_that_is_not_a_deis_file_stops_the_build_naming_it(tmp_path):
    bogus = tmp_path / "not_deis.csv"
    bogus.write_text("a,b,c\n1,2,3\n", encoding="utf-8")
    result = run_dbt(["build", "--select", "+int_deis__commune_year_counts"], tmp_path / "x.duckdb",
                     microdata_vars(bogus, FIXTURES / "births_headerless_latin1.csv", tmp_path / "cache"),
                     check=False)
    assert result.returncode != 0
    assert "not_deis.csv" in result.stdout
