"""Joinpoint regression against independent computations: statsmodels WLS with the joinpoints
fixed, brute-force grid search, a loop-by-loop permutation test, the AAPC definition and NCI's
documented rules (docs/methods/joinpoint.md)."""

import itertools

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats

from infant_mortality.statistics import joinpoint as jp

YEARS = np.arange(2010, 2020)


def broken_line_deaths(years, break_year, slopes, births=100_000.0, rate=0.008, noise=0.0, seed=1):
    """Deaths whose ln rate is a broken line (slope change at break_year), with lognormal noise."""
    t = years - years[0]
    log_rate = np.log(rate) + slopes[0] * t + (slopes[1] - slopes[0]) * np.maximum(years - break_year, 0)
    noise_term = np.random.default_rng(seed).normal(0, noise, len(years)) if noise else 0.0
    return births * np.exp(log_rate + noise_term), np.full(len(years), births)


def hinge_wls(years, deaths, births, joinpoints, weights):
    x = years - years[0]
    cols = [np.ones_like(x, dtype=float), x] + [np.maximum(years - tau, 0.0) for tau in joinpoints]
    return sm.WLS(np.log(deaths / births), np.column_stack(cols), weights=weights).fit()


def admissible_sets(years, k, end=2, between=2):
    """Brute force, written from NCI's wording: at least `end` observations between a joinpoint
    and either end, `between` between two joinpoints, not counting the joinpoints themselves."""
    n = len(years)
    out = []
    for idx in itertools.combinations(range(n), k):
        if k and (idx[0] < end or n - 1 - idx[-1] < end):
            continue
        if any(b - a - 1 < between for a, b in zip(idx, idx[1:])):
            continue
        out.append(idx)
    return out


def brute_force_sse(years, y, w, k):
    """Smallest weighted SSE over every admissible set of k joinpoints, and that set."""
    best = (np.inf, None)
    for idx in admissible_sets(years, k):
        taus = years[list(idx)]
        X = np.column_stack([np.ones(len(years)), years] + [np.maximum(years - t, 0) for t in taus])
        sw = np.sqrt(w)
        coef, *_ = np.linalg.lstsq(sw[:, None] * X, sw * y, rcond=None)
        sse = float(np.sum(w * (y - X @ coef) ** 2))
        if sse < best[0] - 1e-12 * abs(sse):
            best = (sse, tuple(float(t) for t in taus))
    return best


@pytest.mark.parametrize("n, expected", [(3, 0), (6, 0), (7, 1), (10, 1), (11, 1), (12, 2),
                                         (16, 2), (17, 3), (21, 3), (22, 4)])
def test_default_max_joinpoints_follows_nci_table(n, expected):
    assert jp.default_max_joinpoints(n) == expected


@pytest.mark.parametrize("k, end, between", [(1, 2, 2), (2, 2, 2), (3, 2, 2), (2, 3, 1)])
def test_candidate_sets_match_nci_minimum_observation_formula(k, end, between):
    # NCI: Min. Num. Obs. = 2 * NumObsEnd + (MaxJP - 1) * NumObsBetween + MaxJP. At that n exactly
    # one placement exists; one point fewer leaves none.
    n_min = 2 * end + (k - 1) * between + k
    assert len(jp.candidate_joinpoints(n_min, k, end, between)) == 1
    assert len(jp.candidate_joinpoints(n_min - 1, k, end, between)) == 0
    n = n_min + 4
    got = {tuple(c) for c in jp.candidate_joinpoints(n, k, end, between)}
    assert got == set(admissible_sets(np.arange(n), k, end, between))


