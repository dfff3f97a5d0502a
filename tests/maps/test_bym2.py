"""BYM2 (statistics/bym2.py): each piece against a hand computation or a dense brute force."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

from infant_mortality.statistics import band, bym2, bym2_kernels

PATH3 = [(0, 1), (1, 2)]


def test_structure_matrix_is_the_graph_laplacian_and_refuses_loops():
    r = bym2.structure_matrix(3, [(0, 1), (1, 0), (1, 2)]).toarray()  # a pair listed both ways counts once
    assert r.tolist() == [[1, -1, 0], [-1, 2, -1], [0, -1, 1]]
    with pytest.raises(ValueError, match="two different nodes"):
        bym2.structure_matrix(2, [(1, 1)])


def test_scaling_factor_of_paths_by_hand():
    # Two nodes: R = [[1, -1], [-1, 1]], R⁺ = R / 4: marginal variances 1/4, 1/4.
    assert bym2.scaling_factor([[1, -1], [-1, 1]]) == pytest.approx(0.25, rel=1e-12)
    # Three nodes: eigenpairs (1, (1, 0, -1)/√2) and (3, (1, -2, 1)/√6): R⁺ diagonal 10/18, 4/18, 10/18.
    r = bym2.structure_matrix(3, PATH3).toarray()
    assert bym2.scaling_factor(r) == pytest.approx((10 * 4 * 10 / 18 ** 3) ** (1 / 3), rel=1e-12)
    with pytest.raises(ValueError, match="island"):
        bym2.scaling_factor([[0.0]])


def test_scaled_structure_has_geometric_mean_variance_one_per_component():
    # A path of 3, a pair and an island: each connected part scaled on its own (Freni-Sterrantino 2018).
    graph = bym2.decompose(6, [(0, 1), (1, 2), (3, 4)])
    assert graph.is_island.tolist() == [False] * 5 + [True]
    r = graph.scaled.toarray()
    for nodes in ([0, 1, 2], [3, 4]):
        marginal = np.diag(np.linalg.pinv(r[np.ix_(nodes, nodes)]))
        assert np.exp(np.mean(np.log(marginal))) == pytest.approx(1.0, rel=1e-12)
    assert r[5, 5] == 1.0 and np.isnan(graph.scale[5])
    assert graph.scale[:3] == pytest.approx([(400 / 5832) ** (1 / 3)] * 3)
    assert graph.scale[3:5] == pytest.approx([0.25, 0.25])
    assert graph.constraints.toarray().tolist() == [[1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 0]]
    # γ: the eigenvalues of R*⁺: one 0 per constrained component, 1 for the island.
    assert sorted(graph.gamma) == pytest.approx(sorted(
        [0.0, *(1 / np.linalg.eigvalsh(r[:3, :3])[1:]), 0.0, 1 / (2 * 0.25) / 1, 1.0]))


def test_pc_prior_of_the_precision_is_inla_pc_prec():
    # P(σ > 1) = 0.01 with σ = exp(-θ/2); the density integrates to 1 over θ = log τ.
    total = integrate.quad(lambda t: np.exp(bym2.log_pc_prec(t)), -30, 60, limit=200)[0]
    tail = integrate.quad(lambda t: np.exp(bym2.log_pc_prec(t)), -30, 0, limit=200)[0]
    assert total == pytest.approx(1.0, abs=1e-7) and tail == pytest.approx(0.01, abs=1e-7)


def test_pc_prior_of_phi_has_median_one_half_and_integrates_to_one():
    gamma = bym2.decompose(6, [(0, 1), (1, 2), (2, 3), (3, 4), (1, 4)]).gamma
    density = lambda t: np.exp(bym2.log_pc_phi(t, gamma)[0])  # noqa: E731
    # d(φ) is Exponential(λ), λ = log 2 / d(1/2): the mass beyond logit φ = 25 is exp(-λ d(φ)) there.
    lam = np.log(2) / bym2.pc_phi_distance(0.5, gamma)[0]
    beyond = np.exp(-lam * bym2.pc_phi_distance(special.expit(25.0), gamma)[0])
    assert integrate.quad(density, -25, 25, limit=400)[0] + beyond == pytest.approx(1.0, abs=1e-6)
    assert integrate.quad(density, -25, 0, limit=400)[0] == pytest.approx(0.5, abs=1e-6)
    # d(φ) by its definition √(Σ φ(γ-1) - log(1 + φ(γ-1))).
    phi = 0.3
    assert bym2.pc_phi_distance(phi, gamma)[0] == pytest.approx(
        np.sqrt(np.sum(phi * (gamma - 1) - np.log1p(phi * (gamma - 1)))), rel=1e-12)


def _dense_reference(theta, y, births, graph):
    """(mode of η, variance of η, log π(θ|y) up to a constant) with the covariance of b written
    out densely, Σ_b = (φ R*⁺ + (1-φ) I) / τ (R*⁺ the generalised inverse: 1 on an island)."""
    tau, phi = np.exp(theta[0]), special.expit(theta[1])
    n = len(y)
    sigma_b = (phi * np.linalg.pinv(graph.scaled.toarray(), hermitian=True) + (1 - phi) * np.eye(n)) / tau
    q_b = np.linalg.inv(sigma_b)
    x = np.zeros(n + 1)
    x[0] = np.log(y.sum() / births.sum())
    for _ in range(100):
        eta = x[0] + x[1:] + np.log(births)
        e = np.exp(eta)
        g = np.concatenate([[np.sum(y - e)], y - e - q_b @ x[1:]])
        h = np.block([[np.array([[e.sum()]]), e[None, :]], [e[:, None], q_b + np.diag(e)]])
        x = x + np.linalg.solve(h, g)
    cov = np.linalg.inv(h)
    var = cov[0, 0] + np.diag(cov)[1:] + 2 * cov[0, 1:]
    eta = x[0] + x[1:] + np.log(births)
    log_post = (np.sum(y * eta - np.exp(eta)) + 0.5 * np.linalg.slogdet(q_b)[1] - 0.5 * x[1:] @ q_b @ x[1:]
                - 0.5 * np.linalg.slogdet(h)[1] + bym2.log_pc_prec(theta[0]) + bym2.log_pc_phi(theta[1], graph.gamma)[0])
    return x[0] + x[1:], var, log_post


def _dense_prior_precision(tau, phi, graph):
    """Q of x = (μ, b, u) written out from its definition (docs/methods/maps.md)."""
    n = graph.scaled.shape[0]
    q = np.zeros((2 * n + 1, 2 * n + 1))
    q[1:n + 1, 1:n + 1] = tau / (1 - phi) * np.eye(n)
    q[1:n + 1, n + 1:] = q[n + 1:, 1:n + 1] = -np.sqrt(tau * phi) / (1 - phi) * np.eye(n)
    q[n + 1:, n + 1:] = graph.scaled.toarray() + phi / (1 - phi) * np.eye(n)
    return q


def _dense_bordered(q, e, graph):
    """The whole bordered (KKT) matrix [[Q + C, Aᵀ], [A, 0]], C the likelihood's curvature e on η = μ + b."""
    n, k = len(e), graph.constraints.shape[0]
    h = q.copy()
    h[0, 0] += e.sum()
    h[0, 1:n + 1] += e
    h[1:n + 1, 0] += e
    h[1:n + 1, 1:n + 1] += np.diag(e)
    a = np.hstack([np.zeros((k, n + 1)), graph.constraints.toarray()])
    return np.block([[h, a.T], [a, np.zeros((k, k))]])


