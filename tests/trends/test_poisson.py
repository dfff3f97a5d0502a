"""Exact Poisson statistics against the published test vectors (docs/methods/core.md, "Interval for one rate") and scipy."""

import numpy as np
import pytest
from scipy import stats

from infant_mortality.statistics import poisson

# docs/methods/core.md, "Interval for one rate": count-scale exact limits.
GARWOOD_VECTORS = {
    0: (0.0, 3.688879),
    1: (0.025318, 5.571643),
    3: (0.618672, 8.767273),
    10: (4.795389, 18.390356),
    41: (29.422308, 55.621130),
}


@pytest.mark.parametrize("deaths, expected", GARWOOD_VECTORS.items())
def test_poisson_ci_matches_published_vectors(deaths, expected):
    lower, upper = poisson.poisson_ci(deaths)
    assert lower == pytest.approx(expected[0], abs=1e-6)
    assert upper == pytest.approx(expected[1], abs=1e-6)


def test_poisson_ci_agrees_with_the_gamma_form_of_the_same_limits():
    # Second method: the Garwood limits are gamma quantiles, gamma.ppf(a, d) and gamma.ppf(1-a, d+1).
    deaths = np.arange(1, 400)
    lower, upper = poisson.poisson_ci(deaths, 0.95)
    np.testing.assert_allclose(lower, stats.gamma.ppf(0.025, deaths), rtol=1e-10)
    np.testing.assert_allclose(upper, stats.gamma.ppf(0.975, deaths + 1), rtol=1e-10)


def test_poisson_limits_have_their_nominal_tail_probabilities():
    # By definition P(X >= d | upper... ) : P(X <= d | mu=upper) = 0.025 and P(X >= d | mu=lower) = 0.025.
    for d in (1, 5, 20, 100):
        lower, upper = poisson.poisson_ci(d)
        assert stats.poisson.cdf(d, upper) == pytest.approx(0.025, abs=1e-9)
        assert stats.poisson.sf(d - 1, lower) == pytest.approx(0.025, abs=1e-9)


def test_negative_counts_are_refused():
    with pytest.raises(ValueError, match="negative"):
        poisson.poisson_ci(-2)


def test_rate_ratio_exact_interval_reproduces_rothman_and_stata_iri():
    # Stata `iri 41 15 28010 19017`: RR 1.8557, exact 95% CI 1.005684 - 3.609300.
    lower, upper = poisson.rate_ratio_exact_ci(41, 28010, 15, 19017)
    assert (41 / 28010) / (15 / 19017) == pytest.approx(1.8557, abs=1e-4)
    assert lower == pytest.approx(1.005684, abs=1e-6)
    assert upper == pytest.approx(3.609300, abs=1e-6)


def test_rate_ratio_interval_matches_the_synthetic_commune_example():
    # epidemiology research note 8.4: commune 12/1523 vs rest of region 168/23477.
    lower, upper = poisson.rate_ratio_exact_ci(12, 1523, 168, 23477)
    assert lower == pytest.approx(0.5578, abs=1e-4)
    assert upper == pytest.approx(1.9747, abs=1e-4)


def test_rate_ratio_interval_edges_are_zero_and_unbounded():
    lower, _ = poisson.rate_ratio_exact_ci(0, 1000, 10, 1000)
    _, upper = poisson.rate_ratio_exact_ci(10, 1000, 0, 1000)
    assert lower == 0.0
    assert np.isinf(upper)


def test_midp_p_value_against_a_direct_binomial_sum():
    d1, n1, d2, n2 = 41, 28010, 15, 19017
    m, p0 = d1 + d2, n1 / (n1 + n2)
    pmf = stats.binom.pmf(np.arange(m + 1), m, p0)
    upper = pmf[d1 + 1:].sum() + pmf[d1] / 2
    lower = pmf[:d1].sum() + pmf[d1] / 2
    expected = 2 * min(upper, lower)
    assert poisson.rate_ratio_midp_p_value(d1, n1, d2, n2) == pytest.approx(expected, rel=1e-12)
    assert 0.01 < expected < 0.05  # significant at 5%, consistent with the CI excluding 1


