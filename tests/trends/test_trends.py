"""fit_trends: the trend mart rows from yearly rates (docs/methods/trends.md, "Prais-Winsten on log10(rate)")."""

from __future__ import annotations

import logging

import duckdb
import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from scipy import stats

from conftest import seed_column, var_rules
from infant_mortality.statistics.prais_winsten import prais_winsten_trend
from infant_mortality.statistics.trends import MART_METHODS, OUTPUT_COLUMNS, OUTPUT_DTYPES, fit_trends

RESEARCH_NOTE_IMR = [9.1, 8.7, 8.9, 8.2, 8.0, 7.9, 7.3, 7.5, 7.0, 6.8]  # 2005-2014


def _rates(series: dict, first_year: int = 2005, births: int = 1000) -> pd.DataFrame:
    """{(level, code, indicator): [rate or None, ...]} -> a frame like fct_area_year_rates."""
    rows = []
    for (level, code, indicator), values in series.items():
        for i, rate in enumerate(values):
            deaths = None if rate is None else round(rate * births / 1000)
            rows.append({
                "area_level": level, "area_code": code, "area_name": f"name {code}",
                "region_code": None if level == "country" else "13", "year": first_year + i,
                "indicator": indicator, "deaths": deaths, "live_births": births, "multiplier": 1000,
                "rate_per_1000": rate,
            })
    frame = pd.DataFrame(rows)
    frame["deaths"] = frame["deaths"].astype("Int64")
    frame["rate_per_1000"] = frame["rate_per_1000"].astype("Float64")
    return frame


def _periods(*pairs) -> pd.DataFrame:
    return pd.DataFrame({"period_start": [a for a, _ in pairs], "period_end": [b for _, b in pairs],
                         "period_label": [f"{a}-{b}" for a, b in pairs]})


def _study(out) -> pd.DataFrame:
    """The rows of the study's method (Prais-Winsten by default)."""
    return out[out["method"] == "prais_winsten"]


def _one(out, **keys) -> pd.Series:
    """The one row with these keys (of the study's method, unless another is named)."""
    if "method" in out.columns:
        keys = {"method": "prais_winsten", **keys}
    sel = np.ones(len(out), dtype=bool)
    for k, v in keys.items():
        sel &= (out[k] == v).to_numpy(dtype=bool, na_value=False)
    assert sel.sum() == 1, keys
    return out[sel].iloc[0]


def test_research_note_series_apc_and_interval():
    # 20,000 births a year, so that the deaths (182, 174, ... 136) carry the fall the rates show.
    rates = _rates({("commune", "13101", "imr"): RESEARCH_NOTE_IMR}, births=20000)
    out = fit_trends(rates, _periods((2005, 2014)))
    row = _one(out, area_code="13101")
    # epidemiology-methods-research.md 8.7 (digits that do not depend on the 1e-6 / 1e-8 stop).
    assert round(row.slope_log10, 8) == -0.01412563
    assert round(row.slope_se, 8) == 0.00055620
    assert round(row.rho, 6) == -0.651086
    assert round(row.apc, 4) == -3.2002
    assert round(row.apc_ci95_lower, 4) == -3.4857
    assert round(row.apc_ci95_upper, 4) == -2.9139
    assert row.trend == "decreasing"
    # The same rates at 1000 births a year are 9, 9, 9, 8, 8, 8, 7, 8, 7, 7 deaths: the log-rate
    # fit is as sure as before (it sees only the rates), the count model cannot tell the series
    # from no trend, so the study's class is not confirmed while its numbers stay.
    small = fit_trends(_rates({("commune", "13101", "imr"): RESEARCH_NOTE_IMR}), _periods((2005, 2014)))
    small_pw = _one(small, area_code="13101")
    assert small_pw.trend == "not_confirmed" and small_pw.apc == row.apc and small_pw.p_value < 1e-6
    assert _one(small, area_code="13101", method="poisson").trend == "stationary"
    assert row.n_years == row.n_years_used == 10 and row.n_zero_years == 0
    assert row.converged and row.iterations == 3
    assert pd.isna(row.note)
    # The formulas, from the row's own slope and se, c = t(0.975, n - 2).
    c = stats.t.ppf(0.975, 8)
    assert_allclose(row.apc, (10**row.slope_log10 - 1) * 100, rtol=1e-14)
    assert_allclose(row.apc_ci95_lower, (10 ** (row.slope_log10 - c * row.slope_se) - 1) * 100, rtol=1e-14)
    assert_allclose(row.apc_ci95_upper, (10 ** (row.slope_log10 + c * row.slope_se) - 1) * 100, rtol=1e-14)
    assert_allclose(row.t_stat, row.slope_log10 / row.slope_se, rtol=1e-14)
    assert_allclose(row.p_value, 2 * stats.t.sf(abs(row.t_stat), 8), rtol=1e-12)

    normal = _one(fit_trends(rates, _periods((2005, 2014)), ci_critical="normal", ci_level=0.9,
                                    p_threshold=0.1),
                  area_code="13101")
    z = stats.norm.ppf(0.95)
    assert_allclose(normal.apc_ci95_upper, (10 ** (row.slope_log10 + z * row.slope_se) - 1) * 100,
                    rtol=1e-14)
    # The p-value is the normal test's, the one the interval inverts.
    assert_allclose(normal.p_value, 2 * stats.norm.sf(abs(row.t_stat)), rtol=1e-12)
    with pytest.raises(ValueError, match="ci_level .* must be 1 - p_threshold"):
        fit_trends(rates, _periods((2005, 2014)), ci_level=0.9)


