"""Over-dispersion-adjusted funnel limits (Spiegelhalter 2005) against hand computations, a
simulation with a known between-area variance, and the exact Poisson rule they fall back to."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from conftest import query
from infant_mortality.statistics.overdispersion import (
    adjusted_funnel_category,
    adjusted_funnel_rate_limits,
    adjusted_ratio_limits,
    dispersion,
    region_dispersion,
    winsorise,
)
from infant_mortality.statistics.poisson import funnel_category, funnel_count_limits

# The six standardised ratios of FunnelPlotR's own test (tests/testthat/test-funnel_plot.R).
OBSERVED = [100, 150, 180, 80, 120, 225]
EXPECTED = [108, 112, 165, 95, 100, 220]


def type7_quantile(values, p):
    """R's default quantile, by hand: interpolate between order statistics at h = (n - 1) p."""
    x = sorted(values)
    h = (len(x) - 1) * p
    low = math.floor(h)
    return x[low] + (h - low) * (x[min(low + 1, len(x) - 1)] - x[low])


def test_phi_and_tau2_of_funnelplotr_example_by_hand():
    # Spiegelhalter's square-root z-score: (sqrt(O/E) - 1) / (1 / (2 sqrt(E))).
    z = [(math.sqrt(o / e) - 1) / (1 / (2 * math.sqrt(e))) for o, e in zip(OBSERVED, EXPECTED)]
    low, high = type7_quantile(z, 0.1), type7_quantile(z, 0.9)
    winsorised = [min(max(v, low), high) for v in z]
    phi = sum(v * v for v in winsorised) / 6
    w = [4 * e for e in EXPECTED]
    tau2 = (6 * phi - 5) / (sum(w) - sum(x * x for x in w) / sum(w))
    assert phi > 1  # these six are over-dispersed, so tau2 is the formula's, not 0

    fit = dispersion(OBSERVED, EXPECTED, trim=0.1)
    assert fit.n == 6
    assert fit.phi == pytest.approx(phi, rel=1e-12)
    assert fit.tau2 == pytest.approx(tau2, rel=1e-12)


def test_winsorising_matches_r_type7_and_trim_zero_keeps_every_value():
    z = np.array([-4.0, -1.0, 0.0, 0.5, 2.0, 9.0, 1.0])
    got = winsorise(z, 0.1)
    assert got.min() == pytest.approx(type7_quantile(z, 0.1))
    assert got.max() == pytest.approx(type7_quantile(z, 0.9))
    np.testing.assert_array_equal(winsorise(z, 0.0), z)
    with pytest.raises(ValueError, match="trim"):
        winsorise(z, 0.5)


def test_tau2_recovers_a_known_between_area_variance():
    """Areas whose true ratio has sqrt-scale variance tau^2 = 0.01: the estimate (no winsorising,
    so the moment estimator is unbiased) lands within 10% of it over 4000 areas."""
    rng = np.random.default_rng(2005)
    expected = rng.uniform(5, 200, 4000)
    true_root = rng.normal(1.0, 0.1, expected.size)
    observed = rng.poisson(expected * true_root**2)
    fit = dispersion(observed, expected, trim=0.0)
    assert fit.tau2 == pytest.approx(0.01, rel=0.1)
    # phi is about 1 + tau^2 mean(4E): the Poisson part plus the between-area part.
    assert fit.phi == pytest.approx(1 + 0.01 * np.mean(4 * expected), rel=0.1)


def test_pure_poisson_variation_is_not_adjusted():
    rng = np.random.default_rng(14)
    expected = rng.uniform(10, 100, 300)
    observed = rng.poisson(expected)
    fit = dispersion(observed, expected, trim=0.1)  # winsorising pulls phi below 1
    assert fit.phi < 1 and fit.tau2 == 0.0
    np.testing.assert_array_equal(adjusted_funnel_category(observed, expected, fit.tau2),
                                  funnel_category(observed, expected))


def test_adjusted_limits_are_the_back_transformed_normal_limits():
    e, tau2 = 40.0, 0.004
    for level in (0.95, 0.998):
        z = stats.norm.ppf(1 - (1 - level) / 2)
        lower, upper = adjusted_ratio_limits(e, tau2, level)
        # Inverse of the square-root transform: y = sqrt(O/E) is normal with sd sqrt(1/(4E) + tau2).
        assert stats.norm.cdf(math.sqrt(upper), 1, math.sqrt(1 / (4 * e) + tau2)) == pytest.approx(1 - (1 - level) / 2)
        assert stats.norm.cdf(math.sqrt(lower), 1, math.sqrt(1 / (4 * e) + tau2)) == pytest.approx((1 - level) / 2)
    # At a tiny expected count the lower root is negative: the limit is a ratio of 0.
    assert adjusted_ratio_limits(0.5, tau2, 0.998)[0] == 0.0


