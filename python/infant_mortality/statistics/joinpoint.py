"""Joinpoint regression of a rate series, as NCI's Joinpoint program does it (docs/methods/joinpoint.md).

Model (Kim, Fay, Feuer, Midthune 2000): ln(rate_t) = b0 + b1 t + sum_k d_k (t - tau_k)+, a
continuous broken line whose joinpoints tau_k sit at observed years, fitted by weighted least
squares over every admissible set of joinpoints (NCI's grid search). The number of joinpoints is
chosen by NCI's sequential permutation test or by BIC; each segment gets its APC with interval
and p, the whole period its AAPC (Clegg et al. 2009).

API
---
``fit_joinpoint(year, deaths, births, *, max_joinpoints=None, min_joinpoints=0, min_from_end=2,
min_between=2,
selection="permutation", n_permutations=4499, alpha=0.05, seed=20000335, ci_level=0.95,
weighting="poisson", se_method="nci", zero_deaths="add_half", cap_joinpoints=None,
permutation_stop="decision") -> JoinpointFit``
    One series: arrays of equal length, one row per year (any order, years unique).

``fit_joinpoint_many(year, deaths, births, series, **same options) -> list[JoinpointFit]``
    Many series at once from flat long arrays (any row order); one fit per unique ``series``
    label, in sorted label order. A series' result does not depend on the other series fitted
    with it (the permutations are drawn from ``seed`` and the series length only).

``default_max_joinpoints(n_points)`` -- NCI's recommended maximum for that many points.

Options
-------
* ``max_joinpoints``: None = ``default_max_joinpoints(n)``; lowered (with a note) to the largest
  number the distance rules and the degrees of freedom allow. ``min_joinpoints`` (NCI's minimum,
  default 0) is where the tests start; min = max fits exactly that many joinpoints.
* ``min_from_end`` / ``min_between``: observations required between a joinpoint and either end of
  the data, and between two joinpoints, not counting the joinpoint's own observation (NCI's
  grid-search defaults, 2 and 2).
* ``selection``: ``"permutation"`` (Kim et al. 2000: H0 k = ka vs H1 k = kb starting at 0 vs max,
  each test at level alpha / (max - ka) as NCI does since version 3.0 (ka starts at the minimum); p = (1 + #{T* >= T}) /
  (N + 1) with T = SSE_a / SSE_b - 1 over N permutations of the null model's weighted residuals)
  or ``"bic"`` (NCI's BIC(k) = ln(SSE_k / n) + 2 (k + 1) ln(n) / n, smallest wins, ties to fewer).
* ``permutation_stop``: ``"decision"`` (default) draws the permutations in blocks of 250, 500,
  1000, ... and stops a test once its decision (p < level) is settled either way; ``"all"``
  always draws N. Both choose the same model (tested); under ``"decision"`` the p-value of a
  test that stopped early is the lower bound (1 + hits so far) / (N + 1) and
  ``SelectionTest.permutations`` says how many were drawn.
* ``weighting``: ``"poisson"`` (weight = deaths, i.e. 1 / var(ln rate) by the delta method: what
  NCI uses for a crude rate it computes from a count and a population) or ``"constant"`` (OLS).
* ``se_method``: ``"nci"`` (NCI's parametric standard errors: observations on joinpoints left
  out, slopes' variances from the unconstrained per-segment fit, df = n - k - 2 (k + 1); segments
  independent) or ``"hinge"`` (the covariance of the continuous model with the joinpoints taken
  as known, df = n - k - 2; what a WLS on the hinge basis reports).
* ``zero_deaths``: ``"add_half"`` (NCI: a zero count becomes 0.5 when the series has any death;
  a note lists the years) or ``"not_estimable"`` (a series with a zero year is not fitted).

Result
------
:class:`JoinpointFit` per series: the joinpoints (years), the segments (:class:`Segment`:
index from 1, start and end year, slope of ln rate per year, its se, APC = 100 (e^slope - 1)
with its ``ci_level`` interval from t(df_resid), and the slope's two-sided p), the AAPC over the
whole period with interval and p, ``slope`` / ``slope_se`` = the length-weighted mean slope
(ln(1 + AAPC/100)) and its se, ``intercept`` = b0 on the ln(deaths/births) scale at raw years,
``fitted_log_rate``, the selection tests or BICs, ``estimable`` and ``notes``. A fit that is not
estimable has NaN statistics and no segments; ``notes`` say why.
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy import special

NCI_PERMUTATIONS = 4499
DEFAULT_SEED = 20000335  # Stat Med 19:335; any fixed value makes runs repeatable.
SELECTIONS = ("permutation", "bic")
WEIGHTINGS = ("poisson", "constant")
SE_METHODS = ("nci", "hinge")
ZERO_DEATHS = ("add_half", "not_estimable")
# Bytes of permuted responses and their projections held at once: the batch of series and
# permutations is cut to fit a core's cache, since the projections are read again three times
# after the product makes them (squared, summed, maximised). The national joinpoint fits of 30
# years (27,951 series) took 36.3 s of CPU with 32 MB batches, 28.0 s with 4 MB (same doubles).
_PERMUTATION_MEMORY = 4 * 2**20
# Bytes the candidate bases of one slice of series may take (_series_per_slice).
_BASES_MEMORY = 256 * 2**20
# Threads fitting slices of series at once.
_FIT_THREADS = 2
# Permutations of the first block under permutation_stop="decision" (then doubled each block).
_FIRST_PERMUTATION_BLOCK = 250
PERMUTATION_STOPS = ("decision", "all")


@dataclass(frozen=True)
class Segment:
    """One line segment of the chosen model; years are the segment's end points."""

    index: int
    start_year: float
    end_year: float
    slope: float
    slope_se: float
    apc: float
    apc_lower: float
    apc_upper: float
    p_value: float