@pytest.mark.parametrize("weighting", ["poisson", "constant"])
def test_hinge_slopes_and_se_equal_statsmodels_wls_with_the_joinpoint_fixed(weighting):
    deaths, births = broken_line_deaths(YEARS, 2014, (-0.06, 0.05), noise=0.03, seed=3)
    deaths = np.round(deaths)
    fit = jp.fit_joinpoint(YEARS, deaths, births, se_method="hinge", weighting=weighting,
                           n_permutations=199)
    assert fit.joinpoints == (2014.0,)
    weights = deaths if weighting == "poisson" else np.ones(len(YEARS))
    ref = hinge_wls(YEARS, deaths, births, fit.joinpoints, weights)
    L = np.array([[0, 1, 0], [0, 1, 1]])  # segment slopes from (b0, b1, d1)
    slopes = L @ ref.params
    se = np.sqrt(np.diag(L @ ref.cov_params() @ L.T))
    np.testing.assert_allclose([s.slope for s in fit.segments], slopes, rtol=0, atol=1e-10)
    np.testing.assert_allclose([s.slope_se for s in fit.segments], se, rtol=1e-10)
    assert fit.df_resid == ref.df_resid
    # Intercept on raw years: ln rate at year t on the first segment = intercept + b1 t.
    assert fit.intercept == pytest.approx(ref.params[0] - ref.params[1] * YEARS[0], abs=1e-9)
    np.testing.assert_allclose(fit.fitted_log_rate, ref.fittedvalues, atol=1e-10)
    # Intervals and p from t(df) of the same model.
    t = stats.t.ppf(0.975, ref.df_resid)
    for seg, b, s in zip(fit.segments, slopes, se):
        assert seg.apc == pytest.approx(100 * (np.exp(b) - 1), abs=1e-9)
        assert seg.apc_lower == pytest.approx(100 * (np.exp(b - t * s) - 1), abs=1e-9)
        assert seg.apc_upper == pytest.approx(100 * (np.exp(b + t * s) - 1), abs=1e-9)
        assert seg.p_value == pytest.approx(2 * stats.t.sf(abs(b / s), ref.df_resid), rel=1e-9)
    # AAPC interval: delta method on the full covariance, normal quantile (Clegg et al. 2009).
    w = np.array([2014 - 2010, 2019 - 2014])
    var = w @ (L @ ref.cov_params() @ L.T) @ w / w.sum() ** 2
    mean = w @ slopes / w.sum()
    z = stats.norm.ppf(0.975)
    assert fit.aapc_lower == pytest.approx(100 * np.expm1(mean - z * np.sqrt(var)), abs=1e-9)
    assert fit.aapc_upper == pytest.approx(100 * np.expm1(mean + z * np.sqrt(var)), abs=1e-9)
    assert fit.aapc_p == pytest.approx(2 * stats.norm.sf(abs(mean) / np.sqrt(var)), rel=1e-9)


def test_nci_standard_errors_equal_per_segment_wls_without_the_joinpoint_observation():
    deaths, births = broken_line_deaths(YEARS, 2015, (-0.04, 0.06), noise=0.03, seed=5)
    deaths = np.round(deaths)
    fit = jp.fit_joinpoint(YEARS, deaths, births, n_permutations=199)  # se_method="nci"
    (tau,) = fit.joinpoints
    hinge = hinge_wls(YEARS, deaths, births, fit.joinpoints, deaths)
    # Slopes come from the continuous model ...
    np.testing.assert_allclose([s.slope for s in fit.segments], [hinge.params[1], hinge.params[1:].sum()],
                               atol=1e-10)
    # ... standard errors from separate lines per segment, the joinpoint's year left out.
    keep = YEARS != tau
    seg = (YEARS > tau).astype(float)[keep]
    x = (YEARS - 2010.0)[keep]
    X = np.column_stack([1 - seg, (1 - seg) * x, seg, seg * x])
    ref = sm.WLS(np.log(deaths / births)[keep], X, weights=deaths[keep]).fit()
    np.testing.assert_allclose([s.slope_se for s in fit.segments], ref.bse[[1, 3]], rtol=1e-10)
    assert fit.df_resid == ref.df_resid == 10 - 1 - 4
    lengths = np.array([tau - 2010, 2019 - tau])
    var = lengths @ np.diag(ref.bse[[1, 3]] ** 2) @ lengths / 81
    assert fit.slope_se == pytest.approx(np.sqrt(var), rel=1e-10)


@pytest.mark.parametrize("weighting", ["poisson", "constant"])
def test_grid_search_and_bic_equal_brute_force(weighting):
    years = np.arange(2000, 2015)  # 15 points: up to 2 joinpoints
    rng = np.random.default_rng(11)
    for trial in range(6):
        births = rng.integers(2_000, 60_000, len(years)).astype(float)
        log_rate = np.log(0.01) + np.cumsum(rng.normal(0, 0.08, len(years)))
        deaths = rng.poisson(births * np.exp(log_rate)).astype(float) + 1
        fit = jp.fit_joinpoint(years, deaths, births, selection="bic", weighting=weighting)
        y = np.log(deaths / births)
        w = deaths if weighting == "poisson" else np.ones(len(years))
        n = len(years)
        best = [brute_force_sse(years, y, w, k) for k in range(3)]
        bic = [np.log(sse / n) + 2 * (k + 1) * np.log(n) / n for k, (sse, _) in enumerate(best)]
        np.testing.assert_allclose(fit.bic, bic, rtol=0, atol=1e-9)
        k = int(np.argmin(bic))
        assert fit.n_joinpoints == k and fit.joinpoints == best[k][1], trial