def test_the_system_without_b_is_the_schur_complement_of_the_whole_bordered_system():
    """ReducedSystem (b eliminated) against the dense Schur complement of [[Q + C, Aᵀ], [A, 0]],
    Q written out from its definition (docs/methods/maps.md), on two components and an island;
    prior_product against Q x."""
    graph = bym2.decompose(7, PATH3 + [(2, 3), (3, 0), (4, 5)])
    n, k = 7, graph.constraints.shape[0]
    rng = np.random.default_rng(46)
    tau, phi = 3.7, 0.35
    e = rng.uniform(0.5, 40, n)
    q = _dense_prior_precision(tau, phi, graph)
    whole = _dense_bordered(q, e, graph)
    b = np.arange(1, n + 1)
    rest = np.setdiff1d(np.arange(2 * n + 1 + k), b)
    schur = whole[np.ix_(rest, rest)] - whole[np.ix_(rest, b)] @ np.linalg.solve(whole[np.ix_(b, b)], whole[np.ix_(b, rest)])
    reduced = bym2.ReducedSystem(graph).at(tau, phi, e / (tau + (1 - phi) * e)).toarray()
    assert reduced == pytest.approx(schur, rel=1e-12, abs=1e-12)
    x = rng.normal(size=2 * n + 1)
    assert bym2.prior_product([np.log(tau), special.logit(phi)], graph, x) == pytest.approx(q @ x, rel=1e-12)


