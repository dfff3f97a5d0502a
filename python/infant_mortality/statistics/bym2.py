"""BYM2 spatial smoothing of commune rates, fitted by a Laplace approximation over a grid of
its two hyperparameters (docs/methods/maps.md, "BYM2 smoothing and spatial clusters").

The model (Riebler et al. 2016, *Stat Methods Med Res* 25:1145-1165), for areas i = 1..n of one
indicator and period, deaths y_i and live births E_i:

    y_i ~ Poisson(E_i exp(η_i)),   η_i = μ + b_i,   b = (√φ u + √(1-φ) v) / √τ

v ~ N(0, I) is the unstructured part; u is the ICAR (intrinsic CAR) field of the neighbour graph,
scaled per connected component so that the geometric mean of its marginal variances is 1
(INLA's ``scale.model = TRUE``), with a sum-to-zero constraint per component. An area without
neighbours (an island) has no ICAR: its b_i = v_i / √τ, the unstructured part alone, as
Freni-Sterrantino, Ventrucci and Rue (2018, *Spat Spatiotemporal Epidemiol* 26:25-34) recommend
(equivalently a "structured" part with variance 1, as INLA scales singletons).

Every component and island shares one τ and one φ. Priors as INLA's ``bym2`` defaults: μ flat;
τ ~ PC prior with P(1/√τ > 1) = 0.01 (``pc.prec``, param c(1, 0.01)); φ ~ PC prior with
P(φ < 0.5) = 0.5 (``pc``, param c(0.5, 0.5)), whose distance from the base model φ = 0 is
d(φ) = √(nφ(mean γ - 1) - Σ log(1 + φ(γ_k - 1))) over the eigenvalues γ_k of the scaled
structure's generalised inverse (INLA's ``inla.pc.bym.phi``).

Computation. For a given θ = (log τ, logit φ) the latent x = (μ, b, u) has the sparse precision
Q of INLA's augmented bym2 (``prior_product``) and the constraints A x = 0; Newton's method on the
bordered system [[Q + C, Aᵀ], [A, 0]], solved with b eliminated (its block is diagonal:
``ReducedSystem``) and then by blocks, u's by a Cholesky factorisation of its band's envelope
(``BandedSystem``; the whole iteration compiled, ``bym2_kernels``), finds the constrained mode,
and the Laplace approximation of π(θ | y) is the joint density over the Gaussian approximation
at the mode (``laplace_at``). As INLA's ``int.strategy = "grid"``, θ is integrated over a grid in the
standardised coordinates of the mode's Hessian (step ``DZ``, while the log density is within
``DIFF_LOGDENS`` of the mode). Each commune's η_i is then a mixture of normals (one per grid
point, the Gaussian approximation's marginal); the posterior mean rate, its 2.5% and 97.5%
quantiles and P(rate > threshold) are computed from that mixture in closed
form (no sampling; deterministic).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
from scipy import optimize, sparse, special
from scipy.sparse import csgraph
from scipy.sparse import linalg as sparse_linalg

from infant_mortality.statistics import band, bym2_kernels, smoothing

PC_PREC_U, PC_PREC_ALPHA = 1.0, 0.01  # P(sd > 1) = 0.01: INLA's bym2 default pc.prec
PC_PHI_U, PC_PHI_ALPHA = 0.5, 0.5  # P(phi < 0.5) = 0.5: INLA's bym2 default pc
DZ = 0.75  # grid step in the standardised hyperparameter coordinates (INLA's dz)
DIFF_LOGDENS = 6.0  # grid points kept while log π(θ|y) is within this of the mode (INLA's diff.logdens)
NEWTON_TOL = 1e-8
NEWTON_ITERATIONS = 200  # a Laplace step that has not converged by then raises NotConverged
METHOD = "bym2_laplace_grid"
# θ = (log τ, logit φ) outside these is given no mass: beyond them (σ below 0.002 or above 400;
# φ within 6e-6 of 0 or 1) the latent precision is too ill-conditioned to factorise reliably, and
# the priors give them almost none.
THETA_BOUNDS = ((-12.0, 12.0), (-12.0, 12.0))


# --- the graph --------------------------------------------------------------------------------

def structure_matrix(n: int, edges) -> sparse.csr_matrix:
    """The ICAR structure (graph Laplacian) R = D - W of an undirected graph on n nodes; ``edges``
    are (i, j) position pairs, each pair once or in both directions."""
    edges = np.asarray(list(edges), dtype=int).reshape(-1, 2)
    if len(edges) and (edges.min() < 0 or edges.max() >= n or (edges[:, 0] == edges[:, 1]).any()):
        raise ValueError("edges must join two different nodes in 0..n-1")
    w = sparse.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n)).tocsr()
    w = ((w + w.T) > 0).astype(float)
    return (sparse.diags(np.asarray(w.sum(axis=1)).ravel()) - w).tocsr()


def components(structure: sparse.spmatrix) -> np.ndarray:
    """Connected component label of every node (scipy's labels, 0..k-1)."""
    return csgraph.connected_components(abs(structure), directed=False)[1]


def _spectrum(structure: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(eigenvalues of the generalised inverse, its diagonal) of the ICAR structure of ONE
    connected component of at least two nodes; the component's constant gets eigenvalue 0."""
    structure = np.asarray(structure, dtype=float)
    if structure.shape[0] < 2:
        raise ValueError("a component of one node has no ICAR structure (an island)")
    values, vectors = np.linalg.eigh(structure)
    inverse = np.where(np.arange(len(values)) == 0, 0.0, 1.0 / np.where(values > 0, values, 1.0))
    return inverse, (vectors ** 2) @ inverse


def scaling_factor(structure: np.ndarray) -> float:
    """Geometric mean of the marginal variances (the diagonal of the generalised inverse) of the
    ICAR structure of ONE connected component with at least two nodes: the factor INLA's
    ``scale.model`` multiplies it by (Sørbye and Rue 2014), so that scaled the geometric mean is 1."""
    return float(np.exp(np.mean(np.log(_spectrum(structure)[1]))))


@dataclass(frozen=True)
class Bym2Graph:
    """The scaled structure of a graph, ready for the fit."""

    scaled: sparse.csc_matrix  # R*: each component's R times its scaling factor; 1 on an island's diagonal
    constraints: sparse.csr_matrix  # one row per component of two or more nodes: Σ u = 0 over it
    gamma: np.ndarray  # eigenvalues of R*'s generalised inverse (0 for each component's constant)
    component: np.ndarray  # component label per node
    scale: np.ndarray  # per node: its component's scaling factor (nan for an island)
    is_island: np.ndarray  # per node: no neighbour


def decompose(n: int, edges) -> Bym2Graph:
    """Scale the ICAR per connected component (Freni-Sterrantino et al. 2018): each component of
    two or more nodes by its own factor (``scaling_factor``) with its own sum-to-zero constraint;
    an island gets a unit diagonal and no constraint, which makes its b_i = (√φ u_i + √(1-φ) v_i)/√τ
    with u_i, v_i ~ N(0, 1) independent: N(0, 1/τ), the unstructured part alone."""
    structure = structure_matrix(n, edges)
    labels = components(structure)
    diagonal_scale = np.ones(n)
    scale = np.full(n, np.nan)
    island = np.zeros(n, dtype=bool)
    gamma = np.ones(n)
    rows = []
    position = 0
    for label in np.unique(labels):
        nodes = np.flatnonzero(labels == label)
        if len(nodes) == 1:
            island[nodes] = True
            position += 1
            continue
        inverse, marginal = _spectrum(structure[nodes][:, nodes].toarray())
        factor = float(np.exp(np.mean(np.log(marginal))))  # scaling_factor, from the same spectrum
        scale[nodes] = diagonal_scale[nodes] = factor
        gamma[position:position + len(nodes)] = inverse / factor  # eigenvalues of (factor R)⁺
        position += len(nodes)
        rows.append(nodes)
    s = sparse.diags(np.sqrt(diagonal_scale))
    scaled = (s @ structure @ s).tolil()
    for i in np.flatnonzero(island):
        scaled[i, i] = 1.0
    constraints = sparse.csr_matrix(
        (np.ones(sum(len(r) for r in rows)), (np.repeat(np.arange(len(rows)), [len(r) for r in rows]),
                                              np.concatenate(rows) if rows else np.array([], int))),
        shape=(len(rows), n))
    return Bym2Graph(scaled=scaled.tocsc(), constraints=constraints, gamma=gamma, component=labels,
                     scale=scale, is_island=island)


# --- the priors -------------------------------------------------------------------------------

def log_pc_prec(log_tau, u: float = PC_PREC_U, alpha: float = PC_PREC_ALPHA):
    """Log density of θ1 = log τ under the PC prior of a precision with P(1/√τ > u) = alpha:
    π(τ) = (λ/2) τ^(-3/2) exp(-λ/√τ), λ = -log(alpha)/u, times the Jacobian τ."""
    lam = -np.log(alpha) / u
    log_tau = np.asarray(log_tau, dtype=float)
    return np.log(lam / 2) - 0.5 * log_tau - lam * np.exp(-0.5 * log_tau)


def _x_minus_log1p(x):
    """x - log(1 + x), accurate near 0."""
    x = np.asarray(x, dtype=float)
    out = np.asarray(x - np.log1p(x))
    small = np.abs(x) < 1e-4
    if small.any():  # the series only where it is needed (the grid calls this at every θ)
        near = x[small]
        out[small] = near * near / 2 - near ** 3 / 3 + near ** 4 / 4
    return out


def pc_phi_distance(phi, gamma) -> np.ndarray:
    """d(φ) = √(2 KLD) of the BYM2 mixing parameter from its base model φ = 0:
    Σ_k [φ(γ_k - 1) - log(1 + φ(γ_k - 1))] under the root (INLA's ``inla.pc.bym.phi``)."""
    phi = np.atleast_1d(np.asarray(phi, dtype=float))
    g1 = np.asarray(gamma, dtype=float) - 1.0
    return np.sqrt(_x_minus_log1p(phi[:, None] * g1[None, :]).sum(axis=1))


@lru_cache(maxsize=64)
def _distance_at(u: float, gamma_bytes: bytes) -> float:
    """d(u) of a graph's γ (as bytes, to be a cache key): the same at every θ of a fit."""
    return float(pc_phi_distance(u, np.frombuffer(gamma_bytes))[0])


def log_pc_phi(logit_phi, gamma, u: float = PC_PHI_U, alpha: float = PC_PHI_ALPHA):
    """Log density of θ2 = logit φ under the PC prior with P(φ < u) = alpha: d(φ) is
    Exponential(λ), λ = -log(1 - alpha) / d(u), times |dd/dφ| and the Jacobian φ(1 - φ)."""
    logit_phi = np.atleast_1d(np.asarray(logit_phi, dtype=float))
    phi = special.expit(logit_phi)
    g1 = np.asarray(gamma, dtype=float) - 1.0
    if not np.any(g1):
        # Islands only: φ changes nothing (every b_i is N(0, 1/τ)) and the PC prior degenerates
        # (d = 0); a uniform prior on φ keeps the grid proper, and φ is reported as unidentified.
        return np.log(phi) + np.log1p(-phi)
    lam = -np.log(1 - alpha) / _distance_at(float(u), np.asarray(gamma, dtype=float).tobytes())
    d = pc_phi_distance(phi, gamma)
    # dK/dφ of K = d²: Σ (γ-1)² φ / (1 + φ(γ-1)); dd/dφ = K' / (2d), finite as φ -> 0.
    k_prime = (g1[None, :] ** 2 * phi[:, None] / (1 + phi[:, None] * g1[None, :])).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        d_prime = np.where(d > 0, k_prime / (2 * np.where(d > 0, d, 1.0)), np.sqrt((g1 ** 2).sum() / 2))
    return (np.log(lam) - lam * d + np.log(d_prime)
            + np.log(phi) + np.log1p(-phi))


# --- the Laplace approximation at one θ -----------------------------------------------------------

@dataclass
class ConditionalFit:
    log_posterior: float  # log π(θ | y) up to a constant
    mean: np.ndarray  # mode of η = μ + b given θ
    x: np.ndarray | None  # the mode of (μ, b, u), a warm start for the next θ
    variance_parts: tuple | None = None  # (the reduced system's factorisation at the mode, α, β, 1/D)

    @cached_property
    def var(self) -> np.ndarray | None:
        """Marginal variance of η_i in the Gaussian approximation, computed when first read (the
        grid reads it only at the points it keeps): η_i - its mode = α_i μ + β_i u_i + ε_i, with b's
        conditional noise ε_i ~ N(0, 1/D_i) independent of (μ, u), so Var = cᵢᵀ Σ cᵢ + 1/D_i, with
        cᵢ = α_i at μ and β_i at u_i and Σ the reduced system's inverse."""
        if self.variance_parts is None:
            return None
        factor, alpha, beta, noise = self.variance_parts
        return factor.eta_variance(alpha, beta) + noise


def _factor(matrix: sparse.spmatrix):
    """Sparse LU (SuperLU) of a bordered system [[S, Aᵀ], [A, 0]]."""
    # Minimum degree on Aᵀ + A keeps the fill small on the country's graph (COLAMD with partial
    # pivoting: 6 times more); a small pivot threshold still pivots the zero diagonal of the
    # constraint rows.
    return sparse_linalg.splu(matrix, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.01)


def prior_product(theta, graph: Bym2Graph, x) -> np.ndarray:
    """Q x for the prior precision Q of x = (μ, b, u) given θ (INLA's augmented bym2: μ flat;
    v = (√τ b - √φ u)/√(1-φ) ~ N(0, I); u with precision R*), without building Q:

        Q = [[0, 0, 0], [0, τ/(1-φ) I, -√(τφ)/(1-φ) I], [0, -√(τφ)/(1-φ) I, R* + φ/(1-φ) I]]"""
    tau, phi = np.exp(theta[0]), special.expit(theta[1])
    n = graph.scaled.shape[0]
    b, u = x[1:n + 1], x[n + 1:]
    a, c, d = tau / (1 - phi), np.sqrt(tau * phi) / (1 - phi), phi / (1 - phi)
    return np.concatenate([[0.0], a * b - c * u, graph.scaled @ u + d * u - c * b])


class ReducedSystem:
    """The bordered system of (μ, u) after b is eliminated, for one graph.

    Given θ and the likelihood's curvature e_i = n_i exp(η_i), b's block of H = Q + curvature is
    diagonal, D_i = (τ + (1-φ) e_i)/(1-φ), so b is eliminated exactly (Schur complement). With
    w_i = e_i / (τ + (1-φ) e_i) what is left is, over (μ, u) and the constraints' multipliers,

        [[τ Σw, √(τφ) wᵀ, 0], [√(τφ) w, R* + φ diag(w), Aᵀ], [0, A, 0]]

    half the unknowns of [[H, Aᵀ], [A, 0]], with R*'s pattern. Its pattern depends on neither θ
    nor x, so it is built once per fit and only its values are filled in."""

    def __init__(self, graph: Bym2Graph):
        n = graph.scaled.shape[0]
        k = graph.constraints.shape[0]
        coo = graph.scaled.tocoo()
        a = graph.constraints.tocoo()
        # Positions: μ is 0, u_i is 1 + i, the constraints' multipliers n + 1 on.
        rows = np.concatenate([[0], np.zeros(n, int), np.arange(1, n + 1), 1 + coo.row,
                               np.arange(1, n + 1), n + 1 + a.row, 1 + a.col])
        cols = np.concatenate([[0], np.arange(1, n + 1), np.zeros(n, int), 1 + coo.col,
                               np.arange(1, n + 1), 1 + a.col, n + 1 + a.row])
        width = n + 1 + k
        pattern = sparse.csc_matrix((np.ones(len(rows)), (rows, cols)), shape=(width, width))
        pattern.sum_duplicates()
        pattern.sort_indices()
        keys = np.repeat(np.arange(width), np.diff(pattern.indptr)) * width + pattern.indices

        def slots(r, c):
            found = np.searchsorted(keys, np.asarray(c) * width + np.asarray(r))
            assert np.array_equal(keys[found], np.asarray(c) * width + np.asarray(r))
            return found

        self.mu_mu = slots([0], [0])
        self.mu_row = slots(np.zeros(n, int), np.arange(1, n + 1))
        self.mu_col = slots(np.arange(1, n + 1), np.zeros(n, int))
        self.structure_slots = slots(1 + coo.row, 1 + coo.col)
        self.structure_values = coo.data
        self.diagonal = slots(np.arange(1, n + 1), np.arange(1, n + 1))
        self.border = slots(np.concatenate([n + 1 + a.row, 1 + a.col]), np.concatenate([1 + a.col, n + 1 + a.row]))
        self.border_values = np.concatenate([a.data, a.data])
        self.matrix = pattern

    def at(self, tau: float, phi: float, w: np.ndarray) -> sparse.csc_matrix:
        """The reduced bordered matrix for the precision τ, the mixing φ and the weights w."""
        values = np.zeros(len(self.matrix.data))
        values[self.structure_slots] = self.structure_values
        values[self.diagonal] += phi * w
        values[self.mu_mu] = tau * w.sum()
        values[self.mu_row] = values[self.mu_col] = np.sqrt(tau * phi) * w
        values[self.border] = self.border_values
        matrix = self.matrix.copy()
        matrix.data = values
        return matrix


class BandedSystem:
    """The reduced system of ``ReducedSystem`` solved by block elimination, for one graph.

    u's block S = R* + φ diag(w) is symmetric positive definite (w > 0, φ > 0) and, with the
    communes in reverse Cuthill-McKee order, narrow: a band of width 29 on the country (346
    communes), and within it an envelope of 8 columns a row on average, which a compiled
    Cholesky factorises (``bym2_kernels``); μ and the constraints' multipliers, 1 + k unknowns,
    are left as their small dense Schur complement. The whole Newton iteration of one θ is one
    compiled call (``mode``): about 0.3 ms on the country, where the same steps in numpy and
    LAPACK took 1.2 ms, most of it spent calling them."""

    def __init__(self, graph: Bym2Graph):
        self.graph = graph
        self.n = graph.scaled.shape[0]
        self.order = csgraph.reverse_cuthill_mckee(graph.scaled.tocsr(), symmetric_mode=True).astype(np.int64)
        self.position = np.empty(self.n, dtype=int)
        self.position[self.order] = np.arange(self.n)  # u_i's place in the band's order
        coo = graph.scaled[self.order][:, self.order].tocoo()
        lower = coo.row >= coo.col
        rows, cols = coo.row[lower], coo.col[lower]
        width = int(np.max(rows - cols, initial=0))
        # R*'s lower triangle by rows: R*[i, p] at [i, width + p - i] (bym2_kernels' envelope layout).
        self.structure = np.zeros((self.n, width + 1))
        self.structure[rows, width + cols - rows] = coo.data[lower]
        self.first = np.arange(self.n, dtype=np.int64)  # the envelope: row i's first column
        np.minimum.at(self.first, rows, cols.astype(np.int64))
        self.constraints = np.ascontiguousarray(graph.constraints[:, self.order].toarray())  # (k, n), the band's order

    @cached_property
    def bordered(self) -> ReducedSystem:
        """The bordered system for SuperLU, built only if a fallback needs it."""
        return ReducedSystem(self.graph)

    def mode(self, tau: float, phi: float, y: np.ndarray, offset: np.ndarray, start: np.ndarray):
        """(mode of x, its ``BandedFactor``) by the compiled Newton iteration from ``start``; None
        where S's Cholesky fails at some iterate (numerically not positive definite: φ w below
        rounding next to R*'s null space), for SuperLU to take over."""
        outcome, x, factor, forward, schur_inverse, schur_log_abs_det = bym2_kernels.laplace_mode(
            tau, phi, y, offset, self.structure, self.first, self.constraints, self.order, start,
            NEWTON_TOL, NEWTON_ITERATIONS)
        if outcome == bym2_kernels.NOT_POSITIVE_DEFINITE:
            return None
        if outcome == bym2_kernels.NOT_CONVERGED:
            raise NotConverged("BYM2 Newton iterations did not converge")
        return x, BandedFactor(self, factor, forward, schur_inverse, schur_log_abs_det)


@dataclass(frozen=True, eq=False)
class BandedFactor:
    """``BandedSystem`` factorised at the mode of one θ (``bym2_kernels.laplace_mode``): S = L Lᵀ,
    W = L⁻¹ B and the inverse of the Schur complement G = C - Bᵀ S⁻¹ B of t = (μ, multipliers),
    B = [√(τφ) w, Aᵀ], C = diag(τ Σw, 0); all in the band's order."""

    system: BandedSystem
    cholesky: np.ndarray  # L, in the envelope layout
    forward: np.ndarray  # W's columns as rows: (1 + k, n)
    schur_inverse: np.ndarray  # G⁻¹
    schur_log_abs_det: float  # log |det G|

    @property
    def log_abs_det(self) -> float:
        """log |det| of the reduced system: log det S + log |det G|."""
        return float(2 * np.sum(np.log(self.cholesky[:, -1])) + self.schur_log_abs_det)

    def eta_variance(self, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
        """cᵢᵀ Σ cᵢ for cᵢ = α_i at μ and β_i at u_i, Σ the reduced inverse's (μ, u) block. By blocks,
        with Y = S⁻¹ B = L⁻ᵀ W: Σ_tt = G⁻¹, Σ_ut = -Y G⁻¹ and Σ_uu = S⁻¹ + Y G⁻¹ Yᵀ, of which only
        the diagonal of S⁻¹ is needed (Takahashi's recursion, ``band.inverse_diagonal``)."""
        first, position = self.system.first, self.system.position
        solved = self.forward.copy()
        for row in solved:
            bym2_kernels.backward_solve(self.cholesky, first, row)
        y, schur_inverse = solved.T, self.schur_inverse
        u_t = -(y @ schur_inverse[:, 0])[position]  # Σ_ut's column of μ, in the communes' order
        u_u = (band.inverse_diagonal(self.cholesky, first)
               + np.einsum("ij,jk,ik->i", y, schur_inverse, y))[position]
        return alpha ** 2 * schur_inverse[0, 0] + 2 * alpha * beta * u_t + beta ** 2 * u_u


class BorderedFactor:
    """SuperLU's factorisation of the bordered reduced matrix, with ``BandedFactor``'s interface."""

    def __init__(self, lu):
        self.lu = lu
        self.log_abs_det = float(np.sum(np.log(np.abs(lu.U.diagonal()))))

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        return self.lu.solve(rhs)

    def eta_variance(self, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
        """cᵢᵀ Σ cᵢ for cᵢ = α_i at μ and β_i at u_i: n right-hand sides."""
        n = len(alpha)
        rhs = np.zeros((self.lu.shape[0], n))
        rhs[0, :] = alpha
        rhs[1 + np.arange(n), np.arange(n)] = beta
        z = self.lu.solve(rhs)
        return alpha * z[0, :] + beta * z[1 + np.arange(n), np.arange(n)]


def laplace_at(theta, deaths, births, graph: Bym2Graph, start=None, system: BandedSystem | None = None) -> ConditionalFit:
    """Gaussian approximation of x = (μ, b, u) | θ, y at its mode under the sum-to-zero
    constraints A x = 0, and the Laplace approximation of log π(θ | y) (unnormalised; priors
    included).

    Newton's method on the bordered (KKT) system [[H, Aᵀ], [A, 0]] [δ; λ] = [g; 0], which gives the
    step within the constraints, solved with b eliminated (``ReducedSystem``: b's block of H is
    diagonal): compiled (``BandedSystem.mode``), or with SuperLU (``_bordered_mode``) for a θ where
    S's Cholesky fails. The bordered system's log |determinant| is that of H on {A x = 0} (ZᵀHZ for
    an orthonormal basis Z of it) up to a θ-free constant: Σ log D_i plus the reduced system's. The
    constrained covariance of (μ, u) is the reduced inverse's top-left block, and given (μ, u),
    b_i is normal with variance 1/D_i. H alone is singular when no island pins the intercept
    (μ + c and every component's u - c√(τ/φ) are the same fit); the bordered system is not.
    ``system``: the graph's BandedSystem, shared by the grid points of one fit (built when absent).
    """
    y, offset = np.array(deaths, dtype=float), np.log(np.asarray(births, dtype=float))  # writable: numba's types
    n = len(y)
    system = system or BandedSystem(graph)
    tau, phi = np.exp(theta[0]), special.expit(theta[1])
    if start is not None:
        x = np.ascontiguousarray(start, dtype=float)  # read only
    else:
        x = np.zeros(2 * n + 1)
        x[0] = np.log(max(y.sum(), 0.5) / np.exp(offset).sum())
    found = system.mode(tau, phi, y, offset, x)
    x, factor = found if found is not None else _bordered_mode(theta, y, offset, graph, system.bordered, x)

    eta = x[0] + x[1:n + 1] + offset
    expected = np.exp(eta)
    spread = tau + (1 - phi) * expected  # (1 - φ) D_i
    log_det_h = float(np.sum(np.log(spread / (1 - phi))) + factor.log_abs_det)
    log_likelihood = np.sum(y * eta - expected - special.gammaln(y + 1))
    log_prior_x = 0.5 * n * (np.log(tau) - np.log1p(-phi)) - 0.5 * x @ prior_product(theta, graph, x)
    log_hyper = float(log_pc_prec(theta[0]) + log_pc_phi(theta[1], graph.gamma)[0])
    log_posterior = log_likelihood + log_prior_x - 0.5 * log_det_h + log_hyper
    return ConditionalFit(log_posterior=float(log_posterior), mean=x[0] + x[1:n + 1], x=x,
                          variance_parts=(factor, tau / spread, np.sqrt(tau * phi) / spread, (1 - phi) / spread))


def _bordered_mode(theta, y, offset, graph: Bym2Graph, bordered: ReducedSystem, x):
    """``bym2_kernels.laplace_mode`` in numpy with SuperLU on the whole reduced bordered matrix,
    for a θ where S's Cholesky fails: (mode of x, its ``BorderedFactor``)."""
    n = len(y)
    k = graph.constraints.shape[0]
    tau, phi = np.exp(theta[0]), special.expit(theta[1])
    root_tau_phi = np.sqrt(tau * phi)

    def objective(x):
        eta = x[0] + x[1:n + 1] + offset
        return np.sum(y * eta - np.exp(eta)) - 0.5 * x @ prior_product(theta, graph, x)

    current = objective(x)
    for _ in range(NEWTON_ITERATIONS):
        expected = np.exp(x[0] + x[1:n + 1] + offset)
        spread = tau + (1 - phi) * expected  # (1 - φ) D_i
        factor = BorderedFactor(_factor(bordered.at(tau, phi, expected / spread)))
        gradient = -prior_product(theta, graph, x)
        gradient[0] += np.sum(y - expected)
        gradient[1:n + 1] += y - expected
        # b's rows give δb = D⁻¹ (g_b - e δμ + c δu), c = √(τφ)/(1-φ); put into the μ and u rows:
        g_b = gradient[1:n + 1] * (1 - phi) / spread  # D⁻¹ g_b
        reduced = factor.solve(np.concatenate([[gradient[0] - expected @ g_b],
                                               gradient[n + 1:] + root_tau_phi * gradient[1:n + 1] / spread,
                                               np.zeros(k)]))
        d_mu, d_u = reduced[0], reduced[1:n + 1]
        d_b = g_b - ((1 - phi) * expected * d_mu - root_tau_phi * d_u) / spread
        step = np.concatenate([[d_mu], d_b, d_u])
        if np.max(np.abs(step)) < NEWTON_TOL:
            break  # x is the mode (to NEWTON_TOL) and the factorisation is at x
        for _ in range(bym2_kernels.HALVINGS):  # damped: halve until the concave objective does not decrease
            candidate = objective(x + step)
            if candidate >= current - bym2_kernels.DECREASE * abs(current):
                break
            step = step / 2
        else:
            break  # no step improves on x in floating point: x is the mode
        x, current = x + step, candidate
    else:
        raise NotConverged("BYM2 Newton iterations did not converge")
    return x, factor


# --- the grid over θ and the mixture ---------------------------------------------------------------

@dataclass(frozen=True)
class Bym2Fit:
    theta: np.ndarray  # grid points (k, 2): log τ, logit φ
    weights: np.ndarray  # their normalised posterior weights
    mean: np.ndarray  # (k, n) η mode per grid point
    var: np.ndarray  # (k, n) η variance per grid point
    phi_mean: float  # posterior mean of φ
    mode: np.ndarray  # θ at the mode of π(θ | y)

    def rate_mean(self) -> np.ndarray:
        """E[exp(η_i) | y]: a mixture of log-normal means."""
        return self.weights @ np.exp(self.mean + self.var / 2)

    def prob_exceeds(self, threshold) -> np.ndarray:
        """P(exp(η_i) > threshold_i | y)."""
        with np.errstate(divide="ignore"):  # a threshold of 0 (a region with no death): log is -inf, P = 1
            log_t = np.log(np.broadcast_to(np.asarray(threshold, float), self.mean.shape[1:]))
        # A weighted mean of probabilities whose weights sum to 1 only up to rounding (1 + 2e-16 was
        # seen on a small scoped build): the sum is kept inside [0, 1], nothing else changes.
        return np.clip(self.weights @ special.ndtr((self.mean - log_t) / np.sqrt(self.var)), 0.0, 1.0)

    def rate_quantile(self, p: float) -> np.ndarray:
        """The p-quantile of exp(η_i) | y: the mixture's CDF F inverted in η to 1e-12 by Newton's
        method on F(η) - p, the mixture density its derivative, from the mixture's moment-matched
        normal: 4 to 12 steps on the national fits, mostly 5 (a CDF and a density each), where
        bisection took 45 (a CDF each; 7 times as long). Safeguarded as Numerical Recipes'
        rtsafe: a step that leaves the bracket (F < p below, F >= p above, narrowed at every step)
        or does not halve the step before last bisects the bracket instead, so a flat or
        multimodal mixture converges too."""
        w, mean = self.weights, self.mean
        sd = np.sqrt(self.var)
        widest = sd.max(axis=0)
        low, high = mean.min(axis=0) - 10 * widest, mean.max(axis=0) + 10 * widest  # F(low) < p <= F(high)
        centre = w @ mean
        z = np.square(mean - centre)
        x = np.clip(centre + special.ndtri(p) * np.sqrt(w @ self.var + w @ z), low, high)
        inverse_sd = np.divide(1, sd, out=sd)
        # z and cdf are overwritten at every step: a fresh (k, n) array costs about as much as an ndtr.
        cdf = np.empty_like(z)
        eta = np.empty_like(x)
        todo = np.arange(x.size)  # the communes (columns) still iterated on
        done = np.zeros(x.size, bool)
        step = before = high - low
        for _ in range(200):
            np.multiply(np.subtract(x, mean, out=z), inverse_sd, out=z)
            excess = w @ special.ndtr(z, out=cdf) - p  # ndtr: the normal CDF
            np.exp(np.multiply(np.square(z, out=z), -0.5, out=z), out=z)
            density = w @ np.multiply(z, inverse_sd, out=z) / np.sqrt(2 * np.pi)
            below = excess < 0
            low, high = np.where(below, x, low), np.where(below, high, x)
            with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # density 0 or tiny: bisect
                newton = x - excess / density
            keep = (newton >= low) & (newton <= high) & (np.abs(newton - x) <= before / 2)
            moved = np.where(keep, newton, (low + high) / 2)
            before, step = step, np.abs(moved - x)
            x = np.where(done, x, moved)
            done |= (step < 1e-12) | (high - low < 1e-12)
            if done.all():
                break
            if 2 * done.sum() >= done.size:  # half converged: go on with the other half's columns only
                eta[todo[done]] = x[done]
                rest = ~done
                todo, x, low, high, step, before, done = (
                    todo[rest], x[rest], low[rest], high[rest], step[rest], before[rest], done[rest])
                mean, inverse_sd = mean[:, rest], inverse_sd[:, rest]
                z, cdf = np.empty_like(mean), np.empty_like(mean)
        eta[todo] = x
        return np.exp(eta)


def fit_bym2(deaths, births, graph: Bym2Graph, dz: float = DZ, diff_logdens: float = DIFF_LOGDENS) -> Bym2Fit:
    """Fit BYM2 to one set of areas (see the module's docstring)."""
    y, n = np.asarray(deaths, float), np.asarray(births, float)
    if y.shape != n.shape or len(y) != graph.scaled.shape[0]:
        raise ValueError("deaths, births and the graph must have the same areas")
    if (y < 0).any() or (n <= 0).any() or not (np.isfinite(y).all() and np.isfinite(n).all()):
        raise ValueError("deaths must be >= 0 and births > 0 (areas without births are left out before)")
    if y.sum() == 0:
        raise ValueError("no deaths at all: with a flat intercept the posterior is improper")
    cache: dict[tuple, ConditionalFit] = {}
    last = [None]
    system = BandedSystem(graph)  # its pattern and ordering are the same at every θ

    def at(theta) -> ConditionalFit:
        key = tuple(np.round(theta, 12))
        if not (THETA_BOUNDS[0][0] <= theta[0] <= THETA_BOUNDS[0][1]
                and THETA_BOUNDS[1][0] <= theta[1] <= THETA_BOUNDS[1][1]):
            return ConditionalFit(log_posterior=-np.inf, mean=np.full(len(y), np.nan), x=None)
        if key not in cache:
            cache[key] = laplace_at(np.asarray(theta), y, n, graph, start=last[0], system=system)
            last[0] = cache[key].x
        return cache[key]

    mode, hessian = _newton_mode(lambda t: -at(t).log_posterior, np.array([4.0, 0.0]))
    top = at(mode).log_posterior
    values, vectors = np.linalg.eigh(hessian)
    if (values <= 0).any():
        raise RuntimeError(f"the Hessian of -log π(θ|y) at its mode is not positive definite: {values}")
    to_theta = vectors / np.sqrt(values)  # θ = mode + to_theta @ z

    def logdens(z):
        return at(mode + to_theta @ z).log_posterior

    def extent(axis, sign):
        steps = 0
        while steps < 40:
            z = np.zeros(2)
            z[axis] = sign * dz * (steps + 1)
            if top - logdens(z) > diff_logdens:
                break
            steps += 1
        return steps

    reach = [(extent(a, -1), extent(a, 1)) for a in range(2)]
    points, logs = [], []
    for i in range(-reach[0][0], reach[0][1] + 1):
        for j in range(-reach[1][0], reach[1][1] + 1):
            z = np.array([i * dz, j * dz])
            value = logdens(z)
            if top - value <= diff_logdens:
                points.append(mode + to_theta @ z)
                logs.append(value)
    logs = np.array(logs)
    weights = np.exp(logs - logs.max())
    weights /= weights.sum()
    fits = [at(t) for t in points]
    theta = np.array(points)
    return Bym2Fit(theta=theta, weights=weights, mean=np.array([f.mean for f in fits]),
                   var=np.array([f.var for f in fits]), phi_mean=float(weights @ special.expit(theta[:, 1])),
                   mode=mode)


def _newton_mode(f, x, h: float = 1e-2, tol: float = 1e-4, max_iter: int = 50):
    """Minimum of a smooth f of two variables by Newton's method with central differences on a
    3 x 3 stencil (9 evaluations a step: the gradient and the Hessian), falling back to BFGS where
    the Hessian is not positive definite; returns the minimum and the Hessian there."""
    for _ in range(max_iter):
        gradient, hessian = _stencil(f, x, h)
        if np.all(np.isfinite(hessian)) and np.all(np.linalg.eigvalsh(hessian) > 0):
            step = -np.linalg.solve(hessian, gradient)
            scale = min(1.0, 2.0 / max(np.max(np.abs(step)), 1e-300))  # no jump beyond 2 units
            step = step * scale
            value = f(x)
            for _ in range(30):
                if f(x + step) <= value:
                    break
                step = step / 2
            x = x + step
            if np.max(np.abs(step)) < tol:
                return x, _stencil(f, x, h)[1]
        else:
            x = optimize.minimize(f, x, method="BFGS", options={"gtol": 1e-3, "eps": 1e-5}).x
    raise RuntimeError("the mode of log π(θ | y) was not found")


def _stencil(f, x, h):
    values = np.array([[f(x + np.array([i * h, j * h])) for j in (-1, 0, 1)] for i in (-1, 0, 1)])
    gradient = np.array([values[2, 1] - values[0, 1], values[1, 2] - values[1, 0]]) / (2 * h)
    cross = (values[2, 2] - values[2, 0] - values[0, 2] + values[0, 0]) / (4 * h * h)
    hessian = np.array([[values[2, 1] - 2 * values[1, 1] + values[0, 1], cross * h * h],
                        [cross * h * h, values[1, 2] - 2 * values[1, 1] + values[1, 0]]]) / (h * h)
    return gradient, hessian



class NotConverged(RuntimeError):
    """The Newton iterations of a Laplace step found no mode (seen on generated microdata of three
    small regions, a cause indicator with a handful of deaths): the group gets no estimate."""


# --- the mart rows ---------------------------------------------------------------------------------

GROUP = smoothing.GROUP
OUTPUT_DTYPES = {
    **smoothing.COMMUNE_PERIOD_DTYPES,
    "crude_rate_per_1000": "Float64",
    "region_rate_per_1000": "Float64",
    "bym2_rate_per_1000": "Float64",
    "bym2_ci95_lower": "Float64",
    "bym2_ci95_upper": "Float64",
    "bym2_prob_exceeds_region": "Float64",
    "phi_posterior_mean": "Float64",
    "spatial_part": "string",
    "component_size": "Int64",
    "scaling_factor": "Float64",
    "method": "string",
    "note": "string",
}
ISLAND = "unstructured only: no neighbour with a rate (Freni-Sterrantino et al. 2018)"
CONNECTED = "scaled ICAR of its connected part + unstructured"


def bym2_commune_rates(pooled, neighbours):
    """Rows of ``fct_bym2_rates``: one BYM2 fit per indicator and period over every commune of the
    build that has a rate (the national graph: neighbours across regions are neighbours), with
    the neighbour pairs among them. ``pooled`` as for ``smoothing.smooth_commune_rates``
    (commune_code, commune_name, region_code, indicator, period_start, period_end, multiplier,
    deaths, live_births, region_rate_per_1000); ``neighbours``: commune_code, neighbour_code."""
    import pandas as pd

    smoothing.check_pooled_counts(pooled)
    from threadpoolctl import threadpool_limits

    pairs = list(zip(neighbours["commune_code"], neighbours["neighbour_code"]))
    groups = [group.sort_values("commune_code").reset_index(drop=True)
              for _, group in pooled.groupby(GROUP, sort=True)]
    # One BLAS thread: the dense pieces are small, and several threads per process fight over the
    # cores that dbt's other threads use (measured: 4 times slower on 2 busy cores).
    with threadpool_limits(limits=1, user_api="blas"):
        frames = _fit_groups(groups, pairs)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(OUTPUT_DTYPES))
    out = out[list(OUTPUT_DTYPES)].astype(OUTPUT_DTYPES)
    return out.sort_values(["region_code", *GROUP, "commune_code"], ignore_index=True)


# From this many groups (indicator x period) on, worker processes share the fits: a fit is
# mostly Python between short LAPACK calls, so threads would queue for one interpreter lock (two
# took longer than one); a process has its own, and its start-up (about 1 s, importing numpy,
# scipy and numba) is repaid from a few groups on. The national microdata build fits 77.
WORKERS_FROM = 8
# Worker processes beside dbt's own (which fits too, sharing its interpreter lock with the models
# on dbt's other thread): one per core but one. On 2 cores, a second worker bought nothing
# (national microdata build 73.9 s with one, 75.9 s with two).
WORKERS = max(1, (os.cpu_count() or 2) - 1)


def _fit_groups(groups: list, pairs: list) -> list:
    """``_bym2_one_group`` of every group, in order. With WORKERS_FROM groups or more, WORKERS
    worker processes (``python -m infant_mortality.statistics.bym2``, fresh interpreters: forking
    the dbt process would copy DuckDB's threads and locks) fit them from the front while this one
    fits them from the back. Each group is fitted once, by whichever process claims it first
    (creating its claim file is atomic: O_EXCL), and a fit is the same computation in every
    process (one BLAS thread in each), so the rows do not depend on who fitted what (tested)."""
    import pickle
    import subprocess
    import sys
    import tempfile

    if len(groups) < WORKERS_FROM:
        return [_bym2_one_group(group, pairs) for group in groups]
    frames: list = [None] * len(groups)
    with tempfile.TemporaryDirectory(prefix="bym2_") as folder:
        # Files, not pipes: no process ever waits for another to read.
        Path(folder, "groups.pickle").write_bytes(pickle.dumps((groups, pairs)))
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        workers = []
        for k in range(WORKERS):
            with open(Path(folder, f"errors_{k}.txt"), "wb") as errors:
                workers.append(subprocess.Popen([sys.executable, "-m", __name__, folder, str(k)],
                                                stdout=subprocess.DEVNULL, stderr=errors, env=environment))
        try:
            for i in range(len(groups) - 1, -1, -1):
                if not _claim(folder, i):
                    break  # the workers have reached this group: the ones before it are theirs
                frames[i] = _bym2_one_group(groups[i], pairs)
            for k, worker in enumerate(workers):
                if worker.wait() != 0:
                    raise RuntimeError("a BYM2 worker process failed:\n"
                                       + Path(folder, f"errors_{k}.txt").read_text(errors="replace"))
        finally:
            for worker in workers:
                if worker.poll() is None:  # this process failed first: stop the workers before their folder goes
                    worker.kill()
                    worker.wait()
        for k in range(WORKERS):
            for i, frame in pickle.loads(Path(folder, f"rows_{k}.pickle").read_bytes()).items():
                frames[i] = frame
    return frames


def _claim(folder: str, index: int) -> bool:
    """True for the first process to claim group ``index`` (O_EXCL: the file exists at most once)."""
    try:
        os.close(os.open(os.path.join(folder, str(index)), os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


def _worker(folder: str, number: str) -> None:
    """A worker of ``_fit_groups``: reads (groups, pairs) from the folder, fits every group it
    claims from the front, and writes {index: rows} back to the folder."""
    import pickle

    from threadpoolctl import threadpool_limits

    groups, pairs = pickle.loads(Path(folder, "groups.pickle").read_bytes())
    frames = {}
    with threadpool_limits(limits=1, user_api="blas"):
        for i, group in enumerate(groups):
            if _claim(folder, i):  # else another process has it: look at the next
                frames[i] = _bym2_one_group(group, pairs)
    Path(folder, f"rows_{number}.pickle").write_bytes(pickle.dumps(frames))


@lru_cache(maxsize=8)
def _decomposed(n: int, edges: tuple) -> Bym2Graph:
    """``decompose``, once per set of communes: the periods and indicators with the same communes
    share the graph (its eigendecompositions took 20 ms a fit on the country)."""
    return decompose(n, edges)


def _bym2_one_group(group, pairs):
    import pandas as pd

    deaths = pd.to_numeric(group["deaths"]).astype(float).to_numpy()
    births = pd.to_numeric(group["live_births"]).astype(float).to_numpy()
    multiplier = pd.to_numeric(group["multiplier"]).astype(float).to_numpy()
    region_rate = pd.to_numeric(group["region_rate_per_1000"]).astype(float).to_numpy()
    has_rate = np.isfinite(deaths) & np.isfinite(births) & (births > 0)
    if (deaths[has_rate] < 0).any():
        raise ValueError(f"negative pooled deaths for commune(s) {sorted(group.loc[deaths < 0, 'commune_code'])}")
    m = len(group)
    columns = {name: np.full(m, np.nan) for name in
               ("crude", "mean", "lower", "upper", "exceeds", "scale", "size")}
    part = np.full(m, None, dtype=object)
    notes: list[list[str]] = [[] for _ in range(m)]
    for i in np.flatnonzero(~has_rate):
        notes[i].append("no rate: no live births in the period" if births[i] == 0 else "no rate: counts unavailable")
    rows = np.flatnonzero(has_rate)
    phi_mean = np.nan
    if len(rows) and deaths[rows].sum() == 0:
        # With a flat intercept and no death anywhere the posterior is improper (μ -> -∞).
        for i in rows:
            notes[i].append("no deaths in any commune of the indicator and period: no BYM2 posterior")
        rows = rows[:0]
    columns["crude"][has_rate] = deaths[has_rate] / births[has_rate] * multiplier[has_rate]
    if len(rows):
        position = {code: p for p, code in enumerate(group["commune_code"].to_numpy()[rows])}
        edges = [(position[a], position[b]) for a, b in pairs if a in position and b in position and a < b]
        graph = _decomposed(len(rows), tuple(edges))
        try:
            fit = fit_bym2(deaths[rows], births[rows], graph)
        except NotConverged:
            for i in rows:
                notes[i].append("the BYM2 fit did not converge for this indicator and period: no BYM2 estimate")
            rows = rows[:0]
    if len(rows):
        scale = multiplier[rows]
        columns["mean"][rows] = fit.rate_mean() * scale
        columns["lower"][rows] = fit.rate_quantile(0.025) * scale
        columns["upper"][rows] = fit.rate_quantile(0.975) * scale
        columns["exceeds"][rows] = fit.prob_exceeds(region_rate[rows] / scale)
        columns["scale"][rows] = graph.scale
        sizes = np.bincount(graph.component)[graph.component]
        columns["size"][rows] = sizes
        part[rows] = np.where(graph.is_island, ISLAND, CONNECTED)
        phi_mean = fit.phi_mean if len(edges) else np.nan  # no neighbours at all: φ unidentified
        for i in rows[~np.isfinite(region_rate[rows])]:
            notes[i].append("no region rate: bym2_prob_exceeds_region is null")
    return pd.DataFrame({
        "commune_code": group["commune_code"],
        "commune_name": group["commune_name"],
        "region_code": group["region_code"],
        "indicator": group["indicator"],
        "period_start": group["period_start"],
        "period_end": group["period_end"],
        "deaths": group["deaths"],
        "live_births": group["live_births"],
        "crude_rate_per_1000": columns["crude"],
        "region_rate_per_1000": region_rate,
        "bym2_rate_per_1000": columns["mean"],
        "bym2_ci95_lower": columns["lower"],
        "bym2_ci95_upper": columns["upper"],
        "bym2_prob_exceeds_region": columns["exceeds"],
        "phi_posterior_mean": np.where(np.isfinite(columns["mean"]), phi_mean, np.nan),
        "spatial_part": part,
        "component_size": columns["size"],
        "scaling_factor": columns["scale"],
        "method": np.where(np.isfinite(columns["mean"]), METHOD, None),
        "note": ["; ".join(n) if n else None for n in notes],
    })


if __name__ == "__main__":
    import sys

    _worker(sys.argv[1], sys.argv[2])