def test_bic_hand_case():
    # Seven points, OLS: a clear bend at year 3. SSE by hand: 0 joinpoints -> OLS line; 1 -> the
    # best hinge (NCI's rules allow joinpoints at years 2, 3, 4).
    years = np.arange(7.0)
    y = np.array([0.0, 0.1, -0.05, 0.02, 1.0, 2.05, 2.95])
    births = np.full(7, 1000.0)
    deaths = births * np.exp(y)
    line = np.polyfit(years, y, 1)
    sse0 = np.sum((y - np.polyval(line, years)) ** 2)
    sse1 = min(
        np.sum((y - X @ np.linalg.lstsq(X, y, rcond=None)[0]) ** 2)
        for X in (np.column_stack([np.ones(7), years, np.maximum(years - t, 0)]) for t in (2, 3, 4))
    )
    expected = [np.log(sse0 / 7) + 2 * np.log(7) / 7, np.log(sse1 / 7) + 4 * np.log(7) / 7]
    fit = jp.fit_joinpoint(years, deaths, births, selection="bic", weighting="constant")
    np.testing.assert_allclose(fit.bic, expected, atol=1e-10)
    assert fit.n_joinpoints == 1 and fit.joinpoints == (3.0,)
    assert fit.tests == ()


@pytest.mark.parametrize("se_method", ["nci", "hinge"])
def test_aapc_is_the_length_weighted_mean_slope(se_method):
    years = np.arange(2003, 2019)
    t = years - years[0]
    log_rate = np.log(0.01) - 0.02 * t + 0.10 * np.maximum(years - 2008, 0) - 0.15 * np.maximum(years - 2013, 0)
    noise = np.random.default_rng(2).normal(0, 0.01, len(years))
    births = np.full(len(years), 200_000.0)
    deaths = np.round(births * np.exp(log_rate + noise))
    fit = jp.fit_joinpoint(years, deaths, births, se_method=se_method, n_permutations=499)
    assert fit.joinpoints == (2008.0, 2013.0)
    lengths = np.array([s.end_year - s.start_year for s in fit.segments])
    slopes = np.array([s.slope for s in fit.segments])
    assert lengths.sum() == years[-1] - years[0]
    mean = float(lengths @ slopes / lengths.sum())
    assert fit.slope == pytest.approx(mean, abs=1e-15)
    assert fit.aapc == pytest.approx(100 * (np.exp(mean) - 1), abs=1e-12)
    assert fit.aapc_lower < fit.aapc < fit.aapc_upper


def test_no_joinpoint_aapc_equals_apc_and_the_ols_line():
    deaths, births = broken_line_deaths(YEARS, 2030, (-0.03, -0.03), noise=0.02, seed=8)
    fit = jp.fit_joinpoint(YEARS, deaths, births, weighting="constant", n_permutations=499)
    assert fit.n_joinpoints == 0 and fit.joinpoints == ()
    (seg,) = fit.segments
    assert (seg.start_year, seg.end_year) == (2010.0, 2019.0)
    assert (fit.aapc, fit.aapc_lower, fit.aapc_upper, fit.aapc_p) == pytest.approx(
        (seg.apc, seg.apc_lower, seg.apc_upper, seg.p_value), abs=1e-12)
    ols = stats.linregress(YEARS, np.log(deaths / births))
    assert seg.slope == pytest.approx(ols.slope, abs=1e-12)
    assert seg.slope_se == pytest.approx(ols.stderr, rel=1e-10)
    assert seg.p_value == pytest.approx(ols.pvalue, rel=1e-8)
    assert fit.df_resid == 8
    assert fit.tests[0].k_null == 0 and not fit.tests[0].rejected


def test_obvious_break_selects_one_joinpoint_at_the_right_year():
    deaths, births = broken_line_deaths(YEARS, 2015, (-0.08, 0.06), noise=0.01, seed=4)
    fit = jp.fit_joinpoint(YEARS, np.round(deaths), births)
    assert fit.n_joinpoints == 1 and fit.joinpoints == (2015.0,)
    (test,) = fit.tests
    assert (test.k_null, test.k_alt, test.level, test.rejected) == (0, 1, 0.05, True)
    assert test.p_value == pytest.approx(1 / 4500)  # no permutation reaches the observed T
    assert fit.estimable and fit.segments[0].apc < 0 < fit.segments[1].apc


