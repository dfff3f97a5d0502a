"""Geographic inequality: HEAT's BGV and index of disparity on hand vectors, the noise-corrected
true-rate variance against simulations whose true variance is known, the bootstrap drawn only where
its interval is published (deaths floor, yearly replicates) and its Monte Carlo error, and the mart
by hand."""

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from conftest import query
from infant_mortality.statistics.geographic_inequality import (
    area_inequality,
    between_group_variance,
    geographic_inequality,
    index_of_disparity,
    true_rate_variance,
    variance_trend,
)

DEATHS = [2, 5, 10, 0]
BIRTHS = [1000, 2000, 4000, 500]


def test_bgv_and_index_of_disparity_by_hand():
    # Exact arithmetic: b = 17 / 7500; BGV = sum (n_i / N)(r_i - b)^2; ID = 100 mean|r_i - b| / b.
    total_n = sum(BIRTHS)
    b = Fraction(sum(DEATHS), total_n)
    rates = [Fraction(d, n) for d, n in zip(DEATHS, BIRTHS)]
    bgv = sum(Fraction(n, total_n) * (r - b) ** 2 for n, r in zip(BIRTHS, rates))
    disparity = 100 * sum(abs(r - b) for r in rates) / len(rates) / b
    assert between_group_variance(DEATHS, BIRTHS) == pytest.approx(float(bgv), rel=1e-12)
    assert index_of_disparity(DEATHS, BIRTHS) == pytest.approx(float(disparity), rel=1e-12)
    # Equal rates: no disparity at all.
    assert between_group_variance([1, 2, 4], [100, 200, 400]) == pytest.approx(0.0, abs=1e-18)
    assert index_of_disparity([1, 2, 4], [100, 200, 400]) == pytest.approx(0.0, abs=1e-12)


def test_true_variance_is_bgv_minus_the_poisson_noise():
    out = area_inequality(DEATHS, BIRTHS, 1000, replicates=200)
    b = sum(DEATHS) / sum(BIRTHS)
    noise = b / (sum(BIRTHS) / len(BIRTHS))
    assert out["noise_variance"] == pytest.approx(1e6 * noise)
    assert out["true_variance"] == pytest.approx(max(0.0, out["crude_variance"] - 1e6 * noise))
    assert out["rate_per_1000"] == pytest.approx(1000 * b)
    # Per 100,000: rates 100 times, variances 100^2 times, the CVs unchanged.
    wide = area_inequality(DEATHS, BIRTHS, 100000, replicates=200)
    assert wide["true_variance"] == pytest.approx(1e4 * out["true_variance"])
    assert wide["true_cv"] == pytest.approx(out["true_cv"])


def simulate(rng, k, mean, sd, births_range=(200, 5000)):
    births = rng.integers(*births_range, size=k).astype(float)
    theta = rng.gamma(shape=(mean / sd) ** 2, scale=sd**2 / mean, size=k)
    return rng.poisson(births * theta), births


def test_true_variance_recovers_a_known_variance_that_the_crude_one_overstates():
    rng = np.random.default_rng(346)
    mean, sd = 0.007, 0.0015
    deaths, births = simulate(rng, 3000, mean, sd)
    got = true_rate_variance(deaths, births, replicates=500)
    assert got["true_variance"] == pytest.approx(sd**2, rel=0.1)
    assert got["true_variance_ci95_lower"] < sd**2 < got["true_variance_ci95_upper"]
    assert got["true_cv"] == pytest.approx(sd / mean, rel=0.1)
    # The crude BGV also carries the noise: well above the truth with these small communes.
    assert between_group_variance(deaths, births) > 1.5 * sd**2


def test_bootstrap_interval_covers_the_true_variance_about_95_percent_of_the_time():
    rng = np.random.default_rng(2024)
    mean, sd = 0.007, 0.002
    covered = 0
    for trial in range(200):
        deaths, births = simulate(rng, 150, mean, sd, births_range=(2000, 20000))
        got = true_rate_variance(deaths, births, replicates=400, seed=trial)
        covered += got["true_variance_ci95_lower"] <= sd**2 <= got["true_variance_ci95_upper"]
    assert 0.88 <= covered / 200 <= 0.99