def test_midp_p_value_is_one_sided_symmetric_and_bounded():
    assert poisson.rate_ratio_midp_p_value(10, 1000, 10, 1000) == pytest.approx(1.0)
    assert poisson.rate_ratio_midp_p_value(0, 1000, 0, 1000) <= 1.0


# PHE funnel test inputs (epidemiology research note 8.5).
PHE_FUNNEL = [
    (8, 6.23986, "within"),
    (151, 106.44297, "above_99_8"),
    (159, 232.93290, "below_99_8"),
    (191, 184.09639, "within"),
    (124, 183.89441, "below_99_8"),
    (220, 249.80129, "within"),
    (150, 119.56955, "above_95"),
]


@pytest.mark.parametrize("observed, expected, category", PHE_FUNNEL)
def test_funnel_category_matches_phe_test_data(observed, expected, category):
    assert poisson.funnel_category(observed, expected) == category


def test_funnel_count_limits_match_phe_limit_curve():
    # PHE outputs: 1 observed event sits on the 95% upper limit at E = 0.025317898 and on the
    # lower limit at E = 5.571644585; so the limits around those E pass through 1 event.
    _, upper = poisson.funnel_count_limits([0.025317898], 0.95)
    lower, _ = poisson.funnel_count_limits([5.571644585], 0.95)
    assert upper[0] == pytest.approx(1.0, abs=1e-6)
    assert lower[0] == pytest.approx(1.0, abs=1e-6)


def _funnel_limits_by_root_finding(e, level):
    """The second method: solve poisson_ci(d) = e for d numerically on qchisq itself."""
    from scipy import optimize, stats

    a = (1 - level) / 2
    upper = optimize.brentq(lambda d: (stats.chi2.ppf(a, 2 * d) / 2 if d > 0 else 0.0) - e, 0.0, 10 * e + 50)
    if stats.chi2.ppf(1 - a, 2) / 2 > e:
        return 0.0, upper
    return optimize.brentq(lambda d: stats.chi2.ppf(1 - a, 2 * d + 2) / 2 - e, 0.0, 10 * e + 50), upper


@pytest.mark.parametrize("level", poisson.FUNNEL_LEVELS)
def test_funnel_count_limits_equal_root_finding_on_the_garwood_limits(level):
    expected = np.geomspace(0.01, 5000, 40)
    lower, upper = poisson.funnel_count_limits(expected, level)
    for e, lo, up in zip(expected, lower, upper):
        want_lo, want_up = _funnel_limits_by_root_finding(e, level)
        assert lo == pytest.approx(want_lo, rel=1e-8, abs=1e-9)
        assert up == pytest.approx(want_up, rel=1e-8, abs=1e-9)
    # Observed counts on the limits sit exactly on the Garwood limits around them.
    garwood_lower_of_upper, _ = poisson.poisson_ci(upper, level)
    assert garwood_lower_of_upper == pytest.approx(expected, rel=1e-9)


def test_midp_interval_inverts_the_midp_test_by_independent_root_finding():
    from scipy.optimize import brentq

    from infant_mortality.statistics.poisson import rate_ratio_exact_ci, rate_ratio_midp_ci, rate_ratio_midp_p_value

    def tails(d1, total, p):
        point = stats.binom.pmf(d1, total, p)
        return stats.binom.sf(d1, total, p) + point / 2, stats.binom.cdf(d1 - 1, total, p) + point / 2

    # Rothman's 41/28010 vs 15/19017 and small commune-like counts; limits of p by brentq.
    for d1, n1, d2, n2 in [(41, 28010, 15, 19017), (3, 900, 40, 15000), (1, 150, 90, 30000), (12, 2500, 7, 2400)]:
        lower, upper = rate_ratio_midp_ci(d1, n1, d2, n2, 0.95)
        p_low = brentq(lambda p: tails(d1, d1 + d2, p)[0] - 0.025, 1e-12, 1 - 1e-12, xtol=1e-15)
        p_high = brentq(lambda p: tails(d1, d1 + d2, p)[1] - 0.025, 1e-12, 1 - 1e-12, xtol=1e-15)
        assert lower == pytest.approx(p_low / (1 - p_low) * n2 / n1, rel=1e-9)
        assert upper == pytest.approx(p_high / (1 - p_high) * n2 / n1, rel=1e-9)
        # Narrower than the exact (Clopper-Pearson) interval, which it sits inside.
        exact = rate_ratio_exact_ci(d1, n1, d2, n2, 0.95)
        assert exact[0] < lower < upper < exact[1]
    # Edges as the exact interval's: 0 with no deaths in the commune, unbounded with none in the rest.
    assert rate_ratio_midp_ci(0, 100, 5, 1000)[0] == 0 and np.isinf(rate_ratio_midp_ci(5, 100, 0, 1000)[1])


