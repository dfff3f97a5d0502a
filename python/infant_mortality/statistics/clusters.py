"""Where the clusters are: local Moran's I of the empirical-Bayes-standardised rates
(docs/methods/maps.md, "BYM2 smoothing and spatial clusters").

* ``eb_standardised_rates``: Assunção and Reis (1999, *Stat Med* 18:2147-2162), as PySAL's
  ``esda.smoothing.assuncao_rate``: z_i = (r_i - b) / √v_i with b = Σd/Σn,
  s² = Σ n_i (r_i - b)² / Σn, a = s² - b / (Σn / k), v_i = a + b / n_i, or b / n_i where that
  is negative. Unlike Marshall's smoothing a is not floored at 0 (esda's choice, kept).
* ``local_moran``: Anselin's (1995) local I_i = z_i Σ_j w_ij z_j / (Σ z² / k) on the row-standardised
  neighbour weights, with conditional-permutation pseudo p-values (each commune's value held,
  the others' permuted over its neighbours; one-sided in the direction observed, (m + 1) / (P + 1))
  as PySAL's ``esda.Moran_Local`` computes them (to the bit), with a fixed seed, so the build is
  reproducible.
* ``two_sided``: that p doubled (capped at 1): a type is called in either direction.
* ``benjamini_hochberg``: the false discovery rate adjustment of the two-sided p-values (q-values).
* ``cluster_types``: high-high / low-low (a commune high or low among neighbours like it),
  high-low / low-high (an outlier), where q <= alpha; otherwise not significant. A commune
  without neighbours has no local I: "no neighbours".
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import sparse

from infant_mortality.statistics import smoothing

PERMUTATIONS = 999
SEED = 46  # the number: any fixed seed makes the pseudo p-values reproducible
QUADRANTS = {1: "high-high", 2: "low-high", 3: "low-low", 4: "high-low"}  # esda's q
NOT_SIGNIFICANT = "not significant"
NO_NEIGHBOURS = "no neighbours"


def eb_standardised_rates(deaths, births) -> np.ndarray:
    """Assunção-Reis empirical Bayes standardised rates (``esda.smoothing.assuncao_rate``)."""
    d = np.asarray(deaths, dtype=float)
    n = np.asarray(births, dtype=float)
    if d.shape != n.shape or d.ndim != 1 or len(d) == 0 or (n <= 0).any() or (d < 0).any():
        raise ValueError("deaths (>= 0) and births (> 0) must be 1-d arrays of the same, non-zero length")
    r = d / n
    b = d.sum() / n.sum()
    s2 = np.sum(n * (r - b) ** 2) / n.sum()
    a = s2 - b / (n.sum() / len(n))
    v = a + b / n
    v = np.where(v < 0, b / n, v)
    if not (v > 0).all():
        raise ValueError("no deaths anywhere: the standardised rates are undefined")
    return (r - b) / np.sqrt(v)


def benjamini_hochberg(p) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values): min over k >= rank of p_(k) m / k, capped at 1."""
    p = np.asarray(p, dtype=float)
    if p.ndim != 1 or ((p < 0) | (p > 1)).any():
        raise ValueError("p-values must be a 1-d array in [0, 1]")
    m = len(p)
    if m == 0:
        return p.copy()
    order = np.argsort(p)
    # p * (m / k), not p * m / k: m / m is exactly 1, so the largest p keeps its value (p * m / m
    # can round below p), and every factor is >= 1, so no q-value falls below its own p.
    scaled = p[order] * (m / np.arange(1, m + 1))
    adjusted = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    out = np.empty(m)
    out[order] = adjusted
    return out