def test_no_heterogeneity_gives_a_variance_near_zero_and_a_fixed_seed_repeats():
    rng = np.random.default_rng(7)
    births = rng.integers(500, 5000, 400).astype(float)
    deaths = rng.poisson(births * 0.007)
    got = true_rate_variance(deaths, births, replicates=300)
    assert got["true_variance_ci95_lower"] == 0.0
    assert got["true_variance"] < 0.2 * (0.007 / births.mean())  # small next to the noise itself
    assert got == true_rate_variance(deaths, births, replicates=300)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="positions \\[1\\]"):
        true_rate_variance([1, 2], [10, 0])
    with pytest.raises(ValueError, match="at least 2"):
        between_group_variance([1], [10])
    with pytest.raises(ValueError, match="100 replicates"):
        true_rate_variance([1, 2], [10, 20], replicates=10)


def test_variance_trend_matches_the_ols_t_test_by_hand():
    years = np.arange(2010, 2020)
    values = np.array([3.0, 2.8, 2.9, 2.5, 2.6, 2.2, 2.3, 2.0, 1.9, 1.7])
    got = variance_trend(years, values, min_years=5, p_threshold=0.05)
    x = years - years.mean()
    slope = np.sum(x * (values - values.mean())) / np.sum(x**2)
    residuals = values - values.mean() - slope * x
    se = np.sqrt(np.sum(residuals**2) / (len(x) - 2) / np.sum(x**2))
    assert got["true_variance_slope"] == pytest.approx(slope)
    assert got["true_variance_slope_p_value"] == pytest.approx(2 * stats.t.sf(abs(slope / se), len(x) - 2))
    assert got["true_variance_trend"] == "decreasing"
    assert variance_trend(years[:4], values[:4], min_years=5, p_threshold=0.05)["true_variance_trend"] is None


def test_rows_per_region_country_year_and_period():
    rng = np.random.default_rng(3)
    communes = [("01", "01101"), ("01", "01102"), ("01", "01103"), ("01", "01104"), ("02", "02101")]
    yearly = pd.DataFrame([
        {"region_code": region, "commune": code, "indicator": "imr", "multiplier": 1000, "year": year,
         "deaths": rng.poisson(20), "live_births": 3000}
        for region, code in communes for year in range(2010, 2016)
    ])
    pooled = (yearly.groupby(["region_code", "commune", "indicator", "multiplier"], as_index=False)
              [["deaths", "live_births"]].sum()
              .assign(period_start=2010, period_end=2015))
    out = geographic_inequality(yearly, pooled, replicates=100, min_years=5, p_threshold=0.05)
    # Region 02 has a single commune: no row; the country pools both regions' communes.
    assert set(out["area_code"]) == {"01", "CL"}
    assert (out[out["span"] == "year"].groupby("area_code").size() == 6).all()
    period = out[(out["span"] == "period") & (out["area_code"] == "01")].iloc[0]
    assert period["n_years_trend"] == 6 and period["true_variance_trend"] in {"increasing", "decreasing", "stationary"}


def _two_regions_six_years(seed=3):
    """Region 01: four communes with ~20 deaths each a year (~80 an area-year); region 02: three
    communes with ~2 deaths each a year (~6 an area-year, ~36 over the period)."""
    rng = np.random.default_rng(seed)
    communes = [("01", f"0110{i}", 20) for i in range(1, 5)] + [("02", f"0210{i}", 2) for i in range(1, 4)]
    yearly = pd.DataFrame([
        {"region_code": region, "commune": code, "indicator": "imr", "multiplier": 1000, "year": year,
         "deaths": rng.poisson(mean), "live_births": 3000}
        for region, code, mean in communes for year in range(2010, 2016)
    ])
    pooled = (yearly.groupby(["region_code", "commune", "indicator", "multiplier"], as_index=False)
              [["deaths", "live_births"]].sum()
              .assign(period_start=2010, period_end=2015))
    return yearly, pooled


INTERVAL = ["true_variance_ci95_lower", "true_variance_ci95_upper", "true_cv_ci95_lower", "true_cv_ci95_upper"]


def test_no_interval_below_the_deaths_floor_and_the_estimates_unchanged():
    yearly, pooled = _two_regions_six_years()
    out = geographic_inequality(yearly, pooled, replicates=200, min_years=5, p_threshold=0.05, min_deaths=20)
    every = geographic_inequality(yearly, pooled, replicates=200, min_years=5, p_threshold=0.05)
    below = out["deaths"] < 20
    # Region 02's years (~6 deaths) fall below, its period (~36) and region 01 do not.
    assert below.any() and not below.all()
    assert set(out.loc[below, "area_code"]) == {"02"} and set(out.loc[below, "span"]) == {"year"}
    assert out.loc[below, INTERVAL].isna().all().all()
    assert out.loc[~below, INTERVAL].notna().all().all()
    # What is published is what the full bootstrap gives; the floor removes intervals, nothing else.
    pd.testing.assert_frame_equal(out.loc[~below], every.loc[~below])
    unchanged = [c for c in out.columns if c not in INTERVAL]
    pd.testing.assert_frame_equal(out[unchanged], every[unchanged])


