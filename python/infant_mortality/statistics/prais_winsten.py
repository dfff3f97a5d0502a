"""Prais-Winsten / Cochrane-Orcutt AR(1) regression, matching Stata ``prais``.

Two implementations of the same algorithm (``docs/methods/trends.md``, "Prais-Winsten on log10(rate)"):

* :func:`prais_winsten` -- the reference path, any design matrix, every step fitted with
  ``statsmodels.api.OLS``. :func:`prais_winsten_trend` wraps it for ``y ~ 1 + year`` with the
  year centred inside (slope, its se, rho and both Durbin-Watson statistics do not change; the
  intercept and its se are converted back to the raw-year scale).
* :func:`prais_winsten_trend_batch` -- the fast path for many trend series at once
  (``y = log10(rate)`` on ``[1, year]``): numpy arrays of shape (series, years), the 2-column
  least squares of every iteration solved for all series together by a (re-orthogonalised)
  Gram-Schmidt QR, series leaving the loop as soon as their own rho converges. The tests
  check it against the reference path to 1e-10.

Algorithm (Stata ``prais depvar indepvars`` with default options; R ``prais::prais_winsten``
is the same apart from ``max_iter = 50``)::

    beta_0 = OLS(y, X); rho_0 = 0
    for j = 1, 2, ..., max_iter:
        rho_j  = rhotype(e),  e = y - X beta_{j-1}   (untransformed residuals, all rows)
        beta_j = OLS(y*, X*) on the data transformed with rho_j:
                 first row times sqrt(1 - rho_j^2) (Prais-Winsten; dropped for ``corc``),
                 rows t >= 2: y_t - rho_j y_{t-1}, x_t - rho_j x_{t-1}
        stop if twostep, or |rho_j - rho_{j-1}| < tol (converged)
    report rho_j, beta_j and the statistics of that last transformed OLS; iterations = j.

Every reported statistic comes from the last transformed regression (Stata: "rho is assumed
to be estimated without error"): se from s^2 (X*'X*)^-1 with s^2 = RSS*/(N* - k), t, two-sided
p from t(N* - k), R^2 centred on y* (Stata prints R^2 missing and F = 0 when RSS* > TSS*; so
do we: ``rsquared`` NaN, ``fvalue`` 0, ``f_pvalue`` 1), F, log-likelihood; Durbin-Watson of
the OLS residuals of the untransformed equation (``dw_original``) and of the residuals of the
last transformed equation (``dw_transformed``).

|rho| >= 1: sqrt(1 - rho^2) is undefined, so -- as Stata and R ``prais`` do -- the first
transformed row is dropped for that iteration (Prais-Winsten becomes Cochrane-Orcutt there).
rho is never clamped. ``rho_out_of_bounds`` flags the final transformation; the number of
iterations where it happened is in ``n_rho_out_of_bounds``. This reproduces Stata's
``prais realinv realgdp realint`` (rho = 1.006439250608449, 55 iterations) to 16 digits.

rho estimators (``rhotype``, Stata [TS] prais; e = untransformed residuals, sums over the
pairs (t, t-1) of consecutive observations, n = observations, k = regressors incl. constant)::

    regress  sum e_t e_{t-1} / sum e_{t-1}^2              (default)
    freg     sum e_t e_{t-1} / sum e_t^2                  (regression of e_t on e_{t+1})
    tscorr   sum e_t e_{t-1} / sum_{all t} e_t^2
    dw       1 - d/2,  d = sum (e_t - e_{t-1})^2 / sum_{all t} e_t^2
    theil    tscorr * (n - k) / n
    nagar    ((1 - d/2) n^2 + k^2) / (n^2 - k^2)

Only ``regress`` and ``tscorr`` are validated against real Stata output. If the denominator of
a rho estimator is 0 (a perfect fit) rho is taken as 0.

Gaps in time (years missing from the estimation sample, e.g. a zero-rate year dropped from a
log-scale fit), option ``gaps``:

* ``"restart"`` (default) -- what Stata does with ``tsset`` data: it prints "note:
  computations for rho restarted at each gap", i.e. its time-series operators make the lag of
  the first observation after a gap missing. So the pair (t, t-1) across a gap is left out of
  every rho sum and of both Durbin-Watson numerators, and the first observation of every
  uninterrupted run is transformed like the first observation of the series (times
  sqrt(1 - rho^2); dropped with ``corc`` or when |rho| >= 1). Exactly how Stata treats the
  first observation after a gap could not be checked against Stata output offline (research
  note section 2 / 9); this is the reading of ``prais``'s documented behaviour and of the
  user-written commands that copy it (``L.``-based transforms, sqrt(1 - rho^2) where the lag
  is missing). Without gaps (the normal case) both policies are identical.
* ``"consecutive"`` -- R ``prais`` (and Stata on data that are *not* ``tsset`` by year, or
  ``tsset`` by an observation counter): rows in the estimation sample are treated as
  consecutive observations, whatever the years between them.

Time gaps are only known when a time variable is given (``time=`` for the reference path,
``year`` for the trend functions); without it rows are consecutive.
"""

