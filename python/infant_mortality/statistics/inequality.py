"""The socio-economic gradient of commune rates, measured as health-equity tools measure it.

``docs/methods.md`` section 5 is the contract. For one *group* (an area -- a region or the
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
apply the per-group functions to long frames; the dbt Python models only call them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from infant_mortality.statistics.poisson import poisson_ci
from infant_mortality.statistics.trends import fit_series_trends

Z95 = float(stats.norm.ppf(0.975))
N_QUINTILES = 5

GROUP_KEYS = ["area_level", "area_code", "indicator", "period_start", "period_end", "stratifier"]
COMMUNE_COLUMNS = ["commune_code", "deaths", "live_births", "value", "higher_is_more_deprived"]
# Optional: a commune's signed counts in the area's years without a rate of its own, which enter
# the area's (and so the quintiles') sums but not the commune-level models (methods.md section 8).
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
# Measures of one group
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """One measure with its 95% interval (NaN when it does not exist) and a note."""

    estimate: float
    lower: float = math.nan
    upper: float = math.nan
    note: str | None = None


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
    """D, R, PAR, PAF and avoidable deaths (docs/methods.md section 5).

    (d1, n1), (d5, n5): deaths and live births of quintiles 1 and 5; (deaths, births): the
    whole area (every ranked commune). Rates per ``multiplier`` live births (the indicator's).
    Intervals: Poisson variance of each
    count; D and R treat the two quintiles as independent; PAR and PAF account for quintile
    5 being part of the area (the area's deaths are those of quintile 5 plus the rest).
    """
    d1, n1, d5, n5, big_d, big_n = (float(v) for v in (d1, n1, d5, n5, deaths, births))
    out: dict[str, Estimate] = {}
    if n1 <= 0 or n5 <= 0:
        empty = "quintile 1" if n1 <= 0 else "quintile 5"
        note = f"{empty} has no commune (one commune holds too large a share of the births)"
        return {m: _na(note) for m in ("D", "R", "PAR", "PAF", "avoidable_deaths")}
    k = float(multiplier)
    r1, r5, r_area = k * d1 / n1, k * d5 / n5, k * big_d / big_n

    diff = r1 - r5
    se = k * math.sqrt(d1 / n1**2 + d5 / n5**2)
    out["D"] = Estimate(diff, diff - z * se, diff + z * se)

    if d1 > 0 and d5 > 0:
        ratio = r1 / r5
        se_log = math.sqrt(1 / d1 + 1 / d5)
        out["R"] = Estimate(ratio, ratio * math.exp(-z * se_log), ratio * math.exp(z * se_log))
    elif d5 > 0:
        out["R"] = Estimate(0.0, note="no deaths in quintile 1: no log-scale interval")
    else:
        out["R"] = _na("no deaths in quintile 5: the ratio is undefined")

    par = r_area - r5
    se_par = k * math.sqrt((big_d - d5) / big_n**2 + d5 * (1 / n5 - 1 / big_n) ** 2)
    par_note = ("quintile 5 has a higher rate than the area: negative PAR (not set to 0)"
                if par < 0 else None)
    out["PAR"] = Estimate(par, par - z * se_par, par + z * se_par, par_note)
    out["avoidable_deaths"] = Estimate(par * big_n / k, (par - z * se_par) * big_n / k,
                                       (par + z * se_par) * big_n / k, par_note)

    if big_d <= 0:
        out["PAF"] = _na("no deaths in the area: the fraction is undefined")
    elif d5 <= 0:
        out["PAF"] = Estimate(100.0, note="no deaths in quintile 5: no log-scale interval")
    else:
        ratio_5 = r5 / r_area
        se_log = math.sqrt(max(1 / d5 - 1 / big_d, 0.0))
        out["PAF"] = Estimate(100 * (1 - ratio_5), 100 * (1 - ratio_5 * math.exp(z * se_log)),
                              100 * (1 - ratio_5 * math.exp(-z * se_log)), par_note)
    return out


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


def _gradient_na(n: int, note: str) -> GradientFit:
    return GradientFit(math.nan, math.nan, np.full((2, 2), np.nan), math.nan, n, note)


def poisson_gradient(deaths, births, ridit) -> GradientFit:
    """Poisson GLM of commune deaths on the ridit with offset log(births).

    Standard errors are quasi-Poisson: the model covariance times phi = max(1, Pearson chi2 /
    (n - 2)). Not estimable with fewer than 3 communes (no residual degree of freedom), or when
    the maximum-likelihood estimate does not exist: no deaths at all, or every death in the
    single commune at one end of the ridit scale (b would run to -/+ infinity).
    """
    d = np.asarray(deaths, dtype=float)
    n = np.asarray(births, dtype=float)
    x = np.asarray(ridit, dtype=float)
    k = len(d)
    if k < 3:
        return _gradient_na(k, f"{k} communes: at least 3 are needed for a gradient with a dispersion estimate")
    positive = d > 0
    if not positive.any():
        return _gradient_na(k, "no deaths: the Poisson gradient is not estimable")
    if positive.sum() == 1 and (x[positive][0] in (x.min(), x.max())):
        return _gradient_na(k, "every death is in the commune at one end of the ridit scale: "
                               "the maximum-likelihood gradient does not exist")
    fitted = _poisson_newton(d, n, x)
    if fitted is None:
        return _gradient_na(k, "the Poisson regression did not converge")
    a, b, information, mu = fitted
    dispersion = float(np.sum((d - mu) ** 2 / mu) / (k - 2))
    cov = np.linalg.inv(information) * max(1.0, dispersion)
    return GradientFit(a, b, cov, dispersion, k)


def _poisson_newton(d, n, x, max_iterations: int = 100):
    """Maximum likelihood of log E[d_i] = log n_i + a + b x_i by Newton-Raphson (for the log
    link this is IRLS, what statsmodels' GLM does), written out for two parameters: statsmodels
    spent 1.5 ms of set-up per fit, most of the inequity models' time over 5,000 groups.
    Returns (a, b, Fisher information at the estimate, fitted mu), or None without convergence.
    The tests check it against statsmodels' GLM and a matrix IRLS."""
    a, b = math.log(d.sum() / n.sum()), 0.0
    for _ in range(max_iterations):
        mu = n * np.exp(a + b * x)
        residual = d - mu
        score_a, score_b = residual.sum(), (x * residual).sum()
        (h_aa, h_ab), (_, h_bb) = _information(mu, x)
        det = h_aa * h_bb - h_ab * h_ab
        if not (math.isfinite(det) and det > 0):
            return None
        step_a, step_b = (h_bb * score_a - h_ab * score_b) / det, (h_aa * score_b - h_ab * score_a) / det
        a, b = a + step_a, b + step_b
        if abs(step_a) + abs(step_b) <= 1e-13 * (1.0 + abs(a) + abs(b)):
            mu = n * np.exp(a + b * x)
            return float(a), float(b), _information(mu, x), mu
    return None


def _information(mu, x) -> np.ndarray:
    """Fisher information of (a, b) for the Poisson log-link model at fitted means mu."""
    cross = (mu * x).sum()
    return np.array([[mu.sum(), cross], [cross, (mu * x * x).sum()]])


def sii_rii(fit: GradientFit, multiplier: float, z: float = Z95) -> dict[str, Estimate]:
    """SII = (e^a - e^(a+b)) * multiplier (delta method), RII = e^(-b) (log scale), and a, b."""
    if not fit.estimable:
        return {m: _na(fit.note) for m in ("SII", "RII", "gradient_a", "gradient_b")}
    a, b, cov = fit.a, fit.b, fit.cov
    note = (f"quasi-Poisson dispersion {fit.dispersion:.3g}"
            + (" (below 1: Poisson standard errors kept)" if fit.dispersion < 1 else ""))
    top, bottom = math.exp(a), math.exp(a + b)
    sii = multiplier * (top - bottom)
    grad = multiplier * np.array([top - bottom, -bottom])
    se_sii = math.sqrt(float(grad @ cov @ grad))
    se_a, se_b = math.sqrt(cov[0, 0]), math.sqrt(cov[1, 1])
    return {
        "SII": Estimate(sii, sii - z * se_sii, sii + z * se_sii, note),
        "RII": Estimate(math.exp(-b), math.exp(-b - z * se_b), math.exp(-b + z * se_b), note),
        "gradient_a": Estimate(a, a - z * se_a, a + z * se_a, note),
        "gradient_b": Estimate(b, b - z * se_b, b + z * se_b, note),
    }


def concentration_index(deaths, births, ridit, z: float = Z95) -> Estimate:
    """C = 2 sum(w_i r_i x_i) / mu - 1 (w_i births share, r_i rate, mu = sum w_i r_i).

    Interval: the convenient regression 2 sigma_x^2 r_i / mu = alpha + beta x_i fitted by
    weighted least squares with the births as weights (beta = C exactly); its standard error
    (residual variance on n - 2 df) gives C -/+ z se. Needs 3 communes and at least one death.
    """
    d = np.asarray(deaths, dtype=float)
    n = np.asarray(births, dtype=float)
    x = np.asarray(ridit, dtype=float)
    if len(d) < 3:
        return _na(f"{len(d)} communes: at least 3 are needed for an interval")
    w = n / n.sum()
    r = d / n
    mu = float(w @ r)
    if mu <= 0:
        return _na("no deaths: the concentration index is undefined")
    c = 2 * float(np.sum(w * r * x)) / mu - 1
    sigma2 = float(w @ (x - w @ x) ** 2)
    lhs = 2 * sigma2 * r / mu
    # Weighted least squares by its normal equations (statsmodels' WLS gives the same to 1e-12,
    # at 0.3 ms of set-up per group): the slope is C; its se uses the residual variance on n - 2 df.
    X = np.column_stack([np.ones_like(x), x])
    xtwx = X.T @ (n[:, None] * X)
    beta = np.linalg.solve(xtwx, X.T @ (n * lhs))
    residual = lhs - X @ beta
    variance = float(n @ residual**2) / (len(d) - 2)
    se = math.sqrt(variance * np.linalg.inv(xtwx)[1, 1])
    return Estimate(c, c - z * se, c + z * se)


def group_measures(deaths, births, ridit, quintile, multiplier: float, z: float = Z95, area_deaths=None,
                   area_births=None):
    """Every measure of one ranked group: ({measure: Estimate}, GradientFit).

    (deaths, births): the communes' published counts, which the commune-level models (the
    gradient, CIX) fit; (area_deaths, area_births), default the same: their counts in the
    area's count, which the quintile and area sums of D, R, PAR, PAF add up (methods.md
    section 8). A commune without published births has no rate and is left out of the fits.
    """
    d = np.asarray(deaths, dtype=float)
    n = np.asarray(births, dtype=float)
    da = d if area_deaths is None else np.asarray(area_deaths, dtype=float)
    na = n if area_births is None else np.asarray(area_births, dtype=float)
    q = np.asarray(quintile)
    out = gap_measures(da[q == 1].sum(), na[q == 1].sum(), da[q == N_QUINTILES].sum(),
                       na[q == N_QUINTILES].sum(), da.sum(), na.sum(), multiplier, z)
    rated = n > 0
    x = np.asarray(ridit, dtype=float)[rated]
    fit = poisson_gradient(d[rated], n[rated], x)
    out.update(sii_rii(fit, multiplier, z))
    out["CIX"] = concentration_index(d[rated], n[rated], x, z)
    return out, fit


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


def _one_multiplier(values: np.ndarray) -> float:
    """The one rate multiplier of a group's rows (the indicator's)."""
    found = np.unique(values)
    if len(found) != 1 or not found[0] > 0:
        raise ValueError(f"a group needs one positive rate multiplier, got {found.tolist()}")
    return float(found[0])


def inequality_measures(membership: pd.DataFrame, keys: list[str] = GROUP_KEYS) -> pd.DataFrame:
    """Long frame: one row per group and measure (:data:`MEASURES`) with estimate, interval,
    counts of the communes ranked and left out, and a note."""
    reason = membership["exclusion_reason"].astype(object).fillna("").to_numpy(dtype=str)
    deaths = pd.to_numeric(membership["deaths"]).to_numpy(dtype=float, na_value=np.nan)
    births = pd.to_numeric(membership["live_births"]).to_numpy(dtype=float, na_value=np.nan)
    area_deaths, area_births = (c.to_numpy(dtype=float, na_value=np.nan) for c in area_counts(membership))
    ridit = pd.to_numeric(membership["ridit"]).to_numpy(dtype=float, na_value=np.nan)
    quintile = pd.to_numeric(membership["quintile"]).to_numpy(dtype=float, na_value=np.nan)
    multiplier = pd.to_numeric(membership["multiplier"]).to_numpy(dtype=float, na_value=np.nan)
    rows = []
    # Positional indices per group: numpy slices instead of a pandas frame per group.
    for key, idx in _groups(membership, keys).indices.items():
        key = key if isinstance(key, tuple) else (key,)
        r = idx[reason[idx] == ""]
        base = dict(zip(keys, key))
        base.update(
            n_communes=len(r),
            n_communes_without_value=int(np.sum(reason[idx] == "no_value")),
            n_communes_without_births=int(np.sum(reason[idx] == "no_live_births")),
            deaths=int(area_deaths[r].sum()),
            live_births=int(area_births[r].sum()),
        )
        if len(r) == 0:
            measures = {m: _na("no commune with both live births and a value") for m in MEASURES}
        else:
            measures, _ = group_measures(deaths[r], births[r], ridit[r], quintile[r], _one_multiplier(multiplier[r]),
                                         area_deaths=area_deaths[r], area_births=area_births[r])
        for m in MEASURES:
            e = measures[m]
            rows.append({**base, "measure": m, "estimate": e.estimate, "ci95_lower": e.lower,
                         "ci95_upper": e.upper, "ci_method": CI_METHODS[m], "note": e.note})
    cols = keys + ["measure", "estimate", "ci95_lower", "ci95_upper", "n_communes",
                   "n_communes_without_value", "n_communes_without_births", "deaths",
                   "live_births", "ci_method", "note"]
    out = pd.DataFrame(rows, columns=cols)
    for c in ("estimate", "ci95_lower", "ci95_upper"):
        out[c] = out[c].astype(float).replace([np.inf, -np.inf], np.nan)
    return out


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
    notes = []
    for i in range(len(out)):
        parts = []
        if isinstance(out["benchmark_note"].iloc[i], str):
            parts.append(out["benchmark_note"].iloc[i])
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


def classify_gap_change(trend: str, fitted_log10_rii_mid: float) -> str:
    """How the relative gap |log RII| moved over the period.

    ``held`` when the trend of log10(RII) is not significant (``stationary``); when it is, the
    gap ``widened`` if the slope moves log10(RII) away from 0 in the direction of the gradient
    (the sign of the fitted log10(RII) at the middle of the period) and ``narrowed`` if it moves
    it towards 0. ``not_estimable`` when the trend is.
    """
    if trend == "not_estimable":
        return "not_estimable"
    if trend == "stationary" or fitted_log10_rii_mid == 0:
        return "held"
    rising = trend == "increasing"
    return "widened" if rising == (fitted_log10_rii_mid > 0) else "narrowed"


def gap_trends(yearly_rii: pd.DataFrame, periods: pd.DataFrame, *, reason: str | None = None,
               **settings) -> pd.DataFrame:
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

    Added here, the gap's own columns: ``fitted_log10_rii_mid`` (the fitted log10 RII at the
    middle of the period) and ``gap_change`` (:func:`classify_gap_change`).
    """
    missing = [c for c in [*TREND_KEYS, "year", "rii"] if c not in yearly_rii.columns]
    if missing:
        raise ValueError(f"yearly RII rows are missing columns {missing}")
    out = fit_series_trends(yearly_rii, TREND_KEYS, periods=periods, year="year", rate="rii",
                            deaths=None, live_births=None, reason=reason, **settings)
    attrs = dict(out.attrs)
    mid = (out["period_start"].astype(float) + out["period_end"].astype(float)) / 2
    fitted_mid = out["intercept_log10"] + out["slope_log10"] * mid
    out["fitted_log10_rii_mid"] = fitted_mid.astype("Float64")
    out["gap_change"] = pd.array(
        [classify_gap_change(t, m) for t, m in
         zip(out["trend"], fitted_mid.to_numpy(dtype=float, na_value=np.nan))], dtype="string")
    out.attrs.update(attrs)
    return out
