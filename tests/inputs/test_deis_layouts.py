"""The DEIS files as users hold them, mixed in one folder and built by the real dbt CLI (issue 11).

tests/data/deis/mixed/ holds one file per layout, written by hand:
  deaths/def_2015_per_year.csv                 older per-year layout (50 columns, header), codes in force
  deaths/defunciones_2016_official_noheader.csv official-figures layout, no header, latin-1
  deaths/defunciones_2017_official_header.csv   official-figures layout with its header, UTF-8, CRLF
  births/nac_2015.csv                           per-year base, 33 columns with REG_RES, codes in force
  births/nac_2016.csv                           per-year base without REG_RES (32 columns)
  births/nacimientos_2017_compact.csv           compact 11-column layout, no header

Counts worked out by hand from those lines (comments in the files' generator below each case):
2015 deaths (per-year layout): Chillán as 08401: 5 hours, 10 days, 3 months, blank unit, unit 9;
Ñuñoa: 0 years, 45 years, 2 days (REG_RES 5, disagreeing); 2009 01106 (Pozo Almonte's code until 2007); 2019 08401.
2016 deaths: Chillán 16101 0 hours, 28 days; Ñuñoa 11 months, 70 years. 2017: Ñuñoa 7 days, unit 0.
Births: 2015 Chillán 08401 x4, Bulnes 08402 x1, Ñuñoa x4 (one with REG_RES 8); 2016 Chillán 08401
x3, Ñuñoa x2; 2017 Chillán 16101 x2, Ñuñoa x5.
"""

from __future__ import annotations

import shutil

import pytest

from conftest import REPO_ROOT, build_selected, query, run_dbt
from promise import PROMISE_MODELS

MIXED = REPO_ROOT / "tests" / "data" / "deis" / "mixed"
# Regional births as the open series gives them (rows by sex add up): 2015 region 13 says 5, the
# bases have 4; every other year and region of the bases agrees; 2018 is outside the bases.
CONTROL = REPO_ROOT / "tests" / "data" / "deis" / "control" / "Serie_Nacimientos_2015_2018_regional.csv"

# (commune, year): {indicator: (deaths, live births)}
HAND = {
    ("16101", 2015): {"imr": (3, 4), "nmr": (2, 4), "enmr": (1, 4), "pnmr": (1, 4)},
    ("16101", 2016): {"imr": (2, 3), "nmr": (1, 3), "enmr": (1, 3), "pnmr": (1, 3)},
    ("16101", 2017): {"imr": (0, 2), "nmr": (0, 2), "enmr": (0, 2), "pnmr": (0, 2)},
    ("16102", 2015): {"imr": (0, 1), "nmr": (0, 1), "enmr": (0, 1), "pnmr": (0, 1)},
    ("13120", 2015): {"imr": (2, 4), "nmr": (1, 4), "enmr": (1, 4), "pnmr": (0, 4)},
    ("13120", 2016): {"imr": (1, 2), "nmr": (0, 2), "enmr": (0, 2), "pnmr": (1, 2)},
    ("13120", 2017): {"imr": (1, 5), "nmr": (1, 5), "enmr": (0, 5), "pnmr": (0, 5)},
}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    # In a folder whose name has an apostrophe and non-ASCII letters: every var reaches SQL quoted.
    tmp = tmp_path_factory.mktemp("mixed_layouts")
    folder = tmp / "región O'Higgins"
    shutil.copytree(MIXED, folder)
    database = tmp / "mixed.duckdb"
    # A handful of hand-made births per commune, far below each commune's INE population aged 0: the
    # births plausibility check (issue 41) would rightly make every rate unavailable, so it is
    # widened out of the way; test_faults_availability tests it. Only the marts the tests read
    # are built, with what they need: the layouts matter up to the counts.
    run_dbt(build_selected(*PROMISE_MODELS, "+audit_input_files"), database,
            {"vital_source": "deis_microdata", "deis_deaths_path": str(folder / "deaths"),
             "deis_births_path": str(folder / "births"), "deis_cache_dir": str(tmp / "caché'"),
             "deis_births_control_path": str(CONTROL), "max_births_ratio": 1000000})
    return database


def test_every_layout_gives_the_hand_worked_counts_for_all_four_indicators(mixed):
    rows = query(mixed, """
        select area_code, year, indicator, deaths, live_births, rate_per_1000
        from marts.fct_area_year_rates
        where area_level = 'commune' and (live_births > 0 or deaths > 0)
            and indicator in (select unnest(?))""", [sorted({i for counts in HAND.values() for i in counts})])
    found = {}
    for code, year, indicator, deaths, births, rate in rows:
        found.setdefault((code, year), {})[indicator] = (deaths, births)
        assert rate == pytest.approx(1000 * deaths / births)
    assert found == HAND