def _envelope_matrix(rng, n, width):
    """A symmetric positive definite matrix whose rows start at random columns within ``width`` of
    the diagonal, and its lower triangle in the envelope layout (``bym2_kernels``)."""
    first = np.array([max(0, i - int(rng.integers(0, width + 1))) for i in range(n)])
    first[np.arange(n) % 7 == 3] = np.arange(n)[np.arange(n) % 7 == 3]  # a few rows with nothing left of the diagonal
    s = np.zeros((n, n))
    for i in range(n):
        for p in range(first[i], i):
            if rng.random() < 0.6 or p == first[i]:
                s[i, p] = s[p, i] = rng.normal()
    s += np.diag(np.abs(s).sum(axis=1) + rng.uniform(0.01, 1, n))  # diagonally dominant: SPD
    lower = np.zeros((n, width + 1))
    for i in range(n):
        for p in range(first[i], i + 1):
            lower[i, width + p - i] = s[i, p]
    return s, lower, first.astype(np.int64)


def test_the_envelope_cholesky_its_solves_and_the_inverse_diagonal_are_numpys():
    """The compiled envelope pieces against numpy's dense Cholesky, solves, product and inverse,
    on a matrix with rows of every envelope length (and on a plain band: first = i - w)."""
    rng = np.random.default_rng(45)
    n, width = 40, 5
    s, lower, first = _envelope_matrix(rng, n, width)
    factor = lower.copy()
    assert bym2_kernels.envelope_cholesky(factor, first)
    dense_l = np.linalg.cholesky(s)
    for i in range(n):
        assert factor[i, width + first[i] - i:] == pytest.approx(dense_l[i, first[i]:i + 1], rel=1e-12, abs=1e-14)
        assert np.all(dense_l[i, :first[i]] == 0)
    assert band.inverse_diagonal(factor, first) == pytest.approx(np.diag(np.linalg.inv(s)), rel=1e-12)
    rows = rng.normal(size=(3, n))
    solved = rows.copy()
    bym2_kernels.forward_solve(factor, first, solved)
    assert solved == pytest.approx(np.linalg.solve(dense_l, rows.T).T, rel=1e-12, abs=1e-12)
    back = rows[0].copy()
    bym2_kernels.backward_solve(factor, first, back)
    assert back == pytest.approx(np.linalg.solve(dense_l.T, rows[0]), rel=1e-12, abs=1e-12)
    product = np.empty(n)
    bym2_kernels.structure_product(lower, first, rows[1], product)
    assert product == pytest.approx(s @ rows[1], rel=1e-12, abs=1e-12)
    banded = np.maximum(np.arange(n) - width, 0).astype(np.int64)  # the whole band: first = i - w
    assert band.inverse_diagonal(factor, banded) == pytest.approx(np.diag(np.linalg.inv(s)), rel=1e-12)
    indefinite = lower.copy()
    indefinite[n // 2, width] = -1.0
    assert not bym2_kernels.envelope_cholesky(indefinite, first)


def test_the_compiled_reduced_system_and_superlu_solve_it_alike():
    """``bym2_kernels.factorise`` (envelope Cholesky of u's block, dense Schur complement of μ and
    the multipliers) and ``reduced_solve`` against SuperLU on the whole bordered matrix: the same
    solution, |determinant| and latent variances, on two components and an island."""
    graph = bym2.decompose(9, PATH3 + [(2, 3), (3, 0), (4, 5), (5, 6), (6, 7)])  # 0-3, 4-7, island 8
    system = bym2.BandedSystem(graph)
    order, n, k = system.order, 9, graph.constraints.shape[0]
    rng = np.random.default_rng(7)
    tau, phi = 12.0, 0.7
    e = rng.uniform(0.5, 40, n)
    w = e / (tau + (1 - phi) * e)
    ok, factor, forward, lu, pivots = bym2_kernels.factorise(system.structure, system.first, system.constraints,
                                                             tau, phi, w[order])
    assert ok
    banded = bym2.BandedFactor(system, factor, forward, bym2_kernels.lu_inverse(lu, pivots),
                               np.sum(np.log(np.abs(np.diag(lu)))))
    bordered = bym2.BorderedFactor(bym2._factor(system.bordered.at(tau, phi, w)))
    rhs = rng.normal(size=n + 1 + k)
    t, u = bym2_kernels.reduced_solve(factor, system.first, forward, lu, pivots,
                                      np.concatenate([rhs[:1], rhs[n + 1:]]), rhs[1:n + 1][order])
    solution = np.concatenate([t[:1], u[system.position], t[1:]])
    assert solution == pytest.approx(bordered.solve(rhs), rel=1e-10, abs=1e-12)
    assert banded.log_abs_det == pytest.approx(bordered.log_abs_det, rel=1e-12)
    alpha, beta = rng.uniform(0.1, 1, n), rng.uniform(0.1, 1, n)
    assert banded.eta_variance(alpha, beta) == pytest.approx(bordered.eta_variance(alpha, beta), rel=1e-10)


def _dense_laplace(theta, y, births, graph, start=None):
    """The Laplace step as numpy took it before it was compiled, on the whole bordered (KKT)
    system [[H, Aᵀ], [A, 0]] written out densely and solved by numpy: the same start, damped
    Newton steps and stopping rule. (log π(θ | y), the mode x, the variance of η); the bordered
    matrix's log |determinant| is the module's Σ log D_i plus the reduced system's (b eliminated)."""
    tau, phi = np.exp(theta[0]), special.expit(theta[1])
    n, k = len(y), graph.constraints.shape[0]
    offset = np.log(births)
    q = _dense_prior_precision(tau, phi, graph)
    if start is None:
        x = np.zeros(2 * n + 1)
        x[0] = np.log(max(y.sum(), 0.5) / births.sum())
    else:
        x = start.copy()

    def objective(x):
        eta = x[0] + x[1:n + 1] + offset
        return np.sum(y * eta - np.exp(eta)) - 0.5 * x @ q @ x

    current = objective(x)
    for _ in range(bym2.NEWTON_ITERATIONS):
        e = np.exp(x[0] + x[1:n + 1] + offset)
        kkt = _dense_bordered(q, e, graph)
        gradient = -q @ x
        gradient[0] += np.sum(y - e)
        gradient[1:n + 1] += y - e
        step = np.linalg.solve(kkt, np.concatenate([gradient, np.zeros(k)]))[:2 * n + 1]
        if np.max(np.abs(step)) < bym2.NEWTON_TOL:
            break
        for _ in range(50):
            candidate = objective(x + step)
            if candidate >= current - 1e-12 * abs(current):
                break
            step = step / 2
        else:
            break
        x, current = x + step, candidate
    eta = x[0] + x[1:n + 1] + offset
    log_joint = (np.sum(y * eta - np.exp(eta) - special.gammaln(y + 1))
                 + 0.5 * n * (np.log(tau) - np.log1p(-phi)) - 0.5 * x @ q @ x)
    log_post = (log_joint - 0.5 * np.linalg.slogdet(kkt)[1]
                + bym2.log_pc_prec(theta[0]) + bym2.log_pc_phi(theta[1], graph.gamma)[0])
    cov = np.linalg.inv(kkt)[:n + 1, :n + 1]  # of (μ, b)
    return log_post, x, cov[0, 0] + np.diag(cov)[1:] + 2 * cov[0, 1:]


def _shuffled(n, edges, seed):
    """The graph with its nodes renumbered at random: the band's order is not the communes'."""
    relabel = np.random.default_rng(seed).permutation(n)
    return n, [(int(relabel[a]), int(relabel[b])) for a, b in edges]


LAPLACE_GRAPHS = {
    "two components and an island": (7, PATH3 + [(2, 3), (3, 0), (4, 5)]),
    "a triangle": (3, [(0, 1), (1, 2), (2, 0)]),
    "four components and two islands": _shuffled(
        14, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (1, 3), (5, 6), (6, 7), (8, 9), (10, 11)], 1),
    "islands only": (4, []),
    "a ring of 30 with chords": _shuffled(30, [(i, (i + 1) % 30) for i in range(30)]
                                          + [(i, (i + 7) % 30) for i in range(0, 30, 4)], 2),
}


