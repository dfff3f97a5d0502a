"""BYM2 (statistics/bym2.py): each piece against a hand computation or a dense brute force."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

from infant_mortality.statistics import band, bym2

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


def test_the_system_without_b_is_the_schur_complement_of_the_whole_bordered_system():
    """ReducedSystem (b eliminated) against the dense Schur complement of [[Q + C, Aᵀ], [A, 0]],
    Q written out from its definition (docs/methods/maps.md), on two components and an island;
    prior_product against Q x."""
    graph = bym2.decompose(7, PATH3 + [(2, 3), (3, 0), (4, 5)])
    n, k = 7, graph.constraints.shape[0]
    rng = np.random.default_rng(46)
    tau, phi = 3.7, 0.35
    e = rng.uniform(0.5, 40, n)
    r = graph.scaled.toarray()
    q = np.zeros((2 * n + 1, 2 * n + 1))
    q[1:n + 1, 1:n + 1] = tau / (1 - phi) * np.eye(n)
    q[1:n + 1, n + 1:] = q[n + 1:, 1:n + 1] = -np.sqrt(tau * phi) / (1 - phi) * np.eye(n)
    q[n + 1:, n + 1:] = r + phi / (1 - phi) * np.eye(n)
    h = q.copy()
    h[0, 0] += e.sum()
    h[0, 1:n + 1] += e
    h[1:n + 1, 0] += e
    h[1:n + 1, 1:n + 1] += np.diag(e)
    a = np.hstack([np.zeros((k, n + 1)), graph.constraints.toarray()])
    whole = np.block([[h, a.T], [a, np.zeros((k, k))]])
    b = np.arange(1, n + 1)
    rest = np.setdiff1d(np.arange(2 * n + 1 + k), b)
    schur = whole[np.ix_(rest, rest)] - whole[np.ix_(rest, b)] @ np.linalg.solve(whole[np.ix_(b, b)], whole[np.ix_(b, rest)])
    reduced = bym2.ReducedSystem(graph).at(tau, phi, e / (tau + (1 - phi) * e)).toarray()
    assert reduced == pytest.approx(schur, rel=1e-12, abs=1e-12)
    x = rng.normal(size=2 * n + 1)
    assert bym2.prior_product([np.log(tau), special.logit(phi)], graph, x) == pytest.approx(q @ x, rel=1e-12)


def test_band_inverse_diagonal_is_the_diagonal_of_the_dense_inverse():
    """Takahashi's recursion (compiled) on LAPACK's band Cholesky factor against numpy's dense inverse."""
    from scipy.linalg import lapack
    rng = np.random.default_rng(45)
    n, width = 40, 4
    s = np.zeros((n, n))
    for d in range(1, width + 1):
        off = rng.normal(size=n - d)
        s += np.diag(off, d) + np.diag(off, -d)
    s += np.diag(np.abs(s).sum(axis=1) + rng.uniform(0.01, 1, n))  # diagonally dominant: SPD
    lower_band = np.array([np.concatenate([np.diag(s, -d), np.zeros(d)]) for d in range(width + 1)])
    cholesky, info = lapack.dpbtrf(lower_band, lower=1)
    assert info == 0
    inverse = np.diag(np.linalg.inv(s))
    assert band.inverse_diagonal(np.ascontiguousarray(cholesky.T)) == pytest.approx(inverse, rel=1e-12)
    assert band.inverse_diagonal(cholesky.T) == pytest.approx(inverse, rel=1e-12)  # dpbtrf's own layout


def test_the_band_and_superlu_solve_the_reduced_system_alike():
    """BandedFactor (banded Cholesky of u's block, dense Schur complement of μ and the multipliers)
    against SuperLU on the whole bordered matrix: the same solution, |determinant| and latent
    variances, on two components and an island."""
    graph = bym2.decompose(9, PATH3 + [(2, 3), (3, 0), (4, 5), (5, 6), (6, 7)])  # 0-3, 4-7, island 8
    system = bym2.BandedSystem(graph)
    rng = np.random.default_rng(7)
    tau, phi = 12.0, 0.7
    e = rng.uniform(0.5, 40, 9)
    w = e / (tau + (1 - phi) * e)
    banded = system.factor(tau, phi, w)
    assert isinstance(banded, bym2.BandedFactor)
    bordered = bym2.BorderedFactor(bym2._factor(system.bordered.at(tau, phi, w)))
    rhs = rng.normal(size=system.bordered.matrix.shape[0])
    assert banded.solve(rhs) == pytest.approx(bordered.solve(rhs), rel=1e-10, abs=1e-12)
    assert banded.log_abs_det == pytest.approx(bordered.log_abs_det, rel=1e-12)
    alpha, beta = rng.uniform(0.1, 1, 9), rng.uniform(0.1, 1, 9)
    assert banded.eta_variance(alpha, beta) == pytest.approx(bordered.eta_variance(alpha, beta), rel=1e-10)


def test_where_the_band_cholesky_fails_superlu_takes_over(monkeypatch):
    """A band that is numerically not positive definite (φ w under rounding next to R*'s null
    space) falls back to SuperLU on the bordered matrix: the same Laplace approximation."""
    rng = np.random.default_rng(3)
    births = rng.integers(200, 3000, 7).astype(float)
    y = rng.poisson(births * 0.008).astype(float)
    graph = bym2.decompose(7, PATH3 + [(2, 3), (3, 0), (4, 5)])
    banded = bym2.laplace_at(np.array([3.0, -1.0]), y, births, graph)

    def not_positive_definite(self, *args):
        raise np.linalg.LinAlgError("the band is not positive definite (LAPACK info 3)")

    monkeypatch.setattr(bym2.BandedFactor, "__init__", not_positive_definite)
    fallback = bym2.laplace_at(np.array([3.0, -1.0]), y, births, graph)
    assert isinstance(fallback.variance_parts[0], bym2.BorderedFactor)
    assert fallback.mean == pytest.approx(banded.mean, abs=1e-9)
    assert fallback.var == pytest.approx(banded.var, rel=1e-9)
    assert fallback.log_posterior == pytest.approx(banded.log_posterior, abs=1e-9)


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