def test_classification_follows_p_and_sign():
    rng = np.random.default_rng(1)
    years = np.arange(12)
    up = list(5 * 1.06 ** years * np.exp(rng.normal(0, 0.02, 12)))
    down = list(5 * 0.94 ** years * np.exp(rng.normal(0, 0.02, 12)))
    flat = [5.0, 5.4, 4.7, 5.2, 4.9, 5.3, 4.8, 5.1, 5.0, 4.8, 5.2, 4.9]
    rates = _rates({("commune", "a", "imr"): up, ("commune", "b", "imr"): down,
                    ("commune", "c", "imr"): flat}, births=20000)
    out = fit_trends(rates, _periods((2005, 2016)))
    a, b, c = (_one(out, area_code=k) for k in "abc")
    assert a.trend == "increasing" and a.p_value < 0.05 and a.slope_log10 > 0 and a.apc_ci95_lower > 0
    assert b.trend == "decreasing" and b.p_value < 0.05 and b.slope_log10 < 0 and b.apc_ci95_upper < 0
    assert c.trend == "stationary" and c.p_value >= 0.05
    # A threshold below the p-value turns a significant trend into stationary.
    strict = fit_trends(rates, _periods((2005, 2016)), p_threshold=a.p_value / 2, ci_level=1 - a.p_value / 2)
    assert _one(strict, area_code="a").trend == "stationary"


def test_too_few_years_is_not_estimable_with_a_note():
    rates = _rates({("commune", "x", "nmr"): [3.0, 2.5, 2.8, 2.1, 2.6, 2.2]})
    out = fit_trends(rates, _periods((2005, 2010), (2005, 2008)), min_years=5)
    full, short = _one(out, period_end=2010), _one(out, period_end=2008)
    assert full.trend != "not_estimable" and full.n_years_used == 6
    assert short.trend == "not_estimable"
    assert short.n_years == short.n_years_used == 4
    assert "fewer than min_years = 5" in short.note
    stat_cols = ["slope_log10", "slope_se", "t_stat", "p_value", "rho", "iterations", "converged",
                 "dw_original", "dw_transformed", "apc", "apc_ci95_lower", "apc_ci95_upper"]
    assert short[stat_cols].isna().all()
    # min_years = 4 is accepted, but 4-year series usually drive |rho| >= 1, which leaves 3 rows
    # for 2 parameters: not estimable, and the note says why.
    four = _one(fit_trends(rates, _periods((2005, 2008)), min_years=4), period_end=2008)
    assert four.trend == "not_estimable" and "kept 3 observations for 2 parameters" in four.note
    with pytest.raises(ValueError):
        fit_trends(rates, _periods((2005, 2008)), min_years=3)


def test_zero_and_unavailable_years_are_dropped_counted_and_noted():
    values = [6.0, 5.5, 0.0, 5.1, None, 4.8, 4.6, 0.0, 4.1, 4.0]
    rates = _rates({("commune", "z", "pnmr"): values})
    out = fit_trends(rates, _periods((2005, 2014)))
    row = _one(out, area_code="z")
    assert row.n_years == 10 and row.n_years_used == 7 and row.n_zero_years == 2
    assert "zero rate in 2007, 2012" in row.note
    assert "rate unavailable (NULL) for 2009" in row.note
    assert "rho computations restarted at each gap" in row.note
    # Equal to the reference path on the 7 remaining years (gaps restart rho, as Stata).
    used = [i for i, v in enumerate(values) if v]
    ref = prais_winsten_trend(np.log10([values[i] for i in used]), 2005 + np.array(used))
    assert ref.n_gaps == 3
    assert_allclose(row.slope_log10, ref.params[1], rtol=1e-10)
    assert_allclose(row.slope_se, ref.bse[1], rtol=1e-10)
    assert_allclose(row.rho, ref.rho, rtol=1e-10)
    assert row.iterations == ref.iterations
    # Treating the remaining years as consecutive (R prais) is an option and gives other numbers.
    cons = _one(fit_trends(rates, _periods((2005, 2014)), gaps="consecutive"), area_code="z")
    ref_c = prais_winsten_trend(np.log10([values[i] for i in used]), 2005 + np.array(used),
                                gaps="consecutive")
    assert_allclose(cons.rho, ref_c.rho, rtol=1e-10)
    assert abs(cons.rho - row.rho) > 1e-3
    assert "treated as consecutive" in cons.note


def test_add_half_death_policy():
    values = [6.0, 5.5, 0.0, 5.1, 4.9, 4.8, 4.6, 0.0, 4.1, 4.0]
    rates = _rates({("commune", "h", "imr"): values}, births=400)
    out = fit_trends(rates, _periods((2005, 2014)), zero_rate_policy="add_half_death")
    row = _one(out, area_code="h")
    assert row.n_years_used == 10 and row.n_zero_years == 2
    assert "fitted at 0.5 death" in row.note and "2007, 2012" in row.note
    adjusted = [v if v else 0.5 / 400 * 1000 for v in values]
    ref = prais_winsten_trend(np.log10(adjusted), np.arange(2005, 2015))
    assert_allclose(row.slope_log10, ref.params[1], rtol=1e-10)
    assert_allclose(row.p_value, ref.pvalues[1], rtol=1e-8)
    dropped = _one(fit_trends(rates, _periods((2005, 2014))), area_code="h")
    assert dropped.n_years_used == 8 and dropped.slope_log10 != row.slope_log10
    with pytest.raises(ValueError):
        fit_trends(rates, _periods((2005, 2014)), zero_rate_policy="replace_with_mean")


