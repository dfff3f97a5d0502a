"""Joinpoint trend fitter: NCI's segmented log-linear model (``statistics.joinpoint``), the AAPC
over the period as the series' trend and the segments beside it.

* Data: the counts of every year with births (NCI: a zero-death year counted as 0.5 deaths, the
  fit's note names the years), weighted least squares on ln(rate) with Poisson weights.
* The trend of the row is the AAPC: slope = the length-weighted mean segment slope (ln scale,
  returned / ln 10 like every fitter's), its se and p as ``fit_joinpoint`` gives them. With one
  segment the reference distribution is t(df); with joinpoints it is the normal (Clegg et al.
  2009), passed to the shell as df = inf so that the interval it computes is the AAPC interval
  of the same test.
* ``intercept``: the first segment's line (the whole broken line is in the segments).
* ``segments``: per series, the segments (start, end, APC with its interval and p) for
  ``fct_trend_segments``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from infant_mortality.statistics.joinpoint import NCI_PERMUTATIONS, SELECTIONS, fit_joinpoint_many
from infant_mortality.statistics.trend_fitters.base import SeriesData, SeriesFits

LN10 = np.log(10.0)


@dataclass(frozen=True)
class JoinpointFitter:
    """``fit_joinpoint_many`` with NCI's defaults; ``max_joinpoints`` caps NCI's rule for n (None:
    the rule alone, up to 5 joinpoints for 27 years or more)."""

    max_joinpoints: int | None = None
    selection: str = "permutation"
    ci_level: float = 0.95
    n_permutations: int = NCI_PERMUTATIONS

    label = "Joinpoint (NCI)"
    data = "counts"
    min_years_floor = 3

    def __post_init__(self):
        if self.selection not in SELECTIONS:
            raise ValueError(f"joinpoint selection must be one of {SELECTIONS}, got {self.selection!r}")

    def fit(self, data: SeriesData) -> SeriesFits:
        t0 = time.perf_counter()
        fits = fit_joinpoint_many(data.year, data.deaths, data.births, np.asarray(data.series),
                                  cap_joinpoints=self.max_joinpoints, selection=self.selection,
                                  ci_level=self.ci_level, n_permutations=self.n_permutations)

        def column(name):
            return np.array([getattr(f, name) for f in fits], dtype=float)

        slope, se = column("slope") / LN10, column("slope_se") / LN10
        one_segment = np.array([f.n_joinpoints == 0 for f in fits])
        df = np.where(one_segment, column("df_resid"), np.inf)
        labels = np.array([f.series for f in fits])
        return SeriesFits(
            series=labels,
            intercept=(column("intercept") + data.log_multiplier(labels)) / LN10,
            slope=slope,
            slope_se=se,
            t_stat=slope / se,
            p_value=column("aapc_p"),
            df_resid=df,
            estimable=np.array([f.estimable for f in fits]),
            notes=[list(f.notes) + _joinpoint_note(f) for f in fits],
            segments=[[_segment_row(s) for s in f.segments] for f in fits],
            elapsed_seconds=time.perf_counter() - t0,
        )


def _joinpoint_note(fit) -> list[str]:
    if not fit.estimable or fit.n_joinpoints == 0:
        return []
    years = ", ".join(f"{y:g}" for y in fit.joinpoints)
    return [f"{fit.n_joinpoints} joinpoint(s) at {years}: the APC is the AAPC over the period "
            "(segments in fct_trend_segments)"]


def _segment_row(s) -> dict:
    """One segment for fct_trend_segments, its slope on the log10 scale as fct_trends' (a
    non-finite value becomes null: JSON has no NaN)."""
    values = {"slope_log10": s.slope / LN10, "slope_se": s.slope_se / LN10, "apc": s.apc,
              "apc_lower": s.apc_lower, "apc_upper": s.apc_upper, "p_value": s.p_value}
    return {"segment": s.index, "segment_start": int(s.start_year), "segment_end": int(s.end_year),
            **{k: float(v) if np.isfinite(v) else None for k, v in values.items()}}
