"""Empirical Bayes smoothing of commune rates (docs/methods/maps.md, "Smoothed rates").

Rates are in deaths per live birth here; the mart reports them per the indicator's multiplier (1000).

* ``eb_global``: Marshall (1991), as R ``spdep::EBest``, over a set of k areas with deaths d_i
  and births n_i (r_i = d_i / n_i):
  b = Σd/Σn; s² = Σ n_i (r_i - b)² / Σn; a = max(0, s² - b / (Σn / k));
  shrinkage C_i = a / (a + b / n_i); EB_i = b + C_i (r_i - b).
* ``eb_local``: the same moments over each area and its neighbours, as R
  ``spdep::EBlocal(..., geoda = TRUE)``, GeoDa and PySAL's ``Spatial_Empirical_Bayes`` (spdep's
  default ``geoda = FALSE`` centres each neighbour on the neighbour's own local mean instead).
* ``prob_exceeds``: the Poisson-gamma model behind the global estimate (prior Gamma with mean b
  and variance a; d_i ~ Poisson(n_i θ_i)) gives the posterior θ_i ~ Gamma(shape = b²/a + d_i,
  rate = b/a + n_i), whose mean is EB_i; the probability that θ_i exceeds a threshold is its
  upper tail. Undefined (NaN) when a = 0, where the prior is a point mass.
* ``smooth_commune_rates`` builds the mart rows from the pooled counts of
  ``fct_commune_vs_region`` and the neighbours of ``dim_commune_neighbours``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

GROUP = ["indicator", "period_start", "period_end"]
# The keys and pooled counts every commune-period mart of the maps room starts with (smoothed,
# BYM2 and cluster rows alike).
COMMUNE_PERIOD_DTYPES = {
    "commune_code": "string",
    "commune_name": "string",
    "region_code": "string",
    "indicator": "string",
    "period_start": "Int64",
    "period_end": "Int64",
    "deaths": "Int64",
    "live_births": "Int64",
}
OUTPUT_DTYPES = {
    **COMMUNE_PERIOD_DTYPES,
    "crude_rate_per_1000": "Float64",
    "eb_global_rate_per_1000": "Float64",
    "eb_local_rate_per_1000": "Float64",
    "shrinkage": "Float64",
    "prob_exceeds_region": "Float64",
    "note": "string",
}


@dataclass(frozen=True)
class GlobalEB:
    b: float  # prior mean: the pooled rate Σd/Σn
    a: float  # prior variance, method of moments, floored at 0
    shrinkage: np.ndarray  # C_i
    estimate: np.ndarray  # EB_i


def _check_counts(deaths, births) -> tuple[np.ndarray, np.ndarray]:
    d = np.asarray(deaths, dtype=float)
    n = np.asarray(births, dtype=float)
    if d.shape != n.shape or d.ndim != 1 or len(d) == 0:
        raise ValueError("deaths and births must be 1-d arrays of the same, non-zero length")
    if not (np.isfinite(d).all() and np.isfinite(n).all()):
        raise ValueError("deaths and births must be finite (no missing counts)")
    if (d < 0).any():
        raise ValueError(f"negative deaths at positions {np.flatnonzero(d < 0).tolist()}")
    if (n <= 0).any():
        raise ValueError(f"births must be > 0; not at positions {np.flatnonzero(n <= 0).tolist()}")
    return d, n


def moment_estimates(d: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(b, a) of Marshall's estimator over the areas on the last axis of d (births n): one pair
    per row when d holds many simulated sets of deaths for the same areas (a bootstrap)."""
    total_n = n.sum()
    b = d.sum(axis=-1) / total_n
    s2 = np.sum(n * (d / n - b[..., None]) ** 2, axis=-1) / total_n
    return b, np.maximum(0.0, s2 - b / (total_n / n.shape[-1]))


def _moments(d: np.ndarray, n: np.ndarray) -> tuple[float, float]:
    """(b, a) of Marshall's estimator over the areas d, n."""
    b, a = moment_estimates(d, n)
    return float(b), float(a)


