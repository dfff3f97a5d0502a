"""Count-model trend fitter: quasi-Poisson regression of deaths on year, offset ln(births).

The model for small counts (docs/methods/trends.md, "Valid trend conclusions for small communes"): deaths_t ~ Poisson(births_t
exp(a + b t)), log link, every year with births kept (a zero-death year is an observation, not
a missing log). All series are fitted at once by Newton-Raphson on the centred year (two
parameters per series, the 2 x 2 systems solved in closed form); tests compare every series
with statsmodels ``GLM(deaths, [1, year], Poisson, offset=ln births).fit(scale="X2")``.

* Over-dispersion: phi = Pearson chi2 / (n - 2) (quasi-Poisson, published as ``dispersion``).
  With phi > 1, se(b) = sqrt(phi (X'WX)^-1) and the test is t(n - 2): the quasi-Poisson test.
  With phi <= 1 the scale is floored at 1 and a class needs two tests to agree: the Poisson
  variance (se(b) = sqrt((X'WX)^-1), the normal) and the quasi-Poisson test on the series' own
  phi (t(n - 2)); the published se, p and interval are those of the less significant of the
  two. A scale below 1 fitted to 5-10 points is mostly chance: left free it made 31% of series
  with phi < 0.2 significant under no trend; floored alone (the normal test whenever phi <= 1)
  it made 5.7-5.9% of 5-year series significant when the true variance is twice the mean,
  because a chance phi below 1 then hides real over-dispersion. Requiring both tests keeps the
  size below that of each (quasi-Poisson for over-dispersed data, Poisson otherwise;
  docs/methods/trends.md, "Trend calibration").
* Serial correlation: r = lag-1 autocorrelation of the Pearson residuals over consecutive years;
  when r > 0 the variance of b is multiplied by (1 + r) / (1 - r), the AR(1) variance inflation
  of a trend slope (the effective sample size n (1 - r) / (1 + r) of Santer et al. 2000). A
  negative r does not narrow the interval. The estimate b is the GLM's, untouched.
* t = b / se, two-sided p and the interval from t(n - 2) or the normal, as the test used says.
* Not estimable: no finite maximum likelihood (no deaths, or every death in the first or in the
  last year: the slope runs to -+infinity), Newton-Raphson not converged, no residual degree of
  freedom, an exact fit (chi2 = 0), or r >= 1.
* The slope and intercept are returned on the log10 scale of the rate per its multiplier (b / ln 10), as
  every fitter's; ``rho`` carries r and ``dispersion`` carries phi.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy import stats

from infant_mortality.statistics.trend_fitters.base import SeriesData, SeriesFits

LN10 = np.log(10.0)


@dataclass(frozen=True)
class PoissonFitter:
    """Quasi-Poisson GLM of deaths on [1, year], offset ln(births), AR(1)-inflated variance."""

    max_iter: int = 100
    tol: float = 1e-12

    label = "Poisson regression"
    data = "counts"
    min_years_floor = 3

    def fit(self, data: SeriesData) -> SeriesFits:
        t0 = time.perf_counter()
        labels, codes = np.unique(np.asarray(data.series), return_inverse=True)
        year = np.asarray(data.year, dtype=float)
        order = np.lexsort((year, codes))
        codes, year = codes[order], year[order]
        deaths = np.asarray(data.deaths, dtype=float)[order]
        births = np.asarray(data.births, dtype=float)[order]
        if np.isnan(deaths).any() or np.isnan(births).any() or (births <= 0).any() or (deaths < 0).any():
            raise ValueError("the Poisson fitter needs deaths >= 0 and births > 0 on every row it is given")
        S = len(labels)

        def per_series(values):
            return np.bincount(codes, weights=values, minlength=S)

        n = np.bincount(codes, minlength=S).astype(float)
        centre = per_series(year) / n
        x = year - centre[codes]
        total = per_series(deaths)
        first, last = _first_last_deaths(codes, deaths, S)
        finite_mle = (total > 0) & ~first & ~last

        a, b, converged, iterations = _newton(codes, x, deaths, np.log(births), total, per_series,
                                              finite_mle, self.max_iter, self.tol)
        mu = births * np.exp(a[codes] + b[codes] * x)
        s0, s1, s2 = per_series(mu), per_series(x * mu), per_series(x * x * mu)
        df = n - 2
        with np.errstate(divide="ignore", invalid="ignore"):
            pearson = (deaths - mu) / np.sqrt(mu)
            phi = per_series(pearson ** 2) / np.where(df > 0, df, np.nan)
            var_b = s0 / (s0 * s2 - s1 * s1)
            r = _lag1_autocorrelation(codes, year, pearson, S)
            inflation = np.where(r > 0, (1 + r) / (1 - r), 1.0)
            var_b = var_b * inflation
            # phi > 1: the quasi-Poisson test. phi <= 1: the Poisson test (scale 1, normal) and
            # the quasi-Poisson one (scale phi, t(n - 2)) must both reject; the binding one is
            # published, so the interval beside the class is the test's own.
            quasi_se = np.sqrt(phi * var_b)
            quasi_p = 2.0 * stats.t.sf(np.abs(b / quasi_se), np.where(df > 0, df, np.nan))
            poisson_se = np.sqrt(var_b)
            poisson_p = 2.0 * stats.norm.sf(np.abs(b / poisson_se))
            use_quasi = (phi > 1) | (quasi_p > poisson_p)
            se = np.where(use_quasi, quasi_se, poisson_se)
            t_stat = b / se
            p_value = np.where(use_quasi, quasi_p, poisson_p)
            # df = inf tells the shell the test is the normal.
            df_test = np.where(use_quasi, df, np.inf)

        fitted = finite_mle & converged
        estimable = fitted & (df > 0) & (phi > 0) & (r < 1) & np.isfinite(se)
        notes = [[] if estimable[i] else [_why_not(finite_mle[i], converged[i], df[i], phi[i], r[i], self.max_iter)]
                 for i in range(S)]
        with np.errstate(invalid="ignore"):
            intercept_ln = np.where(fitted, a - b * centre, np.nan)
        return SeriesFits(
            series=labels,
            intercept=(intercept_ln + data.log_multiplier(labels)) / LN10,  # log10 of the rate
            slope=np.where(fitted, b, np.nan) / LN10,
            slope_se=se / LN10,
            t_stat=t_stat,
            p_value=p_value,
            df_resid=np.where(df > 0, df_test, df),
            estimable=estimable,
            notes=notes,
            columns={"rho": r, "iterations": iterations.astype(float),
                     "converged": converged.astype(float), "dispersion": phi},
            elapsed_seconds=time.perf_counter() - t0,
        )


def _first_last_deaths(codes, deaths, S):
    """Per series: are all its deaths in its first year / in its last year (rows sorted by year)?"""
    idx = np.arange(len(codes))
    start = np.full(S, len(codes))
    np.minimum.at(start, codes, idx)
    end = np.full(S, -1)
    np.maximum.at(end, codes, idx)
    total = np.bincount(codes, weights=deaths, minlength=S)
    has = end >= 0
    d_first = np.where(has, deaths[np.minimum(start, len(codes) - 1)], 0.0)
    d_last = np.where(has, deaths[np.maximum(end, 0)], 0.0)
    return (total > 0) & (d_first == total), (total > 0) & (d_last == total)


def _newton(codes, x, deaths, offset, total, per_series, active, max_iter, tol):
    """Newton-Raphson for (a, b) of every active series; returns a, b, converged, iterations."""
    S = len(total)
    births_sum = per_series(np.exp(offset))
    with np.errstate(divide="ignore"):
        a = np.where(active, np.log(np.where(active, total, 1.0) / births_sum), 0.0)
    b = np.zeros(S)
    converged = np.zeros(S, dtype=bool)
    iterations = np.zeros(S)
    running = active.copy()
    for _ in range(max_iter):
        if not running.any():
            break
        mu = np.exp(offset + a[codes] + b[codes] * x)
        resid = deaths - mu
        u0, u1 = per_series(resid), per_series(x * resid)
        s0, s1, s2 = per_series(mu), per_series(x * mu), per_series(x * x * mu)
        det = s0 * s2 - s1 * s1
        with np.errstate(divide="ignore", invalid="ignore"):
            da = (s2 * u0 - s1 * u1) / det
            db = (s0 * u1 - s1 * u0) / det
        da, db = np.where(running, da, 0.0), np.where(running, db, 0.0)
        a, b = a + da, b + db
        iterations += running
        done = running & (np.abs(da) < tol * (1 + np.abs(a))) & (np.abs(db) < tol * (1 + np.abs(b)))
        converged |= done
        running &= ~done & np.isfinite(a) & np.isfinite(b)
    return a, b, converged, iterations


def _lag1_autocorrelation(codes, year, resid, S):
    """sum e_t e_(t-1) / sum e_t^2 per series, the products over consecutive years only."""
    pair = np.zeros(len(codes), dtype=bool)
    pair[1:] = (codes[1:] == codes[:-1]) & (np.diff(year) == 1)
    lagged = np.r_[0.0, resid[:-1]]
    num = np.bincount(codes[pair], weights=(resid * lagged)[pair], minlength=S)
    den = np.bincount(codes, weights=resid * resid, minlength=S)
    with np.errstate(divide="ignore", invalid="ignore"):
        return num / den


def _why_not(finite_mle, converged, df, phi, r, max_iter) -> str:
    if not finite_mle:
        return ("not estimable: the Poisson likelihood has no finite maximum (no deaths, or every "
                "death in the first or in the last year)")
    if not converged:
        return f"not estimable: the Poisson fit did not converge in {max_iter} iterations"
    if not df > 0:
        return "not estimable: no residual degrees of freedom left"
    if not phi > 0:
        return "not estimable: the Poisson model fits exactly (Pearson chi2 = 0)"
    return f"not estimable: lag-1 autocorrelation of the Pearson residuals r = {r:.3g} >= 1"