@pytest.mark.parametrize("name", LAPLACE_GRAPHS)
def test_the_compiled_laplace_step_is_the_dense_bordered_newton(name):
    """laplace_at (the compiled Newton iteration, ``bym2_kernels.laplace_mode``) against the same
    iteration on the dense bordered system: log π(θ | y), the mode x and the variances of η to
    1e-9, from the default start and from the mode of another θ (the grid's warm start)."""
    n, edges = LAPLACE_GRAPHS[name]
    rng = np.random.default_rng(n)
    births = rng.integers(200, 3000, n).astype(float)
    y = rng.poisson(births * 0.008).astype(float)
    graph = bym2.decompose(n, edges)
    system = bym2.BandedSystem(graph)
    previous = None
    for theta in ([3.0, -1.0], [1.0, 1.5], [5.0, 0.0], [2.0, 6.0], [7.0, -5.0]):
        theta = np.array(theta)
        for start in (None, previous):
            fit = bym2.laplace_at(theta, y, births, graph, start=start, system=system)
            assert isinstance(fit.variance_parts[0], bym2.BandedFactor)
            log_post, x, var = _dense_laplace(theta, y, births, graph, start=start)
            assert fit.log_posterior == pytest.approx(log_post, rel=1e-9, abs=0), (theta, start is None)
            assert fit.x == pytest.approx(x, rel=1e-9, abs=1e-12), (theta, start is None)
            assert fit.var == pytest.approx(var, rel=1e-9, abs=0), (theta, start is None)
        previous = fit.x