def test_period_beyond_the_data_and_every_series_gets_every_period():
    rates = _rates({("region", "13", "imr"): RESEARCH_NOTE_IMR,
                    ("country", "CL", "imr"): RESEARCH_NOTE_IMR[:6]})
    periods = pd.concat([_periods((2005, 2014), (2010, 2014), (2005, 2016)),
                         _periods((2005, 2014))])  # duplicate period
    out = fit_trends(rates, periods)
    assert len(out) == 2 * 3 * len(MART_METHODS)
    assert not out.duplicated(["area_level", "area_code", "indicator", "period_start", "period_end",
                               "method"]).any()
    row = _one(out, area_code="13", period_end=2016)
    assert row.n_years == 12 and row.n_years_used == 10
    assert row.note.startswith("no data for 2015-2016")
    cl = _one(out, area_code="CL", period_start=2010)
    assert cl.trend == "not_estimable" and cl.n_years_used == 1
    assert "no data for 2011-2014" in cl.note
    assert pd.isna(cl.region_code) and cl.area_name == "name CL"


def test_batched_rows_equal_the_reference_fit_per_series():
    rng = np.random.default_rng(42)
    series = {}
    for i in range(60):
        n = int(rng.integers(5, 16))
        e = np.zeros(n)
        phi = rng.choice([-0.4, 0.0, 0.5, 0.9])
        for t in range(1, n):
            e[t] = phi * e[t - 1] + rng.normal(0, 0.08)
        vals = list(np.round(8 * np.exp(-0.02 * np.arange(n) + e), 4))
        if rng.random() < 0.3:
            vals[int(rng.integers(1, n - 1))] = 0.0
        series[("commune", f"{i:05d}", rng.choice(["imr", "nmr"]))] = vals
    rates = _rates(series, first_year=2000)
    out = _study(fit_trends(rates, _periods((2000, 2014))))
    fitted = out[out.trend != "not_estimable"]
    assert len(fitted) >= 50
    for row in fitted.itertuples():
        vals = series[(row.area_level, row.area_code, row.indicator)]
        used = [i for i, v in enumerate(vals) if v > 0]
        ref = prais_winsten_trend(np.log10([vals[i] for i in used]), 2000 + np.array(used))
        assert row.n_years_used == len(used)
        assert row.iterations == ref.iterations and row.converged == ref.converged
        assert_allclose([row.slope_log10, row.slope_se, row.rho, row.p_value, row.dw_original,
                         row.dw_transformed, row.intercept_log10],
                        [ref.params[1], ref.bse[1], ref.rho, ref.pvalues[1], ref.dw_original,
                         ref.dw_transformed, ref.params[0]], rtol=1e-10, atol=1e-13)


def test_rho_out_of_bounds_and_non_convergence_are_noted():
    # A five-year zig-zag drives rho below -1 (first year dropped in the final fit).
    rates = _rates({("commune", "zz", "imr"): [5.0, 7.0, 4.8, 7.3, 4.5]})
    row = _one(fit_trends(rates, _periods((2005, 2009))), area_code="zz")
    assert row.rho <= -1
    assert "|rho| >= 1" in row.note
    capped = _one(fit_trends(_rates({("commune", "c", "imr"): RESEARCH_NOTE_IMR}),
                             _periods((2005, 2014)), max_iter=2), area_code="c")
    assert not capped.converged and capped.iterations == 2
    assert "did not converge in 2 iterations" in capped.note


def test_output_columns_and_types_even_when_everything_is_null():
    rates = _rates({("commune", "n", "imr"): [None, None, 3.0]})
    out = fit_trends(rates, _periods((2005, 2007)))
    assert list(out.columns) == OUTPUT_COLUMNS
    assert {c: str(t) for c, t in out.dtypes.items()} == {c: str(pd.api.types.pandas_dtype(t))
                                                         for c, t in OUTPUT_DTYPES.items()}
    assert out["slope_log10"].isna().all() and out["converged"].isna().all()
    con = duckdb.connect()
    con.register("t", out)
    types = dict(con.sql("select column_name, column_type from (describe t)").fetchall())
    con.close()
    assert types["slope_log10"] == "DOUBLE" and types["converged"] == "BOOLEAN"
    assert types["iterations"] == "BIGINT" and types["note"] == "VARCHAR"
    assert types["area_code"] == "VARCHAR" and types["trend"] == "VARCHAR"
    empty = fit_trends(rates.iloc[:0], _periods((2005, 2007)))
    assert list(empty.columns) == OUTPUT_COLUMNS and len(empty) == 0


def test_input_problems_are_errors():
    rates = _rates({("commune", "d", "imr"): RESEARCH_NOTE_IMR})
    with pytest.raises(ValueError, match="more than one row"):
        fit_trends(pd.concat([rates, rates.iloc[:1]]), _periods((2005, 2014)))
    bad = rates.copy()
    bad.loc[0, "rate_per_1000"] = -1.0
    with pytest.raises(ValueError, match="negative"):
        fit_trends(bad, _periods((2005, 2014)))
    with pytest.raises(ValueError, match="missing columns"):
        fit_trends(rates.drop(columns="live_births"), _periods((2005, 2014)))


def test_timing_is_reported(caplog):
    rates = _rates({("commune", "t", "imr"): RESEARCH_NOTE_IMR})
    with caplog.at_level(logging.INFO, logger="infant_mortality.statistics.trends"):
        out = fit_trends(rates, _periods((2005, 2014)))
    assert out.attrs["n_series"] == 1 and out.attrs["n_fitted"] == len(MART_METHODS)
    assert 0 <= out.attrs["fit_seconds"] <= out.attrs["total_seconds"]
    assert any("statistics" in r.getMessage() for r in caplog.records)