def test_noiseless_break_is_found_but_an_exact_fit_is_not_estimable():
    deaths, births = broken_line_deaths(YEARS, 2016, (0.05, -0.1))
    fit = jp.fit_joinpoint(YEARS, deaths, births, n_permutations=199)
    assert fit.joinpoints == (2016.0,)
    assert not fit.estimable and "fits exactly" in fit.notes[0]
    assert np.isnan(fit.aapc) and fit.segments == ()


def test_straight_lines_select_no_joinpoint():
    deaths, births = broken_line_deaths(YEARS, 2030, (-0.04, -0.04))
    exact = jp.fit_joinpoint(YEARS, deaths, births, n_permutations=199)
    assert exact.n_joinpoints == 0 and not exact.tests[0].rejected and not exact.estimable
    # With noise, the test's size: about alpha = 5% of straight lines get a joinpoint.
    rng = np.random.default_rng(0)
    S = 400
    log_rate = np.log(0.008) - 0.04 * (YEARS - 2010) + rng.normal(0, 0.02, (S, 10))
    births = np.full((S, 10), 1e5)
    fits = jp.fit_joinpoint_many(np.tile(YEARS, S), (births * np.exp(log_rate)).ravel(), births.ravel(),
                                 np.repeat(np.arange(S), 10), n_permutations=999)
    assert 0.02 < np.mean([f.n_joinpoints for f in fits]) < 0.08


def test_permutation_p_values_are_reproducible_and_depend_on_the_seed():
    deaths, births = broken_line_deaths(YEARS, 2014, (-0.02, 0.02), noise=0.03, seed=9)
    first = jp.fit_joinpoint(YEARS, deaths, births, n_permutations=999, seed=5)
    again = jp.fit_joinpoint(YEARS, deaths, births, n_permutations=999, seed=5)
    other = jp.fit_joinpoint(YEARS, deaths, births, n_permutations=999, seed=6)
    assert first.tests == again.tests
    assert first.tests[0].p_value != other.tests[0].p_value
    assert (first.tests[0].p_value * 1000) == pytest.approx(round(first.tests[0].p_value * 1000))


def test_permutation_p_value_equals_a_loop_over_permutations():
    # Kim et al. (2000): permute the null model's weighted residuals, refit both models by grid
    # search, p = (1 + #{T* >= T}) / (N + 1), T = SSE0 / SSE1 - 1.
    deaths, births = broken_line_deaths(YEARS, 2014, (-0.03, 0.03), noise=0.04, seed=12)
    deaths = np.round(deaths)
    n_perm = 199
    fit = jp.fit_joinpoint(YEARS, deaths, births, n_permutations=n_perm, seed=3, permutation_stop="all")
    y, w = np.log(deaths / births), deaths
    sse0, _ = brute_force_sse(YEARS, y, w, 0)
    sse1, _ = brute_force_sse(YEARS, y, w, 1)
    t_obs = sse0 / sse1 - 1
    line = hinge_wls(YEARS, deaths, births, (), w)
    null_fit, resid_std = line.fittedvalues, np.sqrt(w) * line.resid
    perms = np.random.default_rng([3, len(YEARS)]).permuted(np.tile(np.arange(10), (n_perm, 1)), axis=1)
    hits = 0
    for perm in perms:
        y_star = null_fit + resid_std[perm] / np.sqrt(w)
        t_star = brute_force_sse(YEARS, y_star, w, 0)[0] / brute_force_sse(YEARS, y_star, w, 1)[0] - 1
        hits += t_star >= t_obs - 1e-9 * abs(t_obs)
    assert fit.tests[0].p_value == pytest.approx((1 + hits) / (n_perm + 1), abs=1e-15)


def test_sequential_tests_use_nci_levels_and_find_two_breaks():
    years = np.arange(2000, 2016)  # 16 points: max 2 joinpoints
    t = years - years[0]
    log_rate = np.log(0.01) + 0.06 * t - 0.14 * np.maximum(years - 2005, 0) + 0.12 * np.maximum(years - 2010, 0)
    births = np.full(len(years), 300_000.0)
    deaths = np.round(births * np.exp(log_rate + np.random.default_rng(0).normal(0, 0.01, len(years))))
    fit = jp.fit_joinpoint(years, deaths, births, n_permutations=999)
    assert fit.max_joinpoints == 2
    assert fit.joinpoints == (2005.0, 2010.0)
    first, second = fit.tests
    # alpha / (Kmax - k_null): 0 vs 2 at 0.025, then 1 vs 2 at 0.05.
    assert (first.k_null, first.k_alt, first.level) == (0, 2, 0.025)
    assert first.rejected and (second.k_null, second.k_alt, second.level) == (1, 2, 0.05)