def test_where_the_band_cholesky_fails_superlu_takes_over(monkeypatch):
    """Where u's block is numerically not positive definite (φ w under rounding next to R*'s null
    space) the compiled iteration says so, and SuperLU on the bordered matrix takes over for that
    θ: the same Laplace approximation."""
    rng = np.random.default_rng(3)
    births = rng.integers(200, 3000, 7).astype(float)
    y = rng.poisson(births * 0.008).astype(float)
    graph = bym2.decompose(7, PATH3 + [(2, 3), (3, 0), (4, 5)])
    system = bym2.BandedSystem(graph)
    start = np.zeros(15)
    outcome = bym2_kernels.laplace_mode(3.0, 0.4, y, np.log(births), -system.structure, system.first,
                                        system.constraints, system.order, start, 1e-8, 200)[0]
    assert outcome == bym2_kernels.NOT_POSITIVE_DEFINITE  # -R* + φ diag(w) is not
    banded = bym2.laplace_at(np.array([3.0, -1.0]), y, births, graph)
    compiled = bym2_kernels.laplace_mode
    monkeypatch.setattr(bym2_kernels, "laplace_mode",
                        lambda *args: (bym2_kernels.NOT_POSITIVE_DEFINITE, *compiled(*args)[1:]))
    fallback = bym2.laplace_at(np.array([3.0, -1.0]), y, births, graph)
    assert isinstance(fallback.variance_parts[0], bym2.BorderedFactor)
    assert fallback.mean == pytest.approx(banded.mean, abs=1e-9)
    assert fallback.var == pytest.approx(banded.var, rel=1e-9)
    assert fallback.log_posterior == pytest.approx(banded.log_posterior, abs=1e-9)


def test_a_laplace_step_without_a_mode_after_its_iterations_raises_not_converged(monkeypatch):
    """NEWTON_ITERATIONS bounds the compiled iteration as it bounds SuperLU's."""
    rng = np.random.default_rng(3)
    births = rng.integers(200, 3000, 7).astype(float)
    y = rng.poisson(births * 0.008).astype(float)
    graph = bym2.decompose(7, PATH3 + [(2, 3), (3, 0), (4, 5)])
    monkeypatch.setattr(bym2, "NEWTON_ITERATIONS", 1)
    with pytest.raises(bym2.NotConverged):
        bym2.laplace_at(np.array([3.0, -1.0]), y, births, graph)


@pytest.mark.parametrize("edges, n", [(PATH3 + [(2, 3), (3, 0), (4, 5)], 7), ([(0, 1), (1, 2), (2, 0)], 3)])
def test_sparse_constrained_laplace_equals_the_dense_covariance_form(edges, n):
    """The sparse fit of (μ, b, u) under sum-to-zero constraints (bordered system) gives the same
    Gaussian approximation of η, and the same log π(θ|y) up to a constant, as the dense
    covariance of b (where the constraints are implicit in R*⁺); with and without an island."""
    rng = np.random.default_rng(46)
    births = rng.integers(200, 3000, n).astype(float)
    y = rng.poisson(births * 0.008).astype(float)
    graph = bym2.decompose(n, edges)
    differences = []
    for theta in ([3.0, -1.0], [1.0, 1.5], [5.0, 0.0]):
        fit = bym2.laplace_at(np.array(theta), y, births, graph)
        mean, var, log_post = _dense_reference(np.array(theta), y, births, graph)
        assert fit.mean == pytest.approx(mean, abs=1e-9)
        assert fit.var == pytest.approx(var, rel=1e-8)
        differences.append(fit.log_posterior - log_post)
    assert np.ptp(differences) < 1e-8


def test_one_island_with_a_flat_intercept_is_the_data_alone():
    """One area: μ is flat, so η = μ + b has the likelihood alone: mode log(y/E), variance 1/y,
    at every θ; the posterior mean rate is the log-normal mean exp(log(y/E) + 1/(2y))."""
    graph = bym2.decompose(1, [])
    fit = bym2.fit_bym2([10], [1000], graph)
    assert fit.mean == pytest.approx(np.full_like(fit.mean, np.log(0.01)), abs=1e-9)
    assert fit.var == pytest.approx(np.full_like(fit.var, 0.1), rel=1e-9)
    assert fit.rate_mean()[0] == pytest.approx(0.01 * np.exp(0.05), rel=1e-9)
    assert fit.rate_quantile(0.975)[0] == pytest.approx(0.01 * np.exp(1.959963985 * np.sqrt(0.1)), rel=1e-8)
    assert fit.prob_exceeds(0.01)[0] == pytest.approx(0.5, abs=1e-9)