def test_layouts_are_detected_per_file_and_every_line_is_read(mixed):
    rows = query(mixed, """
        select regexp_extract(entry, '[^/]+$'), layout, encoding, lines, records_expected, records_read, action
        from marts.audit_input_files where input like 'deis_%' order by entry""")
    # Pure-ASCII files (codes only) are read as UTF-8, which agrees with latin-1 on them.
    assert rows == [
        ("nac_2015.csv", "births_per_year_base", "utf-8", 10, 9, 9, "read"),
        ("nac_2016.csv", "births_per_year_base", "utf-8", 6, 5, 5, "read"),
        ("nacimientos_2017_compact.csv", "births_compact", "utf-8", 7, 7, 7, "read"),
        ("def_2015_per_year.csv", "deaths_per_year", "utf-8", 11, 10, 10, "read"),
        ("defunciones_2016_official_noheader.csv", "deaths_official_figures", "latin-1", 4, 4, 4, "read"),
        ("defunciones_2017_official_header.csv", "deaths_official_figures", "utf-8", 3, 2, 2, "read"),
    ]
    basis = query(mixed, "select distinct count_basis from marts.fct_area_year_rates")
    assert basis == [("DEIS microdata: death and birth records",)]
    (folder,), = query(mixed, "select distinct regexp_extract(entry, '/([^/]+)/deaths/', 1) from marts.audit_input_files "
                              "where input = 'deis_deaths'")
    assert folder == "región O'Higgins"


def test_historical_codes_count_under_the_current_commune_and_the_mapping_is_audited(mixed):
    # A 2016 births record with commune 8401 counts for Chillán (16101).
    (chillan_2016,), = query(mixed, """
        select count(*) from staging.stg_deis__births
        where birth_year = 2016 and commune_code_as_read = '08401' and commune_code = '16101'""")
    assert chillan_2016 == 3
    mapped = query(mixed, """
        select source, record_key, commune_code, records_affected from marts.audit_data_quality
        where check_name = 'commune_code_mapped' order by all""")
    assert mapped == [
        ("deis_births_microdata", "code 08401 in 2015", "16101", 4),
        ("deis_births_microdata", "code 08401 in 2016", "16101", 3),
        ("deis_births_microdata", "code 08402 in 2015", "16102", 1),
        ("deis_deaths_microdata", "code 08401 in 2015", "16101", 5),
    ]
    # Outside its validity an old code is no commune: 08401 in 2019, Pozo Almonte's 01106 in 2009.
    problems = dict(query(mixed, """
        select year_as_read, record_problem from staging.stg_deis__deaths where year_as_read in ('2009', '2019')"""))
    assert problems == {"2009": "commune_unknown", "2019": "commune_unknown"}


def test_unknown_age_units_are_audited_and_in_no_indicator(mixed):
    rows = query(mixed, """
        select regexp_extract(record_key, '[^/]+$'), observed_value, affects_results from marts.audit_data_quality
        where check_name = 'age_unit_unknown' and source_line is not null order by record_key""")
    assert [(key, affects) for key, _, affects in rows] == [
        ("def_2015_per_year.csv:5", True), ("def_2015_per_year.csv:6", True),
        ("defunciones_2017_official_header.csv:3", True)]
    assert [observed.split(" EDAD_TIPO=")[1].split(" ")[0] for _, observed, _ in rows] == ["blank", "9", "0"]
    (in_counts,), = query(mixed, "select sum(age_unknown_infant_deaths) from intermediate.int_deis__commune_year_counts "
                                 "where indicator = 'imr' and commune_code = '16101' and year = 2015")
    assert in_counts == 0


def test_a_region_that_disagrees_with_the_commune_is_audited_with_file_and_line(mixed):
    rows = query(mixed, """
        select source, regexp_extract(record_key, '[^/]+$'), observed_value from marts.audit_data_quality
        where check_name = 'region_mismatch' and source_line is not null order by all""")
    assert [(source, key) for source, key, _ in rows] == [
        ("deis_births_microdata", "nac_2015.csv:10"), ("deis_deaths_microdata", "def_2015_per_year.csv:9")]
    assert "REG_RES=08" in rows[0][2] and "REG_RES=05" in rows[1][2]


def test_births_are_reconciled_with_regional_control_totals(mixed):
    rows = query(mixed, """
        select record_key, observed_value, records_affected from marts.audit_data_quality
        where check_name = 'births_control_difference'""")
    assert rows == [("region=13 year=2015", "control 5, counted 4", 1)]


def test_the_audit_names_the_births_file_that_fed_each_year(mixed):
    # A births path given: the user's files are the births of every year (never the bundle).
    rows = query(mixed, """
        select year, source, regexp_extract(observed_value, '[^/]+$') from marts.audit_data_quality
        where check_name = 'births_source' order by year""")
    assert rows == [(2015, "deis_births_microdata", "nac_2015.csv"), (2016, "deis_births_microdata", "nac_2016.csv"),
                    (2017, "deis_births_microdata", "nacimientos_2017_compact.csv")]
    (basis,), = query(mixed, "select distinct count_basis from marts.fct_area_year_rates")
    assert basis == "DEIS microdata: death and birth records"
