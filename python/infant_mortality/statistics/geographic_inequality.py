"""Geographic inequality between communes, on the crude rates and net of chance
(docs/methods/inequity.md, "Geographic inequality net of chance").

Over the k communes of an area (a region, or the country) with deaths d_i and births n_i, with
r_i = d_i / n_i and the area's pooled rate b = sum d / sum n:

* HEAT's between-group variance on the crude rates, births-weighted around the setting average:
  BGV = sum (n_i / sum n) (r_i - b)^2. It includes the Poisson noise of small communes.
* HEAT's (unweighted) index of disparity: ID = 100 x mean |r_i - b| / b.
* The variance of the communes' *true* rates in the Poisson-gamma model that the smoothing fits
  (Marshall's moment estimator, ``smoothing.moment_estimates``): a = max(0, BGV - b / (sum n / k)),
  BGV minus the noise a Poisson count adds on average; its coefficient of variation sqrt(a) / b.
* A 95% percentile interval for a and its CV by parametric bootstrap from the fitted model:
  true rates Gamma(mean b, variance a), deaths Poisson(n_i theta_i) (drawn from their negative
  binomial margin, ``count_draws``), the estimator re-applied (fixed seed, so a rebuild gives the
  same interval). Drawn only where it is published: an
  area-span with fewer deaths than ``min_deaths`` gets none (null), and the yearly rows, whose
  intervals no trend or figure reads, take fewer replicates than the period rows (their Monte
  Carlo error: docs/methods/inequity.md).
* The trend of the yearly a over a period: an ordinary least-squares slope per year with its
  two-sided t-test (scipy.stats.linregress); decreasing means converging communes.

Rates are per the indicator's multiplier of live births in the output (1000: variances per 1000
squared).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
from scipy import stats

from infant_mortality.statistics.count_draws import poisson_gamma_draws
from infant_mortality.statistics.smoothing import moment_estimates

BOOTSTRAP_SEED = 31


def _checked(deaths, births) -> tuple[np.ndarray, np.ndarray]:
    d = np.asarray(deaths, dtype=float)
    n = np.asarray(births, dtype=float)
    if d.shape != n.shape or d.ndim != 1 or len(d) < 2:
        raise ValueError("deaths and births must be 1-d arrays of the same length, at least 2 communes")
    if not (np.isfinite(d).all() and np.isfinite(n).all()) or (d < 0).any() or (n <= 0).any():
        bad = np.flatnonzero(~np.isfinite(d) | ~np.isfinite(n) | (d < 0) | (n <= 0)).tolist()
        raise ValueError(f"deaths must be >= 0 and births > 0 for every commune; not at positions {bad}")
    return d, n


def between_group_variance(deaths, births) -> float:
    """HEAT's BGV of the crude rates, births-weighted around the pooled rate (per unit rate^2)."""
    d, n = _checked(deaths, births)
    b = d.sum() / n.sum()
    return float(np.sum(n / n.sum() * (d / n - b) ** 2))


def index_of_disparity(deaths, births) -> float:
    """HEAT's index of disparity: 100 x the mean absolute deviation of the crude rates from the
    pooled rate, over the pooled rate; NaN when the pooled rate is 0."""
    d, n = _checked(deaths, births)
    b = d.sum() / n.sum()
    return float(100.0 * np.mean(np.abs(d / n - b)) / b) if b > 0 else float("nan")


NO_INTERVAL = {"true_variance_ci95_lower": np.nan, "true_variance_ci95_upper": np.nan,
               "true_cv_ci95_lower": np.nan, "true_cv_ci95_upper": np.nan}


def true_rate_variance(deaths, births, replicates: int | None = 1000, seed: int = BOOTSTRAP_SEED) -> dict:
    """Noise-corrected variance of the true rates and its CV, each with a 95% parametric
    bootstrap percentile interval (rates per unit, not per 1000); `replicates=None`: the
    estimates alone, the interval null (NaN) and no draw made."""
    d, n = _checked(deaths, births)
    if replicates is not None and replicates < 100:
        raise ValueError(f"a bootstrap interval needs at least 100 replicates, got {replicates}")
    b, a = (float(v) for v in moment_estimates(d, n))
    cv = np.sqrt(a) / b if b > 0 else float("nan")
    estimates = {"pooled_rate": b, "true_variance": a, "true_cv": float(cv)}
    if replicates is None:
        return {**estimates, **NO_INTERVAL}
    return {**estimates, **_bootstrap_interval(n, b, a, replicates, seed)}


