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
    ``lower`` limit, P(X < d1) + P(X = d1)/2 for the ``upper``; and P(X = d1)/2, of which the
    tail's derivatives are multiples (see `_log_tail_slopes`)."""
    half_point = stats.binom.pmf(d1, total, p) / 2
    if bound == "lower":
        return stats.binom.sf(d1, total, p) + half_point, half_point
    return stats.binom.cdf(d1 - 1, total, p) + half_point, half_point


def _log_tail_slopes(d1, total, x, bound: str):
    """The mid-p tail T at logit p = x, with the first two derivatives of log T in x.

    With k = d1, n = total and q = 1 - p: d/dp P(X <= k) = -n pmf(k; n-1, p) = -pmf(k) (n-k)/q and
    d/dp pmf(k) = pmf(k) (k/p - (n-k)/q); with dp/dx = p q both tails give
    dT/dx = +-pmf(k)/2 (k q + (n-k) p) (+ for the lower limit's increasing tail), and
    d2T/dx2 = +-pmf(k)/2 ((k q - (n-k) p)(k q + (n-k) p) + p q (n - 2k)). No further scipy call.
    """
    p, q = special.expit(x), special.expit(-x)  # q from x, not 1 - p: exact near p = 1
    tail, half_point = _midp_tail(d1, total, p, bound)
    sign = 1.0 if bound == "lower" else -1.0
    spread = d1 * q + (total - d1) * p
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # tail 0 far out: no step
        first = sign * half_point * spread / tail
        second = sign * half_point * ((d1 * q - (total - d1) * p) * spread + p * q * (total - 2 * d1)) / tail
        return tail, first, second - first**2


def _wilson_logit(d1, total, a: float, bound: str) -> np.ndarray:
    """Start of the root search: logit of the Wilson score limit, the normal approximation that the
    mid-p limit tracks (no continuity correction, as mid-p has none): typically a few hundredths
    off in logit p, up to 1.4 (3.9 at level 0.998) at the smallest counts, under 1e-3 past 1000."""
    z = special.ndtri(1 - a)
    half_width = z * np.sqrt(d1 * (total - d1) / total + z * z / 4)
    wilson = (d1 + z * z / 2 + (-half_width if bound == "lower" else half_width)) / (total + z * z)
    return np.clip(special.logit(wilson), -59.0, 59.0)