def test_many_equals_one_at_a_time_in_any_row_order():
    rows = []
    for label, (brk, slopes, seed) in {"b": (2014, (-0.05, 0.04), 1), "a": (2030, (0.01, 0.01), 2),
                                       "c": (2016, (0.03, -0.06), 3)}.items():
        deaths, births = broken_line_deaths(YEARS, brk, slopes, births=30_000.0, noise=0.05, seed=seed)
        rows += [(label, y, round(d), b) for y, d, b in zip(YEARS, deaths, births)]
    rows = [rows[i] for i in np.random.default_rng(0).permutation(len(rows))]
    series, year, deaths, births = (np.array(c) for c in zip(*rows))
    many = jp.fit_joinpoint_many(year, deaths, births, series, n_permutations=299)
    assert [f.series for f in many] == ["a", "b", "c"]
    for f in many:
        mine = series == f.series
        single = jp.fit_joinpoint(year[mine], deaths[mine], births[mine], n_permutations=299)
        assert single.tests == f.tests and single.segments == f.segments and single.aapc == f.aapc


def test_zero_death_years_get_half_a_death_with_a_note_or_make_the_series_not_estimable():
    deaths = np.array([3, 0, 2, 4, 0, 1, 2, 3, 1, 2], dtype=float)
    births = np.full(10, 1500.0)
    fit = jp.fit_joinpoint(YEARS, deaths, births, n_permutations=99)
    patched = jp.fit_joinpoint(YEARS, np.where(deaths == 0, 0.5, deaths), births, n_permutations=99)
    assert fit.notes == ("no deaths in 2011, 2014: counted as 0.5 deaths, as NCI Joinpoint does",)
    assert fit.segments == patched.segments and patched.notes == ()
    refused = jp.fit_joinpoint(YEARS, deaths, births, zero_deaths="not_estimable")
    assert not refused.estimable and refused.notes[0].startswith("not estimable: no deaths in 2011, 2014")
    none = jp.fit_joinpoint(YEARS, np.zeros(10), births)
    assert not none.estimable and "no deaths in any year" in none.notes[0]


def test_short_series_have_no_joinpoint_and_an_impossible_maximum_is_lowered_with_a_note():
    deaths, births = broken_line_deaths(YEARS[:6], 2030, (0.02, 0.02), noise=0.02)
    short = jp.fit_joinpoint(YEARS[:6], deaths, births)
    assert short.max_joinpoints == 0 and short.tests == () and short.estimable
    deaths, births = broken_line_deaths(YEARS, 2030, (0.02, 0.02), noise=0.02)
    capped = jp.fit_joinpoint(YEARS, deaths, births, max_joinpoints=3, n_permutations=99)
    assert capped.max_joinpoints == 2  # 2 * 2 + 1 * 2 + 2 = 8 <= 10 < 2 * 2 + 2 * 2 + 3
    assert "at most 2 joinpoint(s) fit in 10 years" in capped.notes[-1]
    two = jp.fit_joinpoint(YEARS[:2], deaths[:2], births[:2])
    assert not two.estimable and "at least 3" in two.notes[0]


def test_bad_input_is_refused_with_the_series_named():
    births = np.full(10, 1000.0)
    with pytest.raises(ValueError, match="series 'x' has year 2011 more than once"):
        jp.fit_joinpoint_many(np.r_[YEARS[:9], 2011], np.ones(10), births, np.full(10, "x"))
    with pytest.raises(ValueError, match="births must be positive; series 'y'"):
        jp.fit_joinpoint_many(YEARS, np.ones(10), np.r_[births[:9], 0], np.full(10, "y"))
    with pytest.raises(ValueError, match="negative deaths"):
        jp.fit_joinpoint(YEARS, -np.ones(10), births)
    with pytest.raises(ValueError, match="selection must be one of"):
        jp.fit_joinpoint(YEARS, np.ones(10), births, selection="aic")
    with pytest.raises(ValueError, match="min_from_end must be >= 2"):
        jp.fit_joinpoint(YEARS, np.ones(10), births, min_from_end=1)


