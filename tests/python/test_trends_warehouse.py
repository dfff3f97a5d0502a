"""fct_trends built by the real dbt CLI on the bundled data."""

import numpy as np
import pytest

from conftest import query
from infant_mortality.statistics.prais_winsten import prais_winsten_trend


def test_every_rm_commune_and_the_region_has_an_imr_trend_over_2010_2019(bundled_warehouse):
    rows = query(
        bundled_warehouse,
        "select area_level, count(*) from marts.fct_trends where indicator = 'imr' "
        "and period_start = 2010 and period_end = 2019 group by area_level order by area_level",
    )
    assert rows == [("commune", 346), ("country", 1), ("region", 16)]


def test_trend_class_follows_from_p_value_and_slope(bundled_warehouse):
    rows = query(
        bundled_warehouse,
        "select trend, p_value, slope_log10, n_years_used from marts.fct_trends where indicator = 'imr'",
    )
    assert len(rows) == 3 * (346 + 16 + 1)
    for trend, p, slope, used in rows:
        if used < 5 or p is None:
            assert trend == "not_estimable"
        elif p < 0.05:
            assert trend == ("increasing" if slope > 0 else "decreasing")
        else:
            assert trend == "stationary"


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
        "and period_start = 2010 and period_end = 2019",
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
        "and indicator = 'imr' and period_start = 2010 and period_end = 2019",
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
        "and area_code = '13' and indicator = 'imr' and period_start = 2010 and period_end = 2019",
    )
    assert intercept == pytest.approx(reference.params[0], rel=1e-9)
    # Stata's fitted values (predict xb): intercept + slope * year, on the raw-year scale.
    assert np.allclose(intercept + slope * years, reference.params[0] + reference.params[1] * years,
                       rtol=0, atol=1e-9)
    # Null exactly when the trend is not estimable, like the slope.
    (mismatch,), = query(
        bundled_warehouse,
        "select count(*) from marts.fct_trends where (intercept_log10 is null) <> (trend = 'not_estimable')")
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
        "and period_start = 2010 and period_end = 2019",
    )
    assert [intercept, slope, se, p] == pytest.approx(list(ols.params) + [ols.bse[1], ols.pvalues[1]], rel=1e-9)
    assert rho is None and note is None
    (method,), = query(ols_trends_warehouse, "select vars_json ->> '$.trend_method' from marts.meta_build")
    assert method == "ols"