from __future__ import annotations

import math
import time as _time
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

__all__ = [
    "RHOTYPES",
    "METHODS",
    "GAP_POLICIES",
    "PraisWinstenResult",
    "TrendBatchResult",
    "prais_winsten",
    "prais_winsten_trend",
    "prais_winsten_trend_batch",
    "durbin_watson",
]

RHOTYPES = ("regress", "freg", "tscorr", "dw", "theil", "nagar")
METHODS = ("prais", "corc")
GAP_POLICIES = ("restart", "consecutive")


def _check_options(method, rhotype, tol, max_iter, gaps):
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if rhotype not in RHOTYPES:
        raise ValueError(f"rhotype must be one of {RHOTYPES}, got {rhotype!r}")
    if not (tol > 0):
        raise ValueError(f"tol must be positive, got {tol!r}")
    if int(max_iter) != max_iter or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    if gaps not in GAP_POLICIES:
        raise ValueError(f"gaps must be one of {GAP_POLICIES}, got {gaps!r}")


def _readonly(a) -> np.ndarray:
    a = np.array(a, dtype=float, copy=True)
    a.setflags(write=False)
    return a


# --------------------------------------------------------------------------------------------
# Reference path (statsmodels OLS at every step)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PraisWinstenResult:
    """Result of one Prais-Winsten / Cochrane-Orcutt fit (statistics of the last transformed OLS).

    ``nobs`` is the size of the transformed sample N* (n for Prais-Winsten, n - 1 for
    Cochrane-Orcutt or when |rho| >= 1; minus one more per time gap when those first rows are
    dropped); ``n`` is the number of observations of the untransformed equation.
    For ``twostep`` fits ``converged`` is True by definition.
    """

    params: np.ndarray
    bse: np.ndarray
    tvalues: np.ndarray
    pvalues: np.ndarray
    cov_params: np.ndarray
    rho: float
    iterations: int
    converged: bool
    rho_out_of_bounds: bool
    n_rho_out_of_bounds: int
    n: int
    nobs: int
    df_resid: int
    ssr: float
    rsquared: float
    fvalue: float
    f_pvalue: float
    llf: float
    dw_original: float
    dw_transformed: float
    n_gaps: int
    method: str
    rhotype: str
    twostep: bool
    names: tuple[str, ...] | None = None


def durbin_watson(resid, pairs=None) -> float:
    """Durbin-Watson d = sum (u_t - u_{t-1})^2 / sum u_t^2.

    ``pairs`` (bool, same length) marks the rows t whose difference with row t-1 counts
    (default: all t >= 1); rows across a time gap are left out of the numerator.
    """
    u = np.asarray(resid, dtype=float)
    if pairs is None:
        num = float(np.sum(np.diff(u) ** 2))
    else:
        idx = np.flatnonzero(np.asarray(pairs, dtype=bool))
        idx = idx[idx > 0]
        num = float(np.sum((u[idx] - u[idx - 1]) ** 2))
    den = float(u @ u)
    return num / den if den > 0 else math.nan