def test_a_gappy_series_whose_final_fit_keeps_too_few_rows_is_not_estimable():
    # San José de Maipo 2010-2019 (bundled data): zero deaths in 2011-2013 and 2018 leave the
    # runs 2010 | 2014-2017 | 2019; the fit goes to rho = -1.83, the first row of each run is
    # dropped and three rows remain, fitted exactly (se = 0, p = 0). That is no trend.
    deaths = [1, 0, 0, 0, 2, 2, 1, 2, 0, 1]
    births = [198, 195, 181, 184, 228, 208, 211, 199, 161, 172]
    rates = pd.DataFrame({
        "area_level": "commune", "area_code": "13203", "area_name": "San José de Maipo",
        "region_code": "13", "indicator": "imr", "year": range(2010, 2020),
        "deaths": deaths, "live_births": births, "multiplier": 1000,
        "rate_per_1000": [1000 * d / b for d, b in zip(deaths, births)],
    })
    periods = pd.DataFrame({"period_start": [2010], "period_end": [2019]})
    row = _one(fit_trends(rates, periods), area_code="13203")
    assert row["trend"] == "not_estimable"
    assert row["n_years_used"] == 6 and row["n_zero_years"] == 4
    assert "final transformed regression kept 3 observations" in row["note"]
    assert pd.isna(row["p_value"])


# --------------------------------------------------------------------------------------------
# The fitted intercept, the fitter registry, the OLS fitter and the generic entry point
# --------------------------------------------------------------------------------------------


def test_intercept_is_statas_uncentred_cons_equal_to_gls_at_the_fitted_rho():
    # Prais-Winsten at its final rho is GLS with the AR(1) correlation matrix rho^|i-j| (the
    # first row scaled by sqrt(1 - rho^2) makes it exact); statsmodels GLS is an independent
    # computation of both coefficients on the raw-year scale.
    import statsmodels.api as sm
    from scipy.linalg import toeplitz

    rates = _rates({("commune", "13101", "imr"): RESEARCH_NOTE_IMR})
    row = _one(fit_trends(rates, _periods((2005, 2014))), area_code="13101")
    years = np.arange(2005, 2015, dtype=float)
    y = np.log10(RESEARCH_NOTE_IMR)
    gls = sm.GLS(y, sm.add_constant(years), sigma=toeplitz(row.rho ** np.arange(10))).fit()
    assert_allclose([row.intercept_log10, row.slope_log10], gls.params, rtol=1e-9)
    # The fitted line at year t is intercept + slope * t: near the data, decreasing.
    fitted = row.intercept_log10 + row.slope_log10 * years
    assert np.all(np.abs(10 ** fitted - RESEARCH_NOTE_IMR) < 0.5)
    # And it is the reference path's uncentred constant.
    ref = prais_winsten_trend(y, years)
    assert_allclose(row.intercept_log10, ref.params[0], rtol=1e-10)
    not_estimable = _one(fit_trends(rates, _periods((2005, 2007))), area_code="13101")
    assert pd.isna(not_estimable.intercept_log10)


def test_ols_fitter_equals_statsmodels_ols_on_log10_rate():
    import statsmodels.api as sm
    from statsmodels.stats.stattools import durbin_watson

    rng = np.random.default_rng(7)
    series = {("commune", f"{i:05d}", "imr"): list(np.round(8 * np.exp(-0.03 * np.arange(12)
                                                                     + rng.normal(0, 0.1, 12)), 4))
              for i in range(20)}
    series[("commune", "gappy", "imr")] = [6.0, 5.5, 0.0, 5.1, 4.9, 4.8, 4.6, 0.0, 4.1, 4.0, 3.9, 3.7]
    out = _study(fit_trends(_rates(series, first_year=2008), _periods((2008, 2019)), method="ols"))
    assert (out.trend != "not_estimable").all()
    for row in out.itertuples():
        vals = np.array(series[(row.area_level, row.area_code, row.indicator)])
        keep = vals > 0
        years = np.arange(2008, 2020, dtype=float)[keep]
        ols = sm.OLS(np.log10(vals[keep]), sm.add_constant(years)).fit()
        assert_allclose([row.intercept_log10, row.slope_log10, row.slope_se, row.t_stat, row.p_value],
                        [ols.params[0], ols.params[1], ols.bse[1], ols.tvalues[1], ols.pvalues[1]],
                        rtol=1e-8)
        c = stats.t.ppf(0.975, ols.df_resid)
        assert_allclose(row.apc_ci95_lower, (10 ** (ols.params[1] - c * ols.bse[1]) - 1) * 100, rtol=1e-8)
        assert pd.isna(row.rho) and pd.isna(row.iterations) and pd.isna(row.converged)
        assert pd.isna(row.dw_transformed)
        if keep.all():
            assert_allclose(row.dw_original, durbin_watson(ols.resid), rtol=1e-10)
    gappy = _one(out, area_code="gappy")
    assert gappy.n_years_used == 10 and "zero rate in 2010, 2015" in gappy.note
    assert "rho" not in gappy.note  # no Prais-Winsten remark on an OLS fit
    # OLS needs 3 years (one residual degree of freedom); Prais-Winsten needs 4.
    short = _rates({("commune", "s", "imr"): [5.0, 4.0, 3.5]})
    assert _one(fit_trends(short, _periods((2005, 2007)), method="ols", min_years=3),
                area_code="s").trend != "not_estimable"
    with pytest.raises(ValueError, match="min_years must be an integer >= 3 for OLS"):
        fit_trends(short, _periods((2005, 2007)), method="ols", min_years=2)


