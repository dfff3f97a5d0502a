"""Trend mart rows: Prais-Winsten of log10(yearly rate) on year, per area, indicator and period.

``fit_trends`` turns the yearly rates (mart ``fct_rates_commune_year``) and the analysis
periods (model ``int_analysis_periods``) into one row per (area_level, area_code, indicator,
period_start, period_end), following ``docs/methods.md`` section 4:

* y_t = log10(rate_t) regressed on year with AR(1) errors, iterated Prais-Winsten exactly as
  Stata ``prais y year`` (``prais_winsten.prais_winsten_trend_batch``: all series at once).
* APC = (10^b1 - 1) * 100, interval (10^(b1 -+ c se) - 1) * 100 with c = t(1 - a/2, df) and
  df = residual degrees of freedom of the final transformed regression (= n_years_used - 2;
  one less when Cochrane-Orcutt is used or the first observation was dropped because |rho| >= 1,
  as in Stata's own interval). ``ci_critical="normal"`` uses the normal quantile (1.96) instead.
* Class: ``increasing`` if p < p_threshold and b1 > 0, ``decreasing`` if p < p_threshold and
  b1 < 0, otherwise ``stationary``; ``not_estimable`` when fewer than ``min_years`` usable years
  remain (or no residual degree of freedom is left), with the statistics NULL and the reason in
  ``note``; also when the final transformed regression keeps fewer than 4 rows, i.e. 2 residual
  degrees of freedom (|rho| >= 1 drops the first row of each run), or fits exactly (se = 0). ``min_years`` must be at least 4 (5 with ``method="corc"``): with 3 years the
  iteration always runs to rho = -1.
* Years without a rate (NULL rate, or no row at all in the window) and zero-rate years
  (log10(0) is undefined) are never replaced silently: they are left out of the fit, counted
  (``n_zero_years``; ``n_years`` - ``n_years_used`` in general) and listed in ``note``.
  ``zero_rate_policy="add_half_death"`` instead fits zero-count years at 0.5 death / births
  (also listed in ``note``). A year left out inside the window is a time gap: by default rho
  computations restart at the gap, as Stata does with ``tsset`` data (see the
  ``prais_winsten`` module docstring; ``gaps="consecutive"`` for R ``prais`` behaviour).

The time spent in the statistics is logged (logger ``infant_mortality.trends``, INFO) and
stored in ``result.attrs["fit_seconds"]`` (with ``attrs["n_series"]``, ``attrs["n_fitted"]``).
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pandas as pd
from scipy import stats

from infant_mortality.prais_winsten import (
    GAP_POLICIES,
    METHODS,
    RHOTYPES,
    prais_winsten_trend_batch,
)

logger = logging.getLogger(__name__)

ZERO_RATE_POLICIES = ("drop", "add_half_death")
CI_CRITICAL = ("t", "normal")
TREND_CLASSES = ("increasing", "decreasing", "stationary", "not_estimable")

KEYS = ["area_level", "area_code", "indicator", "period_start", "period_end"]

OUTPUT_DTYPES = {
    "area_level": "string",
    "area_code": "string",
    "area_name": "string",
    "region_code": "string",
    "indicator": "string",
    "period_start": "Int64",
    "period_end": "Int64",
    "n_years": "Int64",
    "n_years_used": "Int64",
    "n_zero_years": "Int64",
    "slope_log10": "Float64",
    "slope_se": "Float64",
    "t_stat": "Float64",
    "p_value": "Float64",
    "rho": "Float64",
    "iterations": "Int64",
    "converged": "boolean",
    "dw_original": "Float64",
    "dw_transformed": "Float64",
    "apc": "Float64",
    "apc_ci95_lower": "Float64",
    "apc_ci95_upper": "Float64",
    "trend": "string",
    "note": "string",
}
OUTPUT_COLUMNS = list(OUTPUT_DTYPES)

RATE_COLUMNS = ["area_level", "area_code", "area_name", "region_code", "year", "indicator",
                "deaths", "live_births", "rate_per_1000"]
PERIOD_COLUMNS = ["period_start", "period_end"]


def _year_list(years) -> str:
    """2010, 2011, 2012, 2015 -> '2010-2012, 2015'."""
    years = sorted(int(y) for y in years)
    parts, start, prev = [], None, None
    for y in years:
        if start is None:
            start = prev = y
        elif y == prev + 1:
            prev = y
        else:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = y
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(parts)


def _validate(rates, periods, min_years, zero_rate_policy, ci_level, ci_critical, p_threshold,
              method, rhotype, gaps):
    missing = [c for c in RATE_COLUMNS if c not in rates.columns]
    if missing:
        raise ValueError(f"rates is missing columns {missing}")
    missing = [c for c in PERIOD_COLUMNS if c not in periods.columns]
    if missing:
        raise ValueError(f"periods is missing columns {missing}")
    if zero_rate_policy not in ZERO_RATE_POLICIES:
        raise ValueError(f"zero_rate_policy must be one of {ZERO_RATE_POLICIES}, got {zero_rate_policy!r}")
    if ci_critical not in CI_CRITICAL:
        raise ValueError(f"ci_critical must be one of {CI_CRITICAL}, got {ci_critical!r}")
    if not 0 < ci_level < 1:
        raise ValueError(f"ci_level must be between 0 and 1, got {ci_level!r}")
    if not 0 < p_threshold < 1:
        raise ValueError(f"p_threshold must be between 0 and 1, got {p_threshold!r}")
    if method not in METHODS or rhotype not in RHOTYPES or gaps not in GAP_POLICIES:
        raise ValueError(f"bad method/rhotype/gaps: {method!r}, {rhotype!r}, {gaps!r}")
    # With 3 years (2 parameters) the Prais-Winsten iteration always runs to rho = -1 (the OLS
    # residuals of 3 points are proportional to (1, -2, 1)), and Cochrane-Orcutt on 4 years
    # keeps 3 rows: neither says anything about a trend.
    floor = 5 if method == "corc" else 4
    if int(min_years) != min_years or min_years < floor:
        raise ValueError(f"min_years must be an integer >= {floor} for method {method!r}, got {min_years!r}")


def _empty_output() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in OUTPUT_DTYPES.items()})


def fit_trends(
    rates: pd.DataFrame,
    periods: pd.DataFrame,
    *,
    min_years: int = 5,
    zero_rate_policy: str = "drop",
    ci_level: float = 0.95,
    ci_critical: str = "t",
    p_threshold: float = 0.05,
    method: str = "prais",
    rhotype: str = "regress",
    twostep: bool = False,
    tol: float = 1e-6,
    max_iter: int = 100,
    gaps: str = "restart",
) -> pd.DataFrame:
    """One trend row per (area_level, area_code, indicator, period_start, period_end).

    ``rates``: area_level, area_code, area_name, region_code, year, indicator, deaths,
    live_births, rate_per_1000 (NULL when unavailable; optional ``unavailable_reason``).
    ``periods``: period_start, period_end (other columns ignored; duplicates dropped).
    Every series present in ``rates`` gets a row for every period. See the module docstring
    for the statistics; the Prais-Winsten options are those of ``prais_winsten``.
    """
    _validate(rates, periods, min_years, zero_rate_policy, ci_level, ci_critical, p_threshold,
              method, rhotype, gaps)
    t_start = time.perf_counter()
    rates = rates.reset_index(drop=True)
    periods = periods.reset_index(drop=True)

    r = pd.DataFrame({
        "area_level": rates["area_level"].astype("string"),
        "area_code": rates["area_code"].astype("string"),
        "indicator": rates["indicator"].astype("string"),
        "year": pd.to_numeric(rates["year"]).astype("Int64"),
        "deaths": pd.to_numeric(rates["deaths"]).astype("Float64"),
        "live_births": pd.to_numeric(rates["live_births"]).astype("Float64"),
        "rate": pd.to_numeric(rates["rate_per_1000"]).astype("Float64"),
    })
    if r[["area_level", "area_code", "indicator", "year"]].isna().any().any():
        raise ValueError("rates has NULL area_level, area_code, indicator or year")
    if (r["rate"] < 0).any():
        raise ValueError("rates has negative rate_per_1000")
    if r.duplicated(["area_level", "area_code", "indicator", "year"]).any():
        raise ValueError("rates has more than one row per (area_level, area_code, indicator, year)")

    p = (pd.DataFrame({
        "period_start": pd.to_numeric(periods["period_start"]).astype("Int64"),
        "period_end": pd.to_numeric(periods["period_end"]).astype("Int64"),
    }).dropna().drop_duplicates().sort_values(PERIOD_COLUMNS, ignore_index=True))
    if (p["period_end"] < p["period_start"]).any():
        raise ValueError("periods has period_end < period_start")

    areas = (pd.DataFrame({
        "area_level": r["area_level"], "area_code": r["area_code"],
        "area_name": rates["area_name"].astype("string"),
        "region_code": rates["region_code"].astype("string"),
    }).sort_values(["area_level", "area_code"])
      .groupby(["area_level", "area_code"], as_index=False, sort=False)
      .agg(area_name=("area_name", "first"), region_code=("region_code", "first")))

    series = (r[["area_level", "area_code", "indicator"]].drop_duplicates()
              .sort_values(["area_level", "area_code", "indicator"], ignore_index=True))
    grid = series.merge(p, how="cross")
    if grid.empty:
        out = _empty_output()
        out.attrs.update(fit_seconds=0.0, n_series=0, n_fitted=0)
        return out
    grid["sid"] = np.arange(len(grid))

    # Each rate row in each period window that contains it.
    rows = r.merge(grid, on=["area_level", "area_code", "indicator"])
    rows = rows[(rows["year"] >= rows["period_start"]) & (rows["year"] <= rows["period_end"])]
    rate = rows["rate"].to_numpy(dtype=float, na_value=np.nan)
    deaths = rows["deaths"].to_numpy(dtype=float, na_value=np.nan)
    births = rows["live_births"].to_numpy(dtype=float, na_value=np.nan)
    unavailable = np.isnan(rate)
    zero = ~unavailable & (rate == 0)
    y_rate = np.where(unavailable | zero, np.nan, rate)
    half = np.zeros(len(rows), dtype=bool)
    if zero_rate_policy == "add_half_death":
        half = zero & (births > 0) & ~(deaths > 0)
        y_rate = np.where(half, 0.5 / np.where(half, births, 1.0) * 1000.0, y_rate)
    used = np.isfinite(y_rate) & (y_rate > 0)
    rows = rows.assign(_used=used, _zero=zero, _half=half, _unavailable=unavailable,
                       _y=np.log10(np.where(used, y_rate, 1.0)))

    sid_all = rows["sid"].to_numpy()
    n_sid = len(grid)
    n_used = np.bincount(sid_all[used], minlength=n_sid)
    n_zero = np.bincount(sid_all[zero], minlength=n_sid)

    # Statistics for the series with enough usable years.
    fit_mask = used & (n_used[sid_all] >= min_years)
    fit = prais_winsten_trend_batch(
        rows["_y"].to_numpy()[fit_mask],
        rows["year"].to_numpy(dtype=float)[fit_mask],
        sid_all[fit_mask],
        method=method, rhotype=rhotype, twostep=twostep, tol=tol, max_iter=max_iter, gaps=gaps,
    )
    fit_seconds = fit.elapsed_seconds
    idx = fit.series.astype(int)

    def full(values, dtype=float, fill=np.nan):
        a = np.full(n_sid, fill, dtype=dtype)
        a[idx] = values
        return a

    slope = full(fit.slope)
    se = full(fit.slope_se)
    t_stat = full(fit.t_stat)
    p_value = full(fit.p_value)
    rho = full(fit.rho)
    df = full(fit.df_resid.astype(float))
    iterations = full(fit.iterations.astype(float))
    converged = full(fit.converged.astype(float))
    oob = full(fit.rho_out_of_bounds.astype(float), fill=0.0) > 0
    # Breaks in the run of fitted years (whatever the gap policy of the fit).
    fy = pd.DataFrame({"sid": sid_all[fit_mask], "year": rows["year"].to_numpy(dtype=int)[fit_mask]})
    fy = fy.sort_values(["sid", "year"])
    brk = (fy["sid"].diff() == 0) & (fy["year"].diff() != 1)
    n_gaps = np.bincount(fy["sid"].to_numpy()[brk.to_numpy()], minlength=n_sid)
    estimable = np.isfinite(se) & np.isfinite(p_value) & (se >= 0)
    # A fit that is technically possible can still say nothing: when |rho| >= 1 drops the first
    # observation of every run, a short gappy series can end with 3 rows for 2 parameters and a
    # near-exact fit (se ~ 0, p ~ 0). Require 2 residual degrees of freedom in the final
    # regression, and call anything less not estimable rather than a "significant" trend.
    final_rows = df + 2
    too_few_final_rows = estimable & (df < 2)
    perfect_fit = estimable & (se == 0)
    estimable = estimable & ~too_few_final_rows & ~perfect_fit

    alpha = 1.0 - ci_level
    with np.errstate(invalid="ignore", over="ignore"):
        if ci_critical == "t":
            crit = stats.t.ppf(1.0 - alpha / 2.0, np.where(df > 0, df, np.nan))
        else:
            crit = np.full(n_sid, stats.norm.ppf(1.0 - alpha / 2.0))
        apc = (10.0 ** slope - 1.0) * 100.0
        lower = (10.0 ** (slope - crit * se) - 1.0) * 100.0
        upper = (10.0 ** (slope + crit * se) - 1.0) * 100.0
    significant = p_value < p_threshold
    trend = np.where(significant & (slope > 0), "increasing",
                     np.where(significant & (slope < 0), "decreasing", "stationary"))
    trend = np.where(estimable, trend, "not_estimable")

    # Notes: one sentence per issue, joined with '; '.
    notes = [[] for _ in range(n_sid)]
    yrs = rows["year"].to_numpy(dtype=int)
    present = {}
    for flag, label in ((unavailable, "unavailable"), (zero & ~half, "zero"), (half, "half")):
        s_, y_ = sid_all[flag], yrs[flag]
        groups = {}
        for s, y in zip(s_.tolist(), y_.tolist()):
            groups.setdefault(s, []).append(y)
        present[label] = groups
    reasons = {}
    if "unavailable_reason" in rates.columns:
        reason_col = rates["unavailable_reason"].astype("string")
        reason_frame = r[["area_level", "area_code", "indicator", "year"]].assign(
            reason=reason_col.to_numpy())
        rr = rows[["sid", "area_level", "area_code", "indicator", "year"]].merge(
            reason_frame, on=["area_level", "area_code", "indicator", "year"], how="left")
        rr = rr[unavailable & rr["reason"].notna().to_numpy()]
        for s, reason in zip(rr["sid"].tolist(), rr["reason"].tolist()):
            reasons.setdefault(s, set()).add(str(reason))
    covered = np.bincount(sid_all, minlength=n_sid)
    g_start = grid["period_start"].to_numpy(dtype=int)
    g_end = grid["period_end"].to_numpy(dtype=int)
    years_by_sid = {}
    short = (covered < g_end - g_start + 1)[sid_all]
    for s, y in zip(sid_all[short].tolist(), yrs[short].tolist()):
        years_by_sid.setdefault(s, set()).add(y)
    zero_note = ("log10 undefined, left out of the fit" if zero_rate_policy == "drop"
                 else "no births to add 0.5 death to, left out of the fit")
    for s in range(n_sid):
        note = notes[s]
        span = g_end[s] - g_start[s] + 1
        if covered[s] < span:
            absent = set(range(g_start[s], g_end[s] + 1)) - years_by_sid.get(s, set())
            note.append(f"no data for {_year_list(absent)}")
        if s in present["unavailable"]:
            text = f"rate unavailable (NULL) for {_year_list(present['unavailable'][s])}"
            if s in reasons:
                text += f" ({', '.join(sorted(reasons[s]))})"
            note.append(text)
        if s in present["zero"]:
            note.append(f"zero rate in {_year_list(present['zero'][s])} ({zero_note})")
        if s in present["half"]:
            note.append(f"zero deaths in {_year_list(present['half'][s])}: fitted at 0.5 death "
                        "(zero_rate_policy add_half_death)")
        if n_used[s] < min_years:
            note.append(f"not estimable: {n_used[s]} usable years, fewer than min_years = {min_years}")
        elif too_few_final_rows[s]:
            note.append(f"not estimable: the final transformed regression kept {int(final_rows[s])} "
                        f"observations for 2 parameters (|rho| = {abs(rho[s]):.3g} >= 1 dropped the "
                        "first of each run of years)")
        elif perfect_fit[s]:
            note.append("not estimable: the transformed regression fits exactly (residual variance 0)")
        elif not estimable[s]:
            note.append("not estimable: no residual degrees of freedom left in the transformed "
                        "regression" if df[s] <= 0
                        else "not estimable: singular transformed regression (rho = 1)")
        if n_used[s] >= min_years:
            if n_gaps[s] > 0:
                note.append("years used are not consecutive: " + (
                    "rho computations restarted at each gap (Stata tsset convention)"
                    if gaps == "restart" else "treated as consecutive observations"))
            if oob[s] and estimable[s]:
                note.append(f"|rho| >= 1 ({rho[s]:.6g}): first observation dropped in the final "
                            "fit (Cochrane-Orcutt)")
            if converged[s] == 0 and estimable[s]:
                note.append(f"rho did not converge in {max_iter} iterations "
                            "(statistics of the last iteration)")

    keep_stats = estimable
    grid = grid.merge(areas, on=["area_level", "area_code"], how="left")

    def col(values, dtype):
        v = np.where(keep_stats, np.asarray(values, dtype=float), np.nan)
        if dtype == "boolean":
            return pd.array([None if np.isnan(x) else bool(x) for x in v], dtype="boolean")
        return pd.array(v, dtype=dtype)

    out = pd.DataFrame({
        "area_level": grid["area_level"].astype("string"),
        "area_code": grid["area_code"].astype("string"),
        "area_name": grid["area_name"].astype("string"),
        "region_code": grid["region_code"].astype("string"),
        "indicator": grid["indicator"].astype("string"),
        "period_start": grid["period_start"].astype("Int64"),
        "period_end": grid["period_end"].astype("Int64"),
        "n_years": pd.Series(g_end - g_start + 1, dtype="Int64"),
        "n_years_used": pd.Series(n_used, dtype="Int64"),
        "n_zero_years": pd.Series(n_zero, dtype="Int64"),
        "slope_log10": col(slope, "Float64"),
        "slope_se": col(se, "Float64"),
        "t_stat": col(t_stat, "Float64"),
        "p_value": col(p_value, "Float64"),
        "rho": col(rho, "Float64"),
        "iterations": col(iterations, "Int64"),
        "converged": col(converged, "boolean"),
        "dw_original": col(full(fit.dw_original), "Float64"),
        "dw_transformed": col(full(fit.dw_transformed), "Float64"),
        "apc": col(apc, "Float64"),
        "apc_ci95_lower": col(lower, "Float64"),
        "apc_ci95_upper": col(upper, "Float64"),
        "trend": pd.Series(trend, dtype="string"),
        "note": pd.Series(["; ".join(n) if n else None for n in notes], dtype="string"),
    })
    out = out[OUTPUT_COLUMNS].astype(OUTPUT_DTYPES)
    total_seconds = time.perf_counter() - t_start
    out.attrs.update(fit_seconds=fit_seconds, total_seconds=total_seconds,
                     n_series=int(n_sid), n_fitted=int(len(fit)))
    logger.info("fit_trends: %d series (%d fitted by Prais-Winsten) in %.3f s of statistics "
                "(%.3f s in total)", n_sid, len(fit), fit_seconds, total_seconds)
    return out