# Published Joinpoint output with its input: UK-Generations-Study/UK-cancer-trends, files
# "Data/Cleaned Data/Cancer_Mortality_Data_Rolling.csv" (column ASR_rolling, England 2002-2018)
# and "Data/Cleaned Data/Joinpoint Output/Cancer_Mortality_Data_Rolling_Joinpoint.txt" (NCI
# Joinpoint run of 12/08/2024, constant variance, ln model): per series the rates, the joinpoints
# NCI chose and its APCs (4 decimals). The selection method of that run is not stated (it gave the
# number of joinpoints); with that number fixed, grid search and APCs must agree.
NCI_ENGLAND_MORTALITY = {
    "all_men": ([388.6, 383.466666666667, 376.466666666667, 370.833333333333, 365.566666666667,
                 361.866666666667, 357.2, 353.066666666667, 348.633333333333, 345.866666666667,
                 342.266666666667, 338.066666666667, 333.133333333333, 328.633333333333,
                 324.033333333333, 318.566666666667, 313.066666666667],
                (2006, 2013), (-1.5527, -1.0906, -1.4960)),
    "all_women": ([254.366666666667, 251.633333333333, 248.6, 246.066666666667, 245.166666666667,
                   244.033333333333, 241.9, 239.233333333333, 237.033333333333, 236.166666666667,
                   234.3, 231.533333333333, 228.666666666667, 227.233333333333, 224.833333333333,
                   222.133333333333, 218.466666666667],
                  (2013,), (-0.8012, -1.1203)),
    "breast_women": ([44.7333333333333, 43.7, 42.7333333333333, 42.0333333333333, 41.2333333333333,
                      40.5, 39.4, 38.4666666666667, 37.5, 36.9, 36.2333333333333, 35.4, 34.7, 34.3,
                      33.9, 33.4666666666667, 32.8333333333333],
                     (2007, 2010, 2014), (-1.9573, -2.4128, -1.9059, -1.3555)),
    "colorectal_men": ([40.7666666666667, 40.4, 39.8333333333333, 39.2333333333333, 38.2,
                        37.7333333333333, 36.9666666666667, 36.7, 35.8, 35.6333333333333, 34.9,
                        34.2333333333333, 33.3666666666667, 32.9666666666667, 32.8333333333333,
                        32.4666666666667, 32.2],
                       (2015,), (-1.6452, -0.8746)),
    "colorectal_women": ([24.9333333333333, 24.7666666666667, 24.3666666666667, 24.1333333333333,
                          23.8666666666667, 23.6, 23.1, 22.5666666666667, 22.1333333333333, 22.1,
                          21.9, 21.6666666666667, 21.3333333333333, 21.3, 21.1333333333333, 21,
                          20.8333333333333],
                         (2007, 2010), (-1.1386, -2.0377, -0.7896)),
    "lung_men": ([93.3333333333333, 90.6333333333333, 88.3, 86.6, 85.4333333333333,
                  84.6333333333333, 83.3, 81.6, 79.4666666666667, 77.3, 75.8, 74.2333333333333,
                  72.5, 70.6333333333333, 68.2666666666667, 66.1, 63.6333333333333],
                 (2004, 2008, 2015), (-2.8662, -1.3800, -2.3120, -3.4150)),
    "lung_women": ([45.4, 45.5, 45.8333333333333, 46.4666666666667, 47.6666666666667,
                    48.6666666666667, 48.9, 48.9333333333333, 48.6666666666667, 48.7333333333333,
                    48.6333333333333, 48.5333333333333, 48.3, 47.8666666666667, 47.1, 45.9,
                    44.6666666666667],
                   (2004, 2007, 2015), (0.2669, 2.3303, -0.1701, -2.4981)),
    "oesophageal_men": ([21.2, 21.2666666666667, 21.4333333333333, 21.3, 21.1, 20.8666666666667,
                         20.8666666666667, 20.9333333333333, 20.7, 20.5, 20.3, 20, 19.7666666666667,
                         19.6, 19.6, 19.3333333333333, 19],
                        (2004, 2010), (0.4138, -0.5417, -1.0107)),
    "oesophageal_women": ([8.66666666666667, 8.66666666666667, 8.5, 8.36666666666667,
                           8.26666666666667, 8.13333333333333, 7.96666666666667, 7.83333333333333,
                           7.66666666666667, 7.53333333333333, 7.43333333333333, 7.4,
                           7.33333333333333, 7.26666666666667, 7.03333333333333, 6.9,
                           6.86666666666667],
                          (), (-1.5177,)),
    "pancreatic_men": ([15.8666666666667, 15.8666666666667, 15.8666666666667, 16, 16.1666666666667,
                        16.3666666666667, 16.4333333333333, 16.3333333333333, 16.5333333333333,
                        16.7333333333333, 16.9, 16.8666666666667, 16.7333333333333, 17.1,
                        17.1666666666667, 17.4, 17.1333333333333],
                       (), (0.5834,)),
    "pancreatic_women": ([12.3333333333333, 12.4, 12.6333333333333, 12.7666666666667,
                          12.9666666666667, 13.0666666666667, 13.3666666666667, 13.3333333333333,
                          13.3333333333333, 13.4, 13.4666666666667, 13.5666666666667,
                          13.4666666666667, 13.5666666666667, 13.6, 13.5666666666667,
                          13.5666666666667],
                         (2008,), (1.3525, 0.2313)),
    "prostate_men": ([56.4, 56.1666666666667, 55.3, 53.9666666666667, 53.0666666666667,
                      52.1333333333333, 51.5, 51.0333333333333, 50.7333333333333, 50.1333333333333,
                      49.1, 48.4333333333333, 48.6333333333333, 48.4333333333333, 48.2666666666667,
                      47.1, 46.4333333333333],
                     (2008,), (-1.6292, -0.9566)),
}