def _bootstrap_interval(n: np.ndarray, b: float, a: float, replicates: int, seed: int) -> dict:
    """The 95% percentile intervals of a and its CV from `replicates` data sets drawn from the
    fitted Poisson-gamma model (rate b, variance a) over births n."""
    # Each commune's deaths are drawn from their negative binomial margin (a Poisson when a = 0),
    # one uniform a commune and replicate: the same model as a gamma then a Poisson draw, at a
    # sixth of the cost (count_draws).
    uniforms = np.random.default_rng(seed).random((len(n), replicates))
    b_star, a_star = moment_estimates(poisson_gamma_draws(n.astype(float), b, a, uniforms), n)
    with np.errstate(invalid="ignore", divide="ignore"):
        cv_star = np.where(b_star > 0, np.sqrt(a_star) / b_star, np.nan)
    a_low, a_high = np.quantile(a_star, [0.025, 0.975])
    cv_low, cv_high = np.nanquantile(cv_star, [0.025, 0.975]) if np.isfinite(cv_star).any() else (np.nan, np.nan)
    return {"true_variance_ci95_lower": float(a_low), "true_variance_ci95_upper": float(a_high),
            "true_cv_ci95_lower": float(cv_low), "true_cv_ci95_upper": float(cv_high)}


def area_inequality(deaths, births, multiplier: float, replicates: int | None = 1000,
                    seed: int = BOOTSTRAP_SEED) -> dict:
    """Every measure of one area and span, rates per `multiplier` live births (variances per
    its square); `replicates=None`: no bootstrap interval (null)."""
    d, n = _checked(deaths, births)
    bgv = between_group_variance(d, n)
    true = true_rate_variance(d, n, replicates, seed)
    b = true["pooled_rate"]
    scale2 = multiplier**2
    return {
        "n_communes": len(d), "deaths": d.sum(), "live_births": n.sum(), "rate_per_1000": multiplier * b,
        "crude_variance": scale2 * bgv,
        "crude_cv": np.sqrt(bgv) / b if b > 0 else np.nan,
        "index_of_disparity": index_of_disparity(d, n),
        "noise_variance": scale2 * b / (n.sum() / len(n)),
        "true_variance": scale2 * true["true_variance"],
        "true_variance_ci95_lower": scale2 * true["true_variance_ci95_lower"],
        "true_variance_ci95_upper": scale2 * true["true_variance_ci95_upper"],
        "true_cv": true["true_cv"], "true_cv_ci95_lower": true["true_cv_ci95_lower"],
        "true_cv_ci95_upper": true["true_cv_ci95_upper"],
    }


def variance_trend(years, variances, min_years: int, p_threshold: float) -> dict:
    """OLS slope per year of the yearly true variance, its p-value and a class (`increasing`,
    `decreasing`, `stationary`); all null below `min_years` years."""
    years = np.asarray(years, dtype=float)
    variances = np.asarray(variances, dtype=float)
    if len(years) < max(min_years, 3):
        return {"n_years_trend": len(years), "true_variance_slope": np.nan, "true_variance_slope_p_value": np.nan,
                "true_variance_trend": None}
    fit = stats.linregress(years, variances)
    trend = "stationary"
    if fit.pvalue < p_threshold:
        trend = "increasing" if fit.slope > 0 else "decreasing"
    return {"n_years_trend": len(years), "true_variance_slope": float(fit.slope),
            "true_variance_slope_p_value": float(fit.pvalue), "true_variance_trend": trend}


KEYS = ["area_level", "area_code", "indicator"]
OUTPUT_COLUMNS = KEYS + [
    "span", "period_start", "period_end", "n_communes", "deaths", "live_births", "rate_per_1000", "crude_variance",
    "crude_cv", "index_of_disparity", "noise_variance", "true_variance", "true_variance_ci95_lower",
    "true_variance_ci95_upper", "true_cv", "true_cv_ci95_lower", "true_cv_ci95_upper", "n_years_trend",
    "true_variance_slope", "true_variance_slope_p_value", "true_variance_trend",
]


def _with_areas(communes: pd.DataFrame) -> pd.DataFrame:
    """Each commune row twice: in its region and in the country (`CL`); rows that already name
    their area (area_level `region` or `country`, one row per area a commune-year enters, as
    core's int_area_commune_years gives them) are taken as they are."""
    if "area_level" in communes.columns and communes["area_level"].isin(["region", "country"]).all():
        return communes
    region = communes.assign(area_level="region", area_code=communes["region_code"])
    country = communes.assign(area_level="country", area_code="CL")
    return pd.concat([region, country], ignore_index=True)


