"""fct_trends built by the real dbt CLI on the bundled data."""

import numpy as np
import pytest

from conftest import aggregate_indicators, query, seed_column
from infant_mortality.statistics.prais_winsten import prais_winsten_trend


def test_every_rm_commune_and_the_region_has_an_imr_trend_over_2010_2019(bundled_warehouse):
    rows = query(
        bundled_warehouse,
        "select area_level, method, count(*) from marts.fct_trends where indicator = 'imr' "
        "and period_start = 2010 and period_end = 2019 group by all order by all",
    )
    assert rows == [(level, method, n) for level, n in [("commune", 346), ("country", 1), ("region", 16)]
                    for method in sorted(seed_column("trend_methods.csv", "method"))]


def test_region_trend_equals_a_statsmodels_reference_fit_of_its_yearly_rates(bundled_warehouse):
    years, rates = zip(*query(
        bundled_warehouse,
        "select year, rate_per_1000 from marts.fct_area_year_rates "
        "where area_level = 'region' and area_code = '13' and indicator = 'imr' order by year",
    ))
    reference = prais_winsten_trend(np.log10(rates), np.array(years, dtype=float))
    (slope, se, p, rho, apc, lower, upper, trend), = query(
        bundled_warehouse,
        "select slope_log10, slope_se, p_value, rho, apc, apc_ci95_lower, apc_ci95_upper, trend "
        "from marts.fct_trends where area_level = 'region' and area_code = '13' and indicator = 'imr' "
        "and period_start = 2010 and period_end = 2019 and method = 'prais_winsten'",
    )
    assert slope == pytest.approx(reference.params[1], rel=1e-9)
    assert se == pytest.approx(reference.bse[1], rel=1e-9)
    assert rho == pytest.approx(reference.rho, rel=1e-9)
    assert apc == pytest.approx((10 ** slope - 1) * 100, rel=1e-12)
    assert lower < apc < upper
    # The region's infant mortality fell from 7.14 to 5.97 per 1000: a significant decrease.
    assert trend == "decreasing" and p < 0.05


def test_the_commune_with_an_unavailable_year_is_fitted_on_the_others_and_says_so(bundled_warehouse):
    (n_years, used, note), = query(
        bundled_warehouse,
        "select n_years, n_years_used, note from marts.fct_trends where area_code = '13123' "
        "and indicator = 'imr' and period_start = 2010 and period_end = 2019 and method = 'prais_winsten'",
    )
    assert (n_years, used) == (10, 9)
    assert "2018" in note


def _region_rates(warehouse):
    """The Metropolitan Region's yearly IMR (the build holds all 16 regions: one series, one fit)."""
    years, rates = zip(*query(
        warehouse,
        "select year, rate_per_1000 from marts.fct_area_year_rates "
        "where area_level = 'region' and area_code = '13' and indicator = 'imr' order by year",
    ))
    return np.array(years, dtype=float), np.log10(rates)


def test_the_mart_carries_the_fitted_line(bundled_warehouse):
    years, y = _region_rates(bundled_warehouse)
    reference = prais_winsten_trend(y, years)
    (intercept, slope), = query(
        bundled_warehouse,
        "select intercept_log10, slope_log10 from marts.fct_trends where area_level = 'region' "
        "and area_code = '13' and indicator = 'imr' and period_start = 2010 and period_end = 2019 "
        "and method = 'prais_winsten'",
    )
    assert intercept == pytest.approx(reference.params[0], rel=1e-9)
    # Stata's fitted values (predict xb): intercept + slope * year, on the raw-year scale.
    assert np.allclose(intercept + slope * years, reference.params[0] + reference.params[1] * years,
                       rtol=0, atol=1e-9)
    # Null exactly when the slope is (no valid fit).
    (mismatch,), = query(
        bundled_warehouse,
        "select count(*) from marts.fct_trends where (intercept_log10 is null) <> (slope_log10 is null)")
    assert mismatch == 0


def test_the_trend_mart_has_a_contract_with_every_column_described(bundled_warehouse):
    rows = query(
        bundled_warehouse,
        "select column_name, data_type, comment from duckdb_columns() "
        "where schema_name = 'marts' and table_name = 'fct_trends' order by column_index",
    )
    types = {name: data_type for name, data_type, _ in rows}
    assert types["intercept_log10"] == "DOUBLE" and types["period_start"] == "BIGINT"
    assert types["converged"] == "BOOLEAN" and types["note"] == "VARCHAR"
    assert all(comment for _, _, comment in rows), [name for name, _, c in rows if not c]
    (constraints,), = query(
        bundled_warehouse,
        "select count(*) from duckdb_constraints() where table_name = 'fct_trends' "
        "and constraint_type = 'PRIMARY KEY'")
    assert constraints == 1


def test_trend_method_ols_fits_statsmodels_ols(ols_trends_warehouse):
    import statsmodels.api as sm

    years, y = _region_rates(ols_trends_warehouse)
    ols = sm.OLS(y, sm.add_constant(years)).fit()
    (intercept, slope, se, p, rho, note), = query(
        ols_trends_warehouse,
        "select intercept_log10, slope_log10, slope_se, p_value, rho, note from marts.fct_trends "
        "where area_level = 'region' and area_code = '13' and indicator = 'imr' "
        "and period_start = 2010 and period_end = 2019 and method = 'prais_winsten'",
    )
    assert [intercept, slope, se, p] == pytest.approx(list(ols.params) + [ols.bse[1], ols.pvalues[1]], rel=1e-9)
    assert rho is None and note is None
    (variant, fitter), = query(ols_trends_warehouse, "select vars_json ->> '$.trend_prais_variant', "
                               "(select distinct fitter from marts.fct_trends where method = 'prais_winsten') "
                               "from marts.meta_build")
    assert variant == fitter == "ols"


