"""The socio-economic gradient of commune rates, measured as health-equity tools measure it.

``docs/methods/inequity.md`` is the contract. For one *group* (an area -- a region or the
country --, an indicator, a period and a stratifier) the input is one row per commune with its
deaths d_i, live births n_i and stratifier value v_i (higher = more deprived):

* :func:`rank_communes` orders the communes from most to least deprived (v descending, ties by
  commune code), gives each its ridit x_i = (births of the communes before it + n_i / 2) / N
  and its quintile q = 1 + floor(5 x) (q = 1 most deprived, q = 5 least deprived). Communes
  without live births or without a value are kept, flagged and counted, never ranked.
* :func:`gap_measures` -- D, R, PAR, PAF and avoidable deaths from the pooled counts of
  quintile 1, quintile 5 and the whole area, with Wald intervals from the Poisson variance of
  each count (groups independent; the overlap of quintile 5 with the area is accounted for).
* :func:`poisson_gradient` -- log mu_i = log n_i + a + b x_i, the Poisson GLM (Newton-Raphson), with
  quasi-Poisson standard errors (Pearson chi2 / df, never below 1); :func:`sii_rii` turns it
  into SII = (e^a - e^(a+b)) * multiplier and RII = e^(-b) with delta-method / log-scale intervals.
* :func:`concentration_index` -- C = 2 sum(w_i r_i x_i) / mu - 1, with the standard error of
  the convenient regression (Kakwani, Wagstaff & van Doorslaer 1997) on grouped data, births
  as weights (O'Donnell et al. 2008, ch. 8; WHO ``healthequal::rci``).
* :func:`benchmark_pairs` -- each commune beside the lowest-rate commune of its region with at
  least ``min_deaths`` deaths, or a pooled list of communes (the comparison itself is SQL's:
  fct_commune_vs_benchmark).
* :func:`gap_trends` -- the trend of the yearly log10(RII) (fct_trends' shell,
  :func:`infant_mortality.statistics.trends.fit_series_trends`) and whether the gap widened, narrowed or
  held.

The drivers (:func:`rank_communes`, :func:`quintile_rates`, :func:`inequality_measures`)
apply them to long frames (the measures of every group at once, by the same array code the
one-group functions run with one group); the dbt Python models only call them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special, stats

from infant_mortality.statistics.poisson import poisson_ci
from infant_mortality.statistics.trends import fit_series_trends

Z95 = float(stats.norm.ppf(0.975))
N_QUINTILES = 5

GROUP_KEYS = ["area_level", "area_code", "indicator", "period_start", "period_end", "stratifier"]
COMMUNE_COLUMNS = ["commune_code", "deaths", "live_births", "value", "higher_is_more_deprived"]
# Optional: a commune's signed counts in the area's years without a rate of its own, which enter
# the area's (and so the quintiles') sums but not the commune-level models (docs/methods/core.md, "One rule for every aggregate of communes").
UNPUBLISHED_COLUMNS = ["unpublished_deaths", "unpublished_live_births"]

MEASURES = ("D", "R", "PAR", "PAF", "avoidable_deaths", "SII", "RII", "CIX",
            "gradient_a", "gradient_b")

CI_METHODS = {
    "D": "Wald, Poisson variance of each quintile's deaths (quintiles independent)",
    "R": "log scale, variance 1/d1 + 1/d5 (Poisson, quintiles independent)",
    "PAR": "Wald, Poisson variance of the deaths of quintile 5 and of the rest of the area",
    "PAF": "log scale of rate(q5)/rate(area), variance 1/d5 - 1/D (quintile 5 is part of the area)",
    "avoidable_deaths": "PAR interval times live births / the rate's multiplier",
    "SII": "delta method on (a, b), quasi-Poisson covariance",
    "RII": "exp(-b -/+ z se(b)), quasi-Poisson se",
    "CIX": "convenient regression on grouped data, births as weights (Kakwani, Wagstaff & "
           "van Doorslaer 1997; O'Donnell et al. 2008)",
    "gradient_a": "Wald, quasi-Poisson se",
    "gradient_b": "Wald, quasi-Poisson se",
}


# --------------------------------------------------------------------------------------------
# Ranking: ridits and quintiles
# --------------------------------------------------------------------------------------------


def quintile_of_ridit(ridit):
    """q = 1 + floor(5 x), capped at 5 (x = 1 would otherwise give 6)."""
    x = np.asarray(ridit, dtype=float)
    if np.any(~np.isfinite(x)) or np.any((x < 0) | (x > 1)):
        raise ValueError("a ridit must lie in [0, 1]")
    q = np.minimum(1 + np.floor(N_QUINTILES * x), N_QUINTILES).astype(int)
    return q[()] if q.ndim == 0 else q


def _check_communes(frame: pd.DataFrame, keys: list[str]) -> None:
    missing = [c for c in keys + COMMUNE_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"commune rows are missing columns {missing}")
    if frame.duplicated(keys + ["commune_code"]).any():
        dup = frame.loc[frame.duplicated(keys + ["commune_code"], keep=False), keys + ["commune_code"]]
        raise ValueError(f"commune listed twice in one group: {dup.iloc[0].to_dict()}")
    deaths = pd.to_numeric(frame["deaths"])
    births = pd.to_numeric(frame["live_births"])
    bad = (deaths < 0) | (births < 0) | (births.gt(0) & deaths.isna())
    if "unpublished_live_births" in frame.columns:
        bad |= pd.to_numeric(frame["unpublished_live_births"]) < 0
    if bad.any():
        row = frame.loc[bad].iloc[0]
        raise ValueError(
            f"commune {row['commune_code']} has deaths={row['deaths']}, "
            f"live_births={row['live_births']} in {row[keys].to_dict()}: counts must be >= 0, "
            "and deaths known whenever there are births")


def rank_communes(communes: pd.DataFrame, keys: list[str] = GROUP_KEYS) -> pd.DataFrame:
    """Ridit and quintile of every commune within each group of ``keys``.

    Input: ``keys`` + commune_code, deaths, live_births, value (NaN = no value),
    higher_is_more_deprived (the stratifier's direction, seed `stratifiers`: False ranks the
    lowest value first), optionally :data:`UNPUBLISHED_COLUMNS`. The ridit counts all the commune's births in the area's count
    (published + unpublished). Output: the input rows plus ``exclusion_reason``
    (``no_live_births`` -- neither births nor deaths in the period --, ``no_value`` -- no stratifier value
    --, or None when ranked), ``deprivation_rank`` (1 = most deprived), ``births_before``,
    ``ridit`` and ``quintile`` (null unless ranked).
    """
    _check_communes(communes, keys)
    out = communes.copy()
    deaths, births = area_counts(out)
    value = pd.to_numeric(out["value"]).astype(float)
    # A commune with deaths but no births in the area's count (Rio Verde 2016: 3 and 0) is
    # ranked with zero width, so that its deaths stay in its quintile's sum.
    counted = (births > 0) | (deaths.fillna(0) != 0)
    reason = np.where(~counted, "no_live_births", np.where(value.isna(), "no_value", None))
    out["exclusion_reason"] = pd.Series(reason, index=out.index, dtype="string")
    ranked = out[out["exclusion_reason"].isna()].copy()
    ranked["_births"] = births[ranked.index]
    # Most deprived first: the highest value, or the lowest when lower is worse.
    higher_is_worse = out["higher_is_more_deprived"].astype(bool)
    ranked["_value"] = value[ranked.index].where(higher_is_worse[ranked.index], -value[ranked.index])
    ranked = ranked.sort_values(keys + ["_value", "commune_code"],
                                ascending=[True] * len(keys) + [False, True], kind="mergesort")
    grouped = ranked.groupby(keys, sort=False, dropna=False)
    total = grouped["_births"].transform("sum")
    before = grouped["_births"].cumsum() - ranked["_births"]
    ridit = (before + ranked["_births"] / 2.0) / total
    ranked["deprivation_rank"] = grouped.cumcount() + 1
    ranked["births_before"] = before
    ranked["ridit"] = ridit
    ranked["quintile"] = quintile_of_ridit(ridit.to_numpy()) if len(ranked) else []
    out = out.join(ranked[["deprivation_rank", "births_before", "ridit", "quintile"]])
    out["deprivation_rank"] = out["deprivation_rank"].astype("Int64")
    out["births_before"] = out["births_before"].astype("Int64")
    out["quintile"] = out["quintile"].astype("Int64")
    return out


# --------------------------------------------------------------------------------------------
# Measures of groups. Each rule below takes the communes of many groups at once (`_Groups`:
# the group of every row) and returns one value per group: the national build's 14,644 groups
# cost a few passes over arrays instead of a Python loop of small numpy calls (5.5 s of the
# interpreter lock, beside the other models). The one-group functions call them with one group.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """One measure with its 95% interval (NaN when it does not exist) and a note."""

    estimate: float
    lower: float = math.nan
    upper: float = math.nan
    note: str | None = None


@dataclass(frozen=True)
class _Estimates:
    """One measure of many groups: arrays of estimates, limits and notes (None: no note)."""

    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    note: np.ndarray

    def at(self, i: int) -> Estimate:
        return Estimate(float(self.estimate[i]), float(self.lower[i]), float(self.upper[i]), self.note[i])

    def unavailable_where(self, where: np.ndarray, note) -> "_Estimates":
        """NaN estimate and limits, and `note` (an array or one text), where `where` holds."""
        nan = np.full(len(where), np.nan)
        return _Estimates(np.where(where, nan, self.estimate), np.where(where, nan, self.lower),
                          np.where(where, nan, self.upper), np.where(where, note, self.note))


def _estimates(estimate, lower=None, upper=None, note=None) -> _Estimates:
    estimate = np.asarray(estimate, dtype=float)
    def filled(values):
        return np.full(len(estimate), np.nan) if values is None else np.asarray(values, dtype=float)
    notes = np.full(len(estimate), None, dtype=object) if note is None else np.asarray(note, dtype=object)
    return _Estimates(estimate, filled(lower), filled(upper), notes)


class _Groups:
    """The group (0 .. size - 1) of every commune row; per-group sums add a group's rows in
    their order."""

    def __init__(self, group: np.ndarray, size: int):
        self.group = np.asarray(group, dtype=np.intp)
        self.size = size

    def sum(self, values) -> np.ndarray:
        return np.bincount(self.group, weights=np.asarray(values, dtype=float), minlength=self.size)

    def count(self, where=None) -> np.ndarray:
        group = self.group if where is None else self.group[where]
        return np.bincount(group, minlength=self.size)

    def spread(self, per_group: np.ndarray) -> np.ndarray:
        """A per-group value on each of the group's rows."""
        return per_group[self.group]

    def subset(self, where: np.ndarray) -> "_Groups":
        return _Groups(self.group[where], self.size)


