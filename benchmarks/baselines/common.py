"""What both of an analyst's scripts finish with, whichever engine counted: exact Poisson limits
on the counts and a GLSAR trend per series (statsmodels' AR(1) regression, the usual stand-in for
Prais-Winsten). Shared so that the pandas and the DuckDB script differ only in how they count."""

import numpy as np
import pandas as pd
from scipy.stats import beta, chi2

PER = 1000.0


def exact_limits(deaths: pd.Series, births: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Garwood 95% limits on deaths, as rates per 1000 births."""
    d = deaths.to_numpy(float)
    lower = np.where(d > 0, chi2.ppf(0.025, 2 * d) / 2, 0.0)
    upper = chi2.ppf(0.975, 2 * d + 2) / 2
    n = births.to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):  # no births: no rate (NaN, inf)
        return lower / n * PER, upper / n * PER


def with_rates(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.assign(rate=frame["deaths"] / frame["births"].where(frame["births"] > 0) * PER)
    frame["lower"], frame["upper"] = exact_limits(frame["deaths"], frame["births"])
    return frame


def rest_of_region_limits(both: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Exact conditional 95% limits of the commune's rate ratio against the rest of its region
    (deaths split binomially given their total), from deaths, births and their region totals."""
    d = both["deaths"].to_numpy(float)
    rest = both["deaths_region"].to_numpy(float) - d
    births_ratio = (both["births_region"] - both["births"]).to_numpy(float) / both["births"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_low = np.where(d > 0, beta.ppf(0.025, d, rest + 1), 0.0)
        p_high = beta.ppf(0.975, d + 1, rest)
        return p_low / (1 - p_low) * births_ratio, p_high / (1 - p_high) * births_ratio


def glsar_trends(yearly: pd.DataFrame, periods: list[tuple[int, int]], keys: list[str]) -> pd.DataFrame:
    """log10(rate) on year with AR(1) errors, one fit per series and period with every rate > 0."""
    from statsmodels.regression.linear_model import GLSAR  # only the scripts that fit trends pay for it

    rows = []
    for key, series in yearly.sort_values("year").groupby(keys):
        for start, end in periods:
            window = series[(series["year"] >= start) & (series["year"] <= end)]
            if len(window) < 5 or (window["rate"] <= 0).any():
                continue
            x = np.column_stack([np.ones(len(window)), window["year"].to_numpy(float)])
            fit = GLSAR(np.log10(window["rate"].to_numpy(float)), x, rho=1).iterative_fit(maxiter=10)
            rows.append((*key, start, end, fit.params[1], fit.bse[1]))
    return pd.DataFrame(rows, columns=[*keys, "period_start", "period_end", "slope", "slope_se"])
