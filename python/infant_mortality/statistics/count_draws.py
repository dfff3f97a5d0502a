"""Deaths drawn from the Poisson-gamma model by inverting their distribution, compiled with numba.

The parametric bootstrap of the geographic inequality (``geographic_inequality``) draws, for every
commune of an area and every replicate, a true rate theta ~ Gamma(mean b, variance a) and deaths
~ Poisson(n theta). Marginally those deaths follow a negative binomial with mean n b and shape
b^2 / a (a Poisson with mean n b when a = 0), so one uniform per draw suffices: the draw is the
first count whose cumulative probability exceeds it. numpy's two draws (gamma, then Poisson) took
51 ns a commune and replicate, 12 of the national build's 120 s of CPU; the inversion takes
8 ns, its uniform included (the yearly draws of the national build, BENCHMARKS.md).

Each commune's probabilities are built once by the ratio of consecutive terms, from the mode
outwards until a term falls below 1e-18 of the mode's, and normalised by their sum: no
factorial or gamma function is evaluated, so means of thousands (a national bootstrap at 8 times
today's births) and shapes of 1e12 (a variance near 0, practically Poisson) are as exact as small
ones. The probability left out beyond the table is below 1e-16. A guide table (Chen and Asau
1974) starts each search within a step or two of its answer.
"""

from __future__ import annotations

import numpy as np
from numba import njit

TAIL = 1e-18  # a term this far below the mode's ends the table


@njit("float64[::1](float64, float64)", cache=True, nogil=True)
def probabilities(mean: float, shape: float) -> np.ndarray:
    """Unnormalised probabilities of 0, 1, ... of a negative binomial with this mean and shape
    (shape 0: a Poisson), the mode's term 1, up to the last term at or above TAIL; leading terms
    below TAIL are returned as 0 (they are never drawn)."""
    if mean <= 0.0:
        return np.ones(1)
    if shape > 0.0:
        q = mean / (shape + mean)  # the failure probability; the ratio of terms x+1 : x is (x + shape) q / (x + 1)
        mode = int(np.floor((shape - 1.0) * mean / shape)) if shape > 1.0 else 0
    else:
        q = 0.0
        mode = int(np.floor(mean))
    low = mode
    term = 1.0
    while low > 0 and term >= TAIL:  # downwards from the mode: where the table starts
        term *= low / ((low - 1.0 + shape) * q) if shape > 0.0 else low / mean
        low -= 1
    high = mode
    term = 1.0
    while term >= TAIL or high <= mean:  # upwards from the mode: where it ends
        term *= (high + shape) * q / (high + 1.0) if shape > 0.0 else mean / (high + 1.0)
        high += 1
    table = np.zeros(high + 1)
    table[mode] = 1.0
    for x in range(mode, low, -1):
        table[x - 1] = table[x] * (x / ((x - 1.0 + shape) * q) if shape > 0.0 else x / mean)
    for x in range(mode, high):
        table[x + 1] = table[x] * ((x + shape) * q / (x + 1.0) if shape > 0.0 else mean / (x + 1.0))
    return table


@njit("float64[:, ::1](float64[::1], float64, float64, float64[:, ::1])", cache=True, nogil=True)
def poisson_gamma_draws(births: np.ndarray, rate: float, variance: float, uniforms: np.ndarray) -> np.ndarray:
    """Deaths of every commune (births[i]) in every replicate, drawn from the Poisson-gamma model
    with true rates of mean ``rate`` and variance ``variance`` (0: every true rate is ``rate``):
    ``uniforms[i, r]`` in [0, 1) becomes the draw of commune i in replicate r, returned at [r, i]
    (a replicate a row, as ``smoothing.moment_estimates`` reads them)."""
    communes, replicates = uniforms.shape
    out = np.empty((replicates, communes))
    shape = rate * rate / variance if variance > 0.0 else 0.0
    if not np.isfinite(shape):  # a variance so small that b^2 / a overflows: the Poisson, its limit
        shape = 0.0
    for i in range(communes):
        cumulative = np.cumsum(probabilities(births[i] * rate, shape))
        size = len(cumulative)
        total = cumulative[size - 1]
        guide = np.empty(size, np.int64)  # guide[g]: the first count whose cumulative sum exceeds g / size of the total
        count = 0
        for g in range(size):
            while count < size - 1 and cumulative[count] <= g / size * total:
                count += 1
            guide[g] = count
        for r in range(replicates):
            target = uniforms[i, r] * total
            count = guide[min(int(uniforms[i, r] * size), size - 1)]
            while count < size - 1 and cumulative[count] <= target:
                count += 1
            out[r, i] = count
    return out
