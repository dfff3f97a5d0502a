"""Totals that add up, and the external anchor, recomputed from the bundled files with pandas.

A second reader of data/raw (pandas, not the warehouse's SQL) derives every commune-year's
infant deaths as INE deaths of all ages - DEIS deaths aged 1+, applies the publication rule of
docs/methods/core.md, "Which commune-years have a rate (bundled aggregates)" (a commune-year has a rate when 0 <= deaths <= births and births > 0) and
checks: every region-year's deaths = its communes' published deaths + unpublished_commune_deaths;
the quintiles of every stratifier add up to the Metropolitana's pooled count in every period;
fct_external_benchmarks shows UN IGME's file values beside the national sums.
"""

from __future__ import annotations

import csv
import shutil

import pandas as pd
import pytest

from conftest import REPO_ROOT, aggregate_indicators, query, regions_of, run_dbt, stratifier_communes, stratifier_regions
from raw_counts import derived_commune_years

RAW = REPO_ROOT / "data" / "raw"
PERIODS = {"2010-2014": (2010, 2014), "2015-2019": (2015, 2019), "2010-2019": (2010, 2019)}


@pytest.fixture(scope="module")
def commune_years() -> pd.DataFrame:
    return derived_commune_years(RAW)


def test_every_region_year_adds_up_to_its_published_communes(bundled_warehouse, commune_years):
    published = commune_years.assign(pub_deaths=commune_years["deaths"].where(commune_years["published"], 0))
    expected = published.groupby(["region", "year"]).agg(
        deaths=("deaths", "sum"), published_deaths=("pub_deaths", "sum"), births=("births", "sum"))
    expected["unpublished"] = expected["deaths"] - expected["published_deaths"]
    got = {(code, year): (d, n, u, ub) for code, year, d, n, u, ub in query(bundled_warehouse, """
        select area_code, year, deaths, live_births, unpublished_commune_deaths, unpublished_commune_births
        from marts.fct_area_year_rates where area_level = 'region' and indicator = 'imr'""")}
    assert len(got) == len(expected) == 160
    for (region, year), row in expected.iterrows():
        assert got[(region, year)] == (row["deaths"], row["births"], row["unpublished"], 0), (region, year)
    # The 16 region-years that did not add up before the column existed, and Providencia 2018.
    assert (expected["unpublished"] != 0).sum() == 16
    assert expected.loc[("13", 2018), "unpublished"] == -2


def test_metropolitana_pooled_and_its_quintiles_add_up_in_every_period(bundled_warehouse, commune_years):
    rm = commune_years[commune_years["region"] == "13"]
    for label, (start, end) in PERIODS.items():
        years = rm[rm["year"].between(start, end)]
        expected = (int(years["deaths"].sum()), int(years["births"].sum()))
        unrated = years[~years["published"]]
        region = query(bundled_warehouse, "select deaths, live_births, unpublished_commune_deaths, "
                                          "unpublished_commune_births from marts.fct_area_period_rates "
                                          "where area_code = '13' and indicator = 'imr' and period_label = ?", [label])
        assert region == [(*expected, int(unrated["deaths"].sum()), int(unrated["births"].sum()))]
        quintiles = query(bundled_warehouse, "select stratifier, sum(deaths), sum(live_births) "
                                             "from marts.fct_rates_by_quintile where area_code = '13' "
                                             "and indicator = 'imr' and period_label = ? group by stratifier", [label])
        assert len(quintiles) == sum("13" in covered for covered in stratifier_regions(bundled_warehouse).values())
        assert all((d, n) == expected for _, d, n in quintiles), (label, quintiles)
    # The full window: 6,615 deaths and 979,124 births (6,617 / 977,267 in the quintiles before).
    assert (int(rm["deaths"].sum()), int(rm["births"].sum())) == (6615, 979124)


def test_every_stratifier_covering_an_area_adds_up_to_it(bundled_warehouse):
    """Generalised: in every area, period, single year and stratifier whose ranking leaves out
    no commune with counts, the quintiles' deaths and births are the area's own."""
    rows = query(bundled_warehouse, """
        with covering as (
            select area_level, area_code, indicator, period_start, period_end, stratifier
            from marts.fct_commune_deprivation
            group by all
            having sum(case when is_ranked then 0
                else abs(deaths + unpublished_deaths) + live_births + unpublished_live_births end) = 0
        ),
        quintiles as (
            select area_level, area_code, indicator, period_start, period_end, stratifier,
                sum(deaths) as deaths, sum(live_births) as live_births
            from marts.fct_rates_by_quintile group by all
        ),
        areas as (
            select area_level, area_code, indicator, year as period_start, year as period_end, deaths, live_births
            from marts.fct_area_year_rates where area_level <> 'commune'
            union all
            select area_level, area_code, indicator, period_start, period_end, deaths, live_births
            from marts.fct_area_period_rates
        )
        select count(*), count(*) filter (where quintiles.deaths is distinct from areas.deaths
                                          or quintiles.live_births is distinct from areas.live_births)
        from quintiles
        inner join covering using (area_level, area_code, indicator, period_start, period_end, stratifier)
        left join areas using (area_level, area_code, indicator, period_start, period_end)""")
    # The groups expected, from the staged values: each indicator of the build, period (13 today),
    # area and stratifier measured there, unless a commune of the area with births in the period has
    # no value (today Antártica: region 12 and the country by the 2022 stratifiers; 416 groups of 468
    # per indicator).
    assert rows == [(sum(_groups_whose_ranking_leaves_out_no_commune(bundled_warehouse, indicator)
                         for indicator in aggregate_indicators()), 0)]