def _rho_reference(e: np.ndarray, has_pred: np.ndarray, rhotype: str, k: int) -> float:
    """rho from the untransformed residuals (scalar code, independent of the batched path)."""
    idx = np.flatnonzero(has_pred)
    cur, lag = e[idx], e[idx - 1]
    num = float(cur @ lag)
    sse = float(e @ e)

    def ratio(a, b):
        return a / b if b != 0 else 0.0

    if rhotype == "regress":
        return ratio(num, float(lag @ lag))
    if rhotype == "freg":
        return ratio(num, float(cur @ cur))
    if rhotype == "tscorr":
        return ratio(num, sse)
    n = e.shape[0]
    d = ratio(float(np.sum((cur - lag) ** 2)), sse)
    if rhotype == "dw":
        return 1.0 - d / 2.0 if sse != 0 else 0.0
    if rhotype == "theil":
        return ratio(num, sse) * (n - k) / n
    if rhotype == "nagar":
        if sse == 0:
            return 0.0
        return ((1.0 - d / 2.0) * n**2 + k**2) / (n**2 - k**2)
    raise ValueError(rhotype)


def _has_pred(n: int, time, gaps: str) -> np.ndarray:
    """has_pred[t]: row t - 1 is the previous period of row t (so the pair (t, t-1) is used)."""
    has_pred = np.ones(n, dtype=bool)
    has_pred[0] = False
    if time is not None:
        t = np.asarray(time, dtype=float)
        if t.shape != (n,):
            raise ValueError("time must have one value per observation")
        step = np.diff(t)
        if np.any(step <= 0):
            raise ValueError("time must be strictly increasing (sort the rows by time)")
        if gaps == "restart":
            has_pred[1:] = step == 1
    return has_pred


def _has_constant(X: np.ndarray) -> bool:
    return bool(np.any(np.all(X == X[0], axis=0) & (X[0] != 0)))


def _pw_transform(y, X, rho, has_pred, method):
    """Transformed (y*, X*) and the rows kept for the OLS."""
    idx = np.flatnonzero(has_pred)
    starts = ~has_pred
    ystar = np.zeros_like(y)
    Xstar = np.zeros_like(X)
    ystar[idx] = y[idx] - rho * y[idx - 1]
    Xstar[idx] = X[idx] - rho * X[idx - 1]
    keep = has_pred.copy()
    if method == "prais" and abs(rho) < 1:
        f = math.sqrt(1.0 - rho * rho)
        ystar[starts] = f * y[starts]
        Xstar[starts] = f * X[starts]
        keep[:] = True
    return ystar, Xstar, keep


