"""The commune-vs-region mart against hand computations from the bundled counts."""

import math

import pytest
from scipy import stats

from conftest import aggregate_indicators, query

INE = "read_csv('data/raw/ine_vital_statistics_chile_2010_2019.csv')"
DEIS = "read_csv('data/raw/deis_deaths_by_commune_year_sex_agegroup_1990_2019.csv')"


def derived_counts_by_hand(warehouse, first_year, last_year):
    """{commune: (infant deaths, births)} straight from the raw files, summed over the years."""
    rows = query(
        warehouse,
        f"""
        with ine as (
            select cast(codigo_comuna as integer) as commune, anio as year,
                sum(case when evento = 'nacimiento' then cantidad end) as births,
                sum(case when evento = 'defuncion' then cantidad end) as all_deaths
            from {INE} group by 1, 2),
        deis as (
            select CODIGO_COMUNA_RESIDENCIA as commune, Year as year, sum(Death_count_all_cause) as aged_1_plus
            from {DEIS} where "Age group" = '1+' group by 1, 2)
        select ine.commune, ine.year, all_deaths - aged_1_plus, births
        from ine join deis using (commune, year)
        where ine.year between {first_year} and {last_year} and ine.commune between 13101 and 13999
        """,
    )
    return rows


def test_independencia_2010_2014_by_hand(bundled_warehouse):
    rows = derived_counts_by_hand(bundled_warehouse, 2010, 2014)
    assert all(deaths >= 0 for _, _, deaths, _ in rows)  # no unavailable commune-year in 2010-2014
    d_c = sum(d for c, _, d, _ in rows if c == 13108)
    n_c = sum(n for c, _, _, n in rows if c == 13108)
    big_d = sum(d for _, _, d, _ in rows)
    big_n = sum(n for _, _, _, n in rows)
    r_c, r_region = 1000 * d_c / n_c, 1000 * big_d / big_n
    rr = r_c / r_region
    se = math.sqrt(1 / d_c - 1 / big_d)
    z = stats.norm.ppf(0.975)

    (got,) = query(
        bundled_warehouse,
        "select deaths, live_births, region_deaths, region_live_births, rate_ratio, rate_ratio_ci95_lower, "
        "rate_ratio_ci95_upper, excess_rate_per_1000, attributable_percent, excess_deaths, n_years "
        "from marts.fct_commune_vs_region where commune_code = '13108' and indicator = 'imr' "
        "and period_start = 2010 and period_end = 2014",
    )
    assert got[:4] == (d_c, n_c, big_d, big_n)
    assert got[4] == pytest.approx(rr, rel=1e-12)
    assert got[5] == pytest.approx(rr * math.exp(-z * se), rel=1e-9)
    assert got[6] == pytest.approx(rr * math.exp(z * se), rel=1e-9)
    assert got[7] == pytest.approx(r_c - r_region, rel=1e-12)
    assert got[8] == pytest.approx(100 * (rr - 1) / rr, rel=1e-12)
    assert got[9] == pytest.approx(d_c - n_c * r_region / 1000, rel=1e-12)
    assert got[10] == 5
    # The study's headline: Independencia's infant mortality was about 1.75 times the region's.
    assert 1.6 < rr < 1.9


def test_region_and_rest_of_region_ratios_satisfy_the_identity(bundled_warehouse):
    # rr_region = rr_rest / (f rr_rest + 1 - f), f = the commune's share of the region's births.
    rows = query(
        bundled_warehouse,
        "select rate_ratio, rest_rate_ratio, live_births::double / region_live_births "
        "from marts.fct_commune_vs_region where deaths > 0 and rest_deaths > 0",  # else no rest ratio
    )
    assert len(rows) >= 150
    for rr_region, rr_rest, f in rows:
        assert rr_region == pytest.approx(rr_rest / (f * rr_rest + 1 - f), rel=1e-10)


def test_rest_of_region_inference_matches_the_exact_conditional_test(bundled_warehouse):
    (d_c, n_c, d_r, n_r, lower, upper, p, comparison), = query(
        bundled_warehouse,
        "select deaths, live_births, rest_deaths, rest_live_births, rest_rate_ratio_exact_lower, "
        "rest_rate_ratio_exact_upper, p_value, comparison from marts.fct_commune_vs_region "
        "where commune_code = '13108' and indicator = 'imr' and period_label = '2010-2014'",
    )
    # Second method: Clopper-Pearson via scipy's binomtest, mapped to the rate-ratio scale.
    ci = stats.binomtest(d_c, d_c + d_r).proportion_ci(0.95, method="exact")
    to_rr = lambda p: p / (1 - p) * n_r / n_c  # noqa: E731
    assert lower == pytest.approx(to_rr(ci.low), rel=1e-8)
    assert upper == pytest.approx(to_rr(ci.high), rel=1e-8)
    assert p < 0.05 and comparison == "higher"