@dataclass(frozen=True)
class SelectionTest:
    """One permutation test of the sequence: H0 k = k_null against H1 k = k_alt."""

    k_null: int
    k_alt: int
    p_value: float
    level: float
    rejected: bool
    permutations: int
    """Permutations drawn: all N, or fewer when the decision was settled earlier (then p_value is
    a lower bound of the p all N give; see permutation_stop)."""


@dataclass(frozen=True)
class JoinpointFit:
    """The chosen model of one series (fields described in the module docstring).

    ``tests`` holds the permutation tests in the order run (empty with BIC); ``bic`` the BIC of
    0..max_joinpoints joinpoints (empty with the permutation test). ``joinpoints`` and
    ``n_joinpoints`` are kept when the selection ran but the final fit is not estimable.
    """

    series: object
    years: tuple
    n_joinpoints: int
    joinpoints: tuple
    segments: tuple
    aapc: float
    aapc_lower: float
    aapc_upper: float
    aapc_p: float
    slope: float
    slope_se: float
    intercept: float
    df_resid: float
    fitted_log_rate: tuple
    max_joinpoints: int
    tests: tuple
    bic: tuple
    estimable: bool
    notes: tuple


def default_max_joinpoints(n_points: int) -> int:
    """NCI's recommended maximum: 0 below 7 points, then one more per 5 points, at most 5."""
    if n_points < 7:
        return 0
    return min((n_points - 2) // 5, 5)


def candidate_joinpoints(n_points: int, k: int, min_from_end: int, min_between: int) -> np.ndarray:
    """Every admissible set of k joinpoint positions (indices into the sorted years), (C, k)."""
    inner = range(min_from_end, n_points - min_from_end)
    sets = [
        c for c in itertools.combinations(inner, k)
        if all(b - a - 1 >= min_between for a, b in zip(c, c[1:]))
    ]
    return np.array(sets, dtype=int).reshape(len(sets), k)


def hinge_design(x: np.ndarray, joinpoint_idx) -> np.ndarray:
    """Columns 1, x, (x - x[j])+ for each joinpoint index j."""
    x = np.asarray(x, dtype=float)
    hinges = [np.maximum(x - x[j], 0.0) for j in joinpoint_idx]
    return np.column_stack([np.ones_like(x), x, *hinges])


def fit_joinpoint(year, deaths, births, **options) -> JoinpointFit:
    """One series; see the module docstring for the options."""
    year = np.asarray(year)
    return fit_joinpoint_many(year, deaths, births, np.zeros(len(year), dtype=int), **options)[0]


def fit_joinpoint_many(
    year, deaths, births, series, *, max_joinpoints=None, min_joinpoints=0, min_from_end=2,
    min_between=2,
    selection="permutation", n_permutations=NCI_PERMUTATIONS, alpha=0.05, seed=DEFAULT_SEED,
    ci_level=0.95, weighting="poisson", se_method="nci", zero_deaths="add_half", cap_joinpoints=None,
    permutation_stop="decision",
) -> list[JoinpointFit]:
    """One fit per unique series label (sorted) from flat arrays; see the module docstring."""
    opts = _Options(max_joinpoints, min_joinpoints, min_from_end, min_between, selection,
                    n_permutations, alpha, seed, ci_level, weighting, se_method, zero_deaths,
                    cap_joinpoints, permutation_stop)
    year, deaths, births, series = _validated_arrays(year, deaths, births, series)
    labels, codes = np.unique(series, return_inverse=True)
    labels = labels.tolist()  # plain Python labels in results and messages
    order = np.lexsort((year, codes))
    year, deaths, births, codes = year[order], deaths[order], births[order], codes[order]
    bounds = np.searchsorted(codes, np.arange(len(labels) + 1))

    prepared = []
    for i, label in enumerate(labels):
        sl = slice(bounds[i], bounds[i + 1])
        prepared.append(_prepare_series(label, year[sl], deaths[sl], births[sl], opts))

    results = {}
    groups = {}
    for i, p in enumerate(prepared):
        if p.reason is None:
            groups.setdefault(tuple(p.years), []).append(i)
        else:
            results[i] = _not_fitted(p, p.reason)
    # Series are fitted independently (the permutations depend on the seed and n only), so a
    # group is fitted in slices that keep its candidate bases within _BASES_MEMORY, and the
    # slices on _FIT_THREADS threads (the matrix products release the interpreter lock), each
    # with its share of the memory.
    slices = []
    for years, members in groups.items():
        step = max(1, _series_per_slice(len(years), opts) // _FIT_THREADS)
        slices += [(np.array(years), members[start:start + step]) for start in range(0, len(members), step)]
    with ThreadPoolExecutor(max_workers=_FIT_THREADS) as pool:
        fitted = pool.map(lambda job: _fit_group(job[0], [prepared[i] for i in job[1]], opts), slices)
        for (_, part), fits in zip(slices, fitted):
            results.update(zip(part, fits))
    return [results[i] for i in range(len(labels))]


@dataclass(frozen=True)
class _Options:
    max_joinpoints: int | None
    min_joinpoints: int
    min_from_end: int
    min_between: int
    selection: str
    n_permutations: int
    alpha: float
    seed: int
    ci_level: float
    weighting: str
    se_method: str
    zero_deaths: str
    cap_joinpoints: int | None = None
    permutation_stop: str = "decision"

    def __post_init__(self):
        for name, value, allowed in (("selection", self.selection, SELECTIONS),
                                     ("permutation_stop", self.permutation_stop, PERMUTATION_STOPS),
                                     ("weighting", self.weighting, WEIGHTINGS),
                                     ("se_method", self.se_method, SE_METHODS),
                                     ("zero_deaths", self.zero_deaths, ZERO_DEATHS)):
            if value not in allowed:
                raise ValueError(f"joinpoint {name} must be one of {allowed}, got {value!r}")
        for name in ("max_joinpoints", "min_joinpoints", "cap_joinpoints"):
            value = getattr(self, name)
            if value is not None and (int(value) != value or value < 0):
                raise ValueError(f"{name} must be a whole number >= 0, got {value}")
        if self.max_joinpoints is not None and self.min_joinpoints > self.max_joinpoints:
            raise ValueError(f"min_joinpoints ({self.min_joinpoints}) is above max_joinpoints "
                             f"({self.max_joinpoints})")
        floor = 2 if self.se_method == "nci" else 1
        if self.min_from_end < floor or self.min_between < floor - 1:
            raise ValueError(
                f"min_from_end must be >= {floor} and min_between >= {floor - 1} with "
                f"se_method={self.se_method!r} (got {self.min_from_end}, {self.min_between}): "
                "a segment needs enough observations of its own for its slope's standard error")
        if not (isinstance(self.n_permutations, (int, np.integer)) and self.n_permutations >= 1):
            raise ValueError(f"n_permutations must be a whole number >= 1, got {self.n_permutations}")
        for name, value in (("alpha", self.alpha), ("ci_level", self.ci_level)):
            if not 0 < value < 1:
                raise ValueError(f"{name} must be between 0 and 1, got {value}")


def _validated_arrays(year, deaths, births, series):
    arrays = [np.asarray(a) for a in (year, deaths, births, series)]
    if len({a.shape for a in arrays}) != 1 or arrays[0].ndim != 1:
        raise ValueError("year, deaths, births and series must be 1-d arrays of the same length, "
                         f"got shapes {[a.shape for a in arrays]}")
    year, deaths, births = (a.astype(float) for a in arrays[:3])
    series = arrays[3]
    for name, values in (("year", year), ("deaths", deaths), ("births", births)):
        bad = ~np.isfinite(values)
        if bad.any():
            raise ValueError(f"{name} is missing or not finite for series {series[bad][0].item()!r}: "
                             "every row needs a year, a death count and a births count")
    if (deaths < 0).any():
        raise ValueError(f"negative deaths for series {series[deaths < 0][0].item()!r}")
    if (births <= 0).any():
        raise ValueError(f"births must be positive; series {series[births <= 0][0].item()!r} has "
                         f"{births[births <= 0][0]:g} in year {year[births <= 0][0]:g}")
    return year, deaths, births, series


@dataclass
class _Prepared:
    label: object
    years: np.ndarray
    log_rate: np.ndarray | None
    weight: np.ndarray | None
    notes: list
    reason: str | None


def _prepare_series(label, years, deaths, births, opts: _Options) -> _Prepared:
    """ln rates and weights for one series, or the reason it cannot be fitted."""
    if len(np.unique(years)) != len(years):
        dup = years[1:][np.diff(years) == 0][0]
        raise ValueError(f"series {label!r} has year {dup:g} more than once: one row per year")
    notes = []

    def refused(reason):
        return _Prepared(label, years, None, None, notes, reason)

    if len(years) < 3:
        return refused(f"not estimable: {len(years)} years, a trend needs at least 3")
    zero = deaths == 0
    if zero.all():
        return refused("not estimable: no deaths in any year, the log rate is undefined")
    if zero.any():
        zero_years = ", ".join(f"{y:g}" for y in years[zero])
        if opts.zero_deaths == "not_estimable":
            return refused(f"not estimable: no deaths in {zero_years}, the log rate is undefined")
        notes.append(f"no deaths in {zero_years}: counted as 0.5 deaths, as NCI Joinpoint does")
    adjusted = np.where(zero, 0.5, deaths)
    weight = adjusted if opts.weighting == "poisson" else np.ones_like(adjusted)
    return _Prepared(label, years, np.log(adjusted / births), weight, notes, None)


def _not_fitted(p: _Prepared, reason: str, n_joinpoints=0, joinpoints=(), kmax=0, tests=(), bic=(),
                notes=None):
    nan = float("nan")
    return JoinpointFit(
        series=p.label, years=tuple(float(y) for y in p.years), n_joinpoints=n_joinpoints,
        joinpoints=joinpoints, segments=(), aapc=nan, aapc_lower=nan, aapc_upper=nan, aapc_p=nan,
        slope=nan, slope_se=nan, intercept=nan, df_resid=nan, fitted_log_rate=(),
        max_joinpoints=kmax, tests=tests, bic=bic, estimable=False,
        notes=(reason, *(p.notes if notes is None else notes)),
    )


def _feasible_range(n: int, opts: _Options) -> tuple[int, int, list]:
    """Fewest and most joinpoints to consider: the asked ones, lowered to what the distance rules
    and the degrees of freedom allow."""
    asked = (max(default_max_joinpoints(n), int(opts.min_joinpoints))
             if opts.max_joinpoints is None else int(opts.max_joinpoints))
    notes = []
    if opts.cap_joinpoints is not None and asked > opts.cap_joinpoints:
        notes.append(f"at most {opts.cap_joinpoints} joinpoint(s) (the cap), where NCI's rule allows "
                     f"{asked} in {n} years")
        asked = max(int(opts.cap_joinpoints), int(opts.min_joinpoints))
    k = asked
    while k > 0 and (_df(n, k, opts.se_method) < 1
                     or len(candidate_joinpoints(n, k, opts.min_from_end, opts.min_between)) == 0):
        k -= 1
    if k < asked:
        notes.append(f"at most {k} joinpoint(s) fit in {n} years with the distance rules "
                     f"(asked {asked})")
    return min(int(opts.min_joinpoints), k), k, notes


def _series_per_slice(n: int, opts: _Options) -> int:
    """How many series of n years one _GroupFits may hold: its hinge bases take
    8 n sum_k C_k k bytes per series (twice, while they are made)."""
    _, kmax, _ = _feasible_range(n, opts)
    per_series = 16 * n * sum(len(candidate_joinpoints(n, k, opts.min_from_end, opts.min_between)) * k
                              for k in range(1, kmax + 1))
    return max(1, _BASES_MEMORY // max(per_series, 1))


def _df(n: int, k: int, se_method: str) -> int:
    # NCI leaves the k observations on joinpoints out and counts 2 (k + 1) parameters.
    return n - k - 2 * (k + 1) if se_method == "nci" else n - k - 2


def _orthonormal_rows(z: np.ndarray) -> np.ndarray:
    """An orthonormal basis of each candidate's k columns z[s, c] (z: S, C, n, k), by modified
    Gram-Schmidt over the k columns at once for every series and candidate: the span of
    np.linalg.qr's Q (up to the signs of its vectors, which no squared projection and no fitted
    value sees) without one LAPACK call per candidate, which took 1.7 s of the national build.
    Stored as rows, basis vector first (S, k, C, n): the product with the responses needs no
    copy, and the k squares of a candidate are summed as k whole slabs."""
    rows = np.ascontiguousarray(np.moveaxis(z, 3, 1))
    for p in range(rows.shape[1]):
        for q in range(p):
            rows[:, p] -= np.einsum("scn,scn->sc", rows[:, q], rows[:, p])[..., None] * rows[:, q]
        rows[:, p] /= np.linalg.norm(rows[:, p], axis=-1, keepdims=True)
    return rows


class _GroupFits:
    """Grid-search machinery for series sharing the same years (weights may differ).

    Responses are sqrt(w) (ln rate - its weighted mean). Every model contains the intercept
    direction u = sqrt(w) / |sqrt(w)| and the line direction v (sqrt(w) year made orthogonal to
    u, unit length); per candidate set of k >= 1 joinpoints, H is an orthonormal basis of its k
    hinge columns made orthogonal to u and v. The weighted SSE of a response matrix Y is then
    |Y|^2 - (u'Y)^2 - (v'Y)^2 - |H'Y|^2: the part every candidate shares is computed once, and
    one matrix product gives |H'Y|^2 for all candidates and permutations (k rows per candidate,
    not k + 1).
    """

    def __init__(self, x: np.ndarray, sqrt_w: np.ndarray, kmax: int, opts: _Options):
        self.n = len(x)
        self.u = sqrt_w / np.linalg.norm(sqrt_w, axis=1, keepdims=True)  # (S, n)
        line = sqrt_w * x
        line = line - self.u * np.einsum("sn,sn->s", self.u, line)[:, None]
        self.v = line / np.linalg.norm(line, axis=1, keepdims=True)  # (S, n)
        self.candidates, self.hinges = [], []
        for k in range(kmax + 1):
            cand = candidate_joinpoints(self.n, k, opts.min_from_end, opts.min_between)
            self.candidates.append(cand)
            if k == 0:
                self.hinges.append(None)
                continue
            design = np.stack([hinge_design(x, c)[:, 2:] for c in cand])  # (C, n, k)
            z = sqrt_w[:, None, :, None] * design[None]  # (S, C, n, k)
            for direction in (self.u, self.v):
                z = z - direction[:, None, :, None] * np.einsum("sn,scnp->scp", direction, z)[:, :, None, :]
            self.hinges.append(_orthonormal_rows(z))

    def rows(self, k: int) -> int:
        """Rows of the matrix product for the candidates with k joinpoints."""
        return 0 if k == 0 else self.hinges[k].shape[2] * k

    def _explained(self, s, k, y):
        """(S', C_k, N): |H'y|^2 of every candidate with k >= 1 joinpoints."""
        h = self.hinges[k][s]  # (S', k, C, n)
        S, p, C, n = h.shape
        proj = np.matmul(h.reshape(S, p * C, n), y)  # (S', k*C, N)
        np.square(proj, out=proj)
        return proj.reshape(S, p, C, -1).sum(axis=1)

    def _line_sse(self, s, y, total):
        """(S', N): the SSE of the straight line (no joinpoint)."""
        if total is None:
            total = self.total(s, y)
        along_v = np.einsum("sn,snm->sm", self.v[s], y)
        return total - along_v * along_v

    def sse(self, s, k, y, total=None):
        """(S', C_k, N) weighted SSE of transformed responses y (S', n, N), every candidate.

        ``total`` = |y|^2 - (u'y)^2, the SSE of the intercept-only model (computed if None).
        """
        line = self._line_sse(s, y, total)
        if k == 0:
            return np.maximum(line, 0.0)[:, None, :]
        return np.maximum(line[:, None, :] - self._explained(s, k, y), 0.0)

    def min_sse(self, s, k, y, total=None):
        """(S', N): the smallest SSE over the candidates, i.e. ``sse(...).min(axis=1)``, from
        the largest explained part (the same doubles: subtraction is monotone)."""
        line = self._line_sse(s, y, total)
        if k == 0:
            return np.maximum(line, 0.0)
        return np.maximum(line - self._explained(s, k, y).max(axis=1), 0.0)

    def total(self, s, y):
        along_u = np.einsum("sn,snm->sm", self.u[s], y)
        return np.einsum("snm,snm->sm", y, y) - along_u * along_u

    def null_fit(self, s, k, best, ytil):
        """Fitted values (transformed scale) of candidate `best` (S',) with k joinpoints."""
        fitted = np.zeros_like(ytil)
        for direction in (self.u[s], self.v[s]):
            fitted += np.einsum("sn,sn->s", direction, ytil)[:, None] * direction
        if k > 0:
            h = self.hinges[k][s, :, best]  # (S', k, n)
            fitted += np.einsum("spn,sp->sn", h, np.einsum("spn,sn->sp", h, ytil))
        return fitted


def _fit_group(years: np.ndarray, members: list, opts: _Options) -> list:
    n = len(years)
    x = years - years[0]
    kmin, kmax, group_notes = _feasible_range(n, opts)
    ylog = np.stack([p.log_rate for p in members])
    weight = np.stack([p.weight for p in members])
    sqrt_w = np.sqrt(weight)
    # Centring on the weighted mean changes no SSE (every model has an intercept) and keeps
    # |y|^2 - |Q'y|^2 free of cancellation.
    ytil = sqrt_w * (ylog - np.average(ylog, weights=weight, axis=1)[:, None])
    machinery = _GroupFits(x, sqrt_w, kmax, opts)
    everyone = np.arange(len(members))
    sse = [machinery.sse(everyone, k, ytil[:, :, None])[:, :, 0] for k in range(kmax + 1)]
    best = [np.argmin(s, axis=1) for s in sse]
    best_sse = np.stack([s.min(axis=1) for s in sse], axis=1)  # (S, kmax+1)

    tests = [[] for _ in members]
    bic = np.full((len(members), kmax + 1), np.nan)
    if opts.selection == "bic":
        penalty = 2 * (np.arange(kmax + 1) + 1) * np.log(n) / n
        with np.errstate(divide="ignore"):
            bic = np.log(best_sse / n) + penalty
        chosen = kmin + np.argmin(bic[:, kmin:], axis=1)
    else:
        chosen = _permutation_selection(machinery, ytil, best, best_sse, kmin, kmax, opts, tests)

    joinpoint_sets = [machinery.candidates[int(chosen[i])][best[int(chosen[i])][i]] for i in range(len(members))]
    bics = [tuple(float(b) for b in bic[i]) if opts.selection == "bic" else () for i in range(len(members))]
    return _final_fits(members, x, joinpoint_sets, kmax, [tuple(t) for t in tests], bics, group_notes, opts)


def _permutations(n: int, opts: _Options) -> np.ndarray:
    """(N, n) permutations of 0..n-1 drawn from the seed and n only."""
    rng = np.random.default_rng([opts.seed, n])
    return rng.permuted(np.tile(np.arange(n), (opts.n_permutations, 1)), axis=1)


def _permutation_selection(machinery, ytil, best, best_sse, kmin, kmax, opts, tests):
    """NCI's sequential permutation tests; appends each test to `tests`; returns chosen k."""
    S, n = ytil.shape
    ka, kb = np.full(S, kmin), np.full(S, kmax)
    perms = _permutations(n, opts) if kmax > kmin else None
    while (ka < kb).any():
        active = np.flatnonzero(ka < kb)
        pairs = np.unique(np.stack([ka[active], kb[active]], axis=1), axis=0)
        for a, b in pairs:
            idx = active[(ka[active] == a) & (kb[active] == b)]
            level = float(opts.alpha / (kmax - a))
            pvals, drawn = _permutation_pvalues(machinery, ytil, best, best_sse, a, b, idx, perms, level,
                                                opts.permutation_stop)
            for s, pv, m in zip(idx, pvals, drawn):
                reject = bool(pv < level)
                tests[s].append(SelectionTest(int(a), int(b), float(pv), level, reject, int(m)))
                if reject:
                    ka[s] += 1
                else:
                    kb[s] -= 1
    return ka


def _ratio(sse_a, sse_b, scale):
    # T = SSE_null / SSE_alt - 1; a perfect alternative fit (SSE 0) is floored, not divided by.
    return (sse_a - sse_b) / np.maximum(sse_b, 1e-14 * scale)


def _permutation_blocks(n_perm: int, stop: str):
    """(start, end) of the blocks of permutations drawn in turn: all at once under ``all``;
    under ``decision`` 250, 500, 1000, ... so that a series whose answer is clear leaves early."""
    if stop == "all":
        yield 0, n_perm
        return
    start, size = 0, _FIRST_PERMUTATION_BLOCK
    while start < n_perm:
        yield start, min(n_perm, start + size)
        start, size = start + size, 2 * size


def _permutation_pvalues(machinery, ytil, best, best_sse, a, b, idx, perms, level, stop):
    """p = (1 + #{T* >= T}) / (N + 1) for H0 k = a vs H1 k = b, for the series idx, and the
    number of permutations drawn for each.

    Under ``stop = "decision"`` a series stops drawing once p < level is settled either way by
    the permutations drawn so far (Besag and Clifford's sequential Monte Carlo test): it cannot
    be rejected once (1 + hits) / (N + 1) >= level, and must be once even a hit on every
    permutation left would keep p below level. The decision, so the chosen model and all that
    is published of it, is the one all N permutations give; the p-value of a test that stopped
    early is the lower bound (1 + hits so far) / (N + 1), exact when all N were drawn."""
    n_perm, n = perms.shape
    fitted = machinery.null_fit(idx, a, best[a][idx], ytil[idx])
    resid = ytil[idx] - fitted
    scale = (ytil[idx] ** 2).sum(axis=1)
    t_obs = _ratio(best_sse[idx, a], best_sse[idx, b], scale)
    # A permuted T equal to the observed one up to rounding counts as reaching it.
    reach = t_obs - 1e-9 * np.abs(t_obs)
    hits, drawn = np.zeros(len(idx), dtype=int), np.zeros(len(idx), dtype=int)
    undecided = np.arange(len(idx))
    bytes_per_permutation = 8 * (2 * n + 1 + machinery.rows(a) + machinery.rows(b))
    for first, last in _permutation_blocks(n_perm, stop):
        block = perms[first:last]
        # A batch: `chunk` series by `width` permutations of the block, within the memory.
        width = max(1, min(len(block), _PERMUTATION_MEMORY // bytes_per_permutation))
        chunk = max(1, _PERMUTATION_MEMORY // (bytes_per_permutation * width))
        for start in range(0, len(undecided), chunk):
            j = undecided[start:start + chunk]
            s = idx[j]
            for part in range(0, len(block), width):
                ystar = fitted[j, :, None] + resid[j][:, block[part:part + width].T]  # (S', n, B')
                total = machinery.total(s, ystar)
                t_star = _ratio(machinery.min_sse(s, a, ystar, total), machinery.min_sse(s, b, ystar, total),
                                scale[j, None])
                hits[j] += (t_star >= reach[j, None]).sum(axis=1)
        drawn[undecided] = last
        left = n_perm - last
        settled = ((1 + hits[undecided]) / (n_perm + 1) >= level) | ((1 + hits[undecided] + left) / (n_perm + 1) < level)
        undecided = undecided[~settled]
        if undecided.size == 0:
            break
    return (1 + hits) / (n_perm + 1), drawn


def _final_fits(members: list, x, joinpoint_sets: list, kmax, tests: list, bic: list, group_notes,
                opts) -> list:
    """The chosen model of each member: coefficients and their inference (NCI or hinge standard
    errors). Members with the same joinpoints share one design and are solved together."""
    fits = [None] * len(members)
    sharing: dict[tuple, list[int]] = {}
    for i, jp_idx in enumerate(joinpoint_sets):
        sharing.setdefault(tuple(int(j) for j in jp_idx), []).append(i)
    for jp_idx, which in sharing.items():
        group = [members[i] for i in which]
        for i, fit in zip(which, _final_fits_sharing(group, x, np.array(jp_idx, dtype=int), kmax,
                                                      [tests[i] for i in which], [bic[i] for i in which],
                                                      group_notes, opts)):
            fits[i] = fit
    return fits


def _weighted_least_squares(design: np.ndarray, y: np.ndarray, sw: np.ndarray) -> np.ndarray:
    """(m, p) coefficients of the weighted fits of each row of y (m, n) on one design (n, p),
    weights sw^2, through the QR factors of each weighted design (batched)."""
    q, r = np.linalg.qr(sw[:, :, None] * design[None])
    return np.linalg.solve(r, _row_dot(q.transpose(0, 2, 1), (sw * y)[:, None, :])[:, :, None])[:, :, 0]


def _row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum(a * b) over the last axis (broadcast over the others), added term by term in order.
    Every product of the final fits goes through it instead of matmul, einsum or ndarray.sum,
    whose order of summation changes with the shape of the batch (so the last bit of a series'
    result changed with the series solved beside it); the last axis is short (years, or
    coefficients)."""
    a, b = np.broadcast_arrays(a, b)
    total = a[..., 0] * b[..., 0]
    for j in range(1, a.shape[-1]):
        total = total + a[..., j] * b[..., j]
    return total


def _final_fits_sharing(members: list, x, jp_idx: np.ndarray, kmax, tests, bic, group_notes, opts) -> list:
    y = np.stack([p.log_rate for p in members])  # (m, n)
    w = np.stack([p.weight for p in members])
    n, k = y.shape[1], len(jp_idx)
    years = members[0].years
    joinpoints = tuple(float(years[j]) for j in jp_idx)
    design = hinge_design(x, jp_idx)
    sw = np.sqrt(w)
    beta = _weighted_least_squares(design, y, sw)  # (m, k + 2)
    fitted = _row_dot(beta[:, None, :], design[None])
    to_slopes = np.tril(np.ones((k + 1, k + 1)))  # segment i slope = b1 + d_1 + ... + d_(i-1)
    slopes = _row_dot(beta[:, None, 1:], to_slopes[None])
    if opts.se_method == "nci":
        cov, df, sse = _nci_covariances(x, y, w, jp_idx)
    else:
        resid = sw * (y - fitted)
        sse, df = _row_dot(resid, resid), n - k - 2
        xtx_inv = np.linalg.inv(_gram(sw[:, :, None] * design[None]))
        scaled = (sse / df)[:, None, None] * xtx_inv[:, 1:, 1:]
        cov = _row_dot(_row_dot(to_slopes[None, :, None, :], scaled.transpose(0, 2, 1)[:, None])[:, :, None, :],
                       to_slopes[None, None])
    centred = y - (_row_dot(w, y) / _row_dot(w, np.ones(n)))[:, None]
    spread = _row_dot(w, centred ** 2)
    exact = sse <= 1e-20 * np.maximum(spread, 1e-300)

    ends = np.r_[years[0], joinpoints, years[-1]]
    lengths = np.diff(ends)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(np.diagonal(cov, axis1=1, axis2=2))  # (m, k + 1)
        upper_q = 0.5 + opts.ci_level / 2
        t_crit = special.stdtrit(df, upper_q)
        segment_apc = _percents(slopes, se, t_crit)
        segment_p = 2 * special.stdtr(df, -np.abs(slopes / se))
        mean_slope = _row_dot(slopes, lengths) / lengths.sum()
        mean_se = np.sqrt(_row_dot(_row_dot(cov, lengths), lengths)) / lengths.sum()
        # Clegg et al. 2009: t(df) when the period is one segment (AAPC = APC), normal otherwise.
        if k == 0:
            crit, aapc_p = t_crit, 2 * special.stdtr(df, -np.abs(mean_slope / mean_se))
        else:
            crit, aapc_p = special.ndtri(upper_q), 2 * special.ndtr(-np.abs(mean_slope / mean_se))
        aapc = _percents(mean_slope, mean_se, crit)
    intercept = beta[:, 0] - beta[:, 1] * years[0]

    fits = []
    for i, p in enumerate(members):
        notes = (*p.notes, *group_notes)
        if exact[i]:
            fits.append(_not_fitted(p, "not estimable: the model fits exactly (residual variance 0), "
                                    "so its standard errors are 0", k, joinpoints, kmax, tests[i], bic[i], notes))
            continue
        segments = tuple(
            Segment(j + 1, float(ends[j]), float(ends[j + 1]), float(slopes[i, j]), float(se[i, j]),
                    *(float(v[i, j]) for v in segment_apc), float(segment_p[i, j]))
            for j in range(k + 1)
        )
        fits.append(JoinpointFit(
            series=p.label, years=tuple(float(v) for v in years), n_joinpoints=k,
            joinpoints=joinpoints, segments=segments, aapc=float(aapc[0][i]), aapc_lower=float(aapc[1][i]),
            aapc_upper=float(aapc[2][i]), aapc_p=float(aapc_p[i]), slope=float(mean_slope[i]),
            slope_se=float(mean_se[i]), intercept=float(intercept[i]), df_resid=float(df),
            fitted_log_rate=tuple(fitted[i].tolist()), max_joinpoints=kmax, tests=tests[i], bic=bic[i],
            estimable=True, notes=notes,
        ))
    return fits


def _nci_covariances(x, y, w, jp_idx):
    """NCI's parametric covariance of the segment slopes (help page "Estimated Regression
    Coefficients"): drop the observations on joinpoints, fit each segment its own intercept and
    slope by WLS with a pooled residual variance, df = n* - 2 (k + 1). For each row of y and w
    (series with the same years and joinpoints): covariances (m, k+1, k+1), df, SSEs (m,)."""
    k, n = len(jp_idx), len(x)
    segment = np.searchsorted(jp_idx, np.arange(n), side="left")
    keep = ~np.isin(np.arange(n), jp_idx)
    seg, xs = segment[keep], x[keep]
    design = np.zeros((len(xs), 2 * (k + 1)))
    design[np.arange(len(xs)), 2 * seg] = 1.0
    design[np.arange(len(xs)), 2 * seg + 1] = xs
    sw, ys = np.sqrt(w[:, keep]), y[:, keep]
    beta = _weighted_least_squares(design, ys, sw)
    weighted = sw[:, :, None] * design[None]
    resid = sw * ys - _row_dot(weighted, beta[:, None, :])
    df = len(xs) - 2 * (k + 1)
    sse = _row_dot(resid, resid)
    cov = (sse / df)[:, None, None] * np.linalg.inv(_gram(weighted))
    return cov[:, 1::2, 1::2], df, sse


def _gram(a: np.ndarray) -> np.ndarray:
    """(m, p, p) = a_i' a_i for each (n, p) matrix a_i of a (m, n, p), by _row_dot."""
    columns = a.transpose(0, 2, 1)
    return _row_dot(columns[:, :, None, :], columns[:, None, :, :])


def _percents(slope, se, crit):
    """100 (e^b - 1) and its interval 100 (e^(b -/+ crit se) - 1), element-wise."""
    return tuple(100 * np.expm1(v) for v in (slope, slope - crit * se, slope + crit * se))
