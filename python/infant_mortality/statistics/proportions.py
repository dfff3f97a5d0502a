"""Exact (Clopper-Pearson) interval for a proportion: the share of infant deaths from a group of
causes (docs/methods/causes.md).

With x of n deaths in the group and tail a = (1 - level) / 2, the limits are the a and 1 - a
quantiles of beta distributions, found by inverting the regularised incomplete beta function:

    lower = I^-1(a; x, n - x + 1)      (0 when x = 0)
    upper = I^-1(1 - a; x + 1, n - x)  (1 when x = n)

Vectorised over numpy arrays (scalars work too).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from infant_mortality.statistics.poisson import _scalar_if_scalar, _tail


def clopper_pearson(successes, trials, level: float = 0.95):
    """(lower, upper) of the exact binomial interval for successes out of trials; NaN for 0 trials."""
    x = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    if np.any((x < 0) | (x > n)) or np.any(x != np.floor(x)) or np.any(n != np.floor(n)):
        raise ValueError("successes must be whole numbers between 0 and the trials")
    a = _tail(level)
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(x > 0, special.betaincinv(np.maximum(x, 1), n - x + 1, a), 0.0)
        upper = np.where(x < n, special.betaincinv(x + 1, np.maximum(n - x, 1), 1 - a), 1.0)
    empty = n == 0
    return _scalar_if_scalar(np.where(empty, np.nan, lower), np.where(empty, np.nan, upper))