def test_a_new_fitter_is_one_registry_line(monkeypatch):
    from infant_mortality.statistics import trend_fitters

    rates = _rates({("commune", "r", "imr"): RESEARCH_NOTE_IMR})
    with pytest.raises(ValueError, match="trend method must be one of .*'prais'.*'ols'.*'poisson'.*'joinpoint'"):
        fit_trends(rates, _periods((2005, 2014)), method="spline")
    monkeypatch.setitem(trend_fitters.FITTERS, "plain", ("ols", "OlsFitter", {}))
    plain = fit_trends(rates, _periods((2005, 2014)), method="plain", rhotype="dw")
    ols = fit_trends(rates, _periods((2005, 2014)), method="ols")
    pd.testing.assert_frame_equal(plain.drop(columns="fitter"), ols.drop(columns="fitter"))
    # `method` picks the fitter of prais_winsten only; every other method keeps the seed's fitter.
    assert set(plain.fitter) == {"plain" if method == "prais_winsten" else fitter for method, fitter in
                                 zip(seed_column("trend_methods.csv", "method"), seed_column("trend_methods.csv", "fitter"))}
    # Options of another method are not passed to a fitter that does not declare them.
    assert trend_fitters.get_fitter("ols", rhotype="dw", gaps="restart").label == "OLS"
    assert trend_fitters.get_fitter("corc", rhotype="dw").rhotype == "dw"
    with pytest.raises(ValueError, match="rhotype"):
        trend_fitters.get_fitter("prais", rhotype="bogus")


def test_fitter_results_are_checked():
    from infant_mortality.statistics.trend_fitters import SeriesFits

    one = np.array([0.0])
    with pytest.raises(ValueError, match="unknown columns"):
        SeriesFits(series=one, intercept=one, slope=one, slope_se=one, t_stat=one, p_value=one,
                   df_resid=one, estimable=np.array([True]), notes=[[]], columns={"theta": one})
    with pytest.raises(ValueError, match="notes has 0 entries for 1 series"):
        SeriesFits(series=one, intercept=one, slope=one, slope_se=one, t_stat=one, p_value=one,
                   df_resid=one, estimable=np.array([True]), notes=[])


def test_generic_entry_fits_any_keyed_series():
    from infant_mortality.statistics.trends import fit_series_trends

    # A yearly index per (region, indicator), named as its caller likes; no periods: one window
    # per series from its first to its last year.
    rows = pd.DataFrame({
        "region_code": ["13"] * 10 + ["05"] * 6,
        "indicator": "imr",
        "year": list(range(2005, 2015)) + list(range(2009, 2015)),
        "rii": RESEARCH_NOTE_IMR + RESEARCH_NOTE_IMR[:6],
    })
    out = fit_series_trends(rows, ["region_code", "indicator"], rate="rii")
    assert list(out.columns[:4]) == ["region_code", "indicator", "period_start", "period_end"]
    rm = _one(out, region_code="13")
    assert (rm.period_start, rm.period_end, rm.n_years_used) == (2005, 2014, 10)
    whole = _one(fit_trends(_rates({("commune", "13101", "imr"): RESEARCH_NOTE_IMR}, births=20000),
                            _periods((2005, 2014))), area_code="13101")
    for column in ["slope_log10", "intercept_log10", "slope_se", "p_value", "rho", "apc", "trend"]:
        assert rm[column] == whole[column]
    assert _one(out, region_code="05").period_start == 2009
    # With periods: every series x every period, as fit_trends.
    two = fit_series_trends(rows, ["region_code", "indicator"], rate="rii",
                            periods=_periods((2005, 2014), (2010, 2014)), method="ols")
    assert len(two) == 4
    with pytest.raises(ValueError, match="missing columns \\['rate_per_1000'\\]"):
        fit_series_trends(rows, ["region_code", "indicator"])


def test_trend_settings_are_typed_from_the_rendered_config_and_name_what_is_missing():
    from infant_mortality.statistics.trends import trend_settings

    rendered = {"min_years": "5", "zero_rate_policy": "drop", "p_threshold": "0.05", "ci_level": "0.95",
                "ci_critical": "t", "rhotype": "regress", "method": "prais", "gaps": "restart",
                "min_deaths": "20", "max_abs_rho": "0.95", "max_joinpoints": "None", "selection": "bic"}
    settings = trend_settings(rendered)
    assert settings["min_years"] == 5 and settings["p_threshold"] == 0.05 and settings["method"] == "prais"
    assert settings["min_deaths"] == 20 and settings["max_abs_rho"] == 0.95
    # An unset var (null) renders as "None": NCI's rule for the number of points.
    assert settings["max_joinpoints"] is None and trend_settings({**rendered, "max_joinpoints": "2"})["max_joinpoints"] == 2
    with pytest.raises(ValueError, match="lacks ci_level, gaps"):
        trend_settings({k: v for k, v in rendered.items() if k not in ("gaps", "ci_level")})


# --------------------------------------------------------------------------------------------
# Valid conclusions (docs/methods/trends.md, "Valid trend conclusions for small communes"): PW validity, too few deaths, the count model,
# joinpoint beside them, and whether the methods agree
# --------------------------------------------------------------------------------------------


