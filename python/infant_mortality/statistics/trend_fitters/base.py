"""What every trend fitter returns to the shell ``infant_mortality.statistics.trends``.

A fitter fits a trend on year for many series at once and decides, with rules of its own
method, which fits say something (estimability, validity) and what the reader must know about
a fit (notes). The shell owns everything that does not depend on the method: the series x
period grid, which years are usable, the zero-rate policy, the minimum numbers of years and
deaths, the APC and its interval, the trend class, the notes about the data, and the output
types.

A fitter is a class with

* ``label`` -- the method's name for people (``"Prais-Winsten"``; the report reads it from
  the build);
* ``data`` -- which years it fits: ``"log_rate"`` (years with a rate > 0, ``y`` = its log10;
  a zero-rate year follows the shell's zero-rate policy) or ``"counts"`` (every year with
  births, zero-death years included);
* ``min_years_floor`` -- the fewest usable years for which the method can say anything about
  a trend (``min_years`` below it is refused);
* ``fit(data: SeriesData) -> SeriesFits`` -- the years of many series in long format (any
  row order, years unique within a series); results per unique series label in sorted
  order, as :class:`SeriesFits`, with the slope on the log10 scale whatever the method's own
  link (a natural-log slope b is b / ln 10), so the shell's APC = (10^b - 1) 100 serves all.

Its constructor takes keyword options; the shell passes only the options the class declares
(``dataclasses.fields``), so an option of another method (``rhotype`` for OLS) is not used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Mart columns a fitter may fill besides the common statistics (null when it does not).
METHOD_COLUMNS = ("rho", "iterations", "converged", "dw_original", "dw_transformed", "dispersion")


@dataclass(frozen=True, eq=False)
class SeriesData:
    """What a fitter fits, one entry per series-year: the series label, the year, the deaths
    and live births (NaN when the rows carry no counts, e.g. a yearly index), the rate's
    multiplier (the rate is per this many live births; NaN without counts), and ``y``, the
    log10 of the rate fitted (finite on every row a ``"log_rate"`` fitter receives)."""

    series: np.ndarray
    year: np.ndarray
    deaths: np.ndarray
    births: np.ndarray
    multiplier: np.ndarray
    y: np.ndarray

    def __post_init__(self):
        n = len(self.series)
        for name in ("year", "deaths", "births", "multiplier", "y"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"SeriesData.{name} has {len(getattr(self, name))} entries for {n} rows")

    def log_multiplier(self, labels) -> np.ndarray:
        """ln(multiplier) per series label of ``labels``: a fitter of counts adds it to its
        ln(deaths / births) intercept so that the intercept is on the scale of the rate. A
        series needs one positive multiplier on every row."""
        found, codes = np.unique(np.asarray(self.series), return_inverse=True)
        multiplier = np.asarray(self.multiplier, dtype=float)
        low, high = np.full(len(found), np.inf), np.full(len(found), -np.inf)
        np.minimum.at(low, codes, multiplier)
        np.maximum.at(high, codes, multiplier)
        at = np.searchsorted(found, labels)
        bad = ~((low[at] == high[at]) & (low[at] > 0))  # NaN fails both comparisons
        if bad.any():
            label = labels[np.argmax(bad)]
            raise ValueError(f"series {label!r} needs one positive rate multiplier on every row, "
                             f"got {low[at][bad][0]:g} to {high[at][bad][0]:g}")
        return np.log(low[at])


@dataclass(frozen=True, eq=False)
class SeriesFits:
    """One fit per series label (``series``, sorted), arrays aligned with it.

    ``intercept`` and ``slope`` are on the log10 scale of the rate (per its multiplier) and the raw year
    (Stata's ``_cons``: the fitted log10 rate at year t is intercept + slope * t). ``df_resid`` is the residual degrees of freedom used for the
    slope's t statistic (the shell uses it for the APC interval). ``estimable`` False means
    the statistics say nothing (the shell nulls them and calls the trend ``not_estimable``);
    ``notes`` holds, per series, first why it is not estimable (when it is not), then what a
    reader must know about the fit, one sentence each. ``columns`` holds the method's own mart
    columns, named in :data:`METHOD_COLUMNS`. ``df_resid`` = inf means the normal distribution
    (a method whose test is a z test). ``segments``, for a segmented method, holds per series
    the list of its segments (dicts: segment, segment_start, segment_end, slope_log10, slope_se,
    apc, apc_lower, apc_upper, p_value), published in ``fct_trend_segments``.
    """

    series: np.ndarray
    intercept: np.ndarray
    slope: np.ndarray
    slope_se: np.ndarray
    t_stat: np.ndarray
    p_value: np.ndarray
    df_resid: np.ndarray
    estimable: np.ndarray
    notes: list[list[str]]
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    segments: list[list[dict]] | None = None
    elapsed_seconds: float = 0.0

    def __post_init__(self):
        n = len(self.series)
        for name in ("intercept", "slope", "slope_se", "t_stat", "p_value", "df_resid", "estimable"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"SeriesFits.{name} has {len(getattr(self, name))} entries for {n} series")
        if len(self.notes) != n:
            raise ValueError(f"SeriesFits.notes has {len(self.notes)} entries for {n} series")
        if self.segments is not None and len(self.segments) != n:
            raise ValueError(f"SeriesFits.segments has {len(self.segments)} entries for {n} series")
        unknown = set(self.columns) - set(METHOD_COLUMNS)
        if unknown:
            raise ValueError(f"SeriesFits.columns has unknown columns {sorted(unknown)}; allowed {METHOD_COLUMNS}")

    def __len__(self) -> int:
        return int(len(self.series))


def consecutive_breaks(year: np.ndarray, series: np.ndarray) -> np.ndarray:
    """Per sorted unique series label: how many times the fitted years skip a year."""
    labels, codes = np.unique(series, return_inverse=True)
    order = np.lexsort((year, codes))
    c, y = codes[order], np.asarray(year, dtype=float)[order]
    brk = np.zeros(len(c), dtype=bool)
    brk[1:] = (c[1:] == c[:-1]) & (np.diff(y) != 1)
    return np.bincount(c[brk], minlength=len(labels))