def test_mixture_summaries_by_hand():
    """Two grid points with weights 0.25 / 0.75: the mean, exceedance and median of a mixture of
    two log-normals."""
    fit = bym2.Bym2Fit(theta=np.zeros((2, 2)), weights=np.array([0.25, 0.75]),
                       mean=np.array([[0.0], [1.0]]), var=np.array([[1.0], [0.25]]), phi_mean=0.5,
                       mode=np.zeros(2))
    assert fit.rate_mean()[0] == pytest.approx(0.25 * np.exp(0.5) + 0.75 * np.exp(1.125))
    assert fit.prob_exceeds(1.0)[0] == pytest.approx(0.25 * 0.5 + 0.75 * stats.norm.sf(-2.0))
    median = fit.rate_quantile(0.5)[0]
    assert 0.25 * stats.norm.cdf(np.log(median)) + 0.75 * stats.norm.cdf((np.log(median) - 1) / 0.5) == pytest.approx(0.5)


def _bisected_quantile(weights, mean, var, p):
    """The mixture's p-quantile in η by plain bisection of the CDF (scipy.stats), halved until
    its bracket no longer shrinks: the reference."""
    sd = np.sqrt(var)
    low, high = (mean - 40 * sd).min(axis=0), (mean + 40 * sd).max(axis=0)
    for _ in range(2000):
        mid = (low + high) / 2
        below = weights @ stats.norm.cdf((mid - mean) / sd) < p
        low, high = np.where(below, mid, low), np.where(below, high, mid)
    return (low + high) / 2


def _mixtures(rng, k=25, n=40):
    """(name, weights, means, variances) of η mixtures like the national fits' (means about
    log 0.008), and extreme ones."""
    commune = np.log(0.008) + rng.normal(0, 0.3, n)
    weights = np.exp(rng.normal(0, 1.5, k))
    weights /= weights.sum()
    yield "realistic", weights, commune + rng.normal(0, 0.05, (k, n)), rng.uniform(0.01, 0.2, (k, n))
    dominant = np.full(k, 1e-3 / (k - 1))
    dominant[3] = 0.999
    yield "one dominant component", dominant, commune + rng.normal(0, 0.5, (k, n)), rng.uniform(0.01, 0.2, (k, n))
    # 30% of the mass 3 to 12 below the rest: bimodal, with a flat CDF between the modes.
    two = np.r_[np.full(10, 0.3 / 10), np.full(k - 10, 0.7 / (k - 10))]
    gap = np.r_[np.zeros(10), np.ones(k - 10)][:, None] * rng.uniform(3, 12, n)
    yield "bimodal", two, commune + gap + rng.normal(0, 0.05, (k, n)), rng.uniform(0.005, 0.05, (k, n))
    yield "tiny variances, spread", weights, commune + rng.normal(0, 0.3, (k, n)), rng.uniform(1e-8, 1e-6, (k, n))
    yield "tiny variances, close", weights, commune + rng.normal(0, 1e-4, (k, n)), rng.uniform(1e-10, 1e-8, (k, n))


def test_the_quantile_by_safeguarded_newton_is_the_bisections(monkeypatch):
    """rate_quantile (Newton's method, bisecting where a step leaves its bracket) against plain
    bisection, on realistic and extreme mixtures: the same rate to 1e-10, F(quantile) = p to
    1e-10, and a few CDF evaluations where the mixture is smooth (bisection took 45)."""
    rng = np.random.default_rng(12)
    ndtr, evaluations = special.ndtr, []
    monkeypatch.setattr(bym2.special, "ndtr", lambda *args, **kwargs: evaluations.append(1) or ndtr(*args, **kwargs))
    for name, weights, mean, var in _mixtures(rng):
        fit = bym2.Bym2Fit(theta=np.zeros((len(weights), 2)), weights=weights, mean=mean, var=var,
                           phi_mean=0.5, mode=np.zeros(2))
        for p in (0.025, 0.5, 0.975):
            evaluations.clear()
            quantile = fit.rate_quantile(p)
            steps = len(evaluations)
            reference = np.exp(_bisected_quantile(weights, mean, var, p))
            assert quantile == pytest.approx(reference, rel=1e-10, abs=0), (name, p)
            cdf = weights @ stats.norm.cdf((np.log(quantile) - mean) / np.sqrt(var))
            assert cdf == pytest.approx(np.full_like(cdf, p), rel=0, abs=1e-10), (name, p)
            assert steps <= (6 if name in ("realistic", "one dominant component") else 30), (name, p)