def test_unavailable_commune_year_is_left_out_on_both_sides(bundled_warehouse):
    # Providencia 2018 has no rate: its 2015-2019 comparison pools 4 years for it and its region.
    (n_years, n_in_period, region_births), = query(
        bundled_warehouse,
        "select n_years, n_years_in_period, region_live_births from marts.fct_commune_vs_region "
        "where commune_code = '13123' and indicator = 'imr' and period_label = '2015-2019'",
    )
    (births_without_2018,), = query(
        bundled_warehouse,
        "select sum(live_births) from marts.fct_area_year_rates where area_level = 'region' "
        "and area_code = '13' and indicator = 'imr' and year between 2015 and 2019 and year <> 2018",
    )
    assert (n_years, n_in_period) == (4, 5)
    assert region_births == births_without_2018


def test_periods_are_the_full_window_and_five_year_blocks(bundled_warehouse):
    rows = query(
        bundled_warehouse,
        "select period_label, count(*) from marts.fct_commune_vs_region where indicator = 'imr' "
        "group by 1 order by 1",
    )
    assert rows == [("2010-2014", 346), ("2010-2019", 346), ("2015-2019", 346)]


def test_custom_period_var_adds_a_period(tmp_path):
    from conftest import run_dbt

    path = tmp_path / "custom.duckdb"
    run_dbt(["build", "--select", "+fct_commune_vs_region"], path, {"custom_period": {"start": 2012, "end": 2016}})
    rows = query(
        path,
        "select indicator, count(*), min(n_years_in_period) from marts.fct_commune_vs_region "
        "where period_label = '2012-2016' group by 1 order by 1",
    )
    assert rows == [(indicator, 346, 5) for indicator in sorted(aggregate_indicators())]


def test_region_period_rates_by_hand_with_exact_limits(bundled_warehouse):
    # fct_area_period_rates: the region's own pooled rate, from the raw files summed by hand.
    for first, last in ((2010, 2014), (2015, 2019), (2010, 2019)):
        rows = derived_counts_by_hand(bundled_warehouse, first, last)
        big_d = sum(d for _, _, d, _ in rows)  # signed: a negative derived commune count cancels out
        big_n = sum(n for _, _, _, n in rows)
        (level, name, n_years, deaths, births, rate, lower, upper), = query(
            bundled_warehouse,
            "select area_level, area_name, n_years, deaths, live_births, rate_per_1000, ci95_lower, "
            "ci95_upper from marts.fct_area_period_rates where area_code = '13' and indicator = 'imr' "
            "and period_start = ? and period_end = ?", [first, last])
        assert (level, n_years, deaths, births) == ("region", last - first + 1, big_d, big_n)
        assert name == "Región Metropolitana de Santiago"
        assert rate == pytest.approx(1000 * big_d / big_n, rel=1e-12)
        # Exact Poisson (Garwood) limits, from scipy's chi-square quantiles.
        assert lower == pytest.approx(1000 * stats.chi2.ppf(0.025, 2 * big_d) / 2 / big_n, rel=1e-9)
        assert upper == pytest.approx(1000 * stats.chi2.ppf(0.975, 2 * big_d + 2) / 2 / big_n, rel=1e-9)


def test_comparison_pools_the_region_over_the_communes_years_from_the_same_rule(bundled_warehouse):
    # Every commune with a rate in every year sees the region's own pooled rate; Providencia
    # (no rate in 2018) sees the region over its 4 years, and only there do the two differ.
    every = query(
        bundled_warehouse,
        "select c.indicator, c.commune_code, c.n_years, c.region_deaths = a.deaths "
        "and c.region_live_births = a.live_births and c.region_rate_per_1000 = a.rate_per_1000 "
        "from marts.fct_commune_vs_region c join marts.fct_area_period_rates a "
        "on a.area_level = 'region' and a.area_code = c.region_code and a.indicator = c.indicator "
        "and a.period_start = c.period_start and a.period_end = c.period_end where c.region_code = '13'")
    assert sorted({indicator for indicator, *_ in every}) == sorted(aggregate_indicators())
    for indicator in aggregate_indicators():  # each reads the same derived count
        rows = [row for i, *row in every if i == indicator]
        assert len(rows) == 156, indicator
        differ = sorted((code, n) for code, n, same in rows if not same)
        assert differ == [("13123", 4), ("13123", 9)], indicator
        assert all(n == 5 or n == 10 for code, n, same in rows if same), indicator


