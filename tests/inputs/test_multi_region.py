"""Several regions: each gets its own region rows, the country aggregates them, and every
commune is compared with its own region. Built from generated files in three small regions."""

from __future__ import annotations

import csv
from collections import Counter

import pytest

from conftest import THREE_REGIONS, build_selected, copy_of, query, run_dbt, run_unit_tests, unit_test_names

REGIONS = THREE_REGIONS  # Aysén, Magallanes, Arica y Parinacota: 25 communes in all
YEARS = tuple(range(2015, 2020))


@pytest.fixture(scope="module")
def national_sample(three_regions):
    """The session's three-region build (conftest): births files without a header, deaths in UTF-8."""
    return three_regions.path, three_regions.files


def births_in_files(out) -> Counter:
    """(region, year) -> births, read with Python's csv module: a second reader of the files."""
    counts = Counter()
    for file in sorted((out / "nacimientos").glob("*.csv")):
        with open(file, encoding="latin-1", newline="") as handle:
            for row in csv.reader(handle, delimiter=";"):
                commune = row[8].zfill(5)
                counts[(commune[:2], int(row[0]))] += 1
    return counts


def infant_deaths_in_files(out) -> Counter:
    """(region, year) -> deaths under one year, read with Python's csv module (docs/methods/core.md,
    "Indicators": hours, days, months 0-11, years 0)."""
    counts = Counter()
    deaths_file = next(out.glob("synthetic_deis_deaths_*.csv"))
    with open(deaths_file, encoding="utf-8", newline="") as handle:
        for row in csv.reader(handle, delimiter=";"):
            unit, amount = row[3], int(row[4])
            infant = unit in ("3", "4") or (unit == "2" and amount <= 11) or (unit == "1" and amount == 0)
            if infant:
                counts[(row[5].zfill(5)[:2], int(row[0]))] += 1
    return counts


def test_region_deaths_reconcile_with_the_generated_death_records(national_sample):
    path, out = national_sample
    rows = query(
        path,
        "select area_code, year, deaths from marts.fct_area_year_rates "
        "where area_level = 'region' and indicator = 'imr'")
    expected = infant_deaths_in_files(out)
    assert {(region, year): deaths for region, year, deaths in rows} == dict(expected)


def test_each_region_and_the_country_have_their_own_rows(national_sample):
    path, out = national_sample
    rows = query(
        path,
        "select area_level, area_code, count(distinct year), sum(live_births) from marts.fct_area_year_rates "
        "where indicator = 'imr' and area_level <> 'commune' group by 1, 2 order by 1, 2")
    births = births_in_files(out)
    expected_regions = [("region", r, 5, sum(births[(r, y)] for y in YEARS)) for r in REGIONS]
    assert rows == [("country", "CL", 5, sum(births.values()))] + expected_regions


def test_country_is_the_sum_of_its_regions_every_year(national_sample):
    path, _ = national_sample
    mismatches = query(
        path,
        """
        with regions as (
            select year, indicator, sum(deaths) as deaths, sum(live_births) as births
            from marts.fct_area_year_rates where area_level = 'region' group by year, indicator)
        select count(*) from marts.fct_area_year_rates as country
        join regions using (year, indicator)
        where country.area_level = 'country'
            and (country.deaths <> regions.deaths or country.live_births <> regions.births)
        """)
    assert mismatches == [(0,)]


def test_every_commune_is_compared_with_its_own_region(national_sample):
    path, _ = national_sample
    rows = query(
        path,
        """
        select c.commune_code, c.region_code, c.region_deaths, c.region_live_births, r.deaths, r.births
        from marts.fct_commune_vs_region as c
        join (select area_code, sum(deaths) as deaths, sum(live_births) as births
              from marts.fct_area_year_rates
              where area_level = 'region' and indicator = 'imr' group by area_code) as r
            on r.area_code = c.region_code
        where c.indicator = 'imr' and c.period_label = '2015-2019' and c.n_years = 5
        """)
    assert {row[1] for row in rows} == set(REGIONS)
    assert len(rows) >= 20
    for _, _, region_deaths, region_births, deaths, births in rows:
        assert (region_deaths, region_births) == (deaths, births)
    ranks = query(
        path,
        "select region_code, max(rank_in_region), count(*) from marts.fct_commune_vs_region "
        "where indicator = 'imr' and period_label = '2015-2019' group by 1 order by 1")
    assert all(top == n for _, top, n in ranks)


def test_region_scope_var_keeps_one_region(tmp_path, national_sample):
    _, out = national_sample
    path = tmp_path / "scoped.duckdb"
    run_dbt(build_selected("+fct_area_year_rates"), path, {
        "vital_source": "deis_microdata",
        "deis_deaths_path": str(next(out.glob("synthetic_deis_deaths_*"))),
        "deis_births_path": str(out / "nacimientos"), "deis_cache_dir": str(tmp_path / "cache"),
        "scope_regions": ["12"], "scope_year_start": 2016})
    rows = query(path, "select distinct area_level, region_code, min(year) over () from marts.fct_area_year_rates "
                       "order by 1")
    assert rows == [("commune", "12", 2016), ("region", "12", 2016)]  # one region: no country row


def test_country_and_region_period_rates_and_the_build_scope(national_sample):
    # fct_area_period_rates: each region and the country pooled over 2015-2019, against the files.
    path, out = national_sample
    births, deaths = births_in_files(out), infant_deaths_in_files(out)
    rows = dict(((level, code), (n, d, b)) for level, code, n, d, b in query(
        path,
        "select area_level, area_code, n_years, deaths, live_births from marts.fct_area_period_rates "
        "where indicator = 'imr' and period_start = 2015 and period_end = 2019"))
    for region in REGIONS:
        assert rows[("region", region)] == (5, sum(v for (r, _), v in deaths.items() if r == region),
                                            sum(v for (r, _), v in births.items() if r == region))
    assert rows[("country", "CL")] == (5, sum(deaths.values()), sum(births.values()))
    (scope,), = query(path, "select scope_regions || ' ' || scope_year_start || '-' || scope_year_end "
                            "from marts.meta_build")
    assert scope == "11,12,15 2015-2019"


def test_external_benchmarks_refuse_a_country_of_three_regions(national_sample):
    # The microdata build has a `CL` row (the sum of its three regions) and both imr and nmr,
    # but it is not Chile: IGME's national estimates stand alone and say why.
    path, _ = national_sample
    assert query(path, "select count(distinct indicator) from marts.fct_area_year_rates "
                       "where area_level = 'country' and indicator in ('imr', 'nmr')") == [(2,)]
    rows = query(path, "select indicator, unavailable_reason, count(*), count(country_deaths), count(igme_deaths) "
                       "from marts.fct_external_benchmarks where year between 2015 and 2019 group by all order by 1")
    assert rows == [("imr", "scope_not_national", 5, 0, 5), ("nmr", "scope_not_national", 5, 0, 5),
                    ("u5mr", "scope_not_national", 5, 0, 5)]


def test_every_unit_test_of_the_microdata_mode_passes(three_regions, tmp_path):
    """The unit tests of the DEIS microdata mode (its own port's among them), on a copy of its build."""
    passed, output = run_unit_tests(copy_of(three_regions.path, tmp_path), three_regions.dbt_vars)
    expected = unit_test_names("deis_microdata")
    assert expected > unit_test_names("ine_aggregates")  # the shared ones and the mode's own
    assert passed == expected, output[-4000:]