def test_fit_shrinks_small_areas_towards_their_neighbours_and_is_deterministic():
    rng = np.random.default_rng(7)
    n = 30
    edges = [(i, i + 1) for i in range(n - 1)] + [(i, i + 5) for i in range(n - 5)]
    births = rng.integers(50, 5000, n).astype(float)
    y = rng.poisson(births * 0.008).astype(float)
    graph = bym2.decompose(n, edges)
    first, second = bym2.fit_bym2(y, births, graph), bym2.fit_bym2(y, births, graph)
    assert np.array_equal(first.rate_mean(), second.rate_mean())
    crude = y / births
    pooled = y.sum() / births.sum()
    smoothed = first.rate_mean()
    # Smoothing pulls the extreme crude rates in: the spread shrinks, and most for the smallest areas.
    assert np.std(smoothed) < np.std(crude)
    small = births < np.median(births)
    pull = np.abs(smoothed - crude) / np.maximum(np.abs(crude - pooled), 1e-12)
    assert np.median(pull[small]) > np.median(pull[~small])
    assert first.weights.sum() == pytest.approx(1.0) and len(first.weights) > 9
    assert 0 < first.phi_mean < 1
    assert (first.rate_quantile(0.025) < smoothed).all() and (smoothed < first.rate_quantile(0.975)).all()


def _pooled(rows):
    return pd.DataFrame(rows, columns=["commune_code", "commune_name", "region_code", "indicator", "period_start",
                                       "period_end", "multiplier", "deaths", "live_births", "region_rate_per_1000"])


def test_mart_rows_name_the_islands_and_leave_communes_without_births_empty():
    rows = [(f"0000{i}", f"c{i}", "01", "imr", 2010, 2014, 1000, d, n, 8.0)
            for i, (d, n) in enumerate([(10, 1200), (4, 900), (9, 1500), (3, 300), (0, 0), (2, 250)])]
    pooled = _pooled(rows)
    neighbours = pd.DataFrame({"commune_code": ["00000", "00001", "00001", "00002", "00003", "00004"],
                               "neighbour_code": ["00001", "00000", "00002", "00001", "00004", "00003"]})
    out = bym2.bym2_commune_rates(pooled, neighbours).set_index("commune_code")
    assert out.loc["00004", "note"] == "no rate: no live births in the period"
    assert pd.isna(out.loc["00004", "bym2_rate_per_1000"]) and pd.isna(out.loc["00004", "method"])
    # 00003's only neighbour has no births: it is an island in this period's graph, as 00005.
    assert out.loc["00003", "spatial_part"] == out.loc["00005", "spatial_part"] == bym2.ISLAND
    assert out.loc["00003", "component_size"] == 1 and pd.isna(out.loc["00003", "scaling_factor"])
    assert out.loc["00000", "spatial_part"] == bym2.CONNECTED and out.loc["00000", "component_size"] == 3
    assert out.loc["00000", "scaling_factor"] == pytest.approx((400 / 5832) ** (1 / 3))
    assert (out["method"].dropna() == "bym2_laplace_grid").all()
    assert out.loc["00000", "crude_rate_per_1000"] == pytest.approx(10 / 1.2)
    assert out["phi_posterior_mean"].dropna().nunique() == 1
    with pytest.raises(ValueError, match="lack columns"):
        bym2.bym2_commune_rates(pooled.drop(columns="multiplier"), neighbours)


def _many_groups(indicators=("indicator_a", "indicator_b", "indicator_c"), starts=(2000, 2005, 2010, 2015)):
    """12 groups (indicator x period) over a ring of 24 communes with a few cross links."""
    rng = np.random.default_rng(11)
    n = 24
    codes = [f"{i:05d}" for i in range(n)]
    births = rng.integers(100, 4000, n)
    rows = [(code, code, "01", indicator, start, start + 4, 1000, int(rng.poisson(b * 0.006)), int(b), 6.0)
            for indicator in indicators for start in starts for code, b in zip(codes, births)]
    pairs = [(codes[i], codes[j]) for i in range(n) for j in (i - 1, i + 1, i - 6, i + 6) if 0 <= j < n]
    return _pooled(rows), pd.DataFrame(pairs, columns=["commune_code", "neighbour_code"])