def _multiplier(indicator, values: np.ndarray) -> float:
    """The one rate multiplier of an indicator's rows."""
    values = pd.unique(values)
    if len(values) != 1 or not values[0] > 0:
        raise ValueError(f"indicator {indicator!r} needs one positive multiplier, got {list(values)}")
    return float(values[0])


def _area_groups(communes: pd.DataFrame, span_keys: list[str]):
    """(key tuple, deaths, births, multiplier) of every area and span with at least two
    communes, in key order, each group's rows in their input order (as a sorted groupby)."""
    rows = _with_areas(communes)
    keys = KEYS + span_keys
    rows = rows.sort_values(keys, kind="stable")
    key_values = [rows[k].to_numpy(dtype=object) for k in keys]
    deaths, births = rows["deaths"].to_numpy(dtype=float), rows["live_births"].to_numpy(dtype=float)
    multiplier = rows["multiplier"].to_numpy(dtype=float)
    starts = np.flatnonzero(np.r_[True, np.any([v[1:] != v[:-1] for v in key_values], axis=0)]) if len(rows) else []
    ends = np.r_[starts[1:], len(rows)] if len(rows) else []
    for start, end in zip(starts, ends):
        if end - start >= 2:
            yield (tuple(v[start] for v in key_values), deaths[start:end], births[start:end],
                   _multiplier(key_values[2][start], multiplier[start:end]))


def interval_replicates(deaths, replicates: int, min_deaths: int) -> int | None:
    """The replicates of an area-span's bootstrap: None (no interval) when its deaths are
    fewer than `min_deaths`, too few to tell the communes' true rates apart from chance."""
    return replicates if float(np.sum(deaths)) >= min_deaths else None


def _measured(groups, replicates: int, min_deaths: int) -> list:
    """area_inequality of every group, on two threads: the bootstrap's draws release the
    interpreter lock and every group draws from its own generator (seeded alike), so the
    results do not depend on the threads or their order."""
    groups = list(groups)
    with ThreadPoolExecutor(max_workers=2) as pool:
        measures = list(pool.map(
            lambda g: area_inequality(g[1], g[2], g[3], interval_replicates(g[1], replicates, min_deaths)), groups))
    return [(g[0], m) for g, m in zip(groups, measures)]


def geographic_inequality(yearly: pd.DataFrame, pooled: pd.DataFrame, replicates: int, min_years: int,
                          p_threshold: float, yearly_replicates: int | None = None,
                          min_deaths: int = 0) -> pd.DataFrame:
    """Rows of ``fct_geographic_inequality``: one per area, indicator and span (`year`, or an
    analysis `period`), from the communes' rows with an available rate and births > 0.

    ``yearly``: region_code, indicator, multiplier, year, deaths, live_births (one row per
    commune-year); ``pooled``: region_code, indicator, multiplier, period_start, period_end,
    deaths, live_births (one row per commune and analysis period). Each row enters its region
    and the country, unless the frames already carry area_level (`region`, `country`) and
    area_code: then each row enters the area it names only (so that an area-year without a rate
    of its own can be left out). An area-span with fewer than two such communes has no row.
    ``replicates``: the bootstrap of the period rows; ``yearly_replicates`` that of the yearly
    rows (None: the same); an area-span with fewer than ``min_deaths`` deaths gets no interval.
    """
    rows, yearly_variance = [], {}
    yearly_replicates = replicates if yearly_replicates is None else yearly_replicates
    for key, measures in _measured(_area_groups(yearly, ["year"]), yearly_replicates, min_deaths):
        rows.append({**dict(zip(KEYS, key[:3])), "span": "year", "period_start": key[3], "period_end": key[3],
                     **measures})
        yearly_variance.setdefault(key[:3], []).append((key[3], measures["true_variance"]))
    for key, measures in _measured(_area_groups(pooled, ["period_start", "period_end"]), replicates, min_deaths):
        in_period = [(year, value) for year, value in yearly_variance.get(key[:3], []) if key[3] <= year <= key[4]]
        rows.append({**dict(zip(KEYS, key[:3])), "span": "period", "period_start": key[3], "period_end": key[4],
                     **measures,
                     **variance_trend([y for y, _ in in_period], [v for _, v in in_period], min_years, p_threshold)})
    return pd.DataFrame(rows, columns=OUTPUT_COLUMNS)
