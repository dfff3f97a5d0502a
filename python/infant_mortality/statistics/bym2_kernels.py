"""The Newton iteration of BYM2's Laplace approximation at one θ, compiled with numba.

``bym2.laplace_at`` finds the constrained mode of x = (μ, b, u) given θ by Newton's method on the
reduced bordered system (``bym2.ReducedSystem``): S = R* + φ diag(w) factorised, the Schur
complement of μ and the constraints' multipliers, the reduced solve, b back-substituted, a step
halved until the objective does not decrease. On the country (346 communes, 4 constraints) that
is about 3.3 steps a θ and 170 θ a fit; written with numpy and LAPACK each step was some forty
calls on arrays of 346, 0.4 ms mostly spent calling, and the national build's 77 fits spent 17 s
of CPU in ``laplace_at``. Here one call (``laplace_mode``) does the whole iteration for one θ and
returns the factorisation at the mode, from which ``bym2.laplace_at`` computes the Laplace
approximation as before.

S is factorised by its envelope (profile) Cholesky: row i of L is nonzero only from the first
column ``first[i]`` of row i of S on (fill stays inside the envelope; George and Liu 1981, ch. 4),
in the reverse Cuthill-McKee order 8 columns a row on average on the country against a bandwidth
of 29: about 22,000 multiply-adds a factorisation instead of LAPACK's 142,000 on the band
(``dpbtrf``, which a compiled band loop did not beat: BENCHMARKS.md).

Storage (``bym2.BandedSystem``): ``structure[i, w + p - i]`` = R*[i, p] for p = first[i]..i, w the
bandwidth, zero before first[i]; the Cholesky factor in the same layout (``factor[i, w + p - i]``
= L[i, p]), so that every inner loop runs along one row. Vectors are in the band's order.

Rounding. The objective, log p(y, x | θ), is a sum of terms of a few hundred that nearly cancel,
so near the mode its rounding (1e-11) can exceed what a last step of 1e-7 gains, and whether
the step was taken was left to that rounding: on the national microdata the numpy iteration
converged at every θ only by chance (one grid point of the ill-defined causes of 2010-2014 took
the step; moved by one unit in the last place, the same θ did not converge). The line search
here sums the change of each term instead (``objective_change``), with the prior's quadratic
form as vᵀv + uᵀR*u over the unstructured part v = (√τ b - √φ u)/√(1-φ) rather than xᵀQx, whose
terms reach 10⁷ where φ is near 1. The steps and the mode are the same to rounding (checked
against numpy's dense Cholesky, solves and the whole bordered (KKT) system in
``tests/maps/test_bym2.py``). Machine code is cached beside this file (``cache=True``); the
explicit signatures load it when the module is imported.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# Outcomes of ``laplace_mode``.
FOUND = 0
NOT_POSITIVE_DEFINITE = 1  # S's Cholesky (or the Schur complement's LU) broke down: the caller uses SuperLU
NOT_CONVERGED = 2
HALVINGS = 50  # a damped Newton step is halved at most this often
# A step is taken unless it lowers the concave objective by more than this, relative: rounding.
DECREASE = 1e-12

_ENVELOPE = "float64[:, ::1], int64[::1]"


# --- the envelope Cholesky factorisation and its solves ---------------------------------------------

@njit(f"boolean({_ENVELOPE})", cache=True, nogil=True)
def envelope_cholesky(factor: np.ndarray, first: np.ndarray) -> bool:
    """S = L Lᵀ in place, row by row (Crout's order): on entry ``factor`` holds S's lower triangle
    in the envelope layout, on return L. L[i, j] = (S[i, j] - Σ_p L[i, p] L[j, p]) / L[j, j] over
    the columns p both rows have, the sum in the order of p and the division a multiplication by
    1 / L[j, j], as in LAPACK's ``dpbtf2`` (most entries of the country's factor are LAPACK's to
    the bit); False where a pivot is not positive (S not positive definite in floating point, as
    LAPACK's ``info > 0``)."""
    n, width = factor.shape[0], factor.shape[1] - 1
    inverse = np.empty(n)  # 1 / L[j, j]
    for i in range(n):
        row = factor[i]
        shift = width - i  # L[i, p] is row[p + shift]
        for j in range(first[i], i):
            other = factor[j]
            other_shift = width - j
            total = row[j + shift]
            for p in range(max(first[i], first[j]), j):
                total -= row[p + shift] * other[p + other_shift]
            row[j + shift] = total * inverse[j]
        pivot = row[width]
        for p in range(first[i], i):
            pivot -= row[p + shift] * row[p + shift]
        if pivot <= 0.0:
            return False
        row[width] = np.sqrt(pivot)
        inverse[i] = 1.0 / row[width]
    return True


@njit(f"void({_ENVELOPE}, float64[:, ::1])", cache=True, nogil=True)
def forward_solve(factor: np.ndarray, first: np.ndarray, rows: np.ndarray) -> None:
    """r <- L⁻¹ r for every row r of ``rows``, by rows of L, the right-hand sides side by side:
    each is a chain of dependent subtractions, and several chains at once keep the processor's
    units busy (the coupling's five: 14 µs against 20 one by one, on the country)."""
    n, width = factor.shape[0], factor.shape[1] - 1
    m = rows.shape[0]
    totals = np.empty(m)
    for i in range(n):
        for c in range(m):
            totals[c] = rows[c, i]
        for p in range(first[i], i):
            entry = factor[i, p + width - i]
            for c in range(m):
                totals[c] -= entry * rows[c, p]
        for c in range(m):
            rows[c, i] = totals[c] / factor[i, width]


@njit(f"void({_ENVELOPE}, float64[::1])", cache=True, nogil=True)
def backward_solve(factor: np.ndarray, first: np.ndarray, v: np.ndarray) -> None:
    """v <- L⁻ᵀ v, by the columns of Lᵀ (L's rows again: contiguous)."""
    n, width = factor.shape[0], factor.shape[1] - 1
    for i in range(n - 1, -1, -1):
        v[i] /= factor[i, width]
        value = v[i]
        for p in range(first[i], i):
            v[p] -= factor[i, p + width - i] * value


@njit(f"void({_ENVELOPE}, float64[::1], float64[::1])", cache=True, nogil=True)
def structure_product(structure: np.ndarray, first: np.ndarray, v: np.ndarray, out: np.ndarray) -> None:
    """out <- R* v for the symmetric R* whose lower triangle ``structure`` holds."""
    n, width = structure.shape[0], structure.shape[1] - 1
    out[:] = 0.0
    for i in range(n):
        total = structure[i, width] * v[i]
        for p in range(first[i], i):
            entry = structure[i, p + width - i]
            total += entry * v[p]
            out[p] += entry * v[i]
        out[i] += total


# --- the small dense Schur complement ------------------------------------------------------------

@njit("float64(float64[::1], float64[::1])", cache=True, nogil=True)
def _dot(a: np.ndarray, b: np.ndarray) -> float:
    total = 0.0
    for i in range(a.shape[0]):
        total += a[i] * b[i]
    return total


@njit("boolean(float64[:, ::1], int64[::1])", cache=True, nogil=True)
def lu_factor(a: np.ndarray, pivots: np.ndarray) -> bool:
    """P a = L U in place with partial pivoting (LAPACK's ``dgetf2``), for the Schur complement
    of μ and the multipliers (indefinite: the multipliers' block is negative definite); False
    if a pivot is exactly zero."""
    m = a.shape[0]
    for j in range(m):
        pivot = j
        for i in range(j + 1, m):
            if abs(a[i, j]) > abs(a[pivot, j]):
                pivot = i
        pivots[j] = pivot
        if a[pivot, j] == 0.0:
            return False
        if pivot != j:
            for c in range(m):
                a[j, c], a[pivot, c] = a[pivot, c], a[j, c]
        for i in range(j + 1, m):
            a[i, j] /= a[j, j]
            for c in range(j + 1, m):
                a[i, c] -= a[i, j] * a[j, c]
    return True


@njit("void(float64[:, ::1], int64[::1], float64[::1])", cache=True, nogil=True)
def lu_solve(lu: np.ndarray, pivots: np.ndarray, v: np.ndarray) -> None:
    """v <- a⁻¹ v from ``lu_factor``'s output."""
    m = lu.shape[0]
    for j in range(m):
        v[j], v[pivots[j]] = v[pivots[j]], v[j]
    for i in range(m):
        for c in range(i):
            v[i] -= lu[i, c] * v[c]
    for i in range(m - 1, -1, -1):
        for c in range(i + 1, m):
            v[i] -= lu[i, c] * v[c]
        v[i] /= lu[i, i]


@njit("float64[:, ::1](float64[:, ::1], int64[::1])", cache=True, nogil=True)
def lu_inverse(lu: np.ndarray, pivots: np.ndarray) -> np.ndarray:
    """a⁻¹ from ``lu_factor``'s output, column by column."""
    m = lu.shape[0]
    out = np.empty((m, m))
    for c in range(m):
        column = np.zeros(m)
        column[c] = 1.0
        lu_solve(lu, pivots, column)
        for r in range(m):
            out[r, c] = column[r]
    return out


# --- the reduced system at one iterate --------------------------------------------------------------

@njit("Tuple((boolean, float64[:, ::1], float64[:, ::1], float64[:, ::1], int64[::1]))"
      f"({_ENVELOPE}, float64[:, ::1], float64, float64, float64[::1])", cache=True, nogil=True)
def factorise(structure, first, constraints, tau, phi, w):
    """The reduced system [[C, Bᵀ], [B, S]] at (τ, φ, w) by blocks, t = (μ, multipliers) first:
    S = R* + φ diag(w) = L Lᵀ; W = L⁻¹ B for the coupling B = [√(τφ) w, Aᵀ] (W's columns held as
    rows); the Schur complement G = C - Bᵀ S⁻¹ B = C - Wᵀ W, C = diag(τ Σw, 0), LU-factorised.
    Returns (ok, L, W, LU of G, its pivots); ok is False where S's Cholesky or G's LU breaks down."""
    n, k = w.shape[0], constraints.shape[0]
    width = structure.shape[1] - 1
    factor = structure.copy()
    for i in range(n):
        factor[i, width] += phi * w[i]
    # B's columns as rows, then W's (loops: numba compiles a 2-d slice assignment for seconds).
    forward = np.empty((1 + k, n))
    root_tau_phi = np.sqrt(tau * phi)
    for i in range(n):
        forward[0, i] = root_tau_phi * w[i]
    for c in range(k):
        for i in range(n):
            forward[1 + c, i] = constraints[c, i]
    schur = np.empty((1 + k, 1 + k))
    pivots = np.empty(1 + k, dtype=np.int64)
    if not envelope_cholesky(factor, first):
        return False, factor, forward, schur, pivots
    forward_solve(factor, first, forward)
    for r in range(1 + k):
        for c in range(1 + k):
            schur[r, c] = -_dot(forward[r], forward[c])
    schur[0, 0] += tau * np.sum(w)
    return lu_factor(schur, pivots), factor, forward, schur, pivots


@njit("Tuple((float64[::1], float64[::1]))(float64[:, ::1], int64[::1], float64[:, ::1], float64[:, ::1], "
      "int64[::1], float64[::1], float64[::1])", cache=True, nogil=True)
def reduced_solve(factor, first, forward, schur, pivots, rhs_t, rhs_u):
    """(t, u) solving [[C, Bᵀ], [B, S]] [t; u] = [rhs_t; rhs_u] from ``factorise``'s pieces:
    z = L⁻¹ rhs_u, G t = rhs_t - Wᵀ z, u = L⁻ᵀ (z - W t)."""
    z = rhs_u.copy()
    forward_solve(factor, first, z.reshape((1, z.shape[0])))
    t = rhs_t.copy()
    for c in range(t.shape[0]):
        t[c] -= _dot(forward[c], z)
    lu_solve(schur, pivots, t)
    for c in range(t.shape[0]):
        for i in range(z.shape[0]):
            z[i] -= t[c] * forward[c, i]
    backward_solve(factor, first, z)
    return t, z


# --- the objective and the Newton step ---------------------------------------------------------------

@njit("void(float64, float64, float64[::1], float64[::1], float64[::1])", cache=True, nogil=True)
def unstructured(tau, phi, b, u, out):
    """out <- v = (√τ b - √φ u) / √(1-φ): the unstructured part, N(0, I) a priori."""
    root_tau, root_phi, root_rest = np.sqrt(tau), np.sqrt(phi), np.sqrt(1 - phi)
    for i in range(b.shape[0]):
        out[i] = (root_tau * b[i] - root_phi * u[i]) / root_rest


@njit("float64(float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], "
      "float64[::1], float64[::1], float64)", cache=True, nogil=True)
def objective_change(y, expected, v, structured, d_eta, d_v, d_u, structured_step, scale):
    """f(x + s δ) - f(x) for the objective f = Σ (y η - exp η) - ½ (vᵀv + uᵀR*u), summed term by
    term (exp η (exp(s δη) - 1) by expm1): exact to the rounding of the change, not of f.
    ``structured``: R* u; ``structured_step``: R* δu; d_eta, d_v: the step's δη = δμ + δb and δv."""
    total = 0.0
    for i in range(y.shape[0]):
        total += (y[i] * scale * d_eta[i] - expected[i] * math.expm1(scale * d_eta[i])
                  - scale * (v[i] * d_v[i] + d_u[i] * structured[i])
                  - 0.5 * scale * scale * (d_v[i] * d_v[i] + d_u[i] * structured_step[i]))
    return total


@njit("Tuple((float64, float64[::1], float64[::1]))(float64[::1], float64[::1], float64[::1], float64[::1], "
      "float64[::1], float64, float64, float64[:, ::1], int64[::1], float64[:, ::1], float64[:, ::1], int64[::1])",
      cache=True, nogil=True)
def newton_step(y, expected, spread, v, structured, tau, phi, factor, first, forward, schur, pivots):
    """The Newton step (δμ, δb, δu) within the constraints, from the gradient of the objective,
    g_b = y - e - √(τ/(1-φ)) v and g_u = √(φ/(1-φ)) v - R* u (g_μ = Σ (y - e)), and the reduced
    system factorised at x. b's rows of the bordered system give δb = D⁻¹ (g_b - e δμ + c δu),
    c = √(τφ)/(1-φ), D = (τ + (1-φ) e)/(1-φ); put into the μ and u rows they leave the reduced
    system with the right-hand side (g_μ - eᵀ D⁻¹ g_b, g_u + c D⁻¹ g_b, 0)."""
    n, k = y.shape[0], forward.shape[0] - 1
    root_tau_phi = np.sqrt(tau * phi)
    to_b, to_u = np.sqrt(tau / (1 - phi)), np.sqrt(phi / (1 - phi))
    scaled = np.empty(n)  # D⁻¹ g_b
    rhs_u = np.empty(n)
    rhs_t = np.zeros(1 + k)
    for i in range(n):
        g_b = y[i] - expected[i] - to_b * v[i]
        scaled[i] = g_b * (1 - phi) / spread[i]
        rhs_u[i] = to_u * v[i] - structured[i] + root_tau_phi * g_b / spread[i]
        rhs_t[0] += y[i] - expected[i] - expected[i] * scaled[i]
    t, d_u = reduced_solve(factor, first, forward, schur, pivots, rhs_t, rhs_u)
    d_b = np.empty(n)
    for i in range(n):
        d_b[i] = scaled[i] - ((1 - phi) * expected[i] * t[0] - root_tau_phi * d_u[i]) / spread[i]
    return t[0], d_b, d_u


@njit("boolean(float64, float64[::1], float64[::1], float64)", cache=True, nogil=True)
def _small(d_mu, d_b, d_u, tolerance):
    """Every coordinate of the step below the tolerance (a NaN is not)."""
    if not abs(d_mu) < tolerance:
        return False
    for i in range(d_b.shape[0]):
        if not (abs(d_b[i]) < tolerance and abs(d_u[i]) < tolerance):
            return False
    return True


# --- the whole iteration -----------------------------------------------------------------------------

@njit("Tuple((int64, float64[::1], float64[:, ::1], float64[:, ::1], float64[:, ::1], float64))"
      "(float64, float64, float64[::1], float64[::1], float64[:, ::1], int64[::1], float64[:, ::1], int64[::1], "
      "float64[::1], float64, int64)", cache=True, nogil=True)
def laplace_mode(tau, phi, deaths, log_births, structure, first, constraints, order, start, tolerance, iterations):
    """The constrained mode of x = (μ, b, u) given θ, from ``start``, by damped Newton steps, each
    halved until the objective does not decrease (by more than rounding); the mode is where the
    whole step is below ``tolerance`` (the factorisation is then at the mode) or where no halving
    improves on x in floating point (``bym2.laplace_at``).

    ``deaths``, ``log_births`` and x in the communes' order; ``order`` the band's. Returns
    (outcome, the mode, L, W = L⁻¹ B by rows, G⁻¹, log |det G|), the factorisation at the mode;
    outcome FOUND, or NOT_POSITIVE_DEFINITE (at some iterate; nothing else is meaningful) or
    NOT_CONVERGED after ``iterations`` steps."""
    n = deaths.shape[0]
    mu, b, u, y, offset = start[0], np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    for j in range(n):  # into the band's order (loops: numba compiles indexing by an array for seconds)
        b[j], u[j] = start[1 + order[j]], start[1 + n + order[j]]
        y[j], offset[j] = deaths[order[j]], log_births[order[j]]
    expected, spread, w, v, structured = np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    d_eta, d_v, structured_step = np.empty(n), np.empty(n), np.empty(n)
    outcome = NOT_CONVERGED
    for _ in range(iterations):
        likelihood = 0.0
        for i in range(n):  # (loops: numba compiles each array expression for a tenth of a second)
            eta = mu + b[i] + offset[i]
            expected[i] = np.exp(eta)
            spread[i] = tau + (1 - phi) * expected[i]  # (1 - φ) D
            w[i] = expected[i] / spread[i]
            likelihood += y[i] * eta - expected[i]
        unstructured(tau, phi, b, u, v)
        structure_product(structure, first, u, structured)
        ok, factor, forward, schur, pivots = factorise(structure, first, constraints, tau, phi, w)
        if not ok:
            return NOT_POSITIVE_DEFINITE, start, np.empty((0, 0)), np.empty((0, 0)), np.empty((0, 0)), 0.0
        d_mu, d_b, d_u = newton_step(y, expected, spread, v, structured, tau, phi, factor, first, forward,
                                     schur, pivots)
        if _small(d_mu, d_b, d_u, tolerance):
            outcome = FOUND
            break
        current = likelihood - 0.5 * (_dot(v, v) + _dot(u, structured))
        for i in range(n):
            d_eta[i] = d_mu + d_b[i]
        unstructured(tau, phi, d_b, d_u, d_v)
        structure_product(structure, first, d_u, structured_step)
        scale = 1.0
        for _ in range(HALVINGS):
            change = objective_change(y, expected, v, structured, d_eta, d_v, d_u, structured_step, scale)
            if change >= -DECREASE * abs(current):
                break
            scale /= 2
        else:
            outcome = FOUND  # no step improves on x in floating point: x is the mode
            break
        mu += scale * d_mu
        for i in range(n):
            b[i] += scale * d_b[i]
            u[i] += scale * d_u[i]
    if outcome == NOT_CONVERGED:
        return NOT_CONVERGED, start, np.empty((0, 0)), np.empty((0, 0)), np.empty((0, 0)), 0.0
    mode = np.empty(2 * n + 1)
    mode[0] = mu
    for j in range(n):
        mode[1 + order[j]], mode[1 + n + order[j]] = b[j], u[j]
    schur_log_abs_det = 0.0
    for c in range(schur.shape[0]):
        schur_log_abs_det += np.log(abs(schur[c, c]))
    return FOUND, mode, factor, forward, lu_inverse(schur, pivots), schur_log_abs_det