def prais_winsten(
    y,
    X,
    *,
    method: str = "prais",
    rhotype: str = "regress",
    twostep: bool = False,
    tol: float = 1e-6,
    max_iter: int = 100,
    time=None,
    gaps: str = "restart",
    fixed_rho: float | None = None,
    names=None,
) -> PraisWinstenResult:
    """Stata ``prais y X`` (X must contain the constant column if the model has one).

    method ``"prais"`` (default) or ``"corc"`` (Cochrane-Orcutt, first observation dropped);
    ``rhotype`` one of :data:`RHOTYPES`; ``twostep`` stops after the first transformed fit;
    ``tol`` is the |delta rho| stopping tolerance (Stata ``tolerance()``), ``max_iter`` the
    maximum number of iterations (Stata ``iterate()``). ``time`` (strictly increasing) enables
    the gap handling described in the module docstring. ``fixed_rho`` skips the estimation of
    rho: one transformed fit at that rho (``iterations`` = 0), e.g. to compare with GLS.
    """
    _check_options(method, rhotype, tol, max_iter, gaps)
    y = np.asarray(y, dtype=float)
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    n, k = X.shape
    if y.shape != (n,):
        raise ValueError("y and X must have the same number of rows")
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(X))):
        raise ValueError("y and X must be finite (drop missing rows first)")
    if n <= k:
        raise ValueError(f"need more than k = {k} observations, got {n}")
    has_pred = _has_pred(n, time, gaps)
    hasconst = _has_constant(X)
    # Imported here, not with the module: statsmodels takes seconds to import and only this
    # one-series reference path uses it; the build fits with prais_winsten_trend_batch (numpy).
    import statsmodels.api as sm

    ols0 = sm.OLS(y, X, hasconst=hasconst).fit()
    e = y - X @ ols0.params
    dw_original = durbin_watson(e, has_pred)

    def fit_at(rho):
        ystar, Xstar, keep = _pw_transform(y, X, rho, has_pred, method)
        res = sm.OLS(ystar[keep], Xstar[keep], hasconst=hasconst).fit()
        return res, ystar, Xstar, keep

    n_oob = 0
    if fixed_rho is not None:
        rho = float(fixed_rho)
        res, ystar, Xstar, keep = fit_at(rho)
        n_oob = int(abs(rho) >= 1)
        iterations, converged = 0, True
    else:
        rho_prev = 0.0
        converged = False
        for j in range(1, int(max_iter) + 1):
            rho = _rho_reference(e, has_pred, rhotype, k)
            n_oob += abs(rho) >= 1
            res, ystar, Xstar, keep = fit_at(rho)
            e = y - X @ res.params
            if twostep or abs(rho - rho_prev) < tol:
                converged = True
                break
            rho_prev = rho
        iterations = j

    resid_star = ystar[keep] - Xstar[keep] @ res.params
    pairs_star = has_pred & keep & np.r_[False, keep[:-1]]
    dw_transformed = durbin_watson(resid_star, pairs_star[keep])
    if res.df_resid > 0:
        bse, tvalues, pvalues = res.bse, res.tvalues, res.pvalues
        cov = res.cov_params()
        rsquared, fvalue, f_pvalue = float(res.rsquared), float(res.fvalue), float(res.f_pvalue)
        if hasconst and res.ssr > res.centered_tss:
            # Stata: Model SS 0, R-squared missing, F = 0, Prob > F = 1.
            rsquared, fvalue, f_pvalue = math.nan, 0.0, 1.0
        if k == 1 and hasconst:
            fvalue, f_pvalue = math.nan, math.nan
    else:
        # No residual degrees of freedom (e.g. n = 3 and |rho| >= 1): the fit is exact and no
        # standard error exists; the residuals are rounding noise, so no Durbin-Watson either.
        bse = tvalues = pvalues = np.full(k, np.nan)
        cov = np.full((k, k), np.nan)
        dw_transformed = rsquared = fvalue = f_pvalue = math.nan

    return PraisWinstenResult(
        params=_readonly(res.params),
        bse=_readonly(bse),
        tvalues=_readonly(tvalues),
        pvalues=_readonly(pvalues),
        cov_params=_readonly(cov),
        rho=float(rho),
        iterations=int(iterations),
        converged=bool(converged),
        rho_out_of_bounds=bool(abs(rho) >= 1),
        n_rho_out_of_bounds=int(n_oob),
        n=int(n),
        nobs=int(res.nobs),
        df_resid=int(res.df_resid),
        ssr=float(res.ssr),
        rsquared=rsquared,
        fvalue=fvalue,
        f_pvalue=f_pvalue,
        llf=float(res.llf),
        dw_original=float(dw_original),
        dw_transformed=float(dw_transformed),
        n_gaps=int(np.count_nonzero(~has_pred[1:])),
        method=method,
        rhotype=rhotype,
        twostep=bool(twostep),
        names=tuple(names) if names is not None else None,
    )


