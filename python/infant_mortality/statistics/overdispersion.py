"""Funnel limits that allow for over-dispersion (Spiegelhalter 2005, "Handling over-dispersion of
performance indicators", Qual Saf Health Care 14:347-351), as NHS-R FunnelPlotR computes them
for standardised ratios with its square-root ("CQC") transform (docs/methods/comparisons.md, "Funnel limits that allow for over-dispersion").

For areas with observed deaths O_i and expected deaths E_i (births x the region's rate), the
ratio O/E is compared with its target 1 on the square-root scale, where a Poisson count has a
nearly constant variance:

    y_i = sqrt(O_i / E_i),  s_i = 1 / (2 sqrt(E_i)),  z_i = (y_i - 1) / s_i = 2 (sqrt(O_i) - sqrt(E_i)).

The z-scores are winsorised (those beyond the `trim` and 1 - `trim` quantiles set to those
quantiles), phi = mean(z_w^2) estimates the dispersion, and the additive random-effects variance
is tau^2 = max(0, (n phi - (n - 1)) / (sum w - sum w^2 / sum w)) with w_i = 1 / s_i^2. The
adjusted limits at expected count E are (1 +/- z_p sqrt(s^2 + tau^2))^2 on the ratio scale, never
inside the exact Poisson limits (see `adjusted_funnel_category`).

When phi <= 1 there is no over-dispersion to allow for: tau^2 is reported as 0 and the adjusted
limits and categories are the exact Poisson ones of `poisson.py` (FunnelPlotR then draws its
unadjusted limits too).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from infant_mortality.statistics.poisson import FUNNEL_LEVELS, funnel_category, funnel_count_limits, poisson_ci

DEFAULT_TRIM = 0.1


@dataclass(frozen=True)
class Dispersion:
    n: int  # areas with an expected count > 0
    phi: float  # dispersion ratio of the winsorised z-scores (1 under pure Poisson variation)
    tau2: float  # between-area variance added on the square-root scale; 0 when phi <= 1


def _checked(observed, expected) -> tuple[np.ndarray, np.ndarray]:
    o = np.asarray(observed, dtype=float)
    e = np.asarray(expected, dtype=float)
    if o.shape != e.shape or o.ndim != 1:
        raise ValueError("observed and expected must be 1-d arrays of the same length")
    if not (np.isfinite(o).all() and np.isfinite(e).all()):
        raise ValueError("observed and expected counts must be finite (no missing counts)")
    if (o < 0).any() or (e <= 0).any():
        bad = np.flatnonzero((o < 0) | (e <= 0)).tolist()
        raise ValueError(f"observed counts must be >= 0 and expected counts > 0; not at positions {bad}")
    return o, e


def sqrt_z_scores(observed, expected) -> np.ndarray:
    """z_i = 2 (sqrt(O_i) - sqrt(E_i)): the unadjusted z-score of O/E on the square-root scale."""
    o, e = _checked(observed, expected)
    return 2.0 * (np.sqrt(o) - np.sqrt(e))


def winsorise(z, trim: float = DEFAULT_TRIM) -> np.ndarray:
    """z with values below its `trim` quantile and above its 1 - `trim` quantile set to those
    quantiles (linear interpolation between order statistics: R's default type 7, as FunnelPlotR)."""
    if not 0 <= trim < 0.5:
        raise ValueError(f"trim must be in [0, 0.5), got {trim}")
    z = np.asarray(z, dtype=float)
    low, high = np.quantile(z, [trim, 1.0 - trim])
    return np.clip(z, low, high)


def dispersion(observed, expected, trim: float = DEFAULT_TRIM) -> Dispersion:
    """phi and tau^2 of Spiegelhalter's additive random-effects model over a set of areas."""
    o, e = _checked(observed, expected)
    if len(o) < 2:
        raise ValueError(f"over-dispersion needs at least 2 areas, got {len(o)}")
    z = winsorise(sqrt_z_scores(o, e), trim)
    n = len(z)
    phi = float(np.mean(z**2))
    if phi <= 1.0:
        return Dispersion(n=n, phi=phi, tau2=0.0)
    w = 4.0 * e  # 1 / s_i^2
    tau2 = max(0.0, (n * phi - (n - 1)) / (w.sum() - np.sum(w**2) / w.sum()))
    return Dispersion(n=n, phi=phi, tau2=float(tau2))


def adjusted_ratio_limits(expected, tau2, level: float):
    """(lower, upper) of O/E at each expected count: (1 -/+ z sqrt(1/(4E) + tau^2))^2, the lower
    limit 0 where the square root's lower limit is negative (a ratio cannot be below 0)."""
    e = np.asarray(expected, dtype=float)
    tau2 = np.asarray(tau2, dtype=float)
    if (tau2 < 0).any():
        raise ValueError(f"tau2 cannot be negative, got {tau2[tau2 < 0][:5].tolist()}")
    z = stats.norm.ppf(0.5 + level / 2.0)
    half_width = z * np.sqrt(1.0 / (4.0 * e) + tau2)
    return np.maximum(1.0 - half_width, 0.0) ** 2, (1.0 + half_width) ** 2


def adjusted_funnel_category(observed, expected, tau2):
    """`funnel_category` against the over-dispersion-adjusted limits: `above_99_8` / `below_99_8`
    outside the 99.8% limits, `above_95` / `below_95` outside the 95% ones only, else `within`.

    A count is outside an adjusted limit only if it is also outside the exact Poisson one: the
    between-area variance can only widen the limits, but the normal approximation on the
    square-root scale is narrower than the exact limits at small expected counts (a commune
    expecting 2 deaths that had none is within the exact 95% limits and below the normal ones).
    Where tau^2 = 0 (phi <= 1) it is the exact `funnel_category`. Vectorised over all three
    arguments (tau^2 is one value per region)."""
    o, e, tau2 = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (observed, expected, tau2)))
    ratio = o / e
    category = np.full(ratio.shape, "within", dtype=object)
    for level, label in zip(FUNNEL_LEVELS, ("95", "99_8")):
        lower, upper = adjusted_ratio_limits(e, tau2, level)
        exact_lower, exact_upper = poisson_ci(o, level)
        category = np.where((ratio > upper) & (exact_lower > e), f"above_{label}", category)
        category = np.where((ratio < lower) & (exact_upper < e), f"below_{label}", category)
    category = np.where(tau2 == 0, np.asarray(funnel_category(o, e), dtype=object), category)
    return category[()] if np.ndim(category) == 0 else category


