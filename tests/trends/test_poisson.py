"""Exact Poisson statistics against the published test vectors (docs/methods/core.md, "Interval for one rate") and scipy."""

import numpy as np
import pytest
from scipy import special, stats

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


# The mid-p limits as they were solved before the Halley iteration (poisson.py until then): the
# old tail, bisected by poisson._bisect_logit, kept as the reference the solver is held to.
def _reference_midp_tail(d1, total, p, bound):
    half_point = stats.binom.pmf(d1, total, p) / 2
    if bound == "lower":
        return stats.binom.sf(d1, total, p) + half_point
    return stats.binom.cdf(d1 - 1, total, p) + half_point


def _reference_midp_limit(d1, n1, d2, n2, level, bound, tail=_reference_midp_tail):
    d1, n1, d2, n2 = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (d1, n1, d2, n2)))
    a = (1 - level) / 2
    shape = d1.shape
    flat_d1, flat_total = d1.reshape(-1), (d1 + d2).reshape(-1)
    # poisson._bisect_logit is that bisection, unchanged (held to all 200 halvings below).
    solved = poisson._bisect_logit(lambda i, p: tail(flat_d1[i], flat_total[i], p, bound), a,
                                   increasing=(bound == "lower"), size=flat_d1.size)[0].reshape(shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = n2 / n1
        if bound == "lower":
            p_low = np.where(d1 > 0, solved, 0.0)
            return p_low / (1 - p_low) * scale
        p_high = np.where(d2 > 0, solved, 1.0)
        return np.where(p_high < 1, p_high / (1 - p_high) * scale, np.inf)


def test_reference_bisection_stops_with_the_same_bits_as_200_halvings():
    """The bisection leaves a problem once its bracket stops moving; a plain loop of all 200
    halvings (the definition) must give the very same doubles, edges included: the reference, and
    poisson._bisect_logit, which finishes the limits near p = 1."""
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
        expected_lower = p_low / (1 - p_low) * (n2 / n1)
        assert np.array_equal(_reference_midp_limit(d1, n1, d2, n2, level, "lower"), expected_lower)
        assert np.array_equal(_reference_midp_limit(d1, n1, d2, n2, level, "upper"), expected_upper)
        for bound in ("lower", "upper"):
            def tail(i, p, bound=bound):
                return _reference_midp_tail(d1[i], (d1 + d2)[i], p, bound)

            p, _ = poisson._bisect_logit(tail, a, bound == "lower", d1.size)
            assert np.array_equal(p, all_200_halvings(d1, d1 + d2, a, bound))
        both = rate_ratio_midp_ci(d1, n1, d2, n2, level)
        assert np.array_equal(both[0], rate_ratio_midp_limit(d1, n1, d2, n2, level, "lower"))
        assert np.array_equal(both[1], rate_ratio_midp_limit(d1, n1, d2, n2, level, "upper"))
    with pytest.raises(ValueError, match="bound must be"):
        rate_ratio_midp_limit(1, 10, 1, 10, 0.95, "middle")


def _staircase(d1, bound):
    """Where scipy's tail is itself rounded coarser than the 1e-13 asked of the solver: for the
    upper limit with 2 <= d1 < 40, binom.cdf(d1 - 1, n, p) is boost's finite binomial sum in p and
    1 - p rounded to a double, good to about n 2^-53; the computed tail is a staircase in p, and
    its crossings of a (the bisection lands on one, Halley near another) spread over about
    1e-17 n in logit p, which is the relative spread of the rate ratio."""
    return (bound == "upper") & (d1 >= 2) & (d1 < 40)


def _realistic_tables(rng, size):
    """Commune against the rest of its region: d1 0..60 deaths in 100..5000 births, d2 100..3000
    in 1e4..5e5 (the inputs of fct_commune_vs_region)."""
    return (rng.integers(0, 61, size).astype(float), rng.integers(100, 5001, size).astype(float),
            rng.integers(100, 3001, size).astype(float), rng.integers(10_000, 500_001, size).astype(float))


def _wide_tables(rng):
    """Realistic tables, every split of the totals 0..5, zeros on either side and the whole total
    on one, large counts (d up to 1e5, totals up to 1e6), d1 nearly all of the total (p near 1),
    births ratios n2/n1 from 1e-8 to 1e8."""
    m = 1200
    splits = [(d1, total - d1) for total in range(6) for d1 in range(total + 1)]
    d1 = np.r_[rng.integers(0, 61, m), rng.integers(0, 100_001, m), rng.integers(0, 60, m),
               rng.integers(0, 1000, m), rng.integers(100, 100_001, 200), [s[0] for s in splits],
               0, 1, 1e5, 1e5, 5e5, 1, 3, 39, 40]
    d2 = np.r_[rng.integers(100, 3001, m), rng.integers(0, 900_001, m), rng.integers(0, 999_941, m),
               rng.integers(0, 100_001, m), rng.integers(0, 5, 200), [s[1] for s in splits],
               1e6, 1e6, 0, 1, 5e5, 999_999, 1e6, 1e6, 1e6]
    n1 = rng.integers(100, 5001, d1.size).astype(float)
    n2 = n1 * 10.0 ** rng.uniform(-8, 8, d1.size)
    return d1.astype(float), n1, d2.astype(float), n2


@pytest.mark.parametrize("level", [0.95, 0.998, 0.9])
@pytest.mark.parametrize("bound", ["lower", "upper"])
def test_midp_limits_agree_with_the_bisection_they_replace(bound, level):
    d1, n1, d2, n2 = _wide_tables(np.random.default_rng(23))
    got = poisson.rate_ratio_midp_limit(d1, n1, d2, n2, level, bound)
    want = _reference_midp_limit(d1, n1, d2, n2, level, bound)
    assert not np.isnan(got).any()
    edge = (d1 == 0) if bound == "lower" else (d2 == 0)
    assert np.all(got[edge] == (0.0 if bound == "lower" else np.inf))
    assert np.array_equal(got[edge], want[edge])
    # 1e-13 relative (1e-300 absolute near 0); on the staircase, its own spread (measured: 1.1e-17 n).
    tolerance = 1e-13 + np.where(_staircase(d1, bound), (d1 + d2) * 2.0**-54, 0.0)
    with np.errstate(invalid="ignore"):
        assert np.all((got == want) | (np.abs(got - want) <= tolerance * want + 1e-300))
    # Near p = 1 (odds p / (1 - p) above 63) the solver hands over to the bisection: same bits.
    odds = want * n1 / n2
    assert np.array_equal(got[~edge & (odds > 70)], want[~edge & (odds > 70)])
    assert (~edge & (odds > 70)).sum() > 10


def test_midp_interval_excludes_1_exactly_when_the_test_rejects_at_the_boundary():
    """Births placed so that a rate ratio of 1 sits a relative 1e-6, 1e-9 or 1e-11 inside or
    outside one limit (found by the reference bisection) of every table of a grid of counts."""
    counts = np.meshgrid([0, 1, 2, 3, 5, 12, 39, 60, 250], [0, 1, 4, 30, 400, 3000])
    d1, d2 = (v.ravel().astype(float) for v in counts)
    for level in (0.95, 0.9, 0.998):
        for bound in ("lower", "upper"):
            has = (d1 > 0) if bound == "lower" else (d2 > 0)
            k, rest = d1[has], d2[has]
            odds = _reference_midp_limit(k, 1.0, rest, 1.0, level, bound)  # p / (1 - p) at the limit
            for shift in (-1e-6, -1e-9, -1e-11, 1e-11, 1e-9, 1e-6):
                n2 = 1e5
                n1 = n2 * odds * (1 + shift)  # the limit's rate ratio is 1 / (1 + shift)
                lower, upper = poisson.rate_ratio_midp_ci(k, n1, rest, n2, level)
                rejects = poisson.rate_ratio_midp_p_value(k, n1, rest, n2) < 1 - level
                assert ((lower > 1) | (upper < 1)).tolist() == rejects.tolist()
                assert rejects.all() if (shift < 0) == (bound == "lower") else not rejects.any()


def test_midp_limits_put_the_tail_on_a_to_its_rounding():
    """At the returned p the mid-p tail is a to within a few 1e-15 (0.9 of the tables) and 3e-14
    (all), beyond what two doubles of p move it: the computed tail is no smoother (at the
    bisection's roots of these tables it is off a by up to 2.6e-14, and 7e-15 at 0.9 of them).
    `_staircase` is allowed its n 2^-53."""
    d1, _, d2, _ = _realistic_tables(np.random.default_rng(31), 3000)
    for level in (0.95, 0.998, 0.9):
        a = (1 - level) / 2
        for bound in ("lower", "upper"):
            has = (d1 > 0) if bound == "lower" else (d2 > 0)
            k, total = d1[has], (d1 + d2)[has]
            p, _ = poisson._midp_root(k, total, a, bound)
            _, slope, _ = poisson._log_tail_slopes(k, total, special.logit(p), bound)
            one_double = np.abs(slope) * np.spacing(p) / (p * (1 - p))  # relative move of the tail
            allowed = 2 * one_double + np.where(_staircase(k, bound), 2 * total * 2.0**-53, 0.0)
            excess = np.abs(_reference_midp_tail(k, total, p, bound) / a - 1) - allowed
            assert excess.max() <= 3e-14 and np.quantile(excess, 0.9) <= 4e-15


def test_midp_solver_takes_a_few_tail_evaluations_where_bisection_took_55():
    d1, n1, d2, n2 = _realistic_tables(np.random.default_rng(37), 2048)
    for level in (0.95, 0.998, 0.9):
        a = (1 - level) / 2
        for bound in ("lower", "upper"):
            has = (d1 > 0) if bound == "lower" else (d2 > 0)
            _, evaluations = poisson._midp_root(d1[has], (d1 + d2)[has], a, bound)
            assert evaluations.mean() <= 3.5 and evaluations.max() <= 6  # measured 2.2 to 3.0, at most 3
            halvings = []

            def counted_tail(d1, total, p, bound):
                halvings.append(np.size(p))
                return _reference_midp_tail(d1, total, p, bound)

            _reference_midp_limit(d1[has], n1[has], d2[has], n2[has], level, bound, tail=counted_tail)
            assert sum(halvings) / has.sum() > 50


def test_midp_limits_grow_with_the_first_count_fall_with_the_second_and_nest_by_level():
    d1 = np.arange(0, 300.0)
    for d2 in (1, 7, 60, 900, 20_000):
        lower, upper = poisson.rate_ratio_midp_ci(d1, 1000.0, d2, 5000.0)
        assert np.all(np.diff(lower) > 0) and np.all(np.diff(upper) > 0)
    d2 = np.arange(0, 300.0)
    for d1 in (1, 5, 40, 2000):
        lower, upper = poisson.rate_ratio_midp_ci(d1, 1000.0, d2, 5000.0)
        assert np.all(np.diff(lower) < 0) and np.all(np.diff(upper) < 0)
    d1, n1, d2, n2 = _realistic_tables(np.random.default_rng(41), 2000)
    (lo90, up90), (lo95, up95), (lo998, up998) = (poisson.rate_ratio_midp_ci(d1, n1, d2, n2, level)
                                                  for level in (0.9, 0.95, 0.998))
    inner = d1 > 0
    assert np.all(lo998[inner] < lo95[inner]) and np.all(lo95[inner] < lo90[inner])
    assert np.all(up90 < up95) and np.all(up95 < up998)


def test_midp_limits_keep_scalars_broadcasting_and_refusals():
    lower, upper = poisson.rate_ratio_midp_ci(41, 28010, 15, 19017)
    assert isinstance(lower, float) and isinstance(upper, float) and np.ndim(lower) == 0
    assert poisson.rate_ratio_midp_limit(0, 100, 5, 1000, 0.95, "lower") == 0.0
    assert poisson.rate_ratio_midp_limit(5, 100, 0, 1000, 0.95, "upper") == np.inf
    grid = poisson.rate_ratio_midp_limit(np.arange(4.0)[:, None], 1000, np.array([0.0, 3, 50]), 2000, 0.95,
                                         "upper")
    assert grid.shape == (4, 3) and np.isinf(grid[:, 0]).all()
    assert grid[2, 1] == poisson.rate_ratio_midp_limit(2, 1000, 3, 2000, 0.95, "upper")
    with pytest.raises(ValueError, match="confidence level"):
        poisson.rate_ratio_midp_limit(1, 10, 1, 10, 1.5, "lower")
    with pytest.raises(ValueError, match="bound must be"):
        poisson.rate_ratio_midp_limit(1, 10, 1, 10, 0.95, "middle")