def test_without_replicates_no_draw_and_the_same_estimates():
    with_interval = true_rate_variance(DEATHS, BIRTHS, replicates=300)
    alone = true_rate_variance(DEATHS, BIRTHS, replicates=None)
    assert {k: alone[k] for k in ("pooled_rate", "true_variance", "true_cv")} == \
        {k: with_interval[k] for k in ("pooled_rate", "true_variance", "true_cv")}
    assert all(np.isnan(alone[k]) for k in INTERVAL)


def test_yearly_rows_take_their_own_replicates_and_period_rows_the_full_count():
    yearly, pooled = _two_regions_six_years(seed=5)
    out = geographic_inequality(yearly, pooled, replicates=1000, min_years=5, p_threshold=0.05,
                                yearly_replicates=250)
    # Second method: each area-span's communes passed to area_inequality directly.
    country_2012 = yearly[yearly["year"] == 2012]
    direct_year = area_inequality(country_2012["deaths"], country_2012["live_births"], 1000, replicates=250)
    region_period = pooled[pooled["region_code"] == "01"]
    direct_period = area_inequality(region_period["deaths"], region_period["live_births"], 1000, replicates=1000)
    got_year = out[(out["area_code"] == "CL") & (out["span"] == "year") & (out["period_start"] == 2012)].iloc[0]
    got_period = out[(out["area_code"] == "01") & (out["span"] == "period")].iloc[0]
    for column in INTERVAL:
        assert got_year[column] == direct_year[column]
        assert got_period[column] == direct_period[column]
    # 250 replicates are not 1000: the yearly interval is not the full bootstrap's.
    full = area_inequality(country_2012["deaths"], country_2012["live_births"], 1000, replicates=1000)
    assert got_year["true_variance_ci95_upper"] != full["true_variance_ci95_upper"]


def test_monte_carlo_error_of_the_limits_falls_as_one_over_root_replicates():
    """The Monte Carlo error stated in docs/methods/inequity.md: the spread of a percentile limit
    over bootstrap seeds scales as 1 / sqrt(replicates), so 250 replicates carry twice the error
    of 1000 (sqrt(1000 / 250) = 2); measured over 60 seeds on one simulated region."""
    rng = np.random.default_rng(11)
    deaths, births = simulate(rng, 40, 0.007, 0.002, births_range=(500, 8000))

    def spread(replicates):
        uppers = [true_rate_variance(deaths, births, replicates, seed)["true_variance_ci95_upper"]
                  for seed in range(60)]
        return np.std(uppers, ddof=1)

    ratio = spread(250) / spread(1000)
    # The ratio of two sample SDs over 60 seeds each: 2 within about +-25% (sampling error ~ 2 / sqrt(2 x 59)).
    assert 1.5 < ratio < 2.6


def test_warehouse_rm_2010_2019_by_hand(bundled_warehouse):
    communes = query(bundled_warehouse, """
        select deaths, live_births from intermediate.int_period_pooled_counts
        where pool = 'area_years' and area_level = 'commune' and region_code = '13' and indicator = 'imr'
        and period_start = 2010 and period_end = 2019 and rate_per_1000 is not null and live_births > 0""")
    d = np.array([c[0] for c in communes], dtype=float)
    n = np.array([c[1] for c in communes], dtype=float)
    b = d.sum() / n.sum()
    bgv = np.sum(n / n.sum() * (d / n - b) ** 2)
    ((n_communes, crude, disparity, true, low, high),) = query(bundled_warehouse, """
        select n_communes, crude_variance, index_of_disparity, true_variance, true_variance_ci95_lower,
            true_variance_ci95_upper
        from marts.fct_geographic_inequality where area_code = '13' and indicator = 'imr' and span = 'period'
        and period_start = 2010 and period_end = 2019""")
    assert n_communes == len(d) == 52
    assert crude == pytest.approx(1e6 * bgv, rel=1e-9)
    assert disparity == pytest.approx(100 * np.mean(np.abs(d / n - b)) / b, rel=1e-9)
    assert true == pytest.approx(1e6 * max(0.0, bgv - b * len(n) / n.sum()), rel=1e-9)
    assert low <= true <= high