def area_counts(frame: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each commune's deaths and births in its area's count: published + unpublished (signed)."""
    def total(published: str, unpublished: str) -> pd.Series:
        counts = pd.to_numeric(frame[published]).astype(float)
        if unpublished in frame.columns:
            counts = counts + pd.to_numeric(frame[unpublished]).fillna(0).astype(float)
        return counts

    return total("deaths", UNPUBLISHED_COLUMNS[0]), total("live_births", UNPUBLISHED_COLUMNS[1])


def _na(note: str) -> Estimate:
    return Estimate(math.nan, math.nan, math.nan, note)


def gap_measures(d1, n1, d5, n5, deaths, births, multiplier: float, z: float = Z95) -> dict[str, Estimate]:
    """D, R, PAR, PAF and avoidable deaths (docs/methods/inequity.md).

    (d1, n1), (d5, n5): deaths and live births of quintiles 1 and 5; (deaths, births): the
    whole area (every ranked commune). Rates per ``multiplier`` live births (the indicator's).
    Intervals: Poisson variance of each
    count; D and R treat the two quintiles as independent; PAR and PAF account for quintile
    5 being part of the area (the area's deaths are those of quintile 5 plus the rest).
    """
    many = _gap_estimates(*(np.array([float(v)]) for v in (d1, n1, d5, n5, deaths, births, multiplier)), z)
    return {m: e.at(0) for m, e in many.items()}


def _gap_estimates(d1, n1, d5, n5, big_d, big_n, k, z) -> dict[str, _Estimates]:
    """gap_measures of many groups (arrays, one value per group)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r1, r5, r_area = k * d1 / n1, k * d5 / n5, k * big_d / big_n
        diff = r1 - r5
        se = k * np.sqrt(d1 / n1**2 + d5 / n5**2)
        out = {"D": _estimates(diff, diff - z * se, diff + z * se)}

        both, only_5 = (d1 > 0) & (d5 > 0), (d1 <= 0) & (d5 > 0)
        ratio, se_log = r1 / r5, np.sqrt(1 / d1 + 1 / d5)
        out["R"] = _estimates(
            np.where(both, ratio, np.where(only_5, 0.0, np.nan)),
            np.where(both, ratio * np.exp(-z * se_log), np.nan), np.where(both, ratio * np.exp(z * se_log), np.nan),
            np.where(both, None, np.where(only_5, "no deaths in quintile 1: no log-scale interval",
                                          "no deaths in quintile 5: the ratio is undefined")))

        par = r_area - r5
        se_par = k * np.sqrt((big_d - d5) / big_n**2 + d5 * (1 / n5 - 1 / big_n) ** 2)
        par_note = np.where(par < 0, "quintile 5 has a higher rate than the area: negative PAR (not set to 0)", None)
        out["PAR"] = _estimates(par, par - z * se_par, par + z * se_par, par_note)
        out["avoidable_deaths"] = _estimates(par * big_n / k, (par - z * se_par) * big_n / k,
                                             (par + z * se_par) * big_n / k, par_note)

        no_area, no_5 = big_d <= 0, (big_d > 0) & (d5 <= 0)
        fraction = ~no_area & ~no_5
        ratio_5, se_log_5 = r5 / r_area, np.sqrt(np.maximum(1 / d5 - 1 / big_d, 0.0))
        out["PAF"] = _estimates(
            np.where(no_area, np.nan, np.where(no_5, 100.0, 100 * (1 - ratio_5))),
            np.where(fraction, 100 * (1 - ratio_5 * np.exp(z * se_log_5)), np.nan),
            np.where(fraction, 100 * (1 - ratio_5 * np.exp(-z * se_log_5)), np.nan),
            np.where(no_area, "no deaths in the area: the fraction is undefined",
                     np.where(no_5, "no deaths in quintile 5: no log-scale interval", par_note)))
    empty = (n1 <= 0) | (n5 <= 0)
    note = np.where(n1 <= 0, "quintile 1", "quintile 5").astype(object) + \
        " has no commune (one commune holds too large a share of the births)"
    return {m: e.unavailable_where(empty, note) for m, e in out.items()}


@dataclass(frozen=True)
class GradientFit:
    """Poisson regression log E[d_i] = log n_i + a + b x_i with quasi-Poisson covariance."""

    a: float
    b: float
    cov: np.ndarray          # 2x2, quasi-Poisson (model covariance times max(1, dispersion))
    dispersion: float        # Pearson chi2 / (n - 2)
    n: int
    note: str | None = None

    @property
    def estimable(self) -> bool:
        return math.isfinite(self.a) and math.isfinite(self.b)


@dataclass(frozen=True)
class _GradientFits:
    """poisson_gradient of many groups: arrays (cov: (groups, 2, 2)); NaN and a note where not
    estimable."""

    a: np.ndarray
    b: np.ndarray
    cov: np.ndarray
    dispersion: np.ndarray
    n: np.ndarray
    note: np.ndarray

    def at(self, i: int) -> GradientFit:
        return GradientFit(float(self.a[i]), float(self.b[i]), self.cov[i].copy(), float(self.dispersion[i]),
                           int(self.n[i]), self.note[i])


def poisson_gradient(deaths, births, ridit) -> GradientFit:
    """Poisson GLM of commune deaths on the ridit with offset log(births).

    Standard errors are quasi-Poisson: the model covariance times phi = max(1, Pearson chi2 /
    (n - 2)). Not estimable with fewer than 3 communes (no residual degree of freedom), or when
    the maximum-likelihood estimate does not exist: no deaths at all, or every death in the
    single commune at one end of the ridit scale (b would run to -/+ infinity).
    """
    d = np.asarray(deaths, dtype=float)
    return _poisson_gradients(d, np.asarray(births, dtype=float), np.asarray(ridit, dtype=float),
                              _Groups(np.zeros(len(d), dtype=np.intp), 1)).at(0)


def _poisson_gradients(d, n, x, groups: _Groups, max_iterations: int = 100) -> _GradientFits:
    """poisson_gradient of many groups. Maximum likelihood by Newton-Raphson (for the log link
    this is IRLS, what statsmodels' GLM does; the tests check it against statsmodels and a
    matrix IRLS), written out for two parameters and run on every group at once, each group
    stopping when its step is below 1e-13 of its estimates."""
    size = groups.size
    k = groups.count()
    positive = d > 0
    n_positive = groups.count(positive)
    lowest, highest = np.full(size, np.inf), np.full(size, -np.inf)
    np.minimum.at(lowest, groups.group, x)
    np.maximum.at(highest, groups.group, x)
    x_positive = groups.sum(np.where(positive, x, 0.0))  # the ridit of a lone commune with deaths
    at_an_end = (n_positive == 1) & ((x_positive == lowest) | (x_positive == highest))
    note = np.full(size, None, dtype=object)
    note[at_an_end] = ("every death is in the commune at one end of the ridit scale: "
                       "the maximum-likelihood gradient does not exist")
    note[n_positive == 0] = "no deaths: the Poisson gradient is not estimable"
    few = k < 3
    note[few] = [f"{count} communes: at least 3 are needed for a gradient with a dispersion estimate"
                 for count in k[few]]

    a, b = np.full(size, np.nan), np.full(size, np.nan)
    running = np.equal(note, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        a[running] = np.log(groups.sum(d) / groups.sum(n))[running]
    b[running] = 0.0
    converged = np.zeros(size, dtype=bool)
    for _ in range(max_iterations):
        rows = running[groups.group]
        part = groups.subset(rows)
        xr, mu = x[rows], n[rows] * np.exp(part.spread(a) + part.spread(b) * x[rows])
        residual = d[rows] - mu
        score_a, score_b = part.sum(residual), part.sum(xr * residual)
        h_aa, h_ab, h_bb = part.sum(mu), part.sum(mu * xr), part.sum(mu * xr * xr)
        with np.errstate(invalid="ignore", over="ignore"):
            det = h_aa * h_bb - h_ab * h_ab
            singular = running & ~(np.isfinite(det) & (det > 0))
            running &= ~singular
            step_a, step_b = (h_bb * score_a - h_ab * score_b) / det, (h_aa * score_b - h_ab * score_a) / det
        a[running] += step_a[running]
        b[running] += step_b[running]
        done = running & (np.abs(step_a) + np.abs(step_b) <= 1e-13 * (1.0 + np.abs(a) + np.abs(b)))
        converged |= done
        running &= ~done
        if not running.any():
            break
    unconverged = np.equal(note, None) & ~converged
    note[unconverged] = "the Poisson regression did not converge"
    a[unconverged], b[unconverged] = np.nan, np.nan

    rows = converged[groups.group]
    part = groups.subset(rows)
    xr = x[rows]
    mu = n[rows] * np.exp(part.spread(a) + part.spread(b) * xr)
    information = np.stack([np.stack([part.sum(mu), part.sum(mu * xr)], axis=-1),
                            np.stack([part.sum(mu * xr), part.sum(mu * xr * xr)], axis=-1)], axis=-2)
    cov, dispersion = np.full((size, 2, 2), np.nan), np.full(size, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        dispersion[converged] = (part.sum((d[rows] - mu) ** 2 / mu) / (k - 2))[converged]
    if converged.any():
        cov[converged] = (np.linalg.inv(information[converged])
                          * np.maximum(1.0, dispersion[converged])[:, None, None])
    return _GradientFits(a, b, cov, dispersion, k, note)


def sii_rii(fit: GradientFit, multiplier: float, z: float = Z95) -> dict[str, Estimate]:
    """SII = (e^a - e^(a+b)) * multiplier (delta method), RII = e^(-b) (log scale), and a, b."""
    fits = _GradientFits(np.array([fit.a]), np.array([fit.b]), np.asarray(fit.cov, dtype=float)[None],
                         np.array([fit.dispersion]), np.array([fit.n]), np.array([fit.note], dtype=object))
    return {m: e.at(0) for m, e in _sii_rii_estimates(fits, np.array([float(multiplier)]), z).items()}


def _sii_rii_estimates(fits: _GradientFits, k: np.ndarray, z: float) -> dict[str, _Estimates]:
    """sii_rii of many groups; the note gives the quasi-Poisson dispersion (or why there is no fit)."""
    a, b, cov = fits.a, fits.b, fits.cov
    estimable = np.isfinite(a) & np.isfinite(b)
    note = fits.note.copy()
    for i in np.flatnonzero(estimable):
        phi = fits.dispersion[i]
        note[i] = f"quasi-Poisson dispersion {phi:.3g}" + (" (below 1: Poisson standard errors kept)" if phi < 1 else "")
    top, bottom = np.exp(a), np.exp(a + b)
    sii = k * (top - bottom)
    g_a, g_b = k * (top - bottom), -k * bottom
    se_sii = np.sqrt(g_a * g_a * cov[:, 0, 0] + 2 * g_a * g_b * cov[:, 0, 1] + g_b * g_b * cov[:, 1, 1])
    se_a, se_b = np.sqrt(cov[:, 0, 0]), np.sqrt(cov[:, 1, 1])
    return {
        "SII": _estimates(sii, sii - z * se_sii, sii + z * se_sii, note),
        "RII": _estimates(np.exp(-b), np.exp(-b - z * se_b), np.exp(-b + z * se_b), note),
        "gradient_a": _estimates(a, a - z * se_a, a + z * se_a, note),
        "gradient_b": _estimates(b, b - z * se_b, b + z * se_b, note),
    }


def concentration_index(deaths, births, ridit, z: float = Z95) -> Estimate:
    """C = 2 sum(w_i r_i x_i) / mu - 1 (w_i births share, r_i rate, mu = sum w_i r_i).

    Interval: the convenient regression 2 sigma_x^2 r_i / mu = alpha + beta x_i fitted by
    weighted least squares with the births as weights (beta = C exactly); its standard error
    (residual variance on n - 2 df) gives C -/+ z se. Needs 3 communes and at least one death.
    """
    d = np.asarray(deaths, dtype=float)
    return _concentration_indices(d, np.asarray(births, dtype=float), np.asarray(ridit, dtype=float),
                                  _Groups(np.zeros(len(d), dtype=np.intp), 1), z).at(0)


def _concentration_indices(d, n, x, groups: _Groups, z: float) -> _Estimates:
    """concentration_index of many groups. The weighted least squares by its normal equations,
    solved in closed form (statsmodels' WLS gives the same to 1e-12)."""
    k = groups.count()
    with np.errstate(divide="ignore", invalid="ignore"):
        w = n / groups.spread(groups.sum(n))
        r = d / n
        mu = groups.sum(w * r)
        c = 2 * groups.sum(w * r * x) / mu - 1
        sigma2 = groups.sum(w * (x - groups.spread(groups.sum(w * x))) ** 2)
        lhs = 2 * groups.spread(sigma2) * r / groups.spread(mu)
        s0, s1, s2 = groups.sum(n), groups.sum(n * x), groups.sum(n * x * x)
        t0, t1 = groups.sum(n * lhs), groups.sum(n * x * lhs)
        det = s0 * s2 - s1 * s1
        alpha, beta = (s2 * t0 - s1 * t1) / det, (s0 * t1 - s1 * t0) / det
        residual = lhs - groups.spread(alpha) - groups.spread(beta) * x
        variance = groups.sum(n * residual**2) / (k - 2)
        se = np.sqrt(variance * s0 / det)
    note = np.where(mu <= 0, "no deaths: the concentration index is undefined", None)
    note = np.where(k < 3, np.char.add(k.astype(str), " communes: at least 3 are needed for an interval")
                    .astype(object), note)
    return _estimates(c, c - z * se, c + z * se).unavailable_where(np.not_equal(note, None), note)


def group_measures(deaths, births, ridit, quintile, multiplier: float, z: float = Z95, area_deaths=None,
                   area_births=None):
    """Every measure of one ranked group: ({measure: Estimate}, GradientFit).

    (deaths, births): the communes' published counts, which the commune-level models (the
    gradient, CIX) fit; (area_deaths, area_births), default the same: their counts in the
    area's count, which the quintile and area sums of D, R, PAR, PAF add up (docs/methods/core.md,
    "One rule for every aggregate of communes"). A commune without published births has no rate and is left out of the fits.
    """
    d = np.asarray(deaths, dtype=float)
    n = np.asarray(births, dtype=float)
    measures, fits = _measures_of_groups(
        d, n, np.asarray(ridit, dtype=float), np.asarray(quintile, dtype=float),
        d if area_deaths is None else np.asarray(area_deaths, dtype=float),
        n if area_births is None else np.asarray(area_births, dtype=float),
        _Groups(np.zeros(len(d), dtype=np.intp), 1), np.array([float(multiplier)]), z)
    return {m: e.at(0) for m, e in measures.items()}, fits.at(0)


def _measures_of_groups(d, n, x, quintile, area_d, area_n, groups: _Groups, multiplier: np.ndarray, z: float):
    """Every measure of many ranked groups: ({measure: _Estimates}, _GradientFits)."""
    first, last = quintile == 1, quintile == N_QUINTILES
    out = _gap_estimates(groups.sum(np.where(first, area_d, 0.0)), groups.sum(np.where(first, area_n, 0.0)),
                         groups.sum(np.where(last, area_d, 0.0)), groups.sum(np.where(last, area_n, 0.0)),
                         groups.sum(area_d), groups.sum(area_n), multiplier, z)
    rated = n > 0
    fits = _poisson_gradients(d[rated], n[rated], x[rated], groups.subset(rated))
    out.update(_sii_rii_estimates(fits, multiplier, z))
    out["CIX"] = _concentration_indices(d[rated], n[rated], x[rated], groups.subset(rated), z)
    return out, fits


# --------------------------------------------------------------------------------------------
# Drivers over long frames (what the dbt Python models call)
# --------------------------------------------------------------------------------------------


def _groups(frame: pd.DataFrame, keys: list[str]):
    return frame.groupby(keys, sort=True, dropna=False)


def quintile_rates(membership: pd.DataFrame, keys: list[str] = GROUP_KEYS) -> pd.DataFrame:
    """Pooled deaths, births and rate (exact Poisson 95% limits) of each quintile of each group.

    Every group with a ranked commune gets five rows; a quintile without communes has
    n_communes = 0 and null rate. Rates per the rows' ``multiplier`` (the indicator's).
    """
    ranked = membership[membership["exclusion_reason"].isna()]
    area_deaths, area_births = area_counts(ranked)
    ranked = ranked.assign(deaths=area_deaths, live_births=area_births)
    groups = ranked[keys + ["multiplier"]].drop_duplicates()
    if groups.duplicated(keys).any():
        raise ValueError("membership has more than one rate multiplier in a group")
    grid = groups.merge(pd.DataFrame({"quintile": range(1, N_QUINTILES + 1)}), how="cross")
    sums = (ranked.assign(quintile=ranked["quintile"].astype(int))
            .groupby(keys + ["quintile"], dropna=False)
            .agg(n_communes=("commune_code", "size"), deaths=("deaths", "sum"),
                 live_births=("live_births", "sum"), value_min=("value", "min"),
                 value_max=("value", "max"))
            .reset_index())
    out = grid.merge(sums, on=keys + ["quintile"], how="left")
    out["n_communes"] = out["n_communes"].fillna(0).astype(int)
    births = out["live_births"].astype(float)
    deaths = out["deaths"].astype(float)
    has = births > 0
    lower, upper = poisson_ci(deaths.where(has, 0).to_numpy())
    k = out["multiplier"].astype(float)
    out["rate_per_1000"] = np.where(has, k * deaths / births.where(has), np.nan)
    out["ci95_lower"] = np.where(has, k * lower / births.where(has), np.nan)
    out["ci95_upper"] = np.where(has, k * upper / births.where(has), np.nan)
    out = out.drop(columns="multiplier")
    out["deaths"] = out["deaths"].astype("Int64")
    out["live_births"] = out["live_births"].astype("Int64")
    return out.sort_values(keys + ["quintile"], ignore_index=True)


def inequality_measures(membership: pd.DataFrame, keys: list[str] = GROUP_KEYS) -> pd.DataFrame:
    """Long frame: one row per group and measure (:data:`MEASURES`) with estimate, interval,
    counts of the communes ranked and left out, and a note."""
    reason = membership["exclusion_reason"].astype(object).fillna("").to_numpy(dtype=str)
    grouping = _groups(membership, keys)
    size = grouping.ngroups
    groups = _Groups(grouping.ngroup().to_numpy(), size)
    key_rows = list(grouping.indices)  # in group order (sorted keys)
    ranked = reason == ""
    area_deaths, area_births = (c.to_numpy(dtype=float, na_value=np.nan) for c in area_counts(membership))

    def column(name):
        return pd.to_numeric(membership[name]).to_numpy(dtype=float, na_value=np.nan)[ranked]

    multiplier = _one_multiplier_per_group(column("multiplier"), groups.subset(ranked))
    measures, _ = _measures_of_groups(column("deaths"), column("live_births"), column("ridit"), column("quintile"),
                                      area_deaths[ranked], area_births[ranked], groups.subset(ranked), multiplier, Z95)
    n_ranked = groups.count(ranked)
    nothing = "no commune with both live births and a value"
    measures = {m: e.unavailable_where(n_ranked == 0, nothing) for m, e in measures.items()}

    def per_measure(values: np.ndarray) -> np.ndarray:  # group-major, measures in MEASURES order
        return np.repeat(values, len(MEASURES))

    out = pd.DataFrame([key if isinstance(key, tuple) else (key,) for key in key_rows for _ in MEASURES],
                       columns=keys)
    out["measure"] = np.tile(np.array(MEASURES, dtype=object), size)
    for column_name, field in (("estimate", "estimate"), ("ci95_lower", "lower"), ("ci95_upper", "upper")):
        values = np.stack([getattr(measures[m], field) for m in MEASURES], axis=1).ravel()
        out[column_name] = np.where(np.isinf(values), np.nan, values)
    out["n_communes"] = per_measure(n_ranked)
    out["n_communes_without_value"] = per_measure(groups.count(reason == "no_value"))
    out["n_communes_without_births"] = per_measure(groups.count(reason == "no_live_births"))
    out["deaths"] = per_measure(groups.subset(ranked).sum(area_deaths[ranked])).astype(int)
    out["live_births"] = per_measure(groups.subset(ranked).sum(area_births[ranked])).astype(int)
    out["ci_method"] = np.tile(np.array([CI_METHODS[m] for m in MEASURES], dtype=object), size)
    out["note"] = np.stack([measures[m].note for m in MEASURES], axis=1).ravel()
    return out


def _one_multiplier_per_group(multiplier: np.ndarray, groups: _Groups) -> np.ndarray:
    """The one rate multiplier of each group's rows (the indicator's); NaN for a group without rows."""
    lowest, highest = np.full(groups.size, np.inf), np.full(groups.size, -np.inf)
    np.minimum.at(lowest, groups.group, multiplier)
    np.maximum.at(highest, groups.group, multiplier)
    present = groups.count() > 0
    wrong = present & ((lowest != highest) | ~(lowest > 0))
    if wrong.any():
        found = np.unique(multiplier[groups.group == np.flatnonzero(wrong)[0]])
        raise ValueError(f"a group needs one positive rate multiplier, got {found.tolist()}")
    return np.where(present, lowest, np.nan)


# --------------------------------------------------------------------------------------------
# Benchmark comparisons (Chilean studies: each commune against the best-off commune)
# --------------------------------------------------------------------------------------------

BENCHMARK_KEYS = ["indicator", "period_start", "period_end"]


def parse_benchmark_vars(min_deaths, communes) -> tuple[int, list[str]]:
    """Validate the dbt vars ``benchmark_min_deaths`` and ``benchmark_communes``.

    min_deaths: a whole number >= 1 (text from dbt is accepted). communes: a list of commune
    codes (4 or 5 digits; a code without its leading zero is padded, as everywhere in the
    warehouse), or empty; a JSON list as text is accepted. Raises ValueError naming the var.
    """
    text = str(min_deaths).strip()
    if isinstance(min_deaths, bool) or not text.isdigit() or int(text) < 1:
        raise ValueError(f"dbt var benchmark_min_deaths must be a whole number >= 1, got {min_deaths!r}")
    if isinstance(communes, str):
        try:
            communes = json.loads(communes) if communes.strip() else []
        except json.JSONDecodeError as exc:
            raise ValueError(f"dbt var benchmark_communes must be a list of commune codes, got {communes!r}") from exc
    if communes is None:
        communes = []
    if not isinstance(communes, (list, tuple)):
        raise ValueError(f"dbt var benchmark_communes must be a list of commune codes, got {communes!r}")
    codes = []
    for c in communes:
        s = str(c).strip()
        if isinstance(c, bool) or not s.isdigit() or len(s) not in (4, 5):
            raise ValueError(f"dbt var benchmark_communes: {c!r} is not a 4- or 5-digit commune code")
        codes.append(s.zfill(5))
    if len(set(codes)) != len(codes):
        raise ValueError(f"dbt var benchmark_communes lists a commune twice: {communes!r}")
    return int(text), codes


def choose_benchmarks(communes: pd.DataFrame, min_deaths: int, listed: list[str]) -> pd.DataFrame:
    """The benchmark of every (region_code, indicator, period): codes, deaths, births, rule.

    ``communes``: commune_code, commune_name, region_code, indicator, period_start, period_end,
    deaths, live_births (pooled as in fct_commune_vs_region; births 0 or null = no data).
    Without ``listed``: the lowest pooled rate of the region among communes with at least
    ``min_deaths`` deaths (ties: lowest code). With ``listed``: those communes, pooled, for
    every commune of every region (one benchmark for the whole build).
    """
    data = communes[pd.to_numeric(communes["live_births"]).fillna(0) > 0].copy()
    # Ranked by deaths per live birth: the order of the rates whatever their multiplier.
    data["rate"] = data["deaths"].astype(float) / data["live_births"].astype(float)
    regions = communes[["region_code"] + BENCHMARK_KEYS].drop_duplicates()
    if listed:
        known = set(communes["commune_code"])
        unknown = [c for c in listed if c not in known]
        if unknown:
            raise ValueError(f"dbt var benchmark_communes: commune(s) {unknown} have no rows in this "
                             "build (not in the scope regions or not a commune code)")
        chosen = data[data["commune_code"].isin(listed)]
        pooled = (chosen.sort_values("commune_code").groupby(BENCHMARK_KEYS)
                  .agg(benchmark_communes=("commune_code", ",".join),
                       benchmark_names=("commune_name", ", ".join),
                       benchmark_deaths=("deaths", "sum"),
                       benchmark_live_births=("live_births", "sum"))
                  .reset_index())
        out = regions.merge(pooled, on=BENCHMARK_KEYS, how="left")
        out["benchmark_rule"] = "listed_communes"
        out["benchmark_note"] = np.where(out["benchmark_communes"].isna(),
                                         "none of the listed communes has live births in this period",
                                         None)
        return out
    eligible = data[data["deaths"] >= min_deaths].sort_values(
        ["region_code"] + BENCHMARK_KEYS + ["rate", "commune_code"])
    best = eligible.groupby(["region_code"] + BENCHMARK_KEYS, as_index=False).first()
    best = best.rename(columns={"commune_code": "benchmark_communes", "commune_name": "benchmark_names",
                                "deaths": "benchmark_deaths", "live_births": "benchmark_live_births"})
    out = regions.merge(best[["region_code"] + BENCHMARK_KEYS + ["benchmark_communes", "benchmark_names",
                                                                  "benchmark_deaths", "benchmark_live_births"]],
                        on=["region_code"] + BENCHMARK_KEYS, how="left")
    out["benchmark_rule"] = "lowest_rate_in_region"
    out["benchmark_note"] = np.where(out["benchmark_communes"].isna(),
                                     f"no commune of the region has at least {min_deaths} deaths "
                                     "(var benchmark_min_deaths) in this period", None)
    return out


def benchmark_pairs(communes: pd.DataFrame, min_deaths: int, listed: list[str]) -> pd.DataFrame:
    """Every commune beside its benchmark (:func:`choose_benchmarks`): the commune's rows with
    the benchmark's codes, names, deaths, births and rule, ``is_benchmark`` (the commune is, or
    is part of, its benchmark: the two counts are then nested) and a ``note``. The comparison
    arithmetic (RT, RAP, RAP%, excess deaths and their intervals) is SQL's, in
    fct_commune_vs_benchmark (macros/comparisons.sql, shared with fct_commune_vs_region)."""
    bench = choose_benchmarks(communes, min_deaths, listed)
    out = communes.merge(bench, on=["region_code"] + BENCHMARK_KEYS, how="left")
    d = pd.to_numeric(out["deaths"]).to_numpy(dtype=float, na_value=np.nan)
    n = pd.to_numeric(out["live_births"]).to_numpy(dtype=float, na_value=np.nan)
    nb = pd.to_numeric(out["benchmark_live_births"]).to_numpy(dtype=float, na_value=np.nan)
    member = np.array([isinstance(b, str) and c in b.split(",")
                       for c, b in zip(out["commune_code"], out["benchmark_communes"])])
    out["is_benchmark"] = member
    benchmark_notes = out["benchmark_note"].tolist()  # one conversion, not an .iloc per row
    notes = []
    for i in range(len(out)):
        parts = []
        if isinstance(benchmark_notes[i], str):
            parts.append(benchmark_notes[i])
        if not n[i] > 0:
            parts.append("no live births in the period")
        elif nb[i] > 0 and d[i] == 0:
            parts.append("no deaths: RT is 0, RAP% undefined, no log-scale interval")
        if member[i]:
            parts.append("the commune is (part of) the benchmark")
        notes.append("; ".join(parts) or None)
    out["note"] = notes
    return out.drop(columns="benchmark_note")


# --------------------------------------------------------------------------------------------
# Is the gap closing? The trend of the yearly log10(RII)
# --------------------------------------------------------------------------------------------

TREND_KEYS = ["area_level", "area_code", "indicator", "stratifier"]
PERIOD_KEYS = ["period_start", "period_end"]


def classify_gap_change(trend: str, fitted_log10_rii_mid: float) -> str:
    """How the relative gap |log RII| moved over the period.

    ``held`` when the trend of log10(RII) is not significant (``stationary``); when it is, the
    gap ``widened`` if the slope moves log10(RII) away from 0 in the direction of the gradient
    (the sign of the fitted log10(RII) at the middle of the period) and ``narrowed`` if it moves
    it towards 0. ``not_estimable``, ``insufficient_data`` or ``not_confirmed`` when the trend is.
    """
    if trend in ("not_estimable", "insufficient_data", "not_confirmed"):
        return trend
    if trend == "stationary" or fitted_log10_rii_mid == 0:
        return "held"
    rising = trend == "increasing"
    return "widened" if rising == (fitted_log10_rii_mid > 0) else "narrowed"


def gradient_change_test(year, deaths, births, ridit) -> dict:
    """Is the Poisson gradient changing? The count model behind the yearly RIIs, pooled over the
    window: log mu_it = log n_it + a_t + (b + g (t - t_bar)) x_it (a level per year, the ridit
    slope moving linearly), fitted by Newton-Raphson. log RII_t = -b_t, so the log RII changes by
    -g a year. As fct_trends' count model: with a Pearson dispersion above 1 the quasi-Poisson
    test (t(N - T - 2)); at or below 1 the scale is floored at 1 and the less significant of the
    Poisson test (the normal) and the quasi-Poisson one is the test.

    Returns ``log_rii_slope`` (-g, natural log per year), its ``se``, ``p_value``,
    ``dispersion``, ``n_deaths`` and ``note`` (why nothing could be fitted); NaN when not estimable."""
    t = np.asarray(year, dtype=float)
    d, n, x = (np.asarray(v, dtype=float) for v in (deaths, births, ridit))
    return _gradient_change_fit(t, d, n, x)


# A Schur complement this small against the (b, g) block it came from is zero up to rounding: the
# ridit does not vary within the years (or only within one), and (b, g) are not identifiable.
_SINGULAR_SCHUR = 1e-10


def _gradient_change_fit(t, d, n, x) -> dict:
    """:func:`gradient_change_test` on float arrays.

    The information of (a_1..a_T, b, g) is a diagonal block, s_k = sum of mu over year k,
    bordered by the two columns of (b, g), so each Newton step eliminates the year levels and
    solves the 2 x 2 Schur complement S onto (b, g): with xbar_k = sum(mu x) / s_k over year k,
    V_k = sum(mu x^2) - s_k xbar_k^2 and c_k = t_k - t_bar, S = sum_k V_k [[1, c_k], [c_k, c_k^2]];
    the reduced score is sum_k r_k [1, c_k] with r_k = sum over year k of d (x - xbar_k); the
    year steps are (D_k - s_k) / s_k - xbar_k (step_b + c_k step_g). All from per-year sums
    (np.bincount), never the dense design; var(g) = (the full inverse information)[g, g] =
    (S^-1)[1, 1]. Singular -- the dense solve's LinAlgError -- when a year's expected sum is zero
    or S is not positive definite (up to rounding)."""
    keep = (n > 0) & np.isfinite(x) & np.isfinite(d)
    t, d, n, x = t[keep], d[keep], n[keep], x[keep]
    out = dict(log_rii_slope=np.nan, se=np.nan, p_value=np.nan, dispersion=np.nan, n_deaths=float(d.sum()), note=None)
    years, k = np.unique(t, return_inverse=True)
    n_years = len(years)
    df = len(d) - n_years - 2
    if n_years < 2 or df <= 0 or d.sum() == 0:
        out["note"] = "too few years or communes with deaths for the gradient's change"
        return out
    c_year = years - t.mean()
    c = c_year[k]
    powers = np.stack([np.ones(n_years), c_year, c_year * c_year])  # sum_k [1, c_k, c_k^2] y_k = powers @ y
    deaths_year = np.bincount(k, d, n_years)
    deaths_x_year = np.bincount(k, d * x, n_years)
    with np.errstate(divide="ignore", invalid="ignore"):
        year_rate = deaths_year / np.bincount(k, n, n_years)
    a = np.log(np.where(year_rate > 0, year_rate, 1e-12))
    b = g = 0.0
    for _ in range(100):
        mu = n * np.exp(a[k] + x * (b + g * c))
        mu_x = mu * x
        s = np.bincount(k, mu, n_years)
        if not s.all():  # a year with a zero expected sum: a zero row and column of the information
            out["note"] = "the gradient's change is not identifiable (singular information)"
            return out
        m = np.bincount(k, mu_x, n_years)
        q = np.bincount(k, mu_x * x, n_years)
        xbar = m / s
        s00, s01, s11 = powers @ (q - m * xbar)
        r0, r1, _ = powers @ (deaths_x_year - xbar * deaths_year)
        det = s00 * s11 - s01 * s01
        if s00 <= _SINGULAR_SCHUR * q.sum() or det <= _SINGULAR_SCHUR * s00 * s11:
            out["note"] = "the gradient's change is not identifiable (singular information)"
            return out
        step_b, step_g = (s11 * r0 - s01 * r1) / det, (s00 * r1 - s01 * r0) / det
        step_a = (deaths_year - s) / s - xbar * (step_b + c_year * step_g)
        a += step_a
        b += step_b
        g += step_g
        if np.abs(step_a).max() < 1e-10 and abs(step_b) < 1e-10 and abs(step_g) < 1e-10:
            break
    else:
        out["note"] = "the gradient's change did not converge"
        return out
    mu = n * np.exp(a[k] + x * (b + g * c))
    phi = float(((d - mu) ** 2 / mu).sum() / df)
    variance = float(s00 / det)
    quasi_se = float(np.sqrt(phi * variance))
    # stats.t(df).sf(z) and stats.norm.sf(z) are special.stdtr(df, -z) and special.ndtr(-z), less
    # scipy.stats' argument handling (tens of microseconds a call, thousands of calls a build).
    tests = [(quasi_se, float(2 * special.stdtr(df, -abs(g) / quasi_se)))]
    if phi <= 1:  # the scale floored at 1: the Poisson test must reject too
        tests.append((float(np.sqrt(variance)), float(2 * special.ndtr(-abs(g) / np.sqrt(variance)))))
    se, p_value = max(tests, key=lambda test: test[1])
    out.update(log_rii_slope=-float(g), se=se, dispersion=phi, p_value=p_value)
    return out


def gradient_change_tests(membership: pd.DataFrame, periods: pd.DataFrame) -> pd.DataFrame:
    """:func:`gradient_change_test` of every area, indicator and stratifier over every period,
    from the ranked single-year rows of ``membership`` (int_inequality__membership: the communes
    with a ridit; period_start = period_end = the year). Rows period by period, the series of a
    period in the order they first appear among its rows (a groupby of the period's rows)."""
    yearly = membership[(membership["period_start"] == membership["period_end"]) & membership["ridit"].notna()]
    # Grouped once, the columns made arrays once: each period is a mask on a series' rows.
    year = np.asarray(yearly["period_start"], dtype=float)
    deaths, births, ridit = (np.asarray(yearly[c], dtype=float) for c in ("deaths", "live_births", "ridit"))
    series = []
    for keys, rows in yearly.groupby(TREND_KEYS, sort=False).indices.items():
        rows = np.sort(rows)  # in the frame's order, as the groupby gives them
        series.append((keys, rows, year[rows]))
    out = []
    for p in periods[PERIOD_KEYS].drop_duplicates().itertuples(index=False):
        inside = []
        for keys, rows, t in series:
            within = rows[(t >= p.period_start) & (t <= p.period_end)]
            if len(within):
                inside.append((within[0], keys, within))
        inside.sort(key=lambda group: group[0])  # first appearance among the period's rows
        for _, keys, within in inside:
            out.append({**dict(zip(TREND_KEYS, keys)), "period_start": p.period_start, "period_end": p.period_end,
                        **_gradient_change_fit(year[within], deaths[within], births[within], ridit[within])})
    columns = [*TREND_KEYS, *PERIOD_KEYS, "log_rii_slope", "se", "p_value", "dispersion", "n_deaths", "note"]
    return pd.DataFrame(out, columns=columns)


def confirm_gap_trends(trends: pd.DataFrame, tests: pd.DataFrame, *, p_threshold: float,
                       min_deaths: int | None) -> pd.DataFrame:
    """The RII trend's class, held to fct_trends' rules: ``insufficient_data`` (no statistics)
    when the ranked communes hold fewer than ``min_deaths`` deaths over the window; an
    ``increasing``/``decreasing`` log RII stands only where the count model of the gradient's
    change (:func:`gradient_change_test`) finds the same direction at ``p_threshold``, else
    ``not_confirmed`` with a note. Adds ``n_deaths`` and ``count_test_p_value``."""
    keys = [*TREND_KEYS, *PERIOD_KEYS]
    merged = trends.drop(columns=["n_deaths"], errors="ignore").merge(
        tests[[*keys, "log_rii_slope", "p_value", "n_deaths"]]
        .rename(columns={"p_value": "count_test_p_value", "log_rii_slope": "_count_slope"}),
        on=keys, how="left")
    merged["n_deaths"] = merged["n_deaths"].round().astype("Int64")
    if min_deaths is not None:
        thin = (merged["n_deaths"].fillna(0) < min_deaths).to_numpy()
        for column in STAT_COLUMNS_NULLED_WHEN_THIN:
            if column in merged:
                merged.loc[thin, column] = pd.NA
        merged.loc[thin, "trend"] = "insufficient_data"
        merged.loc[thin, "count_test_p_value"] = np.nan
        merged.loc[thin, "note"] = [_join_note(note, f"{int(deaths) if pd.notna(deaths) else 0} deaths over the "
                                               f"period, fewer than min_deaths = {min_deaths}")
                                    for note, deaths in zip(merged.loc[thin, "note"], merged.loc[thin, "n_deaths"])]
    significant = merged["trend"].isin(["increasing", "decreasing"]).to_numpy()
    direction = np.where(merged["trend"] == "increasing", 1.0, -1.0)
    confirmed = ((merged["count_test_p_value"].to_numpy(dtype=float, na_value=np.nan) < p_threshold)
                 & (np.sign(merged["_count_slope"].to_numpy(dtype=float, na_value=np.nan)) == direction))
    unconfirmed = significant & ~confirmed
    merged.loc[unconfirmed, "note"] = [
        _join_note(note, f"not confirmed: the log RII's fit says {trend}, but the count model of the "
                         f"gradient's change does not (p = {p:.3g})")
        for note, trend, p in zip(merged.loc[unconfirmed, "note"], merged.loc[unconfirmed, "trend"],
                                  merged.loc[unconfirmed, "count_test_p_value"])]
    merged.loc[unconfirmed, "trend"] = "not_confirmed"
    # A row whose log-RII fit gives no class shows no test result either (fct_trends' rule).
    merged.loc[merged["trend"].isin(["not_estimable", "insufficient_data"]), "count_test_p_value"] = np.nan
    return merged.drop(columns="_count_slope")


# The statistics a window too thin to measure does not publish (as fct_trends' insufficient rows).
STAT_COLUMNS_NULLED_WHEN_THIN = ("slope_log10", "slope_se", "intercept_log10", "t_stat", "p_value", "rho",
                                 "iterations", "converged", "dw_original", "dw_transformed", "dispersion",
                                 "apc", "apc_ci95_lower", "apc_ci95_upper")


def _join_note(note, sentence: str) -> str:
    return sentence if note is None or pd.isna(note) or note == "" else f"{note}; {sentence}"


def gap_trends(yearly_rii: pd.DataFrame, periods: pd.DataFrame, *, reason: str | None = None,
               change_tests: pd.DataFrame | None = None, **settings) -> pd.DataFrame:
    """Trend of log10(RII) on year per (area, indicator, stratifier, period), and what it means
    for the gap.

    ``yearly_rii``: TREND_KEYS + year, rii (NaN or NULL when not estimable that year) and,
    when ``reason`` names it, a column saying why an RII is missing (quoted in ``note``).
    ``periods``: period_start, period_end. The trend is fct_trends' own:
    :func:`infant_mortality.statistics.trends.fit_series_trends` with the RII as the rate, which leaves
    the years without an RII out of the fit and counts them, and owns ``min_years``, the fitter
    (``method`` and its options), estimability, the APC and its interval, the trend class and
    the notes. ``settings`` go to it unchanged (``min_years``, ``zero_rate_policy``,
    ``ci_level``, ``ci_critical``, ``p_threshold``, ``method``, ``rhotype``, ``gaps``, ...).

    ``change_tests`` (:func:`gradient_change_tests`) hold the class to fct_trends' rules
    (:func:`confirm_gap_trends`: the deaths rule and the count model's confirmation).

    Added here, the gap's own columns: ``fitted_log10_rii_mid`` (the fitted log10 RII at the
    middle of the period) and ``gap_change`` (:func:`classify_gap_change`).
    """
    missing = [c for c in [*TREND_KEYS, "year", "rii"] if c not in yearly_rii.columns]
    if missing:
        raise ValueError(f"yearly RII rows are missing columns {missing}")
    out = fit_series_trends(yearly_rii, TREND_KEYS, periods=periods, year="year", rate="rii",
                            deaths=None, live_births=None, reason=reason, **settings)
    attrs = dict(out.attrs)
    if change_tests is not None:
        out = confirm_gap_trends(out, change_tests, p_threshold=float(settings.get("p_threshold", 0.05)),
                                 min_deaths=settings.get("min_deaths"))
    mid = (out["period_start"].astype(float) + out["period_end"].astype(float)) / 2
    fitted_mid = out["intercept_log10"] + out["slope_log10"] * mid
    out["fitted_log10_rii_mid"] = fitted_mid.astype("Float64")
    out["gap_change"] = pd.array(
        [classify_gap_change(t, m) for t, m in
         zip(out["trend"], fitted_mid.to_numpy(dtype=float, na_value=np.nan))], dtype="string")
    out.attrs.update(attrs)
    return out