def _halley_step(log_ratio, first, second):
    """Halley's step for log T - log a = 0 (cubic convergence), or Newton's where Halley's
    denominator leaves [1/2, 2]: far from the root, where the curvature term is no guide (and
    where it overflows, which would give a step of 0)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        newton = -log_ratio / first
        denominator = 1 + newton * second / (2 * first)
        return np.where((denominator >= 0.5) & (denominator <= 2), newton / denominator, newton)


def _halley_logit(d1, total, a: float, bound: str):
    """logit p where the mid-p tail crosses a, by a safeguarded Halley iteration (rtsafe-style) on
    log T over logit p, for 1-d arrays of problems at once; and the tail evaluations each took.

    Every evaluation also narrows a bracket [lo, hi] (from [-60, 60], the bisection's) by the
    bisection's own test, so the root never leaves it; a step that would leave it, or that fails
    to halve the previous step, is replaced by the bracket's midpoint. A problem stops after a
    step smaller than 1e-5 s, s = 1 / sqrt(1 + n p q) being the width in logit p over which the
    tail changes by a factor of order 1: Halley's error after a step h is of order h^3 / s^2, here
    1e-15 s, the rounding of the tail itself. Log T rather than T: it is near quadratic in logit p,
    where T falls off like a normal tail. Realistic counts take 2 or 3 evaluations, 2.7 on
    average at level 0.95 (bisection: 55); none of a wide grid more than 4.
    """
    increasing = bound == "lower"
    x = _wilson_logit(d1, total, a, bound)
    lo, hi = np.full(x.size, -60.0), np.full(x.size, 60.0)
    last_step = np.full(x.size, np.inf)
    evaluations = np.zeros(x.size, dtype=int)
    active = np.flatnonzero(np.isfinite(x))
    for _ in range(200):
        if active.size == 0:
            break
        k, n, xa = d1[active], total[active], x[active]
        tail, first, second = _log_tail_slopes(k, n, xa, bound)
        evaluations[active] += 1
        below = (tail < a) if increasing else (tail > a)
        lo_a, hi_a = np.where(below, xa, lo[active]), np.where(below, hi[active], xa)
        with np.errstate(divide="ignore"):
            step = _halley_step(np.log(tail / a), first, second)
        target = xa + step
        inside = (target > lo_a) & (target < hi_a) & (np.abs(step) <= last_step[active] / 2)
        midpoint = (lo_a + hi_a) / 2
        done = np.abs(step) <= 1e-5 / np.sqrt(1 + n * special.expit(xa) * special.expit(-xa))
        new_x = np.where(inside, target, np.where(done, np.clip(target, lo_a, hi_a), midpoint))
        done |= (midpoint == lo_a) | (midpoint == hi_a)  # bracket down to adjacent doubles
        x[active], lo[active], hi[active], last_step[active] = new_x, lo_a, hi_a, np.abs(new_x - xa)
        active = active[~done]
    return x, evaluations


def _bisect_logit(tail, a: float, increasing: bool, size: int):
    """p in (0, 1) where tail(index, p) crosses a, for `size` problems at once, by bisection on
    logit p over [-60, 60] (200 halvings at most); and the halvings each took.

    A problem leaves the loop when a halving changes neither end of its bracket: the next one
    would take the same midpoint and the same decision, so its bracket is final and the result
    is bit for bit what all 200 halvings give. That takes about 55 halvings (the bracket
    reaches the spacing of doubles near the root).
    """
    lo, hi = np.full(size, -60.0), np.full(size, 60.0)
    halvings = np.zeros(size, dtype=int)
    moving = np.arange(size)
    for _ in range(200):
        if moving.size == 0:
            break
        old_lo, old_hi = lo[moving], hi[moving]
        mid = (old_lo + old_hi) / 2
        value = tail(moving, special.expit(mid))
        halvings[moving] += 1
        below = (value < a) if increasing else (value > a)
        new_lo, new_hi = np.where(below, mid, old_lo), np.where(below, old_hi, mid)
        lo[moving], hi[moving] = new_lo, new_hi
        moving = moving[(new_lo != old_lo) | (new_hi != old_hi)]
    return special.expit((lo + hi) / 2), halvings


# Above this p, one double of p moves the ratio p / (1 - p) by 2^-53 / (1 - p) > 7e-15, so the
# limit is a matter of which double the search lands on: there the bisection decides, as it did.
_COARSE_P = 1 - 1 / 64


def _midp_root(d1, total, a: float, bound: str):
    """p where the mid-p tail of d1 ~ Binomial(total, p) crosses a, for 1-d arrays with a finite
    root (d1 > 0 for the lower limit, total > d1 for the upper); and the tail evaluations each took.

    `_halley_logit` everywhere, then `_bisect_logit` again where p > `_COARSE_P` (rare: the first
    count is nearly all of the total). The result agrees with bisection alone (kept in
    tests/trends/test_poisson.py as the reference) within 3e-14 in the rate ratio, except where
    scipy's tail is itself rounded coarser: for the upper limit with 2 <= d1 < 40 binom.cdf is
    boost's finite binomial sum in p and a rounded 1 - p, good to about total x 2^-53, and any
    root of it moves by up to about 1e-17 x total (the bisection's as much: it finds one of the
    crossings of that staircase, this another).
    """
    x, evaluations = _halley_logit(d1, total, a, bound)
    p = special.expit(x)
    coarse = np.flatnonzero(p > _COARSE_P)
    if coarse.size:
        k, n = d1[coarse], total[coarse]
        p[coarse], halvings = _bisect_logit(lambda i, pi: _midp_tail(k[i], n[i], pi, bound)[0], a,
                                            increasing=(bound == "lower"), size=coarse.size)
        evaluations[coarse] += halvings
    return p, evaluations


def rate_ratio_midp_limit(d1, n1, d2, n2, level: float, bound: str):
    """One limit (``bound`` = ``lower`` or ``upper``) of :func:`rate_ratio_midp_ci`, solving
    only that one (each is a root search)."""
    if bound not in ("lower", "upper"):
        raise ValueError(f"bound must be 'lower' or 'upper', got {bound!r}")
    d1, n1, d2, n2 = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (d1, n1, d2, n2)))
    a = _tail(level)
    # Only limits that exist are solved: the lower is 0 when d1 = 0, the upper +inf when d2 = 0.
    exists = (d1 > 0) if bound == "lower" else (d2 > 0)
    p = np.full(d1.shape, 0.0 if bound == "lower" else 1.0)
    p[exists] = _midp_root(d1[exists], (d1 + d2)[exists], a, bound)[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = n2 / n1
        if bound == "lower":
            return _scalar_if_scalar(p / (1 - p) * scale)[0]
        return _scalar_if_scalar(np.where(p < 1, p / (1 - p) * scale, np.inf))[0]


def rate_ratio_midp_ci(d1, n1, d2, n2, level: float = 0.95):
    """Mid-p interval for (d1/n1) / (d2/n2): the interval that inverts the test of
    :func:`rate_ratio_midp_p_value`, so it excludes 1 exactly when that p < 1 - level.

    Conditional on d1 + d2, d1 ~ Binomial(d1 + d2, p), p = n1 RR / (n1 RR + n2). The lower limit
    for p solves P(X > d1) + P(X = d1)/2 = a/2 and the upper P(X < d1) + P(X = d1)/2 = a/2
    (both tails are monotone in p), each by a safeguarded Halley iteration on logit p from the
    Wilson limit with closed-form derivatives of the tail (`_halley_logit`: about 3 evaluations of
    the tail where bisection to double precision took 55; both limits of 2,048 rows in 5 ms, 79 ms
    by bisection), to the bisection's root within 3e-14 (see `_midp_root`); mapped to RR as the
    exact interval is. Lower 0 when d1 = 0, upper +inf when d2 = 0.
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
