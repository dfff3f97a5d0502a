"""Exact Poisson and conditional-binomial statistics for counts of deaths.

All functions are vectorised over numpy arrays (scalars work too) and follow
`docs/methods/core.md`, "Interval for one rate": Garwood limits for one count, the exact conditional interval and the
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


def _midp_tail(d1, total, p, bound: str):
    """One-sided mid-p tail of d1 ~ Binomial(total, p): P(X > d1) + P(X = d1)/2 for the
    ``lower`` limit, P(X < d1) + P(X = d1)/2 for the ``upper``."""
    half_point = stats.binom.pmf(d1, total, p) / 2
    if bound == "lower":
        return stats.binom.sf(d1, total, p) + half_point
    return stats.binom.cdf(d1 - 1, total, p) + half_point


def _bisect_logit(tail, a: float, increasing: bool, size: int) -> np.ndarray:
    """p in (0, 1) where tail(index, p) crosses a, for `size` problems at once, by bisection on
    logit p over [-60, 60] (200 halvings at most).

    A problem leaves the loop when a halving changes neither end of its bracket: the next one
    would take the same midpoint and the same decision, so its bracket is final and the result
    is bit for bit what all 200 halvings give. That takes about 55 halvings (the bracket
    reaches the spacing of doubles near the root), so most of the work is saved.
    """
    lo, hi = np.full(size, -60.0), np.full(size, 60.0)
    moving = np.arange(size)
    for _ in range(200):
        if moving.size == 0:
            break
        old_lo, old_hi = lo[moving], hi[moving]
        mid = (old_lo + old_hi) / 2
        value = tail(moving, special.expit(mid))
        below = (value < a) if increasing else (value > a)
        new_lo, new_hi = np.where(below, mid, old_lo), np.where(below, old_hi, mid)
        lo[moving], hi[moving] = new_lo, new_hi
        moving = moving[(new_lo != old_lo) | (new_hi != old_hi)]
    return special.expit((lo + hi) / 2)


def rate_ratio_midp_limit(d1, n1, d2, n2, level: float, bound: str):
    """One limit (``bound`` = ``lower`` or ``upper``) of :func:`rate_ratio_midp_ci`, solving
    only that one (each is a root search)."""
    if bound not in ("lower", "upper"):
        raise ValueError(f"bound must be 'lower' or 'upper', got {bound!r}")
    d1, n1, d2, n2 = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (d1, n1, d2, n2)))
    a = _tail(level)
    shape = d1.shape
    flat_d1, flat_total = d1.reshape(-1), (d1 + d2).reshape(-1)
    solved = _bisect_logit(lambda i, p: _midp_tail(flat_d1[i], flat_total[i], p, bound), a,
                           increasing=(bound == "lower"), size=flat_d1.size).reshape(shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = n2 / n1
        if bound == "lower":
            p_low = np.where(d1 > 0, solved, 0.0)
            return _scalar_if_scalar(p_low / (1 - p_low) * scale)[0]
        p_high = np.where(d2 > 0, solved, 1.0)
        return _scalar_if_scalar(np.where(p_high < 1, p_high / (1 - p_high) * scale, np.inf))[0]


def rate_ratio_midp_ci(d1, n1, d2, n2, level: float = 0.95):
    """Mid-p interval for (d1/n1) / (d2/n2): the interval that inverts the test of
    :func:`rate_ratio_midp_p_value`, so it excludes 1 exactly when that p < 1 - level.

    Conditional on d1 + d2, d1 ~ Binomial(d1 + d2, p), p = n1 RR / (n1 RR + n2). The lower limit
    for p solves P(X > d1) + P(X = d1)/2 = a/2 and the upper P(X < d1) + P(X = d1)/2 = a/2
    (both tails are monotone in p; solved by bisection on logit p to double precision); mapped
    to RR as the exact interval is. Lower 0 when d1 = 0, upper +inf when d2 = 0.
    """
    return (rate_ratio_midp_limit(d1, n1, d2, n2, level, "lower"),
            rate_ratio_midp_limit(d1, n1, d2, n2, level, "upper"))


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
    to 1e-9 and took seconds per grid; tests/trends/test_poisson.py keeps it as the check.)
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