def _groups_whose_ranking_leaves_out_no_commune(warehouse, indicator: str) -> int:
    valued = stratifier_communes(warehouse)
    coverage = regions_of(valued)
    years = query(warehouse, "select area_code, region_code, year from marts.fct_area_year_rates "
                             "where area_level = 'commune' and indicator = ? and live_births > 0", [indicator])
    periods = query(warehouse, "select distinct period_start, period_end from marts.fct_area_period_rates "
                               "union select distinct year, year from marts.fct_area_year_rates")
    regions = {r for _, r, _ in years}
    count = 0
    for start, end in periods:
        with_births = {(c, r) for c, r, y in years if start <= y <= end}
        for s, covered in coverage.items():
            areas = [[(c, r) for c, r in with_births if r == region] for region in regions & covered]
            if regions <= covered:
                areas.append(list(with_births))
            count += sum(all(c in valued[s] for c, _ in communes) for communes in areas)
    return count


def read_igme(name: str) -> list[dict]:
    with open(RAW / name, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_external_benchmarks_show_igme_beside_the_national_sums(bundled_warehouse, commune_years):
    igme = {(r["indicator"], int(r["year"])): float(r["value"])
            for r in read_igme("un_igme_chile_2000_2019.csv") if r["sex"] == "bothsex"}
    bounds = {(r["bound"], int(r["year"])): float(r["value"])
              for r in read_igme("un_igme_2015_round_chile_bounds.csv") if r["indicator"] == "IMR"}
    national = commune_years.groupby("year")[["deaths", "births"]].sum()
    rows = query(bundled_warehouse, """
        select year, country_deaths, country_live_births, country_rate_per_1000, igme_rate_per_1000,
            igme_deaths, igme_2015_round_lower_90, igme_2015_round_median, igme_2015_round_upper_90,
            deaths_difference, unavailable_reason
        from marts.fct_external_benchmarks where indicator = 'imr' and year between 2000 and 2019 order by year""")
    assert [r[0] for r in rows] == list(range(2000, 2020))
    for year, deaths, births, rate, igme_rate, igme_deaths, low, mid, high, difference, reason in rows:
        assert igme_rate == igme[("sh_dyn_imrt", year)] and igme_deaths == igme[("sh_dyn_imrtn", year)]
        if year <= 2015:
            assert (low, mid, high) == (bounds[("Lower", year)], bounds[("Median", year)], bounds[("Upper", year)])
        else:
            assert low is None and mid is None and high is None
        if year < 2010:
            assert reason == "year_not_in_build" and deaths is None and rate is None
            continue
        assert reason is None
        assert (deaths, births) == tuple(national.loc[year])
        assert rate == pytest.approx(1000 * deaths / births)
        assert difference == deaths - igme_deaths
    by_year = {r[0]: r for r in rows}
    assert (by_year[2010][4], round(by_year[2010][3], 2)) == (7.4, 7.44)
    assert (by_year[2019][4], round(by_year[2019][3], 2)) == (6.0, 6.53)
    # The bundled build has no neonatal or under-5 figures: IGME's stand alone, saying why.
    others = query(bundled_warehouse, "select distinct indicator, unavailable_reason, country_rate_per_1000 "
                                      "from marts.fct_external_benchmarks where indicator <> 'imr' order by 1")
    assert others == [("nmr", "indicator_not_in_build", None), ("u5mr", "indicator_not_in_build", None)]


def test_a_year_beyond_the_deaths_tolerance_is_audited(bundled_warehouse, commune_years, tmp_path):
    """With the tolerance at 5%, the years whose national deaths differ from IGME's by more
    (computed here from the files) get an audit row; with the default 10% none does."""
    assert query(bundled_warehouse, "select count(*) from marts.audit_data_quality "
                                    "where check_name = 'igme_deaths_difference_exceeds_tolerance'") == [(0,)]
    igme = {int(r["year"]): float(r["value"]) for r in read_igme("un_igme_chile_2000_2019.csv")
            if r["indicator"] == "sh_dyn_imrtn" and r["sex"] == "bothsex"}
    national = commune_years.groupby("year")["deaths"].sum()
    expected = sorted(y for y, d in national.items() if abs(100 * (d - igme[y]) / igme[y]) > 5)
    assert expected == [2011, 2014]
    path = tmp_path / "tolerance.duckdb"
    shutil.copy(bundled_warehouse, path)
    run_dbt(["build", "--select", "fct_external_benchmarks", "int_audit__external_benchmarks", "audit_data_quality"],
            path, {"external_deaths_tolerance_percent": 5})
    rows = query(path, "select year, observed_value, affects_results from marts.audit_data_quality "
                       "where check_name = 'igme_deaths_difference_exceeds_tolerance' order by year")
    assert [r[0] for r in rows] == expected
    assert rows[1][1] == "deaths=1857 igme_deaths=1698 difference=9.4%" and rows[1][2] is False