def local_moran(values, neighbours: list[list[int]], permutations: int = PERMUTATIONS, seed: int = SEED):
    """(I_i, pseudo p_i, quadrant) of every area; neighbours[i] lists positions. An area without
    neighbours gets NaN, NaN, 0.

    The computation of PySAL's ``esda.Moran_Local(values, w, transformation="r",
    permutations=permutations, seed=seed)`` without numba, the same numpy operations in the same
    order, so the same numbers to the bit (tests/maps/test_clusters.py compares them on graphs
    with islands and ties), without importing PySAL (about 2 s a build) and with the whole
    randomisation as one array operation per area:

    * z = (y - ȳ) / sd(y), the lag l_i = Σ_j z_j / k_i over the k_i neighbours, I_i = (n-1) z_i l_i / Σz²;
    * quadrant 1 (z > 0, l > 0), 2 (z ≤ 0, l > 0), 3 (z ≤ 0, l ≤ 0), 4 (z > 0, l ≤ 0);
    * draws: the legacy generator seeded once, each permutation k_max positions drawn without
      replacement from the n - 1 other areas; area i uses the first k_i of every draw;
    * p: m draws at least I_i, folded to the smaller tail, (m + 1) / (P + 1).
    """
    values = np.asarray(values, dtype=float)
    n = len(values)
    if len(neighbours) != n:
        raise ValueError(f"neighbours has {len(neighbours)} entries for {n} areas")
    around = [sorted(set(a) - {i}) for i, a in enumerate(neighbours)]
    size = np.array([len(a) for a in around], dtype=np.int64)
    island = size == 0
    z = values - values.mean()
    with np.errstate(all="ignore"):
        z /= values.std()
    rows = np.repeat(np.arange(n), size)
    columns = np.concatenate(around).astype(np.int64) if size.sum() else np.zeros(0, np.int64)
    with np.errstate(divide="ignore"):
        weight = 1.0 / size.astype(float)
    row_standardised = sparse.csr_matrix((weight[rows], (rows, columns)), shape=(n, n))
    lag = row_standardised @ z
    sum_of_squares = (z * z).sum()
    moran_i = (n - 1) * z * lag / sum_of_squares
    quadrant = np.where(z > 0, np.where(lag > 0, 1, 4), np.where(lag > 0, 2, 3))
    p = np.full(n, np.nan)
    if size.max(initial=0) > 0:
        draws = _draws(int(size.max()), n, permutations, seed)
        scaling = (n - 1) / sum_of_squares
        for i in np.flatnonzero(~island):
            others = np.delete(z, i)
            drawn = others[draws[:, :size[i]].ravel()].reshape(-1, size[i])
            # esda's expression, its zero self-weight term included, so the rounding is its own.
            simulated = z[i] * (drawn @ np.full(size[i], weight[i]) + 0.0 * z[i]) * scaling
            larger = int((simulated >= moran_i[i]).sum())
            larger = min(larger, permutations - larger)
            p[i] = (larger + 1.0) / (permutations + 1.0)
    return (np.where(island, np.nan, moran_i), p, np.where(island, 0, quadrant))


@lru_cache(maxsize=8)
def _draws(width: int, n: int, permutations: int, seed: int) -> np.ndarray:
    """esda's ``vec_permutations`` without numba: per permutation, ``width`` of the n - 1 other
    positions without replacement, from the legacy generator seeded with ``seed``. They depend on
    these four numbers only, so the indicators and periods over the same communes share one set
    (999 Python-level draws took 20 ms a map, 1.5 s of the national build's 77); read-only."""
    generator = np.random.RandomState(seed)
    draws = np.array([generator.choice(n - 1, size=width, replace=False) for _ in range(permutations)],
                     dtype=np.int64).reshape(permutations, width)
    draws.flags.writeable = False
    return draws


def two_sided(p_directed) -> np.ndarray:
    """The two-sided pseudo p-value, min(1, 2 p), of esda's p, which counts the permutations as
    extreme as the observed I in the direction observed only. A type is called in either
    direction (high-high or low-low, high-low or low-high), so the question is two-sided: under
    no structure P(p <= t) is about 2t for esda's p (measured: 0.20 at t = 0.1, tests/maps/
    test_cluster_calibration.py), t for this one, which is what Benjamini-Hochberg assumes."""
    return np.minimum(1.0, 2.0 * np.asarray(p_directed, dtype=float))