# NCI's fitted rates ("Model" column, 2 decimals) for two of them.
NCI_MODEL = {
    "all_men": [388.85, 382.81, 376.87, 371.01, 365.25, 361.27, 357.33, 353.43, 349.58, 345.76,
                341.99, 338.26, 333.20, 328.22, 323.31, 318.47, 313.71],
    "breast_women": [44.61, 43.74, 42.88, 42.04, 41.22, 40.41, 39.44, 38.49, 37.56, 36.84, 36.14,
                     35.45, 34.77, 34.30, 33.84, 33.38, 32.93],
}


@pytest.mark.parametrize("name", sorted(NCI_ENGLAND_MORTALITY))
def test_reproduces_nci_joinpoint_output_with_its_number_of_joinpoints(name):
    rates, joinpoints, apcs = NCI_ENGLAND_MORTALITY[name]
    years = np.arange(2002, 2019)
    k = len(joinpoints)
    # The rate as deaths / births: "deaths" = the rate, "births" = 1 (constant variance ignores w).
    fit = jp.fit_joinpoint(years, np.array(rates), np.ones(17), weighting="constant",
                           min_joinpoints=k, max_joinpoints=k)
    assert fit.joinpoints == tuple(float(j) for j in joinpoints)
    assert tuple(round(s.apc, 4) for s in fit.segments) == apcs
    assert fit.tests == ()  # min = max: nothing to test
    if name in NCI_MODEL:
        np.testing.assert_allclose(np.exp(fit.fitted_log_rate), NCI_MODEL[name], atol=0.005)


def test_minimum_number_of_joinpoints_starts_the_tests_and_bounds_bic():
    rates = np.array(NCI_ENGLAND_MORTALITY["lung_men"][0])
    years = np.arange(2002, 2019)  # 17 points: NCI's default maximum is 3
    fit = jp.fit_joinpoint(years, rates, np.ones(17), weighting="constant", min_joinpoints=2,
                           n_permutations=199)
    assert fit.max_joinpoints == 3
    assert (fit.tests[0].k_null, fit.tests[0].k_alt, fit.tests[0].level) == (2, 3, 0.05)
    free = jp.fit_joinpoint(years, rates, np.ones(17), weighting="constant", selection="bic")
    bounded = jp.fit_joinpoint(years, rates, np.ones(17), weighting="constant", selection="bic",
                               min_joinpoints=3)
    assert bounded.bic == free.bic and bounded.n_joinpoints == 3
    with pytest.raises(ValueError, match="min_joinpoints \\(2\\) is above max_joinpoints \\(1\\)"):
        jp.fit_joinpoint(years, rates, np.ones(17), min_joinpoints=2, max_joinpoints=1)


def test_slices_of_a_group_fit_exactly_as_the_whole_group(monkeypatch):
    """A group of series sharing their years is fitted in slices that bound the memory of the
    candidate bases; each series' fit does not depend on the others, so slices of one series
    give bit-identical fits (the permutations depend on the seed and n only)."""
    years = np.arange(1990, 2010, dtype=float)
    rng = np.random.default_rng(11)
    S = 7
    log_rate = (np.log(0.01) - 0.03 * (years - 1990) + 0.05 * np.clip(years - 2000, 0, None)
                + rng.normal(0, 0.04, (S, len(years))))
    births = np.full((S, len(years)), 5e4)
    args = (np.tile(years, S), np.round(births * np.exp(log_rate)).ravel(), births.ravel(),
            np.repeat(np.arange(S), len(years)))
    whole = jp.fit_joinpoint_many(*args, n_permutations=199, cap_joinpoints=2)
    monkeypatch.setattr(jp, "_BASES_MEMORY", 1)  # one series per slice
    assert jp._series_per_slice(len(years), jp._Options(None, 0, 2, 2, "permutation", 199, 0.05, 1, 0.95,
                                                        "poisson", "nci", "add_half", 2)) == 1
    sliced = jp.fit_joinpoint_many(*args, n_permutations=199, cap_joinpoints=2)
    assert sliced == whole