def prais_winsten_trend(y, year, **options) -> PraisWinstenResult:
    """Prais-Winsten of y on [1, year] (rows sorted by year), the year centred internally.

    ``params`` = (intercept on the raw-year scale, slope); ``bse``, ``tvalues``, ``pvalues`` and
    ``cov_params`` are converted accordingly (the slope's are unchanged by the centring).
    ``year`` doubles as the time variable for gap handling. Options as :func:`prais_winsten`.
    """
    y = np.asarray(y, dtype=float)
    year = np.asarray(year, dtype=float)
    centre = float(np.mean(year))
    X = np.column_stack([np.ones_like(year), year - centre])
    res = prais_winsten(y, X, time=year, names=("const", "year"), **options)
    A = np.array([[1.0, -centre], [0.0, 1.0]])
    params = A @ res.params
    cov = A @ res.cov_params @ A.T
    bse = np.sqrt(np.diag(cov))
    tvalues = params / bse
    pvalues = 2 * stats.t.sf(np.abs(tvalues), res.df_resid)
    return replace(
        res,
        params=_readonly(params),
        bse=_readonly(bse),
        tvalues=_readonly(tvalues),
        pvalues=_readonly(pvalues),
        cov_params=_readonly(cov),
    )


# --------------------------------------------------------------------------------------------
# Batched path for y = log10(rate) on [1, year], many series
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class TrendBatchResult:
    """Per-series results of :func:`prais_winsten_trend_batch`, arrays aligned with ``series``.

    Same definitions as :class:`PraisWinstenResult` (intercept on the raw-year scale).
    Series with too few observations (n < 3, or N* - 2 < 1) have NaN statistics, and so have
    series whose transformed design became numerically singular (condition > 1e12: the
    transformed constant 1 - rho vanishes when rho -> 1 with the first row dropped); those are
    also flagged ``converged = False``.
    """

    series: np.ndarray
    n: np.ndarray
    nobs: np.ndarray
    df_resid: np.ndarray
    intercept: np.ndarray
    intercept_se: np.ndarray
    slope: np.ndarray
    slope_se: np.ndarray
    t_stat: np.ndarray
    p_value: np.ndarray
    rho: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    rho_out_of_bounds: np.ndarray
    n_rho_out_of_bounds: np.ndarray
    ssr: np.ndarray
    dw_original: np.ndarray
    dw_transformed: np.ndarray
    n_gaps: np.ndarray
    elapsed_seconds: float

    def __len__(self) -> int:
        return int(self.series.shape[0])


def _lag(A: np.ndarray) -> np.ndarray:
    out = np.zeros_like(A)
    out[:, 1:] = A[:, :-1]
    return out


def _ls2(C, X, Y):
    """Least squares of Y on the two columns (C, X), row-wise over series (zeros = left out).

    Gram-Schmidt QR with one re-orthogonalisation, y treated as a third column (backward
    stable like Householder for two columns). Returns b0, b1 and the R factor entries.
    """
    r11 = np.sqrt(np.einsum("ij,ij->i", C, C))
    q1 = C / r11[:, None]
    r12 = np.einsum("ij,ij->i", q1, X)
    xo = X - r12[:, None] * q1
    c2 = np.einsum("ij,ij->i", q1, xo)
    xo -= c2[:, None] * q1
    r12 = r12 + c2
    r22 = np.sqrt(np.einsum("ij,ij->i", xo, xo))
    q2 = xo / r22[:, None]
    r1y = np.einsum("ij,ij->i", q1, Y)
    yo = Y - r1y[:, None] * q1
    r2y = np.einsum("ij,ij->i", q2, yo)
    b1 = r2y / r22
    b0 = (r1y - r12 * b1) / r11
    return b0, b1, r11, r12, r22


def _rho_batch(E, P, n, rhotype: str, k: int = 2):
    """rho for each row of E (residuals, 0 where invalid); P marks the used pairs (t, t-1)."""
    El = _lag(E)
    num = np.einsum("ij,ij->i", P * E, El)
    sse = np.einsum("ij,ij->i", E, E)
    with np.errstate(divide="ignore", invalid="ignore"):
        if rhotype == "regress":
            den = np.einsum("ij,ij->i", P * El, El)
            return np.where(den != 0, num / np.where(den != 0, den, 1.0), 0.0)
        if rhotype == "freg":
            den = np.einsum("ij,ij->i", P * E, E)
            return np.where(den != 0, num / np.where(den != 0, den, 1.0), 0.0)
        safe = np.where(sse != 0, sse, 1.0)
        tscorr = np.where(sse != 0, num / safe, 0.0)
        if rhotype == "tscorr":
            return tscorr
        if rhotype == "theil":
            return tscorr * (n - k) / n
        D = P * (E - El)
        d = np.einsum("ij,ij->i", D, D) / safe
        if rhotype == "dw":
            return np.where(sse != 0, 1.0 - d / 2.0, 0.0)
        if rhotype == "nagar":
            return np.where(sse != 0, ((1.0 - d / 2.0) * n**2 + k**2) / (n**2 - k**2), 0.0)
    raise ValueError(rhotype)


