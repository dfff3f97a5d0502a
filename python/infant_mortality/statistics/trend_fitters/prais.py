"""Prais-Winsten (and Cochrane-Orcutt) trend fitter: ``prais_winsten_trend_batch`` plus the
rules that only make sense for an AR(1) fit (docs/methods/trends.md, "Prais-Winsten on log10(rate)").

* Degrees of freedom: the residual df of the final transformed regression (n - 2; one less
  when Cochrane-Orcutt is used or |rho| >= 1 dropped the first observation, as in Stata's own
  interval).
* Estimability: a fit says nothing when the final transformed regression keeps fewer than 4
  rows (|rho| >= 1 drops the first row of each run of years, and a short gappy series can end
  with 3 rows for 2 parameters and a near-exact fit, se ~ 0, p ~ 0), when it fits exactly
  (se = 0), or when no residual degree of freedom is left / the transformed design is
  singular (rho = 1).
* ``min_years_floor``: 4 (5 for Cochrane-Orcutt). With 3 years the Prais-Winsten iteration
  always runs to rho = -1 (the OLS residuals of 3 points are proportional to (1, -2, 1)), and
  Cochrane-Orcutt on 4 years keeps 3 rows: neither says anything about a trend.
* Validity (docs/methods/trends.md, "Valid trend conclusions for small communes"): an estimable fit is a trend only when the
  iteration converged and |rho| < ``max_abs_rho`` (var ``trend_max_abs_rho``, 0.95). On 5-10
  points rho near or beyond +-1 makes the transformed regression an interpolation (Isla de
  Pascua 2010-2019: rho = -0.9999998, p = 8e-14), and a fit that stopped at the iteration cap
  has a p that depends on where it stopped (Tiruá 2010-2019: 0.0003 to 0.12). Such a fit is
  not estimable, with rho, iterations and convergence kept to show why.
* Notes: time gaps (rho restarted at each gap, or rows treated as consecutive), |rho| >= 1,
  non-convergence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infant_mortality.statistics.prais_winsten import _check_options, prais_winsten_trend_batch
from infant_mortality.statistics.trend_fitters.base import SeriesData, SeriesFits, consecutive_breaks


@dataclass(frozen=True)
class PraisWinstenFitter:
    """Iterated Prais-Winsten (``method="prais"``) or Cochrane-Orcutt (``"corc"``), as Stata
    ``prais y year`` with the options of :func:`infant_mortality.statistics.prais_winsten.prais_winsten`."""

    method: str = "prais"
    rhotype: str = "regress"
    twostep: bool = False
    tol: float = 1e-6
    max_iter: int = 100
    gaps: str = "restart"
    max_abs_rho: float = 0.95
    data = "log_rate"

    def __post_init__(self):
        _check_options(self.method, self.rhotype, self.tol, self.max_iter, self.gaps)
        if not 0 < self.max_abs_rho <= 1:
            raise ValueError(f"max_abs_rho must be in (0, 1], got {self.max_abs_rho!r}")

    @property
    def label(self) -> str:
        return "Prais-Winsten" if self.method == "prais" else "Cochrane-Orcutt"

    @property
    def min_years_floor(self) -> int:
        return 5 if self.method == "corc" else 4

    def fit(self, data: SeriesData) -> SeriesFits:
        year, series = np.asarray(data.year, dtype=float), np.asarray(data.series)
        fit = prais_winsten_trend_batch(
            data.y, year, series, method=self.method, rhotype=self.rhotype, twostep=self.twostep,
            tol=self.tol, max_iter=self.max_iter, gaps=self.gaps)
        se, p_value, rho = fit.slope_se, fit.p_value, fit.rho
        df = fit.df_resid.astype(float)
        fitted = np.isfinite(se) & np.isfinite(p_value) & (se >= 0)
        too_few_final_rows = fitted & (df < 2)
        perfect_fit = fitted & (se == 0)
        computed = fitted & ~too_few_final_rows & ~perfect_fit
        rho_too_large = computed & ~(np.abs(rho) < self.max_abs_rho)
        not_converged = computed & ~rho_too_large & ~fit.converged
        estimable = computed & ~rho_too_large & ~not_converged
        n_gaps = consecutive_breaks(year, series)

        notes = []
        for i in range(len(fit)):
            note = []
            if too_few_final_rows[i]:
                note.append(f"not estimable: the final transformed regression kept {int(df[i] + 2)} "
                            f"observations for 2 parameters (|rho| = {abs(rho[i]):.3g} >= 1 dropped the "
                            "first of each run of years)")
            elif perfect_fit[i]:
                note.append("not estimable: the transformed regression fits exactly (residual variance 0)")
            elif rho_too_large[i]:
                note.append(f"not estimable: |rho| = {abs(rho[i]):.7g} is not below trend_max_abs_rho = "
                            f"{self.max_abs_rho:g} (an AR(1) fit this close to a unit root or beyond "
                            "interpolates the points; its p-value means nothing)")
            elif not_converged[i]:
                note.append(f"not estimable: rho did not converge in {self.max_iter} iterations (the "
                            "p-value depends on where the iteration stopped)")
            elif not computed[i]:
                note.append("not estimable: no residual degrees of freedom left in the transformed "
                            "regression" if df[i] <= 0
                            else "not estimable: singular transformed regression (rho = 1)")
            if n_gaps[i] > 0:
                note.append("years used are not consecutive: " + (
                    "rho computations restarted at each gap (Stata tsset convention)"
                    if self.gaps == "restart" else "treated as consecutive observations"))
            if fit.rho_out_of_bounds[i] and computed[i]:
                note.append(f"|rho| >= 1 ({rho[i]:.6g}): first observation dropped in the final "
                            "fit (Cochrane-Orcutt)")
            notes.append(note)

        return SeriesFits(
            series=fit.series,
            intercept=fit.intercept,
            slope=fit.slope,
            slope_se=se,
            t_stat=fit.t_stat,
            p_value=p_value,
            df_resid=df,
            estimable=estimable,
            notes=notes,
            columns={
                "rho": rho,
                "iterations": fit.iterations.astype(float),
                "converged": fit.converged.astype(float),
                "dw_original": fit.dw_original,
                "dw_transformed": fit.dw_transformed,
            },
            elapsed_seconds=fit.elapsed_seconds,
        )
