"""The calibration harness (`make calibrate`, mart fct_trend_calibration): its pieces against
independent computations, its teeth (it catches a rule that does not hold its size), and the
committed calibration against a fresh run of the harness on the bundled build."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from infant_mortality.statistics.trend_calibration import (
    SCENARIO_BY_NAME,
    best_test_power,
    deaths_band,
    draw_deaths,
    simulate_classes,
    summarise,
    wilson_interval,
)
from infant_mortality.statistics.trends import fit_series_trends, fit_trends
from infant_mortality.tools.calibrate import SEED_FILE, build_settings, main, read_inputs
from conftest import REPO_ROOT, query, seed_column


def test_the_scenarios_draw_the_variation_they_name():
    rng = np.random.default_rng(7)
    mean = np.full(200_000, 30.0)
    poisson = draw_deaths(mean, SCENARIO_BY_NAME["no_trend"], rng)
    over = draw_deaths(mean, SCENARIO_BY_NAME["no_trend_overdispersed"], rng)
    shocks = draw_deaths(mean, SCENARIO_BY_NAME["no_trend_year_shocks"], rng)
    assert poisson.mean() == pytest.approx(30, rel=0.01) and poisson.var() == pytest.approx(30, rel=0.02)
    assert over.mean() == pytest.approx(30, rel=0.01) and over.var() == pytest.approx(60, rel=0.02)
    # Lognormal shocks of sd 0.1 centred on the mean: variance mu + mu^2 (e^0.01 - 1).
    assert shocks.mean() == pytest.approx(30, rel=0.01)
    assert shocks.var() == pytest.approx(30 + 900 * np.expm1(0.01), rel=0.03)


def test_wilson_interval_and_bands_match_their_definitions():
    from statsmodels.stats.proportion import proportion_confint

    for k, n in [(0, 50), (3, 50), (50, 50), (117, 2000)]:
        assert wilson_interval(k, n) == pytest.approx(proportion_confint(k, n, method="wilson"), abs=1e-12)
    assert wilson_interval(0, 50)[0] == 0.0 and wilson_interval(50, 50)[1] == 1.0
    assert list(deaths_band([0, 19.9, 20, 49.99, 50, 299, 300, 999.5, 1000, 5000])) == [
        "<20", "<20", "20-49", "20-49", "50-99", "100-299", "300-999", "300-999", "1000+", "1000+"]
    # A whole number of deaths summed in floating point lands in one band whatever the order.
    tenths = [0.1] * 1000
    assert sum(tenths) != 100 and list(deaths_band([sum(tenths), 100 - 1e-12, 100.0])) == ["100-299"] * 3


def test_best_test_power_is_the_wald_test_with_the_true_information():
    # Ten years of 30 expected deaths falling 8% a year; power by simulation of that very test.
    years = np.arange(10.0)
    mu = 30 * 0.92 ** (years - 4.5)
    power = best_test_power(mu, years, -0.08)
    rng = np.random.default_rng(3)
    info = (mu * (years - (mu * years).sum() / mu.sum()) ** 2).sum()
    z = np.log(0.92) * np.sqrt(info) + rng.standard_normal(200_000)
    assert power == pytest.approx(np.mean(np.abs(z) > stats.norm.ppf(0.975)), abs=0.005)
    assert np.isnan(best_test_power(mu, years, 0.0))


def _bundled_births(bundled_warehouse):
    import duckdb

    with duckdb.connect(str(bundled_warehouse), read_only=True) as con:
        return read_inputs(con, "imr")


def test_the_harness_catches_a_rule_that_does_not_hold_its_size(bundled_warehouse):
    """Prais-Winsten's own test, unconfirmed (the study's rule as it was), on the bundled births
    under no trend: the harness finds it above 5% + 2 MC se; the published rule is not."""
    births, periods, vars_json, _ = _bundled_births(bundled_warehouse)
    settings = build_settings(vars_json, REPO_ROOT)
    scenario = SCENARIO_BY_NAME["no_trend"]

    def raw_prais(rates, periods, **s):
        out = fit_series_trends(rates, ["area_level", "area_code"], periods=periods, method=s["method"],
                                **{k: v for k, v in s.items() if k != "method"})
        return out.assign(method="prais_winsten")

    # The 10-year windows only, with enough expected deaths to be classed: the cells that matter.
    ten = periods[periods.period_end - periods.period_start == 9]
    raw = summarise(simulate_classes(births, ten, settings, scenario, 40, np.random.default_rng(1), fit=raw_prais),
                    scenario, 0.05)
    published = summarise(simulate_classes(births, ten, settings, scenario, 40, np.random.default_rng(1)),
                          scenario, 0.05)
    cell = lambda t, m: t[(t.method == m) & (t.period_years == "10") & (t.deaths_band == "20-49")].iloc[0]  # noqa: E731
    assert not cell(raw, "prais_winsten").holds_size and cell(raw, "prais_winsten").rate > 0.08
    assert cell(published, "prais_winsten").holds_size and cell(published, "poisson").holds_size


@pytest.fixture(scope="module")
def fresh_run(bundled_warehouse, tmp_path_factory):
    out = tmp_path_factory.mktemp("calibration") / "trend_calibration.csv"
    assert main(["--warehouse", str(bundled_warehouse), "--out", str(out), "--null-replicates", "20",
                 "--power-replicates", "10", "--scenarios", "no_trend", "no_trend_overdispersed", "fall_8"]) == 0
    return pd.read_csv(out, keep_default_na=False, na_values=[""])


def test_the_committed_calibration_agrees_with_a_fresh_run_within_monte_carlo_error(fresh_run):
    committed = pd.read_csv(REPO_ROOT / SEED_FILE, keep_default_na=False, na_values=[""])
    keys = ["method", "scenario", "period_years", "deaths_band"]
    both = fresh_run.merge(committed, on=keys, suffixes=("_fresh", "_committed"))
    assert len(both) == len(fresh_run)  # every cell of the fresh run is in the committed table
    assert (both.n_series_fresh == both.n_series_committed).all()  # same births, same series
    compared = both[(both.n_simulated_fresh >= 200)]
    se = np.sqrt((compared.rate_fresh * (1 - compared.rate_fresh) / compared.n_simulated_fresh)
                 + compared.mc_se_committed ** 2)
    far = compared[(compared.rate_fresh - compared.rate_committed).abs() > 4 * se + 1e-3]
    assert far.empty, far[keys + ["rate_fresh", "rate_committed"]]
    assert len(compared) > 60


def test_every_published_rule_holds_its_size_and_the_headline_its_power(bundled_warehouse):
    """The acceptance of the calibration, on the mart the build published from the committed seed."""
    rows = query(bundled_warehouse, "select method, scenario, period_years, deaths_band, rate, mc_se, holds_size "
                                    "from marts.fct_trend_calibration where yearly_change = 0")
    assert {r[1] for r in rows} == {"no_trend", "no_trend_overdispersed", "no_trend_year_shocks"}
    assert {r[0] for r in rows} == set(seed_column("trend_methods.csv", "method"))
    for method, scenario, length, band, rate, se, holds in rows:
        assert holds == (rate <= 0.05 + 2 * se), (method, scenario, length, band)
        assert holds, (method, scenario, length, band, rate, se)
    (headline,), = query(bundled_warehouse, "select trend_method from marts.meta_build")
    power = dict(query(bundled_warehouse, "select deaths_band, rate from marts.fct_trend_calibration "
                                          "where scenario = 'fall_8' and period_years = '10' and method = ?",
                       [headline]))
    assert power["300-999"] >= 0.9 and power["1000+"] >= 0.9


def test_the_gradient_change_test_holds_its_size_and_finds_a_widening_gap():
    """The count model that confirms fct_inequality_trends' classes: under a constant gradient
    (RII 2, the same every year) it rejects at most 5% + 2 MC se of 400 simulated regions, with
    and without extra-Poisson variation; a gap widening 10% a year it finds most of the time."""
    from infant_mortality.statistics.inequality import gradient_change_test

    rng = np.random.default_rng(11)
    communes, years = 30, np.arange(2010, 2020)
    births = rng.lognormal(np.log(1500), 0.8, communes)
    ridit = (np.argsort(np.argsort(-births)) + 0.5) / communes  # any fixed ranking
    t, x = np.repeat(years, communes), np.tile(ridit, len(years))
    n = np.tile(births, len(years))

    def rejection(gap_change: float, dispersion: float, sims: int = 400) -> tuple[float, float]:
        log_rii = np.log(2.0) + np.log1p(gap_change) * (t - t.mean())
        mu = n * 0.007 * np.exp(-log_rii * (x - 0.5))
        hits, slopes = 0, []
        for _ in range(sims):
            lam = mu if dispersion == 1 else rng.gamma(mu / (dispersion - 1), dispersion - 1)
            result = gradient_change_test(t, rng.poisson(lam), n, x)
            hits += result["p_value"] < 0.05
            slopes.append(result["log_rii_slope"])
        return hits / sims, float(np.mean(slopes))

    for dispersion in (1.0, 2.0):
        rate, slope = rejection(0.0, dispersion)
        assert rate <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 400), (dispersion, rate)
        assert abs(slope) < 0.01
    power, slope = rejection(0.10, 1.0, sims=100)
    assert power > 0.8 and slope == pytest.approx(np.log(1.1), abs=0.02)