def test_a_prais_winsten_fit_near_a_unit_root_or_unconverged_is_not_estimable_with_its_diagnostics():
    rates = _rates({("commune", "c", "imr"): RESEARCH_NOTE_IMR}, births=20000)
    valid = _one(fit_trends(rates, _periods((2005, 2014))), area_code="c")
    assert valid.trend == "decreasing" and round(valid.rho, 6) == -0.651086
    # The same fit with the limit below its |rho|: no class, no statistics, rho kept to say why.
    strict = _one(fit_trends(rates, _periods((2005, 2014)), max_abs_rho=0.6), area_code="c")
    assert strict.trend == "not_estimable" and pd.isna(strict.slope_log10) and pd.isna(strict.p_value)
    assert strict.rho == valid.rho and strict.converged
    assert "|rho| = 0.6510863 is not below trend_max_abs_rho = 0.6" in strict.note
    # Stopped at the iteration cap: the p-value depends on where it stopped.
    capped = _one(fit_trends(rates, _periods((2005, 2014)), max_iter=2), area_code="c")
    assert capped.trend == "not_estimable" and not capped.converged and pd.isna(capped.apc)
    # A zig-zag drives rho below -1 (Stata keeps going with the first row dropped): no class.
    zigzag = _one(fit_trends(_rates({("commune", "zz", "imr"): [5.0, 7.0, 4.8, 7.3, 4.5]}),
                             _periods((2005, 2009))), area_code="zz")
    assert zigzag.trend == "not_estimable" and zigzag.rho <= -1
    # Only the Prais-Winsten rows follow this rule: the count model of the same series stands.
    assert _one(fit_trends(rates, _periods((2005, 2014)), max_abs_rho=0.6), area_code="c",
                method="poisson").trend == "decreasing"


def test_fewer_deaths_than_min_deaths_is_insufficient_data_for_every_method():
    # 2 deaths a year in 1000 births: 20 deaths over 10 years.
    rates = _rates({("commune", "few", "imr"): [2.0, 3.0, 2.0, 1.0, 2.0, 2.0, 3.0, 1.0, 2.0, 2.0]})
    at = fit_trends(rates, _periods((2005, 2014)), min_deaths=20)
    assert (at.trend != "insufficient_data").all() and (at.n_deaths == 20).all()
    out = fit_trends(rates, _periods((2005, 2014)), min_deaths=21)
    assert (out.trend == "insufficient_data").all()
    assert out.note.str.contains("20 deaths over the period, fewer than min_deaths = 21").all()
    # A window that cannot get a class is not fitted: no p-value, slope or interval that could be
    # read as a finding beside "insufficient data" (the same series at 20 deaths has them).
    assert at[["p_value", "slope_log10", "apc_ci95_lower"]].notna().all().all()
    assert out[["p_value", "slope_log10", "slope_se", "apc", "apc_ci95_lower", "apc_ci95_upper",
                "dispersion", "rho"]].isna().all().all()
    assert (out.n_deaths == 20).all() and (out.n_years_used == 10).all()


def _glm_reference(deaths, births, years):
    import statsmodels.api as sm

    return sm.GLM(np.asarray(deaths, dtype=float), sm.add_constant(np.asarray(years, dtype=float)),
                  family=sm.families.Poisson(), offset=np.log(births)).fit(scale="X2")


def test_the_poisson_rows_are_statsmodels_glms_and_a_scale_below_one_needs_both_tests():
    rng = np.random.default_rng(3)
    rows, series = [], {}
    for i in range(40):
        n = int(rng.integers(5, 13))
        births = rng.integers(80, 4000, n)
        deaths = rng.poisson(births * 0.008 * np.exp(rng.normal(0, 0.2) * np.arange(n) / 5))
        series[f"{i:05d}"] = (deaths, births)
        for t in range(n):
            rows.append({"area_level": "commune", "area_code": f"{i:05d}", "area_name": "x", "region_code": "13",
                         "year": 2005 + t, "indicator": "imr", "deaths": int(deaths[t]),
                         "live_births": int(births[t]), "multiplier": 1000,
                         "rate_per_1000": 1000 * deaths[t] / births[t]})
    rates = pd.DataFrame(rows)
    out = fit_trends(rates, _periods((2005, 2016)))
    counted = out[out.method == "poisson"]
    assert (counted.trend != "not_estimable").sum() >= 35
    n_over = n_quasi_binding = 0
    for row in counted[counted.slope_log10.notna()].itertuples():
        deaths, births = series[row.area_code]
        years = 2005 + np.arange(len(deaths))
        glm = _glm_reference(deaths, births, years)
        assert row.n_years_used == len(deaths) and row.n_zero_years == int((deaths == 0).sum())
        ln10 = np.log(10)
        assert abs(row.slope_log10 * ln10 - glm.params[1]) < 1e-9
        assert_allclose(row.intercept_log10 * ln10 - np.log(1000), glm.params[0], rtol=1e-9)
        assert_allclose(row.dispersion, glm.scale, rtol=1e-9)
        # Over-dispersed (Pearson phi > 1): quasi-Poisson, t(n - 2). Otherwise the scale is
        # floored at 1 and the class needs both the Poisson test (statsmodels' scale = 1, the
        # normal) and the quasi-Poisson one: the less significant of the two is published.
        over = glm.scale > 1
        poisson_se = glm.bse[1] / np.sqrt(glm.scale)  # statsmodels' se at scale = 1
        n_over += over
        # Lag-1 autocorrelation of the Pearson residuals, and the AR(1) inflation when it is > 0.
        e = glm.resid_pearson
        r = np.sum(e[1:] * e[:-1]) / np.sum(e * e)
        assert_allclose(row.rho, r, rtol=1e-8, atol=1e-12)
        inflation = np.sqrt((1 + r) / (1 - r) if r > 0 else 1.0)
        tests = [(glm.bse[1] * inflation, stats.t(len(deaths) - 2))]
        if not over:
            tests.append((poisson_se * inflation, stats.norm()))
        p_values = [2 * dist.sf(abs(glm.params[1] / se)) for se, dist in tests]
        se, reference_dist = tests[int(np.argmax(p_values))]
        assert_allclose(row.slope_se * ln10, se, rtol=1e-8)
        assert_allclose(row.p_value, max(p_values), rtol=1e-7)
        c = reference_dist.ppf(0.975)
        assert_allclose(row.apc_ci95_lower, 100 * (np.exp(glm.params[1] - c * se) - 1), rtol=1e-7, atol=1e-9)
        assert_allclose(row.apc, 100 * np.expm1(glm.params[1]), rtol=1e-8, atol=1e-10)
        n_quasi_binding += (not over) and int(np.argmax(p_values)) == 0
    assert 5 <= n_over <= len(counted) - 5  # both branches of the floor are compared
    assert n_quasi_binding >= 1  # and below 1, a series where the quasi-Poisson test binds


