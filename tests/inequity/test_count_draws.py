"""The bootstrap's deaths drawn by inverting their negative binomial margin (count_draws): every
draw equals scipy's quantile function at its uniform, the draws follow the gamma-then-Poisson
model they replace, and the bootstrap's limits move only within their Monte Carlo error."""

import numpy as np
import pytest
from scipy import stats

from infant_mortality.statistics.count_draws import poisson_gamma_draws, probabilities
from infant_mortality.statistics.geographic_inequality import true_rate_variance
from infant_mortality.statistics.smoothing import moment_estimates


def _one_commune(mean: float, variance_of_rate: float, uniforms: np.ndarray) -> np.ndarray:
    """Draws for one commune of 1 birth whose true rate has this mean and variance."""
    return poisson_gamma_draws(np.array([1.0]), mean, variance_of_rate, uniforms[None, :])[:, 0]


@pytest.mark.parametrize("mean, shape", [
    (0.3, 50.0), (5.6, 70.0), (120.0, 70.0), (3000.0, 5.0), (0.001, 2.0), (2.0, 0.3), (800.0, 1e9),
    (8000.0, 40.0),  # a big commune at 8 times today's births: no factorial overflows
])
def test_every_draw_is_the_negative_binomial_quantile_of_its_uniform(mean, shape):
    uniforms = np.random.default_rng(7).random(20_000)
    drawn = _one_commune(mean, mean * mean / shape, uniforms)
    expected = stats.nbinom.ppf(uniforms, shape, shape / (shape + mean))
    assert np.array_equal(drawn, expected)


@pytest.mark.parametrize("mean", [0.01, 3.0, 700.0, 5000.0])
def test_without_variance_every_draw_is_the_poisson_quantile(mean):
    uniforms = np.random.default_rng(8).random(20_000)
    assert np.array_equal(_one_commune(mean, 0.0, uniforms), stats.poisson.ppf(uniforms, mean))


def test_edges_no_deaths_expected_and_a_variance_too_small_to_divide_by():
    uniforms = np.random.default_rng(9).random(1000)
    assert (_one_commune(0.0, 0.0, uniforms) == 0).all()
    # rate^2 / variance overflows: the Poisson, the model's limit as the variance goes to 0.
    assert np.array_equal(_one_commune(4.0, 1e-320, uniforms), stats.poisson.ppf(uniforms, 4.0))
    table = probabilities(50.0, 10.0)
    assert table.max() == 1.0 and table[-1] < 1e-18 * 1e3  # the mode's term is 1; the table ends in the tail


def test_draws_follow_the_gamma_then_poisson_model_they_replace():
    # Two samples of 200,000: the inverted margin and numpy's gamma then Poisson, binned into
    # counts with at least 5 expected draws each; a chi-square test of homogeneity does not reject.
    rng = np.random.default_rng(10)
    for rate, variance in [(0.008, 0.008**2 / 70), (0.008, 0.008**2 / 2)]:
        births = np.array([700.0, 15_000.0])
        new = poisson_gamma_draws(births, rate, variance, rng.random((2, 200_000)))
        theta = rng.gamma(rate * rate / variance, variance / rate, size=(200_000, 2))
        old = rng.poisson(births * theta)
        for commune in range(2):
            edges = np.unique(np.quantile(old[:, commune], np.linspace(0, 1, 21)))
            table = np.array([np.histogram(sample[:, commune], np.r_[edges[:-1], np.inf])[0] for sample in (new, old)])
            assert stats.chi2_contingency(table)[1] > 0.001


def _old_interval(births, b, a, replicates, seed):
    """The bootstrap's upper limit of a as numpy drew it before: a gamma, then a Poisson."""
    rng = np.random.default_rng(seed)
    theta = rng.gamma(b * b / a, a / b, size=(replicates, len(births)))
    _, a_star = moment_estimates(rng.poisson(births * theta).astype(float), births)
    return np.quantile(a_star, [0.025, 0.975])


def test_the_limits_move_only_within_their_monte_carlo_error():
    # A region of 40 communes with a true CV of 30%: the mean of each limit over 40 seeds, drawn
    # the new way and the old way, differs by less than 4 standard errors of that difference.
    rng = np.random.default_rng(11)
    births = rng.integers(1000, 20_000, size=40).astype(float)
    deaths = rng.poisson(births * rng.gamma(1 / 0.3**2, 0.008 * 0.3**2, size=40)).astype(float)
    b, a = (float(v) for v in moment_estimates(deaths, births))
    new = np.array([[true_rate_variance(deaths, births, 1000, seed)[f"true_variance_ci95_{side}"]
                     for side in ("lower", "upper")] for seed in range(40)])
    old = np.array([_old_interval(births, b, a, 1000, seed) for seed in range(40)])
    assert (new[:, 0] > 0).all() and (old[:, 0] > 0).all()  # both limits away from 0: both can move
    standard_error = np.sqrt(new.var(axis=0, ddof=1) / 40 + old.var(axis=0, ddof=1) / 40)
    assert (np.abs(new.mean(axis=0) - old.mean(axis=0)) < 4 * standard_error).all()
    # And the spread over seeds (the Monte Carlo error itself) is the same within 30%.
    ratio = new.std(axis=0, ddof=1) / old.std(axis=0, ddof=1)
    assert ((0.7 < ratio) & (ratio < 1.3)).all()