# --- Valid conclusions (docs/methods/trends.md, "Valid trend conclusions for small communes"): the acceptance of issue 26 -----------------


def test_no_prais_winsten_class_rests_on_an_unconverged_fit_or_rho_near_a_unit_root(bundled_warehouse):
    (bad,), = query(
        bundled_warehouse,
        "select count(*) from marts.fct_trends where method = 'prais_winsten' "
        "and trend in ('increasing', 'decreasing', 'stationary') and (not converged or abs(rho) >= 0.95)")
    assert bad == 0
    # Isla de Pascua, Cholchol and Gorbea 2010-2019 (0-1 infant deaths a year) have no class by any method.
    rows = query(
        bundled_warehouse,
        "select area_name, method, trend, n_deaths from marts.fct_trends where area_name in "
        "('Isla de Pascua', 'Cholchol', 'Gorbea') and indicator = 'imr' and period_start = 2010 and period_end = 2019")
    assert sorted((name, method) for name, method, _, _ in rows) == sorted(
        (name, method) for name in ("Isla de Pascua", "Cholchol", "Gorbea")
        for method in seed_column("trend_methods.csv", "method"))
    assert all(trend == "insufficient_data" and deaths < 20 for _, _, trend, deaths in rows)
    # Tirúa 2010-2019 never converged (its p swung with the stopping point): no class either.
    (tirua,), = query(bundled_warehouse, "select trend from marts.fct_trends where area_name = 'Tirúa' "
                      "and indicator = 'imr' and period_start = 2010 and period_end = 2019 and method = 'prais_winsten'")
    assert tirua in ("not_estimable", "insufficient_data")


def test_every_poisson_row_is_statsmodels_quasi_poisson_glm(bundled_warehouse):
    import statsmodels.api as sm

    years = query(
        bundled_warehouse,
        "select r.area_level, r.area_code, r.indicator, p.period_start, p.period_end, list(r.year order by r.year), "
        "list(r.deaths order by r.year), list(r.live_births order by r.year) "
        "from marts.fct_area_year_rates r join marts.fct_trends p on r.area_level = p.area_level "
        "and r.area_code = p.area_code and r.indicator = p.indicator and p.method = 'poisson' "
        "and r.year between p.period_start and p.period_end "
        "where r.rate_per_1000 is not null and r.live_births > 0 group by all")
    fitted = {tuple(key): (slope, scale) for *key, slope, scale in query(
        bundled_warehouse,
        "select area_level, area_code, indicator, period_start, period_end, slope_log10, dispersion "
        "from marts.fct_trends where method = 'poisson'")}
    indicators = aggregate_indicators()
    assert len(fitted) == len(indicators) * 3 * (346 + 16 + 1)
    compared = {"commune": 0, "region": 0, "country": 0}
    for level, code, indicator, start, end, yr, deaths, births in years:
        key = (level, code, indicator, start, end)
        slope, scale = fitted[key]
        if slope is None:  # fewer than 5 years or 20 deaths (not fitted), or no finite maximum
            assert len(yr) < 5 or sum(deaths) < 20 or max(deaths) == sum(deaths), key
            continue
        glm = sm.GLM(np.array(deaths, dtype=float), sm.add_constant(np.array(yr, dtype=float)),
                     family=sm.families.Poisson(), offset=np.log(births)).fit(scale="X2")
        assert abs(slope * np.log(10) - glm.params[1]) < 1e-6, key
        assert scale == pytest.approx(glm.scale, rel=1e-6), key
        compared[level] += 1
    (fitted_communes,), = query(bundled_warehouse, "select count(*) from marts.fct_trends "
                                "where method = 'poisson' and area_level = 'commune' and slope_log10 is not null")
    assert compared["region"] == len(indicators) * 48 and compared["country"] == len(indicators) * 3
    assert compared["commune"] == fitted_communes > 300


def test_every_joinpoint_aapc_is_its_segments_length_weighted_mean_slope(bundled_warehouse):
    rows = query(
        bundled_warehouse,
        "select t.apc, t.slope_log10, list(s.slope_log10 order by s.segment), "
        "list(s.segment_end - s.segment_start order by s.segment), any_value(s.n_segments) "
        "from marts.fct_trends t join marts.fct_trend_segments s using (area_level, area_code, indicator, "
        "period_start, period_end) where t.method = 'joinpoint' group by t.area_level, t.area_code, "
        "t.indicator, t.period_start, t.period_end, t.apc, t.slope_log10")
    (fits,), = query(bundled_warehouse, "select count(*) from marts.fct_trends "
                     "where method = 'joinpoint' and slope_log10 is not null")
    assert len(rows) == fits and any(n > 1 for *_, n in rows)
    for apc, slope, slopes, lengths, _ in rows:
        mean = np.dot(slopes, lengths) / np.sum(lengths)
        assert slope == pytest.approx(mean, rel=1e-12, abs=1e-15)
        assert apc == pytest.approx(100 * (10 ** mean - 1), rel=1e-9, abs=1e-12)


def test_meta_build_names_the_headline_method_and_interval_level(bundled_warehouse):
    (method, label, level), = query(bundled_warehouse, "select trend_method, trend_method_label, "
                                    "trend_ci_level from marts.meta_build")
    assert (method, level) == ("poisson", 0.95) and label.startswith("Poisson")