def test_funnel_limits_mart_agrees_with_the_funnel_categories(bundled_warehouse):
    """marts.fct_funnel_limits is the exact Poisson funnel around the region's rate on its births
    grid, and every RM commune's funnel_category (the mart's UDF) sits where the limits, computed
    at the commune's own births by a second function, put it."""
    import numpy as np

    from infant_mortality.statistics.poisson import funnel_count_limits

    where = "region_code = '13' and indicator = 'imr' and period_start = 2010 and period_end = 2019"
    grid = query(bundled_warehouse, f"select live_births, region_rate_per_1000, expected_deaths, lower_95_per_1000, "
                                    f"upper_95_per_1000, lower_998_per_1000, upper_998_per_1000 "
                                    f"from marts.fct_funnel_limits where {where} order by grid_point")
    communes = query(bundled_warehouse, f"select live_births, deaths, funnel_category from marts.fct_commune_vs_region "
                                        f"where {where} and rate_per_1000 is not null")
    (rate,), = query(bundled_warehouse, "select rate_per_1000 from marts.fct_area_period_rates where area_level = "
                                        "'region' and area_code = '13' and indicator = 'imr' and period_start = 2010 "
                                        "and period_end = 2019")
    births = [b for b, _, _ in communes]
    assert len(grid) == 36 and len(communes) == 52
    assert grid[0][0] == pytest.approx(0.7 * min(births)) and grid[-1][0] == pytest.approx(1.4 * max(births))
    assert all(b2 > b1 for (b1, *_), (b2, *_) in zip(grid, grid[1:]))
    for live_births, centre, expected, lo95, up95, lo998, up998 in grid:
        assert centre == pytest.approx(rate, rel=1e-12) and expected == pytest.approx(rate * live_births / 1000)
        for level, lo, up in ((0.95, lo95, up95), (0.998, lo998, up998)):
            lower, upper = funnel_count_limits(expected, level)
            assert (lo, up) == (pytest.approx(1000 * lower[0] / live_births), pytest.approx(1000 * upper[0] / live_births))
    seen = set()
    for live_births, deaths, category in communes:
        (lo95,), (up95,) = funnel_count_limits(rate * live_births / 1000, 0.95)
        (lo998,), (up998,) = funnel_count_limits(rate * live_births / 1000, 0.998)
        place = ("above_99_8" if deaths > up998 else "above_95" if deaths > up95 else
                 "below_99_8" if deaths < lo998 else "below_95" if deaths < lo95 else "within")
        assert place == category, (live_births, deaths, category)
        seen.add(category)
    assert {"within", "above_95"} <= seen and np.isfinite(rate)


def test_every_comparison_label_agrees_with_the_midp_interval_beside_it(bundled_warehouse):
    every = query(
        bundled_warehouse,
        "select indicator, comparison, rest_rate_ratio_ci95_lower, coalesce(rest_rate_ratio_ci95_upper, 'infinity'), "
        "rest_rate_ratio_exact_lower, coalesce(rest_rate_ratio_exact_upper, 'infinity') "
        "from marts.fct_commune_vs_region where comparison is not null")
    assert sorted({indicator for indicator, *_ in every}) == sorted(aggregate_indicators())
    for _, comparison, lower, upper, *_ in every:
        expected = "higher" if lower > 1 else "lower" if upper < 1 else "similar"
        assert comparison == expected
    # The infant mortality rate's comparisons; the exact interval is the conservative one: 13 labels
    # fall outside it (the reason the mid-p interval is the one published as the comparison's ci95,
    # the exact one named apart).
    rows = [row for indicator, *row in every if indicator == "imr"]
    assert len(rows) == 1038
    outside_exact = sum(1 for c, _, _, lo, up in rows if (c == "higher" and lo <= 1) or (c == "lower" and up >= 1))
    assert outside_exact == 13


def test_where_the_funnel_and_the_label_part_the_row_says_why(bundled_warehouse):
    rows = query(bundled_warehouse, "select comparison, funnel_category, funnel_differs_note "
                                    "from marts.fct_commune_vs_region where comparison is not null")
    high, low = ("above_95", "above_99_8"), ("below_95", "below_99_8")
    differ = [(c, f, note) for c, f, note in rows
              if (c == "higher") != (f in high) or (c == "lower") != (f in low)]
    assert len(differ) == sum(note is not None for *_, note in rows) > 0
    for comparison, funnel, note in differ:
        assert note is not None, (comparison, funnel)
        assert ("within the funnel" in note) == (funnel == "within")
        assert ("not different from the rest" in note) == (comparison == "similar")
