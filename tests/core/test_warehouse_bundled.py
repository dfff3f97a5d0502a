"""The warehouse built by the real dbt CLI on the bundled real data (all of Chile) gives the
known figures. Expectations come from the raw files read by a second reader (Python's csv
module), from data/README.md and from INE/DEIS published totals."""

import csv
from collections import defaultdict

import pytest

from conftest import REPO_ROOT, aggregate_indicators, copy_of, query, run_unit_tests, unit_test_names

RAW = REPO_ROOT / "data" / "raw"
INE_FILE = RAW / "ine_vital_statistics_chile_2010_2019.csv"
DEIS_FILE = RAW / "deis_deaths_by_commune_year_sex_agegroup_1990_2019.csv"
COMMUNES, REGIONS, YEARS = 346, 16, range(2010, 2020)


@pytest.fixture(scope="module")
def by_hand():
    """(commune, year) -> (births, all-age deaths, DEIS deaths aged 1+), read with csv, not DuckDB.
    A commune-year the DEIS file does not list had no death aged 1+ (data/README.md)."""
    ine = defaultdict(dict)
    with open(INE_FILE, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            ine[(row["codigo_comuna"], int(row["anio"]))][row["evento"]] = int(row["cantidad"])
    aged_1_plus = defaultdict(int)
    with open(DEIS_FILE, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            if row["Age group"] == "1+":
                aged_1_plus[(row["CODIGO_COMUNA_RESIDENCIA"].zfill(5), int(row["Year"]))] += int(row["Death_count_all_cause"])
    return {key: (events["nacimiento"], events["defuncion"], aged_1_plus[key]) for key, events in ine.items()}


def test_every_commune_of_chile_has_ten_years_of_infant_mortality(bundled_warehouse):
    rows = query(
        bundled_warehouse,
        "select count(distinct area_code), count(distinct year), count(*), count(distinct region_code) "
        "from marts.fct_area_year_rates where area_level = 'commune' and indicator = 'imr'",
    )
    assert rows == [(COMMUNES, 10, COMMUNES * 10, REGIONS)]


def test_commune_births_equal_the_national_file_every_commune_year(bundled_warehouse, by_hand):
    rows = query(
        bundled_warehouse,
        "select area_code, year, live_births from marts.fct_area_year_rates "
        "where area_level = 'commune' and indicator = 'imr'",
    )
    assert {(code, year): births for code, year, births in rows} == {key: v[0] for key, v in by_hand.items()}


def test_derived_deaths_are_ine_minus_deis_aged_1_plus_every_commune_year(bundled_warehouse, by_hand):
    rows = query(
        bundled_warehouse,
        "select commune_code, year, deaths from intermediate.int_commune_year_counts where indicator = 'imr'",
    )
    assert {(code, year): deaths for code, year, deaths in rows} == {
        key: all_ages - aged_1_plus for key, (_, all_ages, aged_1_plus) in by_hand.items()}
    # Published wherever the rate is: the same number.
    published = query(
        bundled_warehouse,
        "select area_code, year, deaths from marts.fct_area_year_rates "
        "where area_level = 'commune' and rate_per_1000 is not null",
    )
    assert len(published) > 3000
    for code, year, deaths in published:
        _, all_ages, aged_1_plus = by_hand[(code, year)]
        assert deaths == all_ages - aged_1_plus


def test_every_negative_and_no_birth_commune_year_is_audited_and_has_no_rate(bundled_warehouse, by_hand):
    negative = {key for key, (_, a, d1) in by_hand.items() if a - d1 < 0}
    no_births = {key for key, (b, _, _) in by_hand.items() if b == 0}
    more_deaths_than_births = {key for key, (b, a, d1) in by_hand.items() if b > 0 and a - d1 > b}
    assert (len(negative), len(no_births)) == (19, 24)  # data/README.md and issue 12
    assert more_deaths_than_births == {("12103", 2018)}  # Río Verde: 4 derived deaths, 1 birth
    audited = defaultdict(set)
    for check, code, year in query(
            bundled_warehouse,
            "select check_name, commune_code, year from marts.audit_data_quality "
            "where source = 'commune_year_counts' and affects_results"):
        audited[check].add((code, year))
    assert audited == {"negative_derived_count": negative, "no_live_births": no_births,
                       "deaths_exceed_births": more_deaths_than_births}
    unavailable = query(
        bundled_warehouse,
        "select area_code, year, unavailable_reason, deaths, rate_per_1000 from marts.fct_area_year_rates "
        "where area_level = 'commune' and unavailable_reason is not null",
    )
    assert {(code, year) for code, year, *_ in unavailable} == negative | no_births | more_deaths_than_births
    assert all(deaths is None and rate is None for *_, deaths, rate in unavailable)


def test_small_counts_stay_published_and_flagged_unreliable(bundled_warehouse, by_hand):
    # Colchane 2010: 1 derived death in 8 births, 125 per 1000, above the plausibility bound but on
    # fewer than 5 deaths: a legitimate small count.
    births, all_ages, aged_1_plus = by_hand[("01403", 2010)]
    assert (births, all_ages - aged_1_plus) == (8, 1)
    (deaths, rate, unreliable, reason), = query(
        bundled_warehouse,
        "select deaths, rate_per_1000, is_unreliable, unavailable_reason from marts.fct_area_year_rates "
        "where area_code = '01403' and year = 2010 and indicator = 'imr'",
    )
    assert (deaths, rate, unreliable, reason) == (1, 125.0, True, None)


def test_deis_commune_years_not_listed_count_as_zero_deaths_aged_1_plus(bundled_warehouse, by_hand):
    # Río Verde 2016: DEIS lists no death aged 1+, INE 3 deaths of all ages and 0 births.
    rows = query(
        bundled_warehouse,
        "select deaths_aged_1_plus, infant_deaths_derived, live_births, is_missing_from_deis "
        "from intermediate.int_ine__commune_year_counts where commune_code = '12103' and year = 2016",
    )
    assert rows == [(0, 3, 0, True)]
    (listed,), = query(bundled_warehouse, "select count(*) from marts.audit_data_quality "
                                          "where check_name = 'deis_commune_year_not_listed'")
    deis_keys = set()
    with open(DEIS_FILE, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            deis_keys.add((row["CODIGO_COMUNA_RESIDENCIA"].zfill(5), int(row["Year"])))
    assert listed == len(set(by_hand) - deis_keys) == 64


def test_country_births_and_infant_mortality_every_year(bundled_warehouse, by_hand):
    rows = query(
        bundled_warehouse,
        "select year, deaths, live_births, round(rate_per_1000, 2) from marts.fct_area_year_rates "
        "where area_level = 'country' and area_code = 'CL' and indicator = 'imr' order by year",
    )
    # DEIS national births series (data/README.md), and the national derivation 7.44 ... 6.53.
    assert [births for _, _, births, _ in rows][:5] == [250643, 247358, 243635, 242005, 250997]
    assert [rate for *_, rate in rows] == [7.44, 7.72, 7.44, 7.00, 7.40, 6.91, 7.04, 7.11, 6.73, 6.53]
    assert rows[0][:3] == (2010, 1865, 250643)
    for year, deaths, births, _ in rows:  # the signed sum of every commune-year (docs/methods/core.md, "Regions and the country")
        assert deaths == sum(a - d1 for (_, y), (_, a, d1) in by_hand.items() if y == year)
        assert births == sum(b for (_, y), (b, _, _) in by_hand.items() if y == year)


def test_region_2010_is_721_deaths_in_101047_births(bundled_warehouse):
    # data/README.md: RM infant mortality from the derivation is 7.14 per 1000 in 2010.
    (deaths, births, rate, lower, upper), = query(
        bundled_warehouse,
        "select deaths, live_births, rate_per_1000, ci95_lower, ci95_upper from marts.fct_area_year_rates "
        "where area_level = 'region' and area_code = '13' and year = 2010 and indicator = 'imr'",
    )
    assert (deaths, births) == (721, 101047)
    assert round(rate, 2) == 7.14
    assert lower < rate < upper


def test_region_rates_match_the_published_derivation_every_year(bundled_warehouse):
    published = [7.14, 7.55, 7.02, 6.73, 7.06, 6.57, 6.63, 6.82, 5.95, 5.97]  # data/README.md
    rows = query(
        bundled_warehouse,
        "select round(rate_per_1000, 2) from marts.fct_area_year_rates "
        "where area_level = 'region' and area_code = '13' and indicator = 'imr' order by year",
    )
    assert [r[0] for r in rows] == published


def test_every_region_has_its_yearly_rates_comparisons_and_trends(bundled_warehouse):
    rates = query(bundled_warehouse,
                  "select count(distinct area_code), count(*), count(rate_per_1000) from marts.fct_area_year_rates "
                  "where area_level = 'region' and indicator = 'imr'")
    assert rates == [(REGIONS, REGIONS * 10, REGIONS * 10)]  # every region-year is published
    comparisons = query(bundled_warehouse,
                        "select region_code, count(distinct commune_code), count(distinct period_label) "
                        "from marts.fct_commune_vs_region where indicator = 'imr' group by 1 order by 1")
    communes_per_region = query(bundled_warehouse,
                                "select region_code, count(*) from marts.dim_commune group by 1 order by 1")
    assert [(r, n) for r, n, _ in comparisons] == communes_per_region
    assert all(periods == 3 for *_, periods in comparisons)
    trends = query(bundled_warehouse,
                   "select area_level, count(distinct area_code) from marts.fct_trends "
                   "where indicator = 'imr' and period_start = 2010 and period_end = 2019 "
                   "and area_level <> 'commune' group by 1 order by 1")
    assert trends == [("country", 1), ("region", REGIONS)]


def test_negative_derived_count_is_audited_and_has_no_rate(bundled_warehouse):
    # Providencia 2018: INE 1100 deaths of all ages, DEIS 1102 aged 1+ -> -2 infant deaths.
    # One audit row and one rate row per indicator of the build: each reads the same derived count.
    audit = query(
        bundled_warehouse,
        "select indicator, check_name, observed_value, affects_results from marts.audit_data_quality "
        "where commune_code = '13123' and year = 2018 order by indicator",
    )
    indicators = sorted(aggregate_indicators())
    assert audit == [(i, "negative_derived_count", "deaths=-2 live_births=1857", True) for i in indicators]
    rates = query(
        bundled_warehouse,
        "select indicator, deaths, rate_per_1000, ci95_lower, unavailable_reason from marts.fct_area_year_rates "
        "where area_code = '13123' and year = 2018 order by indicator",
    )
    assert rates == [(i, None, None, None, "negative_derived_count") for i in indicators]


def test_commune_interval_is_the_exact_poisson_interval_by_hand(bundled_warehouse, by_hand):
    # Independencia 2010 by hand: INE births and all-age deaths minus DEIS deaths aged 1+.
    (deaths, births, rate, lower, upper), = query(
        bundled_warehouse,
        "select deaths, live_births, rate_per_1000, ci95_lower, ci95_upper from marts.fct_area_year_rates "
        "where area_code = '13108' and year = 2010 and indicator = 'imr'",
    )
    births_by_hand, all_deaths, aged_1_plus = by_hand[("13108", 2010)]
    assert births == births_by_hand
    assert deaths == all_deaths - aged_1_plus
    from scipy import stats

    assert rate == 1000 * deaths / births
    assert lower == stats.chi2.ppf(0.025, 2 * deaths) / 2 * 1000 / births
    assert upper == stats.chi2.ppf(0.975, 2 * deaths + 2) / 2 * 1000 / births


def test_staged_lines_keep_their_file_and_exact_line_number(bundled_warehouse):
    with open(INE_FILE, encoding="utf-8") as handle:
        line_1234 = handle.readlines()[1233].rstrip("\n")
    rows = query(bundled_warehouse,
                 "select raw_line, source_file from staging.stg_ine__vital_statistics where source_line = 1234")
    assert rows == [(line_1234, "data/raw/ine_vital_statistics_chile_2010_2019.csv")]
    (lines,), = query(bundled_warehouse, "select max(source_line) from staging.stg_deis_aggregates__deaths_by_age_group")
    assert lines == sum(1 for _ in open(DEIS_FILE, encoding="utf-8"))


def test_dim_commune_has_all_346_communes_with_coordinates_but_antartica(bundled_warehouse):
    rows = query(
        bundled_warehouse,
        "select count(*), count(distinct region_code), count(latitude), "
        "max(commune_name) filter (where commune_code = '13101') from marts.dim_commune",
    )
    assert rows == [(346, 16, 345, "Santiago")]  # Antártica (12202) has no polygon, so no label point


def test_scope_regions_narrows_the_build_to_the_study_region_unchanged(bundled_warehouse, tmp_path):
    from conftest import run_dbt

    path = tmp_path / "rm.duckdb"
    run_dbt(["build", "--select", "+fct_area_year_rates"], path, {"scope_regions": [13]})
    sql = ("select area_level, area_code, year, deaths, live_births, rate_per_1000, unavailable_reason "
           "from marts.fct_area_year_rates where indicator = 'imr' {} order by all")
    scoped = query(path, sql.format(""))
    assert {(level, code[:2]) for level, code, *_ in scoped} == {("commune", "13"), ("region", "13")}  # no country
    assert len(scoped) == 52 * 10 + 10
    assert scoped == query(bundled_warehouse, sql.format("and region_code = '13'"))


def test_every_unit_test_of_the_aggregates_mode_passes(bundled_warehouse, tmp_path):
    """`make warehouse` leaves the unit tests out (they test the models' code on fixed inputs,
    not the data); here each one this input mode declares runs and passes."""
    passed, output = run_unit_tests(copy_of(bundled_warehouse, tmp_path))
    expected = unit_test_names("ine_aggregates")
    assert len(expected) >= 10 and passed == expected, output[-4000:]


@pytest.mark.parametrize("mart, change, rule", [
    ("fct_trends", "set trend = 'increasing' where trend = 'not_estimable'", "slope_log10 IS NOT NULL"),
    ("fct_area_year_rates", "set deaths = -1 where area_level = 'commune'", "deaths >= 0"),
    ("fct_commune_vs_region", "set comparison = 'worse' where comparison = 'higher'", "comparison IN"),
    ("fct_area_year_rates", "set is_unreliable = not is_unreliable where deaths is not null", "is_unreliable"),
])
def test_a_mart_refuses_a_row_that_breaks_its_rules(bundled_warehouse, tmp_path, mart, change, rule):
    """Rules on a mart's own rows are CHECK constraints of the table (DuckDB enforces them when
    the build writes it, and on every later write), not tests run after it: a row breaking one
    cannot be in the published file."""
    import duckdb
    import shutil

    copy = tmp_path / "copy.duckdb"
    shutil.copyfile(bundled_warehouse, copy)
    with duckdb.connect(str(copy)) as con:
        checks = con.execute("select count(*) from duckdb_constraints() where schema_name = 'marts' "
                             "and table_name = ? and constraint_type = 'CHECK'", [mart]).fetchone()[0]
        assert checks >= 2
        with pytest.raises(duckdb.ConstraintException, match="CHECK constraint failed") as refused:
            con.execute(f"update marts.{mart} {change}")
        assert rule in str(refused.value)