def _dw_batch(U, pairs):
    D = pairs * (U - _lag(U))
    num = np.einsum("ij,ij->i", D, D)
    den = np.einsum("ij,ij->i", U, U)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def prais_winsten_trend_batch(
    y,
    year,
    series,
    *,
    method: str = "prais",
    rhotype: str = "regress",
    twostep: bool = False,
    tol: float = 1e-6,
    max_iter: int = 100,
    gaps: str = "restart",
) -> TrendBatchResult:
    """Fit y ~ 1 + year by Prais-Winsten for every series at once (same algorithm and options
    as :func:`prais_winsten_trend`).

    ``y``, ``year``, ``series`` are flat arrays of equal length (long format, any row order);
    ``series`` holds any sortable labels. Results are per unique label, in sorted order
    (``result.series``). Years must be unique within a series and y finite.
    """
    _check_options(method, rhotype, tol, max_iter, gaps)
    t0 = _time.perf_counter()
    y = np.asarray(y, dtype=float)
    year = np.asarray(year, dtype=float)
    series = np.asarray(series)
    if not (y.shape == year.shape == series.shape) or y.ndim != 1:
        raise ValueError("y, year and series must be 1-D arrays of equal length")
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(year))):
        raise ValueError("y and year must be finite (drop missing rows first)")
    labels, codes = np.unique(series, return_inverse=True)
    S = labels.shape[0]
    order = np.lexsort((year, codes))
    codes, y, year = codes[order], y[order], year[order]
    counts = np.bincount(codes, minlength=S)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = np.arange(codes.shape[0]) - starts[codes]
    T = int(counts.max()) if S else 0

    V = np.zeros((S, T), dtype=bool)
    Y = np.zeros((S, T))
    YR = np.zeros((S, T))
    V[codes, pos] = True
    Y[codes, pos] = y
    YR[codes, pos] = year
    if np.any(V[:, 1:] & (YR[:, 1:] <= YR[:, :-1])):
        raise ValueError("duplicate years within a series")
    n = counts.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        centre = YR.sum(axis=1) / n
    X = np.where(V, YR - centre[:, None], 0.0)
    P = V & _lag(V)
    if gaps == "restart":
        P &= (YR - _lag(YR)) == 1
    ST = V & ~P
    Pf = P.astype(float)
    Vf = V.astype(float)

    # Output arrays (NaN for series that cannot be fitted).
    nan = np.full(S, np.nan)
    out = {name: nan.copy() for name in ("b0", "b1", "r11", "r12", "r22", "ssr", "dwt", "rho")}
    nobs = np.zeros(S, dtype=int)
    iters = np.zeros(S, dtype=int)
    conv = np.zeros(S, dtype=bool)
    oob = np.zeros(S, dtype=bool)
    n_oob = np.zeros(S, dtype=int)
    dw_orig = nan.copy()

    ok = np.flatnonzero(counts >= 3)
    # Iteration 0: OLS on the untransformed data.
    b0, b1, *_ = _ls2(Vf[ok], X[ok], Y[ok])
    E = np.zeros((S, T))
    E[ok] = (Y[ok] - b0[:, None] - b1[:, None] * X[ok]) * Vf[ok]
    dw_orig[ok] = _dw_batch(E[ok], Pf[ok])

    rho_prev = np.zeros(S)
    active = ok
    for j in range(1, int(max_iter) + 1):
        if active.size == 0:
            break
        a = active
        Ea, Pa, Va, STa = E[a], Pf[a], V[a], ST[a]
        r = _rho_batch(Ea, Pa, n[a], rhotype)
        rr = r[:, None]
        Ya, Xa = Y[a], X[a]
        Cs = Pa * (1.0 - rr)
        Ys = Pa * (Ya - rr * _lag(Ya))
        Xs = Pa * (Xa - rr * _lag(Xa))
        inb = np.abs(r) < 1
        n_oob[a] += ~inb
        if method == "prais":
            w = np.where(inb, np.sqrt(np.where(inb, 1.0 - r * r, 0.0)), 0.0)[:, None] * STa
            Cs = Cs + w
            Ys = Ys + w * Ya
            Xs = Xs + w * Xa
            M = Pa.astype(bool) | (STa & inb[:, None])
        else:
            M = Pa.astype(bool)
        with np.errstate(divide="ignore", invalid="ignore"):
            b0, b1, r11, r12, r22 = _ls2(Cs, Xs, Ys)
        # A singular transformed design (rho = 1 with the first row dropped) identifies no
        # intercept: NaN statistics, the series leaves the loop unconverged.
        # Numerically singular too: the transformed constant 1 - rho vanishing next to the
        # year column (Cochrane-Orcutt with rho -> 1, a degenerate attractor of rhotype dw).
        scale = np.maximum(r11, np.hypot(r12, r22))
        broken = ~(np.isfinite(b0) & np.isfinite(b1) & (np.minimum(r11, r22) > 1e-12 * scale))
        b0 = np.where(broken, np.nan, b0)
        b1 = np.where(broken, np.nan, b1)
        U = (Ys - Cs * b0[:, None] - Xs * b1[:, None]) * M
        Mf = M.astype(float)
        pairs_star = Pa * _lag(Mf) * Mf
        out["b0"][a], out["b1"][a] = b0, b1
        out["r11"][a], out["r12"][a], out["r22"][a] = r11, r12, r22
        out["ssr"][a] = np.einsum("ij,ij->i", U, U)
        out["dwt"][a] = _dw_batch(U, pairs_star)
        out["rho"][a] = r
        nobs[a] = M.sum(axis=1)
        iters[a] = j
        oob[a] = ~inb
        E[a] = (Ya - b0[:, None] - b1[:, None] * Xa) * Va
        if twostep:
            conv[a] = ~broken
            break
        done = (np.abs(r - rho_prev[a]) < tol) & ~broken
        conv[a[done]] = True
        rho_prev[a] = r
        active = a[~(done | broken)]

    df_resid = nobs - 2
    with np.errstate(invalid="ignore", divide="ignore"):
        dfr = np.where(df_resid > 0, df_resid, np.nan)
        s = np.sqrt(out["ssr"] / dfr)
        r11, r12, r22 = out["r11"], out["r12"], out["r22"]
        var1 = (s / r22) ** 2
        var0c = s**2 * (1.0 / r11**2 + (r12 / (r11 * r22)) ** 2)
        cov01 = -(s**2) * r12 / (r11 * r22**2)
        slope = out["b1"]
        intercept = out["b0"] - slope * centre
        intercept_se = np.sqrt(var0c + centre**2 * var1 - 2.0 * centre * cov01)
        slope_se = np.sqrt(var1)
        t_stat = slope / slope_se
        p_value = 2.0 * stats.t.sf(np.abs(t_stat), dfr)
    fitted = np.isfinite(out["rho"])
    return TrendBatchResult(
        series=labels,
        n=counts,
        nobs=nobs,
        df_resid=np.where(fitted, df_resid, 0),
        intercept=intercept,
        intercept_se=intercept_se,
        slope=slope,
        slope_se=slope_se,
        t_stat=t_stat,
        p_value=p_value,
        rho=out["rho"],
        iterations=iters,
        converged=conv,
        rho_out_of_bounds=oob,
        n_rho_out_of_bounds=n_oob,
        ssr=out["ssr"],
        dw_original=dw_orig,
        dw_transformed=np.where(df_resid > 0, out["dwt"], np.nan),
        n_gaps=np.where(counts > 0, (ST.sum(axis=1) - 1).clip(min=0), 0),
        elapsed_seconds=_time.perf_counter() - t0,
    )