def adjusted_funnel_rate_limits(rate: float, grid, tau2: float, multiplier: float, levels=FUNNEL_LEVELS,
                                exact: dict | None = None) -> dict:
    """The adjusted control limits as rates per `multiplier` live births around an area's rate at each live-birth
    count of `grid`: {level: (lower rates, upper rates)}, each the wider of the exact Poisson
    limit (`funnel_count_limits`) and the random-effects one, as `adjusted_funnel_category`
    decides; the exact limits where tau^2 = 0. A commune drawn outside a limit at its own
    births is in the matching `adjusted_funnel_category`. `exact`: the exact limits of
    `funnel_rate_limits` for the same rate, grid and multiplier, when already computed (the
    same numbers: each is an inversion of the chi-square in its degrees of freedom, the costly
    part)."""
    grid = np.asarray(grid, dtype=float)
    expected = rate * grid / multiplier
    limits = {}
    for level in levels:
        exact_lower, exact_upper = exact[level] if exact is not None else (
            multiplier * limit / grid for limit in funnel_count_limits(expected, level))
        if tau2 == 0:
            limits[level] = (exact_lower, exact_upper)
        else:
            lower, upper = adjusted_ratio_limits(expected, tau2, level)
            limits[level] = (np.minimum(exact_lower, rate * lower),
                             np.maximum(exact_upper, rate * upper))
    return limits


def region_dispersion(pooled, trim: float = DEFAULT_TRIM):
    """phi and tau^2 per region, indicator and period from commune rows with region_code,
    indicator, period_start, period_end, deaths and expected_deaths. Communes without an
    expected count (no births, or a region rate of 0) are not in the model; a region with fewer
    than two communes that have one gets no row."""
    keys = ["region_code", "indicator", "period_start", "period_end"]
    usable = pooled[pooled["expected_deaths"].notna() & (pooled["expected_deaths"] > 0) & pooled["deaths"].notna()]
    rows = []
    for key, group in usable.groupby(keys, sort=True):
        if len(group) < 2:
            continue
        fit = dispersion(group["deaths"].to_numpy(float), group["expected_deaths"].to_numpy(float), trim)
        rows.append({**dict(zip(keys, key)), "n_communes": fit.n, "phi": fit.phi, "tau2": fit.tau2})
    # Typed even when empty (a scope whose periods leave no region with two communes): an
    # untyped empty frame would reach DuckDB as columns of type NULL.
    return pd.DataFrame(rows, columns=keys + ["n_communes", "phi", "tau2"]).astype(
        {"region_code": "string", "indicator": "string", "period_start": "int64", "period_end": "int64",
         "n_communes": "int64", "phi": "float64", "tau2": "float64"})