def _shrink(a, b, n):
    """C = a / (a + b / n); 0 when a = b = 0 (no deaths anywhere: nothing to shrink towards)."""
    denominator = a + b / n
    return np.where(denominator > 0, a / np.where(denominator > 0, denominator, 1.0), 0.0)


def eb_global(deaths, births) -> GlobalEB:
    """Marshall's global empirical Bayes estimate of every area's rate (``spdep::EBest``)."""
    d, n = _check_counts(deaths, births)
    b, a = _moments(d, n)
    shrinkage = _shrink(a, b, n)
    return GlobalEB(b=b, a=a, shrinkage=shrinkage, estimate=b + shrinkage * (d / n - b))


def eb_local(deaths, births, neighbours: list[list[int]]) -> np.ndarray:
    """Local empirical Bayes estimate of every area (``spdep::EBlocal(geoda = TRUE)``): the
    global moments over area i and its neighbours ``neighbours[i]`` (positions; listing i itself
    changes nothing). An area without neighbours keeps its crude rate (over one area a = 0 and
    b = r_i); ``smooth_commune_rates`` gives such islands the global estimate instead.
    """
    d, n = _check_counts(deaths, births)
    if len(neighbours) != len(d):
        raise ValueError(f"neighbours has {len(neighbours)} entries for {len(d)} areas")
    return np.array([_local_estimate(d, n, i, around) for i, around in enumerate(neighbours)])


def _local_estimate(d: np.ndarray, n: np.ndarray, i: int, around) -> float:
    members = np.array(sorted({i, *around}), dtype=int)
    if members.min() < 0 or members.max() >= len(d):
        raise ValueError(f"area {i}: neighbour position out of range in {list(around)}")
    b, a = _moments(d[members], n[members])
    return float(b + _shrink(a, b, n[i]) * (d[i] / n[i] - b))


def prob_exceeds(deaths, births, a: float, b: float, threshold) -> np.ndarray:
    """P(θ_i > threshold) under the posterior Gamma(b²/a + d_i, rate b/a + n_i); NaN if a = 0."""
    d, n = _check_counts(deaths, births)
    threshold = np.broadcast_to(np.asarray(threshold, dtype=float), d.shape)
    if not a > 0:
        return np.full(len(d), np.nan)
    return stats.gamma.sf(threshold, b * b / a + d, scale=1.0 / (b / a + n))


def check_pooled_counts(pooled) -> None:
    """The pooled counts every maps-room statistic reads (EB, BYM2): the columns it needs, and one
    row per commune, indicator and period."""
    required = {"commune_code", "commune_name", "region_code", *GROUP, "multiplier", "deaths", "live_births",
                "region_rate_per_1000"}
    missing = required - set(pooled.columns)
    if missing:
        raise ValueError(f"pooled counts lack columns: {sorted(missing)}")
    keys = ["commune_code", *GROUP]
    repeated = pooled[pooled.duplicated(keys, keep=False)]
    if not repeated.empty:
        raise ValueError(f"pooled counts repeat commune/indicator/period: {repeated[keys].head(5).to_dict('records')}")