def test_a_count_series_without_a_finite_poisson_maximum_is_not_estimable():
    from infant_mortality.statistics.trend_fitters import SeriesData, get_fitter

    # No deaths; every death in the first year; every death in the last year; a proper series.
    deaths = np.array([0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 2, 0, 3, 1], dtype=float)
    series = np.repeat([0, 1, 2, 3], 5)
    fits = get_fitter("poisson").fit(SeriesData(series=series, year=np.tile(np.arange(2010, 2015), 4),
                                                deaths=deaths, births=np.full(20, 300.0), multiplier=np.full(20, 1000.0),
                                                y=np.full(20, np.nan)))
    assert fits.estimable.tolist() == [False, False, False, True]
    assert all("no finite maximum" in n[0] for n in fits.notes[:3])
    glm = _glm_reference(deaths[15:], np.full(5, 300.0), np.arange(2010, 2015))
    assert abs(fits.slope[3] * np.log(10) - glm.params[1]) < 1e-9


def test_joinpoint_rows_are_the_aapc_of_fit_joinpoint_and_carry_its_segments():
    import json

    from infant_mortality.statistics.joinpoint import fit_joinpoint

    # A fall, then a rise from 2012: one joinpoint, two segments.
    rates = _rates({("region", "13", "imr"): [9.0, 8.1, 7.3, 7.6, 8.2, 8.9, 9.5, 10.3, 11.0, 12.1]},
                   first_year=2008, births=20000)
    row = _one(fit_trends(rates, _periods((2008, 2017))), area_code="13", method="joinpoint")
    frame = rates.sort_values("year")
    ref = fit_joinpoint(frame.year.to_numpy(), frame.deaths.to_numpy(dtype=float),
                        frame.live_births.to_numpy(dtype=float))
    assert ref.n_joinpoints == 1
    assert_allclose([row.apc, row.apc_ci95_lower, row.apc_ci95_upper, row.p_value],
                    [ref.aapc, ref.aapc_lower, ref.aapc_upper, ref.aapc_p], rtol=1e-10)
    segments = json.loads(row.segments)
    assert [(s["segment_start"], s["segment_end"]) for s in segments] == [
        (int(s.start_year), int(s.end_year)) for s in ref.segments]
    assert_allclose([s["apc"] for s in segments], [s.apc for s in ref.segments], rtol=1e-12)
    # AAPC = the length-weighted mean segment slope (Clegg et al. 2009).
    lengths = np.array([s["segment_end"] - s["segment_start"] for s in segments])
    mean_slope = lengths @ np.array([s["slope_log10"] for s in segments]) / lengths.sum()
    assert_allclose(row.slope_log10, mean_slope, rtol=1e-12)
    assert "1 joinpoint(s) at" in row.note and row.trend in ("increasing", "stationary")


def test_an_increase_or_decrease_stands_only_where_the_count_model_says_the_same():
    rates = _rates({("commune", "d", "imr"): RESEARCH_NOTE_IMR}, births=20000)
    out = fit_trends(rates, _periods((2005, 2014)))
    assert set(out.trend) == {"decreasing"}
    methods = seed_column("trend_methods.csv", "method")
    assert sorted(out.method) == sorted(methods)
    assert (out.n_methods_classed == len(methods)).all() and (out.n_methods_agreeing == len(methods)).all()
    assert (out.methods_disagreeing == "").all()
    # Ñuñoa 2010-2019 (bundled data), 150 deaths. Prais-Winsten on the log rates (rho = -0.33)
    # finds a decrease (p = 0.037); the count model, whose variance grows with the Pearson
    # dispersion of two low years (6 and 8 deaths), does not (p = 0.066): the study's class is
    # not confirmed; its own p and interval stay published.
    deaths = [18, 16, 19, 18, 17, 16, 6, 18, 14, 8]
    births = [2620, 2645, 2633, 2720, 2954, 3027, 2805, 2713, 2739, 2630]
    nunoa = pd.DataFrame({"area_level": "commune", "area_code": "13120", "area_name": "Ñuñoa", "region_code": "13",
                          "indicator": "imr", "year": range(2010, 2020), "deaths": deaths, "live_births": births,
                          "multiplier": 1000, "rate_per_1000": [1000 * d / b for d, b in zip(deaths, births)]})
    out = fit_trends(nunoa, _periods((2010, 2019)), min_deaths=20).set_index("method")
    pw, count = out.loc["prais_winsten"], out.loc["poisson"]
    assert pw.trend == "not_confirmed" and pw.p_value < 0.05 and pw.apc_ci95_upper < 0
    assert "not confirmed: p < the threshold (decreasing), but the Poisson" in pw.note
    assert count.trend == "stationary" and count.p_value > 0.05
    # Agreement counts only the methods with a class: Prais-Winsten has none here.
    assert pd.isna(pw.n_methods_agreeing) and pd.isna(pw.methods_disagreeing)
    assert count.n_methods_classed == (out.trend.isin(["increasing", "decreasing", "stationary"])).sum()