def test_category_changes_exactly_at_the_drawn_limits():
    rate, tau2 = 8.0, 0.003
    births = np.array([500.0, 2000.0, 9000.0])
    limits = adjusted_funnel_rate_limits(rate, births, tau2, 1000)
    expected = rate * births / 1000
    for level, label in ((0.95, "95"), (0.998, "99_8")):
        lower, upper = limits[level]
        just_above = upper * births / 1000 * (1 + 1e-9)
        just_inside = upper * births / 1000 * (1 - 1e-9)
        assert (adjusted_funnel_category(just_above, expected, tau2) == f"above_{label}").all()
        assert (adjusted_funnel_category(just_inside, expected, tau2) != f"above_{label}").all()
        below = adjusted_funnel_category(lower * births / 1000 * (1 - 1e-9), expected, tau2)
        assert (below[lower > 0] == f"below_{label}").all()
    # With tau^2 = 0 the drawn limits are the exact Poisson ones (funnel_rate_limits).
    exact_upper = funnel_count_limits(expected, 0.95)[1] * 1000 / births
    np.testing.assert_allclose(adjusted_funnel_rate_limits(rate, births, 0.0, 1000)[0.95][1], exact_upper)
    # Per 100,000 the same counts give the same limits, 100 times larger.
    np.testing.assert_allclose(adjusted_funnel_rate_limits(100 * rate, births, tau2, 100000)[0.95][1],
                               100 * limits[0.95][1])


def test_adjusted_limits_never_flag_what_the_exact_limits_do_not():
    rng = np.random.default_rng(44)
    expected = rng.uniform(0.5, 80, 2000)
    observed = rng.poisson(expected * rng.gamma(4, 0.25, expected.size))
    exact = funnel_category(observed, expected)
    adjusted = adjusted_funnel_category(observed, expected, 0.01)
    assert ((adjusted == "within") | (exact != "within")).all()
    assert (adjusted[exact == "within"] == "within").all()
    assert ((adjusted != "within") & (exact != "within")).any()  # tau^2 still leaves some outside
    # No death where 2 were expected: within the exact 95% limits (upper 3.69 > 2), so within
    # the adjusted ones too, though the square-root normal limit alone would call it low.
    assert funnel_category(0, 2.0) == "within"
    assert adjusted_ratio_limits(2.0, 0.001, 0.95)[0] > 0
    assert adjusted_funnel_category(0, 2.0, 0.001) == "within"


def test_bad_counts_are_refused_with_their_positions():
    with pytest.raises(ValueError, match=r"positions \[1\]"):
        dispersion([3, 4], [2.0, 0.0])
    with pytest.raises(ValueError, match="at least 2"):
        dispersion([3], [2.0])


def test_region_dispersion_groups_regions_and_skips_communes_without_expected_deaths():
    rows = pd.DataFrame({
        "region_code": ["01"] * 7 + ["02"],
        "indicator": "imr", "period_start": 2010, "period_end": 2014,
        "deaths": OBSERVED + [0, 5],
        "expected_deaths": EXPECTED + [0.0, 4.0],
    })
    out = region_dispersion(rows, trim=0.1)
    assert out["region_code"].tolist() == ["01"]  # region 02 has one commune: no model
    assert out.loc[0, "n_communes"] == 6
    assert out.loc[0, "tau2"] == pytest.approx(dispersion(OBSERVED, EXPECTED).tau2)


def test_warehouse_adjusted_category_follows_the_published_tau2(bundled_warehouse):
    """fct_commune_vs_region's adjusted category, recomputed from fct_funnel_limits' tau2 and the
    commune's counts, for every RM commune and period; the region's phi recomputed by hand."""
    rows = query(
        bundled_warehouse,
        """
        select c.deaths, c.live_births * c.region_rate_per_1000 / 1000, f.phi, f.tau2, c.funnel_category_adjusted,
            c.period_start, c.period_end
        from marts.fct_commune_vs_region as c
        join marts.fct_funnel_limits as f
            on f.region_code = c.region_code and f.indicator = c.indicator
            and f.period_start = c.period_start and f.period_end = c.period_end and f.grid_point = 1
        where c.region_code = '13' and c.indicator = 'imr' and c.live_births > 0
        """,
    )
    assert rows
    for period in {(r[5], r[6]) for r in rows}:
        these = [r for r in rows if (r[5], r[6]) == period]
        z = [2 * (math.sqrt(d) - math.sqrt(e)) for d, e, *_ in these]
        low, high = type7_quantile(z, 0.1), type7_quantile(z, 0.9)
        phi = sum(min(max(v, low), high) ** 2 for v in z) / len(z)
        assert these[0][2] == pytest.approx(phi, rel=1e-9)
        for d, e, _, tau2, category, *_ in these:
            assert category == adjusted_funnel_category(d, e, tau2)


def test_adjusted_limits_from_the_exact_ones_already_drawn_are_the_same_numbers():
    """int_funnel_limits hands over the exact limits funnel_rate_limits drew on the same grid
    instead of inverting the chi-square again: bit for bit the same limits."""
    from infant_mortality.statistics.poisson import funnel_rate_limits

    for rate, multiplier, tau2 in ((8.0, 1000, 0.003), (6.5, 1000, 0.0), (310.0, 100000, 0.01)):
        grid, exact = funnel_rate_limits(rate, 80.0, 40000.0, multiplier)
        reused = adjusted_funnel_rate_limits(rate, grid, tau2, multiplier, exact=exact)
        fresh = adjusted_funnel_rate_limits(rate, grid, tau2, multiplier)
        for level in fresh:
            for got, want in zip(reused[level], fresh[level]):
                np.testing.assert_array_equal(got, want)
