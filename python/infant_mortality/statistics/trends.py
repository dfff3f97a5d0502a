"""Trend rows: a fitted line of log10(yearly rate) on year, per series and analysis period.

The shell of trend fitting (``docs/methods/trends.md``). It owns every rule that does
not depend on the regression method; the method is a *fitter* chosen by name from
``infant_mortality.statistics.trend_fitters`` (``prais``, the default, and ``corc``: Prais-Winsten /
Cochrane-Orcutt as Stata ``prais``; ``ols``: plain least squares; ``poisson``: quasi-Poisson
regression of the counts). The fitter owns its own rules: which years it fits (log rates or
counts), degrees of freedom, when a fit is estimable and valid, its method-specific columns and
notes. ``fct_trends`` holds one row per series, period and method of :data:`MART_METHODS`.

Two entry points:

* :func:`fit_series_trends` -- generic: rows of (key columns..., year, rate) for any series
  (an area's yearly rates, a yearly inequality index, ...), optionally crossed with analysis
  periods; one row per series (and period).
* :func:`fit_trends` -- the ``fct_trends`` rows from ``fct_area_year_rates`` and
  ``int_analysis_periods``: series keyed by (area_level, area_code, indicator).

Rules of the shell:

* y_t = log10(rate_t) regressed on year by the fitter, on the usable years of the window; a
  fitter of counts (``data = "counts"``) gets the deaths and births of every year with births,
  zero-death years included.
* APC = (10^b1 - 1) * 100, interval (10^(b1 -+ c se) - 1) * 100 with c = t(1 - a/2, df),
  df = the fitter's residual degrees of freedom; ``ci_critical="normal"`` uses the normal
  quantile (1.96) instead. The fitted log10 rate at year t is intercept_log10 + slope_log10 * t
  (Stata's ``_cons``, uncentred).
* The p-value is the fitter's (t with its df) under ``ci_critical="t"`` and from the normal
  distribution under ``"normal"``, and ``ci_level`` must be 1 - ``p_threshold``: the class then
  says exactly whether the interval beside it excludes 0 (never contradicts it).
* Class: ``increasing`` if p < p_threshold and b1 > 0, ``decreasing`` if p < p_threshold and
  b1 < 0, otherwise ``stationary``; ``not_estimable`` when fewer than ``min_years`` usable
  years remain or the fitter says the fit is not estimable (or not valid), with the statistics
  NULL and the reason in ``note``; ``insufficient_data`` (first of all, whatever the years and
  the fit) when the years with a rate hold fewer than ``min_deaths`` deaths, so every method
  says the same of a series too thin to measure (statistics kept when the fit is estimable). ``min_years`` must be at least the fitter's ``min_years_floor``.
* Years without a rate (NULL rate, or no row at all in the window) and zero-rate years
  (log10(0) is undefined) are never replaced silently: they are left out of the fit, counted
  (``n_zero_years``; ``n_years`` - ``n_years_used`` in general) and listed in ``note``.
  ``zero_rate_policy="add_half_death"`` instead fits zero-count years at 0.5 death / births
  (also listed in ``note``).

The time spent in the statistics is logged (logger ``infant_mortality.statistics.trends``, INFO) and
stored in ``result.attrs["fit_seconds"]`` (with ``attrs["n_series"]``, ``attrs["n_fitted"]``,
``attrs["method_label"]``).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from infant_mortality.statistics.trend_fitters import METHOD_COLUMNS, SeriesData, get_fitter

logger = logging.getLogger(__name__)

ZERO_RATE_POLICIES = ("drop", "add_half_death")
CI_CRITICAL = ("t", "normal")
TREND_CLASSES = ("increasing", "decreasing", "stationary", "not_confirmed", "not_estimable", "insufficient_data")
CLASSED = ("increasing", "decreasing", "stationary")

# fct_trends' methods (the `method` column) and the fitter of each; the study's log10-rate fit
# takes its fitter from the settings (var trend_prais_variant: prais, corc or ols).
MART_METHODS = {"prais_winsten": None, "poisson": "poisson", "joinpoint": "joinpoint"}
# The method whose test holds its size under no trend in every deaths band, with and without
# extra-Poisson variation (fct_trend_calibration; docs/methods/trends.md, "Trend calibration"): the
# other methods' increasing/decreasing stand only where it says the same, else not_confirmed.
CONFIRMING_METHOD = "poisson"

AREA_KEYS = ["area_level", "area_code", "indicator"]
KEYS = ["area_level", "area_code", "indicator", "period_start", "period_end", "method"]

# Statistics columns of every trend row, after the series keys (and period columns).
STAT_DTYPES = {
    "n_years": "Int64",
    "n_years_used": "Int64",
    "n_zero_years": "Int64",
    "n_deaths": "Int64",
    "slope_log10": "Float64",
    "intercept_log10": "Float64",
    "slope_se": "Float64",
    "t_stat": "Float64",
    "p_value": "Float64",
    "rho": "Float64",
    "iterations": "Int64",
    "converged": "boolean",
    "dw_original": "Float64",
    "dw_transformed": "Float64",
    "dispersion": "Float64",
    "apc": "Float64",
    "apc_ci95_lower": "Float64",
    "apc_ci95_upper": "Float64",
    "trend": "string",
    "note": "string",
    "segments": "string",
}

OUTPUT_DTYPES = {
    "area_level": "string",
    "area_code": "string",
    "area_name": "string",
    "region_code": "string",
    "indicator": "string",
    "period_start": "Int64",
    "period_end": "Int64",
    "method": "string",
    "fitter": "string",
    "method_label": "string",
    **STAT_DTYPES,
    "n_methods_classed": "Int64",
    "n_methods_agreeing": "Int64",
    "methods_disagreeing": "string",
}
OUTPUT_COLUMNS = list(OUTPUT_DTYPES)

RATE_COLUMNS = ["area_level", "area_code", "area_name", "region_code", "year", "indicator",
                "deaths", "live_births", "multiplier", "rate_per_1000"]
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


def _check_settings(fitter, min_years, zero_rate_policy, ci_level, ci_critical, p_threshold):
    if zero_rate_policy not in ZERO_RATE_POLICIES:
        raise ValueError(f"zero_rate_policy must be one of {ZERO_RATE_POLICIES}, got {zero_rate_policy!r}")
    if ci_critical not in CI_CRITICAL:
        raise ValueError(f"ci_critical must be one of {CI_CRITICAL}, got {ci_critical!r}")
    if not 0 < ci_level < 1:
        raise ValueError(f"ci_level must be between 0 and 1, got {ci_level!r}")
    if not 0 < p_threshold < 1:
        raise ValueError(f"p_threshold must be between 0 and 1, got {p_threshold!r}")
    if abs(ci_level - (1.0 - p_threshold)) > 1e-9:
        raise ValueError(f"ci_level ({ci_level!r}) must be 1 - p_threshold ({p_threshold!r}): a trend class "
                         "must say whether the interval beside it excludes 0 (vars trend_ci_level, "
                         "trend_p_threshold)")
    floor = fitter.min_years_floor
    if int(min_years) != min_years or min_years < floor:
        raise ValueError(f"min_years must be an integer >= {floor} for {fitter.label}, got {min_years!r}")


def _typed_rows(rows, keys, year, rate, deaths, live_births, multiplier, reason) -> pd.DataFrame:
    """The input rows with fixed column names and types, checked: keys, year, deaths,
    live_births, multiplier, rate, reason (optional columns all-NULL when absent)."""

    def optional(name, dtype):
        if name is not None and name in rows.columns:
            return rows[name].astype(dtype) if dtype == "string" else pd.to_numeric(rows[name]).astype(dtype)
        return pd.Series(pd.NA, index=rows.index, dtype=dtype)

    r = pd.DataFrame({k: rows[k].astype("string") for k in keys})
    r["year"] = pd.to_numeric(rows[year]).astype("Int64")
    r["deaths"] = optional(deaths, "Float64")
    r["live_births"] = optional(live_births, "Float64")
    r["multiplier"] = optional(multiplier, "Float64")
    r["rate"] = pd.to_numeric(rows[rate]).astype("Float64")
    r["reason"] = optional(reason, "string")
    if r[[*keys, "year"]].isna().any().any():
        raise ValueError(f"rows has NULL {', '.join(keys)} or {year}")
    if (r["rate"] < 0).any():
        raise ValueError(f"rows has a negative {rate}")
    if r.duplicated([*keys, "year"]).any():
        raise ValueError(f"rows has more than one row per ({', '.join(keys)}, {year})")
    return r


def _series_grid(r, rows, keys, periods, attributes) -> pd.DataFrame:
    """One row per series and period window (``sid`` numbers them), with the attributes."""
    series = r[keys].drop_duplicates().sort_values(keys, ignore_index=True)
    if periods is not None:
        p = (pd.DataFrame({
            "period_start": pd.to_numeric(periods["period_start"]).astype("Int64"),
            "period_end": pd.to_numeric(periods["period_end"]).astype("Int64"),
        }).dropna().drop_duplicates().sort_values(PERIOD_COLUMNS, ignore_index=True))
        if (p["period_end"] < p["period_start"]).any():
            raise ValueError("periods has period_end < period_start")
        grid = series.merge(p, how="cross")
    else:
        span = r.groupby(keys, as_index=False).agg(period_start=("year", "min"), period_end=("year", "max"))
        grid = series.merge(span, on=keys)
    if attributes:
        attrs = (rows[attributes].astype("string").assign(**{k: r[k] for k in keys})
                 .sort_values(keys).groupby(keys, as_index=False, sort=False).first())
        grid = grid.merge(attrs, on=keys, how="left")
    grid = grid.reset_index(drop=True)
    grid["sid"] = np.arange(len(grid))
    return grid


def _window_years(r, grid, keys, zero_rate_policy) -> pd.DataFrame:
    """Each rate row in each window that contains it, flagged: ``unavailable`` (NULL rate),
    ``zero`` (rate 0), ``half`` (zero deaths fitted at 0.5 death), ``used`` (fitted, with
    ``y`` = log10 of the rate fitted)."""
    w = r.merge(grid[[*keys, *PERIOD_COLUMNS, "sid"]], on=keys)
    w = w[(w["year"] >= w["period_start"]) & (w["year"] <= w["period_end"])].reset_index(drop=True)
    rate = w["rate"].to_numpy(dtype=float, na_value=np.nan)
    deaths = w["deaths"].to_numpy(dtype=float, na_value=np.nan)
    births = w["live_births"].to_numpy(dtype=float, na_value=np.nan)
    unavailable = np.isnan(rate)
    zero = ~unavailable & (rate == 0)
    y_rate = np.where(unavailable | zero, np.nan, rate)
    half = np.zeros(len(w), dtype=bool)
    if zero_rate_policy == "add_half_death":
        half = zero & (births > 0) & ~(deaths > 0)
        multiplier = w["multiplier"].to_numpy(dtype=float, na_value=np.nan)
        y_rate = np.where(half, 0.5 / np.where(half, births, 1.0) * multiplier, y_rate)
    used = np.isfinite(y_rate) & (y_rate > 0)
    counted = ~unavailable & (births > 0) & (deaths >= 0)
    return w.assign(unavailable=unavailable, zero=zero, half=half, used=used, counted=counted,
                    y=np.log10(np.where(used, y_rate, 1.0)))


def _data_notes(grid, w, zero_rate_policy, fits_logs) -> list[list[str]]:
    """Per window: the sentences about its data (years absent, unavailable, zero, fitted at
    0.5 death), in that order. A fitter of counts keeps zero years: nothing to say of them."""
    sid, yrs = w["sid"].to_numpy(), w["year"].to_numpy(dtype=int)

    def years_by_window(flag):
        groups = {}
        for s, y in zip(sid[flag].tolist(), yrs[flag].tolist()):
            groups.setdefault(s, []).append(y)
        return groups

    unavailable = w["unavailable"].to_numpy()
    # A window has a row for each of its years unless some are absent: only those are listed.
    length = (grid["period_end"] - grid["period_start"] + 1).to_numpy(dtype=int)
    short = np.bincount(sid, minlength=len(grid)) < length
    absent_rows = years_by_window(short[sid])
    null_years = years_by_window(unavailable)
    zero_years = years_by_window(w["zero"].to_numpy() & ~w["half"].to_numpy() & fits_logs)
    half_years = years_by_window(w["half"].to_numpy())
    reasons = {}
    for s, text in zip(sid[unavailable].tolist(), w["reason"][unavailable].tolist()):
        if not pd.isna(text):
            reasons.setdefault(s, set()).add(str(text))
    zero_note = ("log10 undefined, left out of the fit" if zero_rate_policy == "drop"
                 else "no births to add 0.5 death to, left out of the fit")
    notes = []
    for s, start, end in zip(grid["sid"].tolist(), grid["period_start"].tolist(), grid["period_end"].tolist()):
        note = []
        absent = set(range(start, end + 1)) - set(absent_rows.get(s, [])) if short[s] else ()
        if absent:
            note.append(f"no data for {_year_list(absent)}")
        if s in null_years:
            text = f"rate unavailable (NULL) for {_year_list(null_years[s])}"
            if s in reasons:
                text += f" ({', '.join(sorted(reasons[s]))})"
            note.append(text)
        if s in zero_years:
            note.append(f"zero rate in {_year_list(zero_years[s])} ({zero_note})")
        if s in half_years:
            note.append(f"zero deaths in {_year_list(half_years[s])}: fitted at 0.5 death "
                        "(zero_rate_policy add_half_death)")
        notes.append(note)
    return notes


def fit_series_trends(
    rows: pd.DataFrame,
    keys: list[str],
    *,
    periods: pd.DataFrame | None = None,
    year: str = "year",
    rate: str = "rate_per_1000",
    deaths: str | None = "deaths",
    live_births: str | None = "live_births",
    multiplier: str | None = "multiplier",
    reason: str | None = "unavailable_reason",
    attributes: list[str] | tuple[str, ...] = (),
    min_years: int = 5,
    min_deaths: int | None = None,
    zero_rate_policy: str = "drop",
    ci_level: float = 0.95,
    ci_critical: str = "t",
    p_threshold: float = 0.05,
    method: str = "prais",
    **fitter_options,
) -> pd.DataFrame:
    """One trend row per series (the distinct values of ``keys``) and period.

    ``rows``: one row per series and year with the columns ``keys``, ``year`` and ``rate``
    (a rate > 0 is fitted on the log10 scale; NULL = unavailable, 0 = zero rate). Optional
    columns: ``deaths`` and ``live_births`` (needed by ``zero_rate_policy="add_half_death"``),
    ``multiplier`` (the rate is per this many live births: needed with counts, by that policy
    and by the fitters of counts, whose intercept is on the scale of the rate),
    ``reason`` (why a rate is NULL, quoted in ``note``), ``attributes`` (descriptive columns
    carried to the output, first non-null value per series). Names set to None or absent
    from ``rows`` are not used.
    ``periods``: frame with period_start, period_end (other columns ignored); every series
    gets a row for every period. Without it each series has one window, from its first to
    its last year in ``rows``.
    ``min_deaths``: a window whose years with a rate hold fewer deaths is ``insufficient_data``
    (None: no such rule, e.g. for an index without counts).
    ``method``: a name of ``infant_mortality.statistics.trend_fitters.FITTERS``; ``fitter_options``
    (e.g. ``rhotype``, ``gaps``, ``twostep``, ``tol``, ``max_iter`` for Prais-Winsten) go to
    the fitter, which uses those its class declares.

    Returns the ``keys``, ``attributes``, period_start, period_end and the columns of
    :data:`STAT_DTYPES`.
    """
    windows = series_windows(rows, keys, periods=periods, year=year, rate=rate, deaths=deaths,
                             live_births=live_births, multiplier=multiplier, reason=reason,
                             attributes=attributes, zero_rate_policy=zero_rate_policy)
    return fit_windows(windows, min_years=min_years, min_deaths=min_deaths, ci_level=ci_level,
                       ci_critical=ci_critical, p_threshold=p_threshold, method=method, **fitter_options)


@dataclass
class SeriesWindows:
    """The rows of every series and window of :func:`fit_series_trends`, prepared once for any
    number of fitters (fct_trends fits the same windows by three methods)."""
    keys: list[str]
    attributes: list[str]
    zero_rate_policy: str
    grid: pd.DataFrame  # one row per series and window (``sid``), with the attributes
    w: pd.DataFrame  # each rate row in each window that contains it, flagged (_window_years)
    seconds: float  # the time taken to prepare them
    _notes: dict = field(default_factory=dict)

    def data_notes(self, fits_logs: bool) -> list[list[str]]:
        """:func:`_data_notes`, computed once per kind of fitter; a fresh list per call (the
        caller appends its own sentences)."""
        if fits_logs not in self._notes:
            self._notes[fits_logs] = _data_notes(self.grid, self.w, self.zero_rate_policy, fits_logs)
        return [list(note) for note in self._notes[fits_logs]]


def series_windows(rows: pd.DataFrame, keys, *, periods=None, year="year", rate="rate_per_1000",
                   deaths="deaths", live_births="live_births", multiplier="multiplier",
                   reason="unavailable_reason", attributes=(), zero_rate_policy="drop") -> SeriesWindows:
    """The checked rows of :func:`fit_series_trends` (same arguments) in their windows."""
    t_start = time.perf_counter()
    if zero_rate_policy not in ZERO_RATE_POLICIES:
        raise ValueError(f"zero_rate_policy must be one of {ZERO_RATE_POLICIES}, got {zero_rate_policy!r}")
    keys, attributes = list(keys), list(attributes)
    missing = [c for c in [*keys, year, rate, *attributes] if c not in rows.columns]
    if missing:
        raise ValueError(f"rows is missing columns {missing}")
    if periods is not None:
        missing = [c for c in PERIOD_COLUMNS if c not in periods.columns]
        if missing:
            raise ValueError(f"periods is missing columns {missing}")
    rows = rows.reset_index(drop=True)
    r = _typed_rows(rows, keys, year, rate, deaths, live_births, multiplier, reason)
    grid = _series_grid(r, rows, keys, periods, attributes)
    w = _window_years(r, grid, keys, zero_rate_policy) if not grid.empty else None
    return SeriesWindows(keys, attributes, zero_rate_policy, grid, w, time.perf_counter() - t_start)


def fit_windows(windows: SeriesWindows, *, min_years: int = 5, min_deaths: int | None = None,
                ci_level: float = 0.95, ci_critical: str = "t", p_threshold: float = 0.05,
                method: str = "prais", **fitter_options) -> pd.DataFrame:
    """:func:`fit_series_trends` of prepared windows (:func:`series_windows`) by one fitter."""
    fitter = get_fitter(method, ci_level=ci_level, **fitter_options)
    zero_rate_policy = windows.zero_rate_policy
    _check_settings(fitter, min_years, zero_rate_policy, ci_level, ci_critical, p_threshold)
    t_start = time.perf_counter() - windows.seconds
    keys, attributes, grid, w = windows.keys, windows.attributes, windows.grid, windows.w
    out_columns = [*keys, *attributes, *PERIOD_COLUMNS, *STAT_DTYPES]
    if grid.empty:
        out = pd.DataFrame({c: pd.Series([], dtype=STAT_DTYPES.get(c, "string")) for c in out_columns})
        out[PERIOD_COLUMNS] = out[PERIOD_COLUMNS].astype("Int64")
        out.attrs.update(fit_seconds=0.0, n_series=0, n_fitted=0, method_label=fitter.label)
        return out
    sid_all = w["sid"].to_numpy()
    fits_logs = fitter.data == "log_rate"
    used = w["used" if fits_logs else "counted"].to_numpy()
    n_sid = len(grid)
    n_used = np.bincount(sid_all[used], minlength=n_sid)
    n_zero = np.bincount(sid_all[w["zero"].to_numpy()], minlength=n_sid)
    counted = w["counted"].to_numpy()
    deaths_all = w["deaths"].to_numpy(dtype=float, na_value=np.nan)
    n_deaths = np.bincount(sid_all[counted], weights=deaths_all[counted], minlength=n_sid)
    has_counts = np.bincount(sid_all[counted], minlength=n_sid) > 0
    too_few_deaths = (has_counts & (n_deaths < min_deaths) if min_deaths is not None
                      else np.zeros(n_sid, dtype=bool))

    # The fitter sees the windows that can get a class: enough usable years and enough deaths
    # (a window too thin to measure gets no statistics at all, not a p-value beside no class).
    fit_mask = used & (n_used[sid_all] >= min_years) & ~too_few_deaths[sid_all]
    births_all = w["live_births"].to_numpy(dtype=float, na_value=np.nan)
    fit = fitter.fit(SeriesData(series=sid_all[fit_mask], year=w["year"].to_numpy(dtype=float)[fit_mask],
                                deaths=deaths_all[fit_mask], births=births_all[fit_mask],
                                multiplier=w["multiplier"].to_numpy(dtype=float, na_value=np.nan)[fit_mask],
                                y=w["y"].to_numpy()[fit_mask]))
    idx = np.asarray(fit.series).astype(int)

    def full(values, fill=np.nan):
        a = np.full(n_sid, fill, dtype=float)
        a[idx] = np.asarray(values, dtype=float)
        return a

    slope, intercept, se = full(fit.slope), full(fit.intercept), full(fit.slope_se)
    t_stat, p_value, df = full(fit.t_stat), full(fit.p_value), full(fit.df_resid)
    estimable = full(fit.estimable, fill=0.0) > 0
    fitted = np.zeros(n_sid, dtype=bool)
    fitted[idx] = True
    if ci_critical == "normal":  # the test of the interval beside the class
        p_value = 2.0 * stats.norm.sf(np.abs(t_stat))

    alpha = 1.0 - ci_level
    with np.errstate(invalid="ignore", over="ignore"):
        if ci_critical == "t":
            crit = stats.t.ppf(1.0 - alpha / 2.0, np.where(df > 0, df, np.nan))
        else:
            crit = np.full(n_sid, stats.norm.ppf(1.0 - alpha / 2.0))
        # (10^b - 1) 100 as expm1(b ln 10) 100: exact near b = 0, where 10^b - 1 rounds a
        # slope of 1e-17 to an APC of exactly 0 (the wrong sign for it).
        apc, lower, upper = (np.expm1(b * np.log(10.0)) * 100.0
                             for b in (slope, slope - crit * se, slope + crit * se))
    significant = p_value < p_threshold
    trend = np.where(significant & (slope > 0), "increasing",
                     np.where(significant & (slope < 0), "decreasing", "stationary"))
    trend = np.where(estimable, trend, "not_estimable")
    trend = np.where(too_few_deaths, "insufficient_data", trend)

    # Notes: the data first, then why there is no class / what the fitter says; joined with '; '.
    notes = windows.data_notes(fits_logs)
    fitter_notes = dict(zip(idx.tolist(), fit.notes))
    for s, note in enumerate(notes):
        if too_few_deaths[s]:
            note.append(f"insufficient data: {int(n_deaths[s])} deaths over the period, fewer than "
                        f"min_deaths = {min_deaths} (a trend in the rate is not measurable)")
        if n_used[s] < min_years:
            note.append(f"not estimable: {n_used[s]} usable years, fewer than min_years = {min_years}")
        elif not too_few_deaths[s]:
            note.extend(fitter_notes.get(s, []))

    def stat(values, dtype, keep=estimable):
        v = np.where(keep, np.asarray(values, dtype=float), np.nan)
        if dtype == "boolean":
            return pd.array([None if np.isnan(x) else bool(x) for x in v], dtype="boolean")
        return pd.array(v, dtype=dtype)

    method_values = {name: full(fit.columns[name]) if name in fit.columns else np.full(n_sid, np.nan)
                     for name in METHOD_COLUMNS}
    out = grid[[*keys, *attributes]].astype("string")
    out["period_start"] = grid["period_start"].astype("Int64")
    out["period_end"] = grid["period_end"].astype("Int64")
    stats_frame = pd.DataFrame({
        "n_years": pd.Series((grid["period_end"] - grid["period_start"] + 1).to_numpy(dtype=int), dtype="Int64"),
        "n_years_used": pd.Series(n_used, dtype="Int64"),
        "n_zero_years": pd.Series(n_zero, dtype="Int64"),
        "n_deaths": pd.array(np.where(has_counts, n_deaths, np.nan), dtype="Float64").astype("Int64"),
        "slope_log10": stat(slope, "Float64"),
        "intercept_log10": stat(intercept, "Float64"),
        "slope_se": stat(se, "Float64"),
        "t_stat": stat(t_stat, "Float64"),
        "p_value": stat(p_value, "Float64"),
        # The method's diagnostics are kept for every fit, estimable or not: they say why not.
        **{name: stat(values, STAT_DTYPES[name], keep=fitted) for name, values in method_values.items()},
        "apc": stat(apc, "Float64"),
        "apc_ci95_lower": stat(lower, "Float64"),
        "apc_ci95_upper": stat(upper, "Float64"),
        "trend": pd.Series(trend, dtype="string"),
        "note": pd.Series(["; ".join(n) if n else None for n in notes], dtype="string"),
        "segments": pd.Series(_segments_json(fit, idx, estimable, n_sid), dtype="string"),
    })
    out = pd.concat([out, stats_frame], axis=1)[out_columns].astype(STAT_DTYPES)
    total_seconds = time.perf_counter() - t_start
    out.attrs.update(fit_seconds=fit.elapsed_seconds, total_seconds=total_seconds,
                     n_series=int(n_sid), n_fitted=int(len(fit)), method_label=fitter.label)
    logger.info("fit_series_trends: %d series (%d fitted by %s) in %.3f s of statistics "
                "(%.3f s in total)", n_sid, len(fit), fitter.label, fit.elapsed_seconds, total_seconds)
    return out


def _segments_json(fit, idx, estimable, n_sid) -> list:
    """Per window: its segments as a JSON list (segmented fitters, estimable fits), else None."""
    out = [None] * n_sid
    if fit.segments is not None:
        for s, segments in zip(idx.tolist(), fit.segments):
            if estimable[s]:
                out[s] = json.dumps(segments)
    return out


# The trend vars as the models' config `trend_settings` carries them (text, rendered by dbt),
# with the Python type of each: the one place where a var becomes a keyword of fit_series_trends.
# `method` is the fitter of the study's log10-rate fit (var trend_prais_variant).
def _optional_int(text):
    """A var that may be unset (rendered "None" or ""): None, else the whole number."""
    return None if str(text).strip() in ("", "None", "none") else int(text)


TREND_SETTING_TYPES = {"min_years": int, "min_deaths": int, "zero_rate_policy": str, "p_threshold": float,
                       "ci_level": float, "ci_critical": str, "rhotype": str, "method": str, "gaps": str,
                       "max_abs_rho": float, "max_joinpoints": _optional_int, "selection": str}


def trend_settings(config: dict | None) -> dict:
    """The keyword settings of fit_trends / gap_trends from a model's `trend_settings` config
    (declared once in models/trends/intermediate/_trend_settings.yml); names the missing ones."""
    config = config or {}
    missing = sorted(set(TREND_SETTING_TYPES) - set(config))
    if missing:
        raise ValueError(f"config trend_settings lacks {', '.join(missing)} "
                         f"(declared in models/trends/intermediate/_trend_settings.yml)")
    return {name: convert(config[name]) for name, convert in TREND_SETTING_TYPES.items()}


def fit_trends(rates: pd.DataFrame, periods: pd.DataFrame, *, method: str = "prais", **settings) -> pd.DataFrame:
    """The ``fct_trends`` rows: one per (area_level, area_code, indicator, period_start, period_end)
    and method of :data:`MART_METHODS` (``method`` names the fitter of ``prais_winsten``: ``prais``,
    ``corc`` or ``ols``).

    Every method's increasing/decreasing is confirmed by :data:`CONFIRMING_METHOD` (see
    :func:`confirm_classes`), and every row says how the methods agree
    (:func:`method_agreement`).

    ``rates``: area_level, area_code, area_name, region_code, year, indicator, deaths,
    live_births, rate_per_1000 (NULL when unavailable; optional ``unavailable_reason``).
    ``periods``: period_start, period_end (other columns ignored; duplicates dropped).
    Every series present in ``rates`` gets a row for every period. ``settings`` as
    :func:`fit_series_trends` (``min_years``, ``zero_rate_policy``, ``ci_level``,
    ``ci_critical``, ``p_threshold``, ``method`` and the fitter's options; for Prais-Winsten
    ``rhotype``, ``twostep``, ``tol``, ``max_iter``, ``gaps`` as
    :func:`infant_mortality.statistics.prais_winsten.prais_winsten`).
    """
    missing = [c for c in RATE_COLUMNS if c not in rates.columns]
    if missing:
        raise ValueError(f"rates is missing columns {missing}")
    t_start = time.perf_counter()
    # The windows are the same for every method: prepared once.
    windows = series_windows(rates, AREA_KEYS, periods=periods, attributes=["area_name", "region_code"],
                             zero_rate_policy=settings.pop("zero_rate_policy", "drop"))
    parts, attrs = [], {"fit_seconds": 0.0, "n_series": 0, "n_fitted": 0}
    for name, fitter in MART_METHODS.items():
        fitter = fitter or method
        part = fit_windows(windows, method=fitter, **settings)
        parts.append(part.assign(method=name, fitter=fitter, method_label=part.attrs["method_label"]))
        attrs["fit_seconds"] += part.attrs["fit_seconds"]
        attrs["n_series"] = part.attrs["n_series"]
        attrs["n_fitted"] += part.attrs["n_fitted"]
    attrs["method_label"] = ", ".join(p.attrs["method_label"] for p in parts)
    series = [*AREA_KEYS, *PERIOD_COLUMNS]
    out = confirm_classes(pd.concat(parts, ignore_index=True), series)
    out = method_agreement(out, series)
    out = out.sort_values(KEYS, ignore_index=True)
    out = out[OUTPUT_COLUMNS].astype(OUTPUT_DTYPES)
    out.attrs.update(attrs, total_seconds=time.perf_counter() - t_start)
    return out


def confirm_classes(out: pd.DataFrame, series: list[str], confirming: str = CONFIRMING_METHOD) -> pd.DataFrame:
    """A method's ``increasing``/``decreasing`` stands only where the ``confirming`` method's row of
    the same series gives the same class; otherwise it becomes ``not_confirmed`` with a note.

    Why: on our own births under no trend, Prais-Winsten's test calls 11-18% of series
    increasing or decreasing and joinpoint's up to 7% in small series, while the count model's
    test holds its 5% in every deaths band (fct_trend_calibration). Requiring both keeps each
    method's published class at most as often wrong as the confirming test. The p-value and
    interval stay the method's own (the study's numbers are unchanged), so a ``not_confirmed``
    row can have an interval that excludes 0: it is a significant test that the calibrated test
    does not support, not a conclusion."""
    reference = out.loc[out["method"] == confirming, [*series, "trend"]].rename(columns={"trend": "confirming_trend"})
    merged = out[series].merge(reference, on=series, how="left")
    trend = out["trend"].to_numpy(dtype=object)
    confirming_trend = merged["confirming_trend"].to_numpy(dtype=object)
    significant = np.isin(trend, ("increasing", "decreasing"))
    unconfirmed = significant & (trend != confirming_trend) & (out["method"].to_numpy() != confirming)
    out = out.copy()
    out.loc[unconfirmed, "trend"] = "not_confirmed"
    label = get_fitter(confirming).label
    notes = out["note"].to_numpy(dtype=object, na_value=None)  # one column write, not one per row
    for i in np.flatnonzero(unconfirmed):
        sentence = (f"not confirmed: p < the threshold ({trend[i]}), but the {label} test of the same "
                    f"series says {str(confirming_trend[i]).replace('_', ' ')}")
        notes[i] = sentence if notes[i] is None else f"{notes[i]}; {sentence}"
    out["note"] = pd.array(notes, dtype=out["note"].dtype)
    return out


def method_agreement(out: pd.DataFrame, series: list[str]) -> pd.DataFrame:
    """Per row, over the methods that give the same series and period a class (increasing,
    decreasing or stationary): ``n_methods_classed``; ``n_methods_agreeing``, how many of them
    (this row's method included) give this row's class; ``methods_disagreeing``, the others,
    comma-separated in method order ('' when all agree). Both null on a row without a class."""
    # A series' rows side by side: one column per method (MART_METHODS' order, any other after).
    order = {name: i for i, name in enumerate(MART_METHODS)}
    methods = sorted(out["method"].unique(), key=lambda m: (order.get(m, len(order)), m))
    column = out["method"].map({m: i for i, m in enumerate(methods)}).to_numpy(dtype=np.intp)
    row_series = out.groupby(series, sort=False).ngroup().to_numpy(dtype=np.intp)
    trend = out["trend"].to_numpy(dtype=object, na_value=None)
    wide = np.full((row_series.max() + 1 if len(out) else 0, len(methods)), None, dtype=object)
    wide[row_series, column] = trend
    others = wide[row_series]  # (rows, methods): every method's class of the row's series
    classed = np.isin(others, CLASSED)
    has_class = np.isin(trend, CLASSED)
    same = classed & (others == trend[:, None])
    merged = out.copy()
    merged["n_methods_classed"] = pd.array(classed.sum(axis=1), dtype="Int64")
    merged["n_methods_agreeing"] = pd.arrays.IntegerArray(same.sum(axis=1), mask=~has_class)
    disagreeing = classed & ~same
    merged["methods_disagreeing"] = [", ".join(m for m, d in zip(methods, row) if d) if own else None
                                     for own, row in zip(has_class, disagreeing)]
    return merged