def test_method_agreement_names_every_method_that_classes_a_series_otherwise():
    from infant_mortality.statistics.trends import method_agreement

    # The seed's methods, in its order (methods_disagreeing's); the rows come in reverse order, so
    # the names are sorted by the function. Series a: the first method says stationary, every
    # other decreasing. Series b: the first has no class (not_confirmed), every other stationary.
    first, *others = seed_column("trend_methods.csv", "method")
    assert len(others) >= 2
    rows = pd.DataFrame({"area_code": ["a"] * (1 + len(others)) + ["b"] * (1 + len(others)),
                         "method": [first, *others] * 2,
                         "trend": ["stationary", *["decreasing"] * len(others),
                                   "not_confirmed", *["stationary"] * len(others)]}).iloc[::-1]
    out = method_agreement(rows, ["area_code"]).set_index(["area_code", "method"])
    assert out.loc[("a", first), "n_methods_agreeing"] == 1
    assert out.loc[("a", first), "methods_disagreeing"] == ", ".join(others)
    for method in others:
        assert out.loc[("a", method), "n_methods_agreeing"] == len(others)
        assert out.loc[("a", method), "methods_disagreeing"] == first
        assert out.loc[("b", method), "n_methods_agreeing"] == len(others)
        assert out.loc[("b", method), "methods_disagreeing"] == ""
    assert (out.loc["a", "n_methods_classed"] == 1 + len(others)).all()
    assert (out.loc["b", "n_methods_classed"] == len(others)).all()
    assert pd.isna(out.loc[("b", first), "n_methods_agreeing"])
    assert pd.isna(out.loc[("b", first), "methods_disagreeing"])


def test_a_rate_per_100000_changes_only_the_intercept_of_every_method():
    """The multiplier is the indicator's (seed `indicators`): the same counts as a rate per
    100,000 fit the same slopes, p-values and classes, and an intercept larger by log10(100)."""
    deaths = [18, 16, 19, 18, 17, 16, 6, 18, 14, 8]
    births = [2620, 2645, 2633, 2720, 2954, 3027, 2805, 2713, 2739, 2630]

    def frame(multiplier):
        return pd.DataFrame({"area_level": "commune", "area_code": "13120", "area_name": "Ñuñoa",
                             "region_code": "13", "indicator": "x", "year": range(2010, 2020), "deaths": deaths,
                             "live_births": births, "multiplier": multiplier,
                             "rate_per_1000": [multiplier * d / b for d, b in zip(deaths, births)]})

    per_1000 = fit_trends(frame(1000), _periods((2010, 2019))).set_index("method")
    per_100000 = fit_trends(frame(100000), _periods((2010, 2019))).set_index("method")
    for method in seed_column("trend_methods.csv", "method"):
        a, b = per_1000.loc[method], per_100000.loc[method]
        assert b["slope_log10"] == pytest.approx(a["slope_log10"], rel=1e-9), method
        assert b["p_value"] == pytest.approx(a["p_value"], rel=1e-9), method
        assert b["trend"] == a["trend"], method
        assert b["intercept_log10"] - a["intercept_log10"] == pytest.approx(2.0, abs=1e-9), method


def test_the_var_check_of_trend_min_years_is_the_lowest_fitter_floor():
    """One home for the floors: the fitters. The run-start check of the var (validate_vars.sql)
    refuses only what no fitter would fit, so OLS with 3 years is not refused up front."""
    from infant_mortality.statistics.trend_fitters import FITTERS, get_fitter

    spec = var_rules()
    assert spec["trend_min_years"]["type"] == "int"
    var_floor = spec["trend_min_years"]["min"]
    floors = {name: get_fitter(name).min_years_floor for name in FITTERS}
    assert var_floor == min(floors.values()), floors


def test_windows_prepared_once_fit_as_fresh_ones_by_every_method():
    """fit_trends prepares the windows once for its three methods: each fit of the shared
    windows, the second one of a method too (its notes must not pile up), equals a fresh call."""
    from pandas.testing import assert_frame_equal

    from infant_mortality.statistics.trends import AREA_KEYS, fit_series_trends, fit_windows, series_windows

    rng = np.random.default_rng(5)
    series = {("commune", f"c{i}", "imr"): [None if rng.random() < 0.1 else float(rng.uniform(0, 12)) for _ in range(12)]
              for i in range(6)}
    series[("commune", "c1", "imr")][3] = 0.0  # a zero rate: noted by the log fitters only
    rates = _rates(series, births=300)
    rates = rates[~((rates["area_code"] == "c2") & (rates["year"] == 2008))]  # an absent year
    periods = _periods((2005, 2016), (2005, 2010), (2011, 2016))
    settings = dict(min_years=5, min_deaths=20)
    windows = series_windows(rates, AREA_KEYS, periods=periods, attributes=["area_name"])
    for method in ("prais", "poisson", "joinpoint", "prais"):
        fresh = fit_series_trends(rates, AREA_KEYS, periods=periods, attributes=["area_name"], method=method,
                                  **settings)
        assert_frame_equal(fit_windows(windows, method=method, **settings), fresh)
    assert fresh["note"].str.contains("no data for 2008").any()
    assert fresh["note"].str.contains("zero rate in 2008").any()