def smooth_commune_rates(pooled: pd.DataFrame, neighbours: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``fct_smoothed_rates`` from the pooled counts and the neighbour pairs.

    ``pooled``: one row per commune, indicator and period with commune_code, commune_name,
    region_code, indicator, multiplier (the rate is per this many live births), period_start,
    period_end, deaths, live_births and region_rate_per_1000 (as in ``fct_commune_vs_region``). ``neighbours``: commune_code,
    neighbour_code (both directions). Global EB is computed within each region, indicator and
    period; local EB over each commune and those of its neighbours that have a rate for the same
    indicator and period (in any region). A commune without a rate (no live births, or no count)
    gets null estimates and a note; an island, or a commune none of whose neighbours has a rate,
    gets the global estimate as its local one, with a note.
    """
    check_pooled_counts(pooled)
    negative = pooled[pooled["deaths"] < 0]
    if not negative.empty:
        raise ValueError(f"negative pooled deaths for commune(s) {sorted(negative['commune_code'].unique())}")

    around: dict[str, list[str]] = {}
    for code, neighbour in zip(neighbours["commune_code"], neighbours["neighbour_code"]):
        around.setdefault(code, []).append(neighbour)

    frames = []
    for _, period in pooled.groupby(GROUP, sort=True):
        frames.append(_smooth_one_period(period.reset_index(drop=True), around))
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(OUTPUT_DTYPES))
    out = out[list(OUTPUT_DTYPES)].astype(OUTPUT_DTYPES)
    return out.sort_values(["region_code", *GROUP, "commune_code"], ignore_index=True)


def _smooth_one_period(period: pd.DataFrame, around: dict[str, list[str]]) -> pd.DataFrame:
    deaths = pd.to_numeric(period["deaths"]).astype(float).to_numpy()
    births = pd.to_numeric(period["live_births"]).astype(float).to_numpy()
    has_rate = np.isfinite(deaths) & np.isfinite(births) & (births > 0)
    multiplier = pd.to_numeric(period["multiplier"]).astype(float).to_numpy()
    notes: list[list[str]] = [[] for _ in range(len(period))]
    crude = np.full(len(period), np.nan)
    crude[has_rate] = deaths[has_rate] / births[has_rate]
    global_eb = np.full(len(period), np.nan)
    shrinkage = np.full(len(period), np.nan)
    exceeds = np.full(len(period), np.nan)
    local_eb = np.full(len(period), np.nan)

    for i in np.flatnonzero(~has_rate):
        notes[i].append("no rate: no live births in the period" if births[i] == 0 else "no rate: counts unavailable")

    for region, rows in period.groupby("region_code").groups.items():
        rows = np.asarray(rows)
        rows = rows[has_rate[rows]]
        if len(rows) == 0:
            continue
        fit = eb_global(deaths[rows], births[rows])
        global_eb[rows] = fit.estimate
        shrinkage[rows] = fit.shrinkage
        if fit.a > 0:
            threshold = (pd.to_numeric(period["region_rate_per_1000"]).astype(float).to_numpy()[rows]
                         / multiplier[rows])
            exceeds[rows] = prob_exceeds(deaths[rows], births[rows], fit.a, fit.b, threshold)
        else:
            for i in rows:
                notes[i].append(
                    f"a = 0 in region {region}: the communes' rates vary no more than Poisson noise, "
                    "so every commune is shrunk fully to the region's rate and prob_exceeds_region is undefined"
                )

    codes = period["commune_code"].tolist()  # one conversion, not a pandas lookup per commune
    position = {code: i for i, code in enumerate(codes)}
    for i in np.flatnonzero(has_rate):
        code = codes[i]
        with_rate = [position[c] for c in around.get(code, []) if c in position and has_rate[position[c]]]
        if not around.get(code):
            local_eb[i] = global_eb[i]
            notes[i].append("no neighbours (island or no polygon): eb_local_rate_per_1000 is the global estimate")
        elif not with_rate:
            local_eb[i] = global_eb[i]
            notes[i].append("no neighbour has a rate for this indicator and period: eb_local_rate_per_1000 is the global estimate")
        else:
            local_eb[i] = _local_estimate(deaths, births, i, with_rate)

    return pd.DataFrame({
        "commune_code": period["commune_code"],
        "commune_name": period["commune_name"],
        "region_code": period["region_code"],
        "indicator": period["indicator"],
        "period_start": period["period_start"],
        "period_end": period["period_end"],
        "deaths": period["deaths"],
        "live_births": period["live_births"],
        "crude_rate_per_1000": crude * multiplier,
        "eb_global_rate_per_1000": global_eb * multiplier,
        "eb_local_rate_per_1000": local_eb * multiplier,
        "shrinkage": shrinkage,
        "prob_exceeds_region": exceeds,
        "note": ["; ".join(n) if n else None for n in notes],
    })
