"""Ordinary least squares trend fitter: log10(rate) on [1, year], errors assumed independent.

A second method beside Prais-Winsten (var ``trend_method: ols``), for readers who want the
plain log-linear trend (what Joinpoint reports with no joinpoint and no autocorrelation
correction). Per series: b1 = Sxy / Sxx, b0 = mean(y) - b1 mean(year), s^2 = RSS / (n - 2),
se(b1) = sqrt(s^2 / Sxx), t = b1 / se, two-sided p from t(n - 2); Durbin-Watson of the
residuals over consecutive years (pairs across a gap left out) goes to ``dw_original`` as a
check of the independence assumption. Not estimable when no residual degree of freedom is
left (n < 3) or the fit is exact (residual variance 0).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy import stats

from infant_mortality.statistics.trend_fitters.base import SeriesData, SeriesFits


@dataclass(frozen=True)
class OlsFitter:
    """OLS of y on [1, year] per series; no options."""

    label = "OLS"
    data = "log_rate"
    min_years_floor = 3

    def fit(self, data: SeriesData) -> SeriesFits:
        t0 = time.perf_counter()
        y = np.asarray(data.y, dtype=float)
        year = np.asarray(data.year, dtype=float)
        labels, codes = np.unique(np.asarray(data.series), return_inverse=True)
        order = np.lexsort((year, codes))
        codes, y, year = codes[order], y[order], year[order]
        S = len(labels)

        def per_series(values):
            return np.bincount(codes, weights=values, minlength=S)

        n = np.bincount(codes, minlength=S).astype(float)
        x_mean = per_series(year) / n
        y_mean = per_series(y) / n
        dx = year - x_mean[codes]
        dy = y - y_mean[codes]
        sxx = per_series(dx * dx)
        df = n - 2
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = per_series(dx * dy) / sxx
            resid = dy - slope[codes] * dx
            ssr = per_series(resid * resid)
            dfr = np.where(df > 0, df, np.nan)
            slope_se = np.sqrt(ssr / dfr / sxx)
            t_stat = slope / slope_se
            p_value = 2.0 * stats.t.sf(np.abs(t_stat), dfr)
            # Durbin-Watson over consecutive years of the same series.
            pair = np.zeros(len(codes), dtype=bool)
            pair[1:] = (codes[1:] == codes[:-1]) & (np.diff(year) == 1)
            step = np.where(pair, resid - np.r_[0.0, resid[:-1]][: len(resid)], 0.0)
            dw = per_series(step * step) / np.where(ssr > 0, ssr, np.nan)
        intercept = y_mean - slope * x_mean
        fitted = (df > 0) & (sxx > 0)
        exact = fitted & (ssr == 0)
        estimable = fitted & ~exact
        notes = [
            [] if estimable[i]
            else ["not estimable: the regression fits exactly (residual variance 0)"] if exact[i]
            else ["not estimable: no residual degrees of freedom left"]
            for i in range(S)
        ]
        return SeriesFits(
            series=labels, intercept=intercept, slope=slope, slope_se=slope_se, t_stat=t_stat,
            p_value=p_value, df_resid=df, estimable=estimable, notes=notes,
            columns={"dw_original": dw}, elapsed_seconds=time.perf_counter() - t0,
        )