def test_midp_interval_excludes_1_exactly_when_the_midp_test_rejects():
    from infant_mortality.statistics.poisson import rate_ratio_exact_ci, rate_ratio_midp_ci, rate_ratio_midp_p_value

    rng = np.random.default_rng(5)
    d1, d2 = rng.integers(0, 60, 5000), rng.integers(1, 400, 5000)
    n1, n2 = rng.integers(100, 6000, 5000), rng.integers(2000, 90000, 5000)
    for level in (0.95, 0.9):
        lower, upper = rate_ratio_midp_ci(d1, n1, d2, n2, level)
        rejects = rate_ratio_midp_p_value(d1, n1, d2, n2) < 1 - level
        assert ((lower > 1) | (upper < 1)).tolist() == rejects.tolist()
        assert rejects.sum() > 100


def test_midp_limits_stop_bisecting_with_the_same_bits_as_200_halvings():
    """The bisection leaves a problem once its bracket stops moving; a plain loop of all 200
    halvings (the definition) must give the very same doubles, edges included."""
    from scipy import special

    from infant_mortality.statistics.poisson import rate_ratio_midp_ci, rate_ratio_midp_limit

    def all_200_halvings(d1, total, a, bound):
        lo, hi = np.full(d1.shape, -60.0), np.full(d1.shape, 60.0)
        for _ in range(200):
            mid = (lo + hi) / 2
            p = special.expit(mid)
            point = stats.binom.pmf(d1, total, p)
            if bound == "lower":
                below = stats.binom.sf(d1, total, p) + point / 2 < a
            else:
                below = stats.binom.cdf(d1 - 1, total, p) + point / 2 > a
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return special.expit((lo + hi) / 2)

    rng = np.random.default_rng(11)
    d1 = np.r_[rng.integers(0, 80, 3000), 0, 5, 1, 500]
    d2 = np.r_[rng.integers(0, 900, 3000), 5, 0, 1, 500]
    n1 = np.r_[rng.integers(50, 8000, 3000), 100, 100, 1000, 40000]
    n2 = np.r_[rng.integers(1000, 90000, 3000), 1000, 1000, 1000, 40000]
    for level in (0.95, 0.9):
        a = (1 - level) / 2
        p_low = np.where(d1 > 0, all_200_halvings(d1, d1 + d2, a, "lower"), 0.0)
        p_high = np.where(d2 > 0, all_200_halvings(d1, d1 + d2, a, "upper"), 1.0)
        with np.errstate(divide="ignore"):
            expected_upper = np.where(p_high < 1, p_high / (1 - p_high) * (n2 / n1), np.inf)
        lower = rate_ratio_midp_limit(d1, n1, d2, n2, level, "lower")
        upper = rate_ratio_midp_limit(d1, n1, d2, n2, level, "upper")
        assert np.array_equal(lower, p_low / (1 - p_low) * (n2 / n1))
        assert np.array_equal(upper, expected_upper)
        both = rate_ratio_midp_ci(d1, n1, d2, n2, level)
        assert np.array_equal(both[0], lower) and np.array_equal(both[1], upper)
    with pytest.raises(ValueError, match="bound must be"):
        rate_ratio_midp_limit(1, 10, 1, 10, 0.95, "middle")