def cluster_types(quadrant, q_values, alpha: float) -> np.ndarray:
    """The cluster type of each area from esda's quadrant (1 HH, 2 LH, 3 LL, 4 HL; 0 no
    neighbours) and its FDR-adjusted p-value."""
    quadrant = np.asarray(quadrant)
    q_values = np.asarray(q_values, dtype=float)
    out = np.full(len(quadrant), NOT_SIGNIFICANT, dtype=object)
    significant = np.isfinite(q_values) & (q_values <= alpha)
    for code, name in QUADRANTS.items():
        out[significant & (quadrant == code)] = name
    out[quadrant == 0] = NO_NEIGHBOURS
    return out


def spatial_clusters(deaths, births, neighbours: list[list[int]], alpha: float,
                     permutations: int = PERMUTATIONS, seed: int = SEED) -> dict[str, np.ndarray]:
    """Everything for one indicator and period: standardised rate, local I, pseudo p, q, type."""
    z = eb_standardised_rates(deaths, births)
    moran_i, p_directed, quadrant = local_moran(z, neighbours, permutations, seed)
    p = two_sided(p_directed)
    q = np.full(len(z), np.nan)
    tested = np.isfinite(p)
    q[tested] = benjamini_hochberg(p[tested])
    return {"eb_standardised_rate": z, "local_moran_i": moran_i, "p_value": p, "q_value": q,
            "cluster_type": cluster_types(quadrant, q, alpha)}


GROUP = smoothing.GROUP
OUTPUT_DTYPES = {
    **smoothing.COMMUNE_PERIOD_DTYPES,
    "eb_standardised_rate": "Float64",
    "local_moran_i": "Float64",
    "p_value": "Float64",
    "q_value": "Float64",
    "cluster_type": "string",
    "note": "string",
}


def commune_clusters(pooled, neighbours, alpha: float, permutations: int = PERMUTATIONS):
    """Rows of ``fct_spatial_clusters``: per indicator and period, over every commune of the build
    with a rate (the national graph, as the BYM2 fit), from the pooled counts (commune_code,
    commune_name, region_code, indicator, period_start, period_end, deaths, live_births) and the
    neighbour pairs (commune_code, neighbour_code). A commune without a rate has null figures and
    a note; one none of whose neighbours has a rate is "no neighbours"."""
    import pandas as pd

    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), not {alpha}")
    around: dict[str, set[str]] = {}
    for code, other in zip(neighbours["commune_code"], neighbours["neighbour_code"]):
        around.setdefault(code, set()).add(other)
        around.setdefault(other, set()).add(code)
    frames = []
    for _, group in pooled.groupby(GROUP, sort=True):
        # The permutations are drawn in row order: sort, so the p-values do not depend on it.
        group = group.sort_values("commune_code").reset_index(drop=True)
        deaths = pd.to_numeric(group["deaths"]).astype(float).to_numpy()
        births = pd.to_numeric(group["live_births"]).astype(float).to_numpy()
        has_rate = np.isfinite(deaths) & np.isfinite(births) & (births > 0)
        m = len(group)
        figures = {name: np.full(m, np.nan) for name in ("eb_standardised_rate", "local_moran_i", "p_value", "q_value")}
        kind = np.full(m, None, dtype=object)
        notes = np.full(m, None, dtype=object)
        notes[~has_rate] = np.where(births[~has_rate] == 0, "no rate: no live births in the period",
                                    "no rate: counts unavailable")
        rows = np.flatnonzero(has_rate)
        if len(rows) and deaths[rows].sum() > 0:
            codes = group["commune_code"].to_numpy()[rows]
            position = {code: p for p, code in enumerate(codes)}
            lists = [[position[c] for c in around.get(code, ()) if c in position] for code in codes]
            result = spatial_clusters(deaths[rows], births[rows], lists, alpha, permutations)
            for name in figures:
                figures[name][rows] = result[name]
            kind[rows] = result["cluster_type"]
        elif len(rows):
            notes[rows] = "no deaths in any commune: standardised rates undefined"
        frames.append(pd.DataFrame({
            **{c: group[c] for c in ["commune_code", "commune_name", "region_code", *GROUP, "deaths", "live_births"]},
            **figures, "cluster_type": kind, "note": notes}))
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(OUTPUT_DTYPES))
    out = out[list(OUTPUT_DTYPES)].astype(OUTPUT_DTYPES)
    return out.sort_values(["region_code", *GROUP, "commune_code"], ignore_index=True)