def test_the_cap_lowers_nci_rule_and_says_so():
    """NCI's rule allows 3 joinpoints in 20 years; a cap of 1 keeps at most 1 and the note says
    why; a cap above the rule changes nothing."""
    years = np.arange(1990, 2010, dtype=float)
    assert jp.default_max_joinpoints(len(years)) == 3
    deaths, births = broken_line_deaths(years, 2000, (-0.05, 0.04), noise=0.02, seed=3)
    capped = jp.fit_joinpoint(years, np.round(deaths), births, n_permutations=199, cap_joinpoints=1)
    assert capped.max_joinpoints == 1 and capped.n_joinpoints <= 1
    assert any("at most 1 joinpoint(s) (the cap), where NCI's rule allows 3 in 20 years" in n for n in capped.notes)
    free = jp.fit_joinpoint(years, np.round(deaths), births, n_permutations=199)
    loose = jp.fit_joinpoint(years, np.round(deaths), births, n_permutations=199, cap_joinpoints=5)
    assert free == loose and free.max_joinpoints == 3


def test_stopping_when_the_decision_is_settled_chooses_what_all_permutations_choose():
    # 600 series of 16 years (up to 2 joinpoints, two tests each), from straight lines to clear
    # breaks, Poisson counts of small and large communes: every chosen model, decision and fit
    # is the one all 4,499 permutations give; a stopped test's p is a lower bound of the full p.
    rng = np.random.default_rng(21)
    years = np.arange(2004, 2020)
    S = 600
    t = years - years[0]
    change = rng.choice([0.0, 0.02, 0.05, 0.12], S)[:, None]
    log_rate = np.log(0.008) - 0.03 * t + change * np.maximum(years - 2011, 0)
    births = rng.choice([800.0, 5_000.0, 60_000.0], S)[:, None] * np.ones(len(years))
    deaths = rng.poisson(births * np.exp(log_rate)).astype(float)
    args = (np.tile(years, S), deaths.ravel(), births.ravel(), np.repeat(np.arange(S), len(years)))
    early = jp.fit_joinpoint_many(*args)
    full = jp.fit_joinpoint_many(*args, permutation_stop="all")
    stopped = 0
    for e, f in zip(early, full):
        assert (e.n_joinpoints, e.joinpoints, e.segments, e.aapc, e.estimable) == \
            (f.n_joinpoints, f.joinpoints, f.segments, f.aapc, f.estimable)
        assert [(x.k_null, x.k_alt, x.level, x.rejected) for x in e.tests] == \
            [(x.k_null, x.k_alt, x.level, x.rejected) for x in f.tests]
        for x, y in zip(e.tests, f.tests):
            assert y.permutations == jp.NCI_PERMUTATIONS
            if x.permutations < jp.NCI_PERMUTATIONS:
                stopped += 1
                assert x.p_value <= y.p_value
            else:
                assert x.p_value == y.p_value
    # Most tests of noise settle in the first blocks: the saving is real.
    assert stopped > 0.5 * sum(len(f.tests) for f in full)
    assert {f.n_joinpoints for f in full} == {0, 1, 2}
    with pytest.raises(ValueError, match="permutation_stop"):
        jp.fit_joinpoint(years, deaths[0], births[0], permutation_stop="some")


def test_the_hinge_bases_span_what_qr_spans_and_are_orthonormal():
    # Gram-Schmidt over every series and candidate at once (joinpoint._orthonormal_rows) against
    # numpy's QR of each candidate: the same projections |Q'y|^2 and fitted values QQ'y.
    rng = np.random.default_rng(12)
    for k in (1, 2, 3):
        z = rng.normal(size=(4, 7, 20, k))
        rows = jp._orthonormal_rows(z)  # (S, k, C, n)
        q = np.linalg.qr(z)[0]  # (S, C, n, k)
        y = rng.normal(size=(4, 20))
        ours = np.einsum("skcn,sn->skc", rows, y)
        theirs = np.einsum("scnk,sn->skc", q, y)
        assert np.allclose((ours**2).sum(axis=1), (theirs**2).sum(axis=1), rtol=1e-12, atol=0)
        assert np.allclose(np.einsum("skcn,skc->scn", rows, ours), np.einsum("scnk,skc->scn", q, theirs),
                           rtol=1e-10, atol=1e-12)
        gram = np.einsum("spcn,sqcn->scpq", rows, rows)
        assert np.allclose(gram, np.eye(k), atol=1e-13)
