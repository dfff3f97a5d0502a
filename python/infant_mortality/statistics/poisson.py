"""Exact Poisson and conditional-binomial statistics for counts of deaths.

All functions are vectorised over numpy arrays (scalars work too) and follow
`docs/methods.md`: Garwood limits for one count, the exact conditional interval and the
mid-p value for a ratio of two rates, and exact control limits for funnel plots.
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats


def _scalar_if_scalar(*arrays):
    """Plain floats for scalar input, arrays otherwise (numpy returns 0-d arrays from np.where)."""
    return tuple(a[()] if np.ndim(a) == 0 else a for a in arrays)


def _tail(level: float) -> float:
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be between 0 and 1, got {level}")
    return (1.0 - level) / 2.0


def poisson_ci(deaths, level: float = 0.95):
    """Exact (Garwood) limits for a Poisson count: returns (lower, upper) on the count scale.

    lower = qchisq(a/2, 2d)/2 (0 when d = 0), upper = qchisq(1 - a/2, 2d + 2)/2.
    Divide by the births and multiply by the rate's multiplier for a rate interval.
    """
    d = np.asarray(deaths, dtype=float)
    if np.any(d < 0):
        raise ValueError("a Poisson count cannot be negative")
    a = _tail(level)
    with np.errstate(invalid="ignore"):
        lower = np.where(d > 0, stats.chi2.ppf(a, 2 * d) / 2, 0.0)
    upper = stats.chi2.ppf(1 - a, 2 * d + 2) / 2
    return _scalar_if_scalar(lower, upper)


def rate_ratio_exact_ci(d1, n1, d2, n2, level: float = 0.95):
    """Exact conditional interval for (d1/n1) / (d2/n2).

    Given d1 + d2, d1 is binomial with p = n1 RR / (n1 RR + n2); the Clopper-Pearson limits
    for p are mapped back to RR. The lower limit is 0 when d1 = 0 and the upper is +inf when
    d2 = 0 (no finite bound exists).
    """
    d1, n1, d2, n2 = (np.asarray(v, dtype=float) for v in (d1, n1, d2, n2))
    a = _tail(level)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_low = np.where(d1 > 0, stats.beta.ppf(a, d1, d2 + 1), 0.0)
        p_high = np.where(d2 > 0, stats.beta.ppf(1 - a, d1 + 1, d2), 1.0)
        scale = n2 / n1
        lower = p_low / (1 - p_low) * scale
        upper = np.where(p_high < 1, p_high / (1 - p_high) * scale, np.inf)
    return _scalar_if_scalar(lower, upper)


def rate_ratio_midp_p_value(d1, n1, d2, n2):
    """Two-sided mid-p value for H0: rate 1 = rate 2, conditional on d1 + d2.

    Under H0, d1 ~ Binomial(d1 + d2, n1 / (n1 + n2)). Each one-sided mid-p is
    P(more extreme) + P(X = d1)/2; the two-sided value is twice the smaller, at most 1.
    """
    d1, n1, d2, n2 = (np.asarray(v, dtype=float) for v in (d1, n1, d2, n2))
    total = d1 + d2
    p0 = n1 / (n1 + n2)
    point = stats.binom.pmf(d1, total, p0)
    upper_tail = stats.binom.sf(d1, total, p0) + point / 2
    lower_tail = stats.binom.cdf(d1 - 1, total, p0) + point / 2
    return _scalar_if_scalar(np.minimum(1.0, 2 * np.minimum(upper_tail, lower_tail)))[0]


def _midp_tails(d1, total, p):
    """One-sided mid-p tails of d1 ~ Binomial(total, p): (P(X > d1) + P(X = d1)/2, P(X < d1) + P(X = d1)/2)."""
    point = stats.binom.pmf(d1, total, p)
    return stats.binom.sf(d1, total, p) + point / 2, stats.binom.cdf(d1 - 1, total, p) + point / 2


def rate_ratio_midp_ci(d1, n1, d2, n2, level: float = 0.95):
    """Mid-p interval for (d1/n1) / (d2/n2): the interval that inverts the test of
    :func:`rate_ratio_midp_p_value`, so it excludes 1 exactly when that p < 1 - level.

    Conditional on d1 + d2, d1 ~ Binomial(d1 + d2, p), p = n1 RR / (n1 RR + n2). The lower limit
    for p solves P(X > d1) + P(X = d1)/2 = a/2 and the upper P(X < d1) + P(X = d1)/2 = a/2
    (both tails are monotone in p; solved by bisection on logit p to double precision); mapped
    to RR as the exact interval is. Lower 0 when d1 = 0, upper +inf when d2 = 0.
    """
    d1, n1, d2, n2 = (np.asarray(v, dtype=float) for v in (d1, n1, d2, n2))
    a = _tail(level)
    total = d1 + d2
    shape = np.broadcast(d1, n1, d2, n2).shape

    def solve(tail_index, increasing):
        lo, hi = np.full(shape, -60.0), np.full(shape, 60.0)
        for _ in range(200):
            mid = (lo + hi) / 2
            tail = _midp_tails(d1, total, special.expit(mid))[tail_index]
            below = (tail < a) if increasing else (tail > a)
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return special.expit((lo + hi) / 2)

    with np.errstate(invalid="ignore", divide="ignore"):
        p_low = np.where(d1 > 0, solve(0, True), 0.0)
        p_high = np.where(d2 > 0, solve(1, False), 1.0)
        scale = n2 / n1
        lower = p_low / (1 - p_low) * scale
        upper = np.where(p_high < 1, p_high / (1 - p_high) * scale, np.inf)
    return _scalar_if_scalar(lower, upper)


FUNNEL_LEVELS = (0.95, 0.998)
# The funnel's births axis spans its communes from this fraction of the fewest births to this
# multiple of the most (the mart's grid and the report's axis both use it).
FUNNEL_BIRTHS_SPAN = (0.7, 1.4)


def funnel_category(observed, expected):
    """Where an observed count sits against exact Poisson limits around its expected count.

    `above_99_8` / `below_99_8` when outside the 99.8% limits, `above_95` / `below_95` when
    outside the 95% but not the 99.8% limits, else `within`. A count is above the limits when
    even the lower exact limit of the observation exceeds the expectation (PHE's rule).
    """
    observed = np.asarray(observed, dtype=float)
    expected = np.asarray(expected, dtype=float)
    category = np.full(observed.shape, "within", dtype=object)
    for level, label in zip(FUNNEL_LEVELS, ("95", "99_8")):
        lower, upper = poisson_ci(observed, level)
        category = np.where(lower > expected, f"above_{label}", category)
        category = np.where(upper < expected, f"below_{label}", category)
    return _scalar_if_scalar(category)[0]


def funnel_count_limits(expected, level: float):
    """Observed counts on the funnel limits for each expected count: returns (lower, upper).

    The limits are the continuous counts d at which `funnel_category` changes: the upper limit
    solves poisson_ci(d).lower = expected and the lower limit poisson_ci(d).upper = expected.
    Both are closed forms in the chi-square degrees of freedom: qchisq(a, 2d)/2 = e holds when
    pchisq(2e, 2d) = a, so 2d is the inverse of the chi-square CDF in its degrees of freedom
    (scipy's chdtriv), and 2d + 2 likewise for the upper Garwood limit. The lower limit is 0
    where even d = 0 has an upper limit above e. (Root-finding on qchisq gave the same limits
    to 1e-9 and took seconds per grid; tests/python/test_poisson.py keeps it as the check.)
    """
    expected = np.atleast_1d(np.asarray(expected, dtype=float))
    a = _tail(level)
    positive = expected > 0
    twice = 2 * np.where(positive, expected, 1.0)
    upper = np.where(positive, special.chdtriv(a, twice) / 2, 0.0)
    lower = np.where(positive, np.maximum(special.chdtriv(1 - a, twice) / 2 - 1, 0.0), 0.0)
    return lower, upper


def funnel_rate_limits(rate: float, births_min: float, births_max: float, multiplier: float, points: int = 36,
                       levels=FUNNEL_LEVELS) -> tuple[np.ndarray, dict]:
    """The funnel plot's control limits, as rates per `multiplier` live births (the indicator's),
    around an area's rate over a grid of live births: (grid, {level: (lower rates, upper rates)}).

    The grid is `points` log-spaced birth counts from max(1, births_min) to births_max; at each,
    the limits are `funnel_count_limits` of the expected deaths (rate x births), divided by the
    births. A commune drawn outside a limit at its own births is in the matching
    `funnel_category` (same exact Poisson rule).
    """
    grid = np.geomspace(max(1.0, births_min), births_max, points)
    expected = rate * grid / multiplier
    limits = {}
    for level in levels:
        lower, upper = funnel_count_limits(expected, level)
        limits[level] = (multiplier * lower / grid, multiplier * upper / grid)
    return grid, limits