def test_groups_shared_with_a_worker_process_give_the_rows_of_one_process(monkeypatch):
    """From WORKERS_FROM groups on, worker processes fit some of them: every row must be
    the one this process alone gives, bit for bit, in the same order."""
    pooled, neighbours = _many_groups()
    monkeypatch.setattr(bym2, "WORKERS_FROM", 10 ** 6)
    alone = bym2.bym2_commune_rates(pooled, neighbours)
    fitted_here = []
    one_group, claim = bym2._bym2_one_group, bym2._claim
    monkeypatch.setattr(bym2, "_bym2_one_group", lambda g, p: fitted_here.append(1) or one_group(g, p))
    monkeypatch.setattr(bym2, "_claim", _after_the_workers_first_claim(claim))
    monkeypatch.setattr(bym2, "WORKERS_FROM", 2)
    shared = bym2.bym2_commune_rates(pooled, neighbours)
    assert alone["bym2_rate_per_1000"].notna().all() and alone.groupby(["indicator", "period_start"]).ngroups == 12
    assert 0 < len(fitted_here) < 12  # the worker fitted the others
    pd.testing.assert_frame_equal(alone, shared, check_exact=True)


def _after_the_workers_first_claim(claim):
    """This process's claims, made only once the worker (which starts from group 0) holds one, so
    that both processes fit some groups whatever the machine's speed."""
    import os
    import time

    def waiting(folder, index):
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(folder, "0")) and time.monotonic() < deadline:
            time.sleep(0.01)
        return claim(folder, index)
    return waiting


def test_a_failing_worker_process_stops_the_build_with_its_traceback(monkeypatch):
    """A group the worker cannot fit (negative deaths here) fails the model with the worker's own
    error."""
    pooled, neighbours = _many_groups()
    first = ((pooled["indicator"] == "indicator_a") & (pooled["period_start"] == 2000)
             & (pooled["commune_code"] == "00003"))
    pooled.loc[first, "deaths"] = -1
    monkeypatch.setattr(bym2, "_claim", lambda folder, index: False)  # this process leaves every group to the worker
    monkeypatch.setattr(bym2, "WORKERS_FROM", 2)
    with pytest.raises(RuntimeError, match=r"(?s)BYM2 worker process failed.*negative pooled deaths"):
        bym2.bym2_commune_rates(pooled, neighbours)


def test_no_death_anywhere_gives_no_posterior_and_says_why():
    rows = [(f"0000{i}", f"c{i}", "01", "imr", 2010, 2014, 1000, 0, 100, 0.0) for i in range(3)]
    out = bym2.bym2_commune_rates(_pooled(rows), pd.DataFrame({"commune_code": ["00000"], "neighbour_code": ["00001"]}))
    assert out["bym2_rate_per_1000"].isna().all() and (out["crude_rate_per_1000"] == 0).all()
    assert out["note"].str.contains("no BYM2 posterior").all() and out["method"].isna().all()
    with pytest.raises(ValueError, match="improper"):
        bym2.fit_bym2([0, 0], [10, 20], bym2.decompose(2, [(0, 1)]))


def test_exceedance_probabilities_stay_probabilities_even_against_a_zero_rate():
    """A region with no death has a threshold of 0: every commune exceeds it with probability 1
    (to rounding, never above), and no probability leaves [0, 1] by rounding (1.0000000000000002 stopped a small
    scoped build on the mart's check)."""
    graph = bym2.decompose(5, [(0, 1), (1, 2), (2, 3), (3, 4)])
    fit = bym2.fit_bym2([0, 1, 0, 3, 0], [2, 40, 3, 900, 5], graph)
    certain = fit.prob_exceeds(np.zeros(5))
    assert ((certain <= 1) & (np.abs(certain - 1) < 1e-12)).all()
    for threshold in (1e-6, 1e-3, 0.01, 0.5):
        p = fit.prob_exceeds(np.full(5, threshold))
        assert ((p >= 0) & (p <= 1)).all()


def test_a_fit_that_finds_no_mode_leaves_its_group_empty_and_says_why(monkeypatch):
    """Seen on generated microdata of three small regions: the group gets no estimate and a note,
    and the build goes on (the mart's other groups are untouched)."""
    rows = [(f"0000{i}", f"c{i}", "01", "imr", 2010, 2014, 1000, d, n, 8.0)
            for i, (d, n) in enumerate([(10, 1200), (4, 900), (9, 1500)])]
    neighbours = pd.DataFrame({"commune_code": ["00000", "00001"], "neighbour_code": ["00001", "00000"]})

    def no_mode(*args, **kwargs):
        raise bym2.NotConverged("BYM2 Newton iterations did not converge")

    monkeypatch.setattr(bym2, "fit_bym2", no_mode)
    out = bym2.bym2_commune_rates(_pooled(rows), neighbours)
    assert out["bym2_rate_per_1000"].isna().all() and out["bym2_prob_exceeds_region"].isna().all()
    assert (out["note"] == "the BYM2 fit did not converge for this indicator and period: no BYM2 estimate").all()
    assert out["crude_rate_per_1000"].notna().all()
