"""The inequality statistics (docs/methods/inequity.md) against hand computations and second
methods: ridits and quintiles, D, R, PAR, PAF and avoidable deaths worked out by hand on a
small fixture; SII/RII against statsmodels' formula API and a hand-written IRLS; CIX against
its closed form and a hand weighted least squares; the benchmark choice under both var
settings; communes without a value or without births counted, never dropped silently; the
count model of the gradient's change against the dense Newton-Raphson it replaced and
statsmodels' GLM."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf

from infant_mortality.statistics.inequality import (
    benchmark_pairs,
    classify_gap_change,
    concentration_index,
    gap_measures,
    gap_trends,
    inequality_measures,
    parse_benchmark_vars,
    poisson_gradient,
    quintile_of_ridit,
    quintile_rates,
    rank_communes,
    sii_rii,
)

Z = 1.959963984540054

# Six ranked communes with 1000 births in all, one commune without a stratifier value and one
# without births. Ordered most deprived first (value descending; 13102 and 13103 tie at 25 and
# are ordered by code), the ridits are x = (births before + own / 2) / 1000:
#   13101 v=30 n=100 d=2  x = 50/1000  = 0.050  q = 1 + floor(0.25)  = 1
#   13108 v=28 n=80  d=1  x = 140/1000 = 0.140  q = 1 + floor(0.70)  = 1
#   13102 v=25 n=220 d=4  x = 290/1000 = 0.290  q = 1 + floor(1.45)  = 2
#   13103 v=25 n=200 d=1  x = 500/1000 = 0.500  q = 1 + floor(2.50)  = 3
#   13104 v=10 n=150 d=1  x = 675/1000 = 0.675  q = 1 + floor(3.375) = 4
#   13105 v=5  n=250 d=1  x = 875/1000 = 0.875  q = 1 + floor(4.375) = 5
FIXTURE = [
    # commune_code, value, live_births, deaths
    ("13103", 25.0, 200, 1),
    ("13101", 30.0, 100, 2),
    ("13105", 5.0, 250, 1),
    ("13102", 25.0, 220, 4),
    ("13104", 10.0, 150, 1),
    ("13108", 28.0, 80, 1),
    ("13106", None, 80, 3),   # no value for the stratifier
    ("13107", 12.0, 0, 0),    # no live births in the period
]
EXPECTED_RIDIT = {"13101": 0.05, "13108": 0.14, "13102": 0.29, "13103": 0.5, "13104": 0.675, "13105": 0.875}
EXPECTED_QUINTILE = {"13101": 1, "13108": 1, "13102": 2, "13103": 3, "13104": 4, "13105": 5}


def fixture_frame(rows=FIXTURE, **keys) -> pd.DataFrame:
    base = {"area_level": "region", "area_code": "13", "indicator": "imr", "multiplier": 1000,
            "period_start": 2010, "period_end": 2019, "stratifier": "income_poverty_2013"} | keys
    return pd.DataFrame([{"higher_is_more_deprived": True, **base, "commune_code": c, "value": v,
                          "live_births": n, "deaths": d} for c, v, n, d in rows])


@pytest.fixture(scope="module")
def ranked():
    return rank_communes(fixture_frame())


def test_ridits_quintiles_and_order_by_hand(ranked):
    r = ranked.set_index("commune_code")
    inside = r[r["exclusion_reason"].isna()]
    assert inside["ridit"].to_dict() == pytest.approx(EXPECTED_RIDIT, abs=1e-12)
    assert inside["quintile"].astype(int).to_dict() == EXPECTED_QUINTILE
    # Most deprived first; the tie at 25 goes to the lower code.
    assert inside.sort_values("deprivation_rank").index.tolist() == [
        "13101", "13108", "13102", "13103", "13104", "13105"]
    assert r.loc["13102", "births_before"] == 180


def test_a_stratifier_where_lower_is_worse_ranks_the_lowest_value_first(ranked):
    """The seed's direction: with higher_is_more_deprived false the same values rank in reverse
    (ties still by commune code), so the most deprived commune is the lowest value."""
    reverse = rank_communes(fixture_frame(higher_is_more_deprived=False)).set_index("commune_code")
    forward = ranked.set_index("commune_code")
    inside = forward[forward["exclusion_reason"].isna()]
    by_value = inside.sort_values(["value", "deprivation_rank"], ascending=[True, True])
    assert reverse.loc[by_value.index[0], "deprivation_rank"] == 1
    assert reverse.loc[inside["deprivation_rank"].idxmin(), "deprivation_rank"] == len(inside)


def test_communes_without_value_or_births_are_kept_and_flagged(ranked):
    r = ranked.set_index("commune_code")
    assert r.loc["13106", "exclusion_reason"] == "no_value"
    assert r.loc["13107", "exclusion_reason"] == "no_live_births"
    assert pd.isna(r.loc["13106", "ridit"]) and pd.isna(r.loc["13107", "quintile"])
    assert len(ranked) == len(FIXTURE)


def test_quintile_of_ridit_edges():
    assert quintile_of_ridit([0.0, 0.1999999, 0.2, 0.5, 0.8, 0.9999, 1.0]).tolist() == [1, 1, 2, 3, 5, 5, 5]
    with pytest.raises(ValueError):
        quintile_of_ridit(1.2)


def test_negative_count_is_an_error_naming_the_commune():
    rows = list(FIXTURE)
    rows[0] = ("13103", 25.0, 200, -1)
    with pytest.raises(ValueError, match="commune 13103"):
        rank_communes(fixture_frame(rows))


def test_quintile_rates_by_hand(ranked):
    q = quintile_rates(ranked).set_index("quintile")
    assert q["n_communes"].tolist() == [2, 1, 1, 1, 1]
    assert q["deaths"].tolist() == [3, 4, 1, 1, 1]
    assert q["live_births"].tolist() == [180, 220, 200, 150, 250]
    assert q.loc[1, "rate_per_1000"] == pytest.approx(1000 * 3 / 180)
    # Garwood limits of 3 deaths (docs/methods/core.md, "Interval for one rate" test vector: 0.618672, 8.767273).
    assert q.loc[1, "ci95_lower"] == pytest.approx(1000 * 0.618672 / 180, rel=1e-6)
    assert q.loc[1, "ci95_upper"] == pytest.approx(1000 * 8.767273 / 180, rel=1e-6)
    assert (q.loc[1, "value_min"], q.loc[1, "value_max"]) == (28.0, 30.0)


def test_gap_measures_by_hand():
    # q1: 3 deaths / 180 births (16.667 per 1000); q5: 1 / 250 (4); area: 10 / 1000 (10).
    m = gap_measures(3, 180, 1, 250, 10, 1000, 1000)
    se_d = 1000 * math.sqrt(3 / 180**2 + 1 / 250**2)
    assert m["D"].estimate == pytest.approx(50 / 3 - 4)
    assert (m["D"].lower, m["D"].upper) == pytest.approx((50 / 3 - 4 - Z * se_d, 50 / 3 - 4 + Z * se_d))
    assert m["R"].estimate == pytest.approx(25 / 6)
    se_log = math.sqrt(1 / 3 + 1 / 1)
    assert m["R"].lower == pytest.approx(25 / 6 * math.exp(-Z * se_log))
    # PAR = 10 - 4 = 6 per 1000; variance 1000^2 (9 / 1000^2 + 1 (1/250 - 1/1000)^2) = 9 + 9.
    assert m["PAR"].estimate == pytest.approx(6.0)
    assert (m["PAR"].lower, m["PAR"].upper) == pytest.approx((6 - Z * math.sqrt(18), 6 + Z * math.sqrt(18)))
    # PAF = 100 * 6 / 10; the ratio 4 / 10 has log-scale variance 1/1 - 1/10.
    assert m["PAF"].estimate == pytest.approx(60.0)
    assert m["PAF"].lower == pytest.approx(100 * (1 - 0.4 * math.exp(Z * math.sqrt(0.9))))
    assert m["PAF"].upper == pytest.approx(100 * (1 - 0.4 * math.exp(-Z * math.sqrt(0.9))))
    # 6 per 1000 x 1000 births = 6 deaths = 10 observed - 4 expected at q5's rate.
    assert m["avoidable_deaths"].estimate == pytest.approx(6.0)
    assert m["avoidable_deaths"].upper == pytest.approx(6 + Z * math.sqrt(18))
    # Per 100,000 live births: rates and their intervals 100 times, ratios and deaths unchanged.
    wide = gap_measures(3, 180, 1, 250, 10, 1000, 100000)
    assert wide["D"].upper == pytest.approx(100 * m["D"].upper)
    assert wide["R"].lower == pytest.approx(m["R"].lower)
    assert wide["avoidable_deaths"].upper == pytest.approx(m["avoidable_deaths"].upper)


def test_gap_measures_empty_quintile_and_zero_deaths():
    m = gap_measures(0, 0, 5, 500, 20, 1000, 1000)
    assert all(math.isnan(e.estimate) for e in m.values())
    assert "quintile 1 has no commune" in m["D"].note
    m = gap_measures(3, 180, 0, 250, 10, 1000, 1000)
    assert math.isnan(m["R"].estimate) and m["PAF"].estimate == 100.0 and math.isnan(m["PAF"].lower)


def test_measures_table_uses_the_hand_quintiles_and_counts_left_out_communes(ranked):
    table = inequality_measures(ranked).set_index("measure")
    assert table.loc["D", "estimate"] == pytest.approx(50 / 3 - 4)
    assert table.loc["PAF", "estimate"] == pytest.approx(60.0)
    assert table.loc["avoidable_deaths", "estimate"] == pytest.approx(6.0)
    assert set(table["n_communes"]) == {6}
    assert set(table["n_communes_without_value"]) == {1}
    assert set(table["n_communes_without_births"]) == {1}
    assert set(table["deaths"]) == {10} and set(table["live_births"]) == {1000}


def with_unpublished(frame: pd.DataFrame, counts: dict) -> pd.DataFrame:
    """The fixture with signed counts of commune-years without a rate: {code: (deaths, births)}."""
    unpublished = frame["commune_code"].map(counts)
    return frame.assign(unpublished_deaths=[u[0] if isinstance(u, tuple) else 0 for u in unpublished],
                        unpublished_live_births=[u[1] if isinstance(u, tuple) else 0 for u in unpublished])


def test_unpublished_counts_enter_the_quintiles_and_area_but_not_the_gradient(ranked):
    # 13105 (quintile 5) had a year without a rate: -1 death in 50 births (Providencia 2018's
    # case). 13107 (no births) had a year with 2 deaths and 0 births (Rio Verde 2016's case).
    communes = with_unpublished(fixture_frame(), {"13105": (-1, 50), "13107": (2, 0)})
    out = rank_communes(communes).set_index("commune_code")
    # 1050 ranked births: 13105's ridit is (750 + 300 / 2) / 1050; 13107 (v=12, between
    # 13103 and 13104) is ranked with zero width at 600 / 1050, in quintile 3 with 13103.
    assert out.loc["13105", "ridit"] == pytest.approx(900 / 1050)
    assert out.loc["13107", "ridit"] == pytest.approx(600 / 1050)
    assert pd.isna(out.loc["13107", "exclusion_reason"])
    quintiles = quintile_rates(out.reset_index()).set_index("quintile")
    # Every ranked commune's counts, published + unpublished: 10 - 1 + 2 deaths, 1050 births.
    assert quintiles["deaths"].sum() == 11 and quintiles["live_births"].sum() == 1050
    assert quintiles.loc[5, "deaths"] == 1 - 1 and quintiles.loc[5, "live_births"] == 300
    assert quintiles.loc[3, "deaths"] == 1 + 2 and quintiles.loc[3, "live_births"] == 200
    table = inequality_measures(out.reset_index()).set_index("measure")
    assert set(table["deaths"]) == {11} and set(table["live_births"]) == {1050}
    # The gradient fits the published counts only (13107 has no published births).
    fitted = table.loc["gradient_b", "estimate"]
    published = out[out["exclusion_reason"].isna() & (out["live_births"] > 0)]
    alone = poisson_gradient(published["deaths"].to_numpy(float), published["live_births"].to_numpy(float),
                             published["ridit"].to_numpy(float))
    assert fitted == pytest.approx(alone.b)


def hand_irls(d, n, x, iterations=50):
    """Newton-Raphson / IRLS for log E[d] = log n + a + b x, written out."""
    X = np.column_stack([np.ones_like(x), x])
    beta = np.array([math.log(d.sum() / n.sum()), 0.0])
    for _ in range(iterations):
        mu = n * np.exp(X @ beta)
        beta = beta + np.linalg.solve(X.T @ (mu[:, None] * X), X.T @ (d - mu))
    mu = n * np.exp(X @ beta)
    cov = np.linalg.inv(X.T @ (mu[:, None] * X))
    return beta, cov, float(np.sum((d - mu) ** 2 / mu))


def gradient_data(seed=7, k=30, overdispersed=True):
    rng = np.random.default_rng(seed)
    n = rng.integers(500, 5000, size=k).astype(float)
    order = np.argsort(rng.random(k))
    n = n[order]
    x = (np.cumsum(n) - n / 2) / n.sum()
    lam = n * 0.008 * np.exp(-0.6 * x)
    if overdispersed:
        lam = lam * rng.gamma(4.0, 1 / 4.0, size=k)
    return rng.poisson(lam).astype(float), n, x


@pytest.mark.parametrize("overdispersed", [True, False])
def test_sii_rii_against_the_formula_api_and_a_hand_irls(overdispersed):
    d, n, x = gradient_data(overdispersed=overdispersed)
    fit = poisson_gradient(d, n, x)
    beta, cov, pearson = hand_irls(d, n, x)
    assert (fit.a, fit.b) == pytest.approx(tuple(beta), rel=1e-8)
    frame = pd.DataFrame({"d": d, "x": x, "logn": np.log(n)})
    formula = smf.glm("d ~ x", frame, offset=frame["logn"],
                      family=sm.families.Poisson()).fit()
    assert fit.b == pytest.approx(formula.params["x"], rel=1e-8)
    phi = pearson / (len(d) - 2)
    assert fit.dispersion == pytest.approx(phi, rel=1e-8)
    # Quasi-Poisson: the model covariance scaled by phi, never by less than 1.
    assert fit.cov == pytest.approx(cov * max(1.0, phi), rel=1e-6)
    assert (phi > 1) == overdispersed
    m = sii_rii(fit, 1000)
    a, b = beta
    assert m["RII"].estimate == pytest.approx(math.exp(-b), rel=1e-8)
    se_b = math.sqrt(cov[1, 1] * max(1.0, phi))
    assert m["RII"].lower == pytest.approx(math.exp(-b - Z * se_b), rel=1e-6)
    assert m["SII"].estimate == pytest.approx(1000 * (math.exp(a) - math.exp(a + b)), rel=1e-8)
    # Delta method for SII, gradient of 1000 (e^a - e^(a+b)) written out.
    g = 1000 * np.array([math.exp(a) - math.exp(a + b), -math.exp(a + b)])
    se_sii = math.sqrt(g @ (cov * max(1.0, phi)) @ g)
    assert m["SII"].upper == pytest.approx(m["SII"].estimate + Z * se_sii, rel=1e-6)
    # Deprived communes die more here: SII > 0, RII > 1.
    assert m["SII"].estimate > 0 and m["RII"].estimate > 1


def test_gradient_not_estimable_cases():
    n = np.array([100.0, 200.0, 300.0, 400.0])
    x = (np.cumsum(n) - n / 2) / n.sum()
    assert not poisson_gradient([0, 0, 0, 0], n, x).estimable
    only_first = poisson_gradient([5, 0, 0, 0], n, x)
    assert not only_first.estimable and "does not exist" in only_first.note
    assert poisson_gradient([0, 5, 0, 0], n, x).estimable
    assert "at least 3" in poisson_gradient([1, 2], n[:2], x[:2]).note
    assert all(math.isnan(e.estimate) for e in sii_rii(only_first, 1000).values())


def test_concentration_index_closed_form_and_regression_se(ranked):
    inside = ranked[ranked["exclusion_reason"].isna()]
    d, n, x = (inside[c].to_numpy(dtype=float) for c in ("deaths", "live_births", "ridit"))
    cix = concentration_index(d, n, x)
    # C = 2 sum(w r x) / mu - 1 = 2 sum(d x) / D - 1 = 2 (0.1 + 0.14 + 1.16 + 0.5 + 0.675 + 0.875) / 10 - 1.
    assert cix.estimate == pytest.approx(-0.31, abs=1e-12)
    # Convenient regression by hand: weighted least squares via the normal equations.
    w = n / n.sum()
    mu = float(w @ (d / n))
    lhs = 2 * float(w @ (x - w @ x) ** 2) * (d / n) / mu
    X = np.column_stack([np.ones_like(x), x])
    xtwx = X.T @ (n[:, None] * X)
    beta = np.linalg.solve(xtwx, X.T @ (n * lhs))
    assert beta[1] == pytest.approx(-0.31, abs=1e-12)
    resid = lhs - X @ beta
    s2 = float(n @ resid**2) / (len(d) - 2)
    se = math.sqrt(s2 * np.linalg.inv(xtwx)[1, 1])
    assert (cix.lower, cix.upper) == pytest.approx((-0.31 - Z * se, -0.31 + Z * se), rel=1e-9)


def test_concentration_index_signs():
    n = np.full(5, 1000.0)
    x = (np.arange(5) + 0.5) / 5
    assert concentration_index([9, 7, 5, 3, 1], n, x).estimate < 0   # deaths among the deprived
    assert concentration_index([1, 3, 5, 7, 9], n, x).estimate > 0
    assert concentration_index([4, 4, 4, 4, 4], n, x).estimate == pytest.approx(0.0, abs=1e-12)


# --------------------------------------------------------------------------------------------
# Benchmark
# --------------------------------------------------------------------------------------------

BENCH_ROWS = [
    # commune, region, deaths, births: rates 2.5, 4, 5, 10, 6, 3 per 1000
    ("13101", "13", 5, 2000),    # lowest rate of region 13 but only 5 deaths
    ("13102", "13", 24, 6000),   # lowest rate among those with >= 20 deaths
    ("13103", "13", 30, 6000),
    ("13104", "13", 50, 5000),
    ("05101", "05", 30, 5000),
    ("05102", "05", 9, 3000),    # region 05: only 05101 has >= 20 deaths
]


def bench_frame():
    return pd.DataFrame([{"commune_code": c, "commune_name": f"C{c}", "region_code": r,
                          "indicator": "imr", "period_start": 2010, "period_end": 2014,
                          "deaths": d, "live_births": n} for c, r, d, n in BENCH_ROWS])


def test_benchmark_lowest_rate_with_minimum_deaths():
    out = benchmark_pairs(bench_frame(), 20, []).set_index("commune_code")
    assert out.loc["13104", "benchmark_communes"] == "13102"
    assert out.loc["05102", "benchmark_communes"] == "05101"
    assert set(out["benchmark_rule"]) == {"lowest_rate_in_region"}
    assert (out.loc["13104", "benchmark_deaths"], out.loc["13104", "benchmark_live_births"]) == (24, 6000)
    # The benchmark itself is nested in its benchmark, flagged (the SQL comparison then uses
    # the covariance); the arithmetic is tested on the mart (test_inequality_warehouse.py).
    assert out.loc["13102", "is_benchmark"] and not out.loc["13104", "is_benchmark"]
    assert out.loc["13102", "note"] == "the commune is (part of) the benchmark"
    # With a lower threshold the 5-death commune becomes the benchmark.
    low = benchmark_pairs(bench_frame(), 5, []).set_index("commune_code")
    assert low.loc["13104", "benchmark_communes"] == "13101"
    # Nobody qualifies: no benchmark, said in the note.
    none = benchmark_pairs(bench_frame(), 100, []).set_index("commune_code")
    assert none["benchmark_communes"].isna().all() and none["benchmark_deaths"].isna().all()
    assert "at least 100 deaths" in none.loc["13101", "note"]


def test_benchmark_listed_communes_pooled_for_every_region():
    out = benchmark_pairs(bench_frame(), 20, ["13101", "13103"]).set_index("commune_code")
    assert set(out["benchmark_rule"]) == {"listed_communes"}
    assert set(out["benchmark_communes"]) == {"13101,13103"}
    # Pooled: 35 deaths / 8000 births, for region 05 too; 13103 is part of the pool.
    assert (out.loc["05101", "benchmark_deaths"], out.loc["05101", "benchmark_live_births"]) == (35, 8000)
    assert out.loc["13103", "is_benchmark"] and out.loc["13101", "is_benchmark"]
    assert not out.loc["13102", "is_benchmark"]
    with pytest.raises(ValueError, match="benchmark_communes.*13999"):
        benchmark_pairs(bench_frame(), 20, ["13999"])


@pytest.mark.parametrize("min_deaths, communes, message", [
    (0, [], "benchmark_min_deaths"),
    ("abc", [], "benchmark_min_deaths"),
    (True, [], "benchmark_min_deaths"),
    (20, "13101", "benchmark_communes"),
    (20, ["131"], "benchmark_communes"),
    (20, ["13101", 13101], "benchmark_communes"),
])
def test_benchmark_vars_are_validated_with_the_var_named(min_deaths, communes, message):
    with pytest.raises(ValueError, match=message):
        parse_benchmark_vars(min_deaths, communes)


def test_benchmark_vars_accepted_forms():
    assert parse_benchmark_vars("20", []) == (20, [])
    assert parse_benchmark_vars(20, [1101, "13132"]) == (20, ["01101", "13132"])
    assert parse_benchmark_vars(5, '["13132"]') == (5, ["13132"])


# --------------------------------------------------------------------------------------------
# Gap trend
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("trend, mid, expected", [
    ("increasing", 0.1, "widened"), ("decreasing", 0.1, "narrowed"),
    ("increasing", -0.1, "narrowed"), ("decreasing", -0.1, "widened"),
    ("stationary", 0.1, "held"), ("not_estimable", math.nan, "not_estimable"),
])
def test_gap_change_rule(trend, mid, expected):
    assert classify_gap_change(trend, mid) == expected


def trend_frame(values, start=2010, stratifier="income_poverty_2013"):
    return pd.DataFrame({"area_level": "region", "area_code": "13", "indicator": "imr",
                         "stratifier": stratifier, "year": range(start, start + len(values)),
                         "rii": values})


NOISE = np.array([0.01, -0.012, 0.008, -0.006, 0.011, -0.009, 0.004, -0.01, 0.007, -0.003])
STEPS = np.arange(10)
GAP_SERIES = {                                                  # log10(RII) by design
    "a_rising_above_one": 0.1 + 0.02 * STEPS + NOISE,            # away from 0: widened
    "b_falling_below_one": -0.1 - 0.02 * STEPS + NOISE,          # away from 0: widened
    "c_falling_above_one": 0.3 - 0.02 * STEPS + NOISE,           # towards 0: narrowed
    "d_rising_below_one": -0.3 + 0.02 * STEPS + NOISE,           # towards 0: narrowed
    "e_flat": 0.1 + NOISE,                                        # no trend: held
}
GAP_PERIODS = pd.DataFrame({"period_start": [2010, 2010], "period_end": [2019, 2013]})


def gap_fixture():
    return pd.concat([trend_frame(10 ** y, stratifier=name) for name, y in GAP_SERIES.items()],
                     ignore_index=True)


def test_gap_trends_classifies_the_gap():
    out = gap_trends(gap_fixture(), GAP_PERIODS).set_index(["stratifier", "period_end"])
    expected = {"a_rising_above_one": ("increasing", "widened"),
                "b_falling_below_one": ("decreasing", "widened"),
                "c_falling_above_one": ("decreasing", "narrowed"),
                "d_rising_below_one": ("increasing", "narrowed"),
                "e_flat": ("stationary", "held")}
    for name, (trend, change) in expected.items():
        row = out.loc[(name, 2019)]
        assert (row["trend"], row["gap_change"]) == (trend, change), name
        # The fitted log10 RII at the middle of the period, from the published line.
        assert row["fitted_log10_rii_mid"] == pytest.approx(
            row["intercept_log10"] + row["slope_log10"] * 2014.5, rel=1e-12)
        # ... on the side of 0 the series lies on (its design value at mid-period).
        assert np.sign(row["fitted_log10_rii_mid"]) == np.sign(GAP_SERIES[name].mean())
        # 2010-2013: 4 years, fewer than min_years = 5: nothing to classify.
        short = out.loc[(name, 2013)]
        assert short["trend"] == "not_estimable" and short["gap_change"] == "not_estimable"
        assert pd.isna(short["fitted_log10_rii_mid"])


def test_gap_trends_fitted_mid_is_the_mean_log_rii_under_ols():
    # OLS passes through (mean year, mean y): with every year of 2010-2019 used, the fitted
    # log10 RII at 2014.5 is the mean of log10(RII), whatever the slope.
    out = gap_trends(gap_fixture(), GAP_PERIODS.iloc[:1], method="ols").set_index("stratifier")
    for name, y in GAP_SERIES.items():
        assert out.loc[name, "fitted_log10_rii_mid"] == pytest.approx(y.mean(), abs=1e-12)
        slope = np.polyfit(np.arange(2010, 2020), y, 1)[0]
        assert out.loc[name, "slope_log10"] == pytest.approx(slope, rel=1e-9)


@pytest.mark.parametrize("settings", [{}, {"method": "ols", "min_years": 3},
                                      {"method": "corc", "ci_critical": "normal", "p_threshold": 0.2,
                                       "ci_level": 0.8}])
def test_gap_trends_is_the_trend_shell_plus_the_gap(settings):
    from infant_mortality.statistics.trends import STAT_DTYPES, fit_series_trends

    rows = gap_fixture()
    rows.loc[(rows["stratifier"] == "a_rising_above_one") & (rows["year"] == 2013), "rii"] = np.nan
    rows["why"] = np.where(rows["rii"].isna(), "2 communes: at least 3 are needed", None)
    rows = rows[~((rows["stratifier"] == "c_falling_above_one") & (rows["year"] == 2016))]
    out = gap_trends(rows, GAP_PERIODS, reason="why", **settings)
    shell = fit_series_trends(rows, ["area_level", "area_code", "indicator", "stratifier"],
                              periods=GAP_PERIODS, rate="rii", deaths=None, live_births=None,
                              reason="why", **settings)
    pd.testing.assert_frame_equal(out[list(shell.columns)], shell)
    assert list(out.columns) == [*shell.columns, "fitted_log10_rii_mid", "gap_change"]
    assert set(STAT_DTYPES) <= set(out.columns)
    # Years without an RII are left out and counted, and the note says why.
    full = out.set_index(["stratifier", "period_end"])
    assert full.loc[("a_rising_above_one", 2019), "n_years_used"] == 9
    assert "2013 (2 communes: at least 3 are needed)" in full.loc[("a_rising_above_one", 2019), "note"]
    assert full.loc[("c_falling_above_one", 2019), "n_years_used"] == 9
    assert "no data for 2016" in full.loc[("c_falling_above_one", 2019), "note"]
    expected = [classify_gap_change(t, m) for t, m in
                zip(out["trend"], out["fitted_log10_rii_mid"].to_numpy(dtype=float, na_value=np.nan))]
    assert out["gap_change"].tolist() == expected


def test_gap_trends_rejects_rows_without_an_rii_column():
    with pytest.raises(ValueError, match=r"missing columns \['rii'\]"):
        gap_trends(gap_fixture().drop(columns="rii"), GAP_PERIODS)
    with pytest.raises(ValueError, match="min_years"):
        gap_trends(gap_fixture(), GAP_PERIODS, min_years=2)


@pytest.mark.parametrize("seed", range(12))
def test_gradient_equals_statsmodels_glm_on_groups_of_every_size(seed):
    # Regions have 3 to 52 communes, the country 346: the written-out Newton-Raphson must give
    # statsmodels' GLM estimates, covariance and Pearson dispersion on all of them.
    rng = np.random.default_rng(seed)
    k = int(rng.choice([3, 4, 7, 15, 52, 346]))
    d, n, x = gradient_data(seed=seed, k=k, overdispersed=bool(seed % 2))
    assert (d > 0).sum() > 1   # the MLE exists for every draw used here
    fit = poisson_gradient(d, n, x)
    reference = sm.GLM(d, np.column_stack([np.ones(k), x]), family=sm.families.Poisson(),
                       offset=np.log(n)).fit(tol=1e-12)
    phi = reference.pearson_chi2 / reference.df_resid
    assert (fit.a, fit.b) == pytest.approx(tuple(reference.params), rel=1e-9, abs=1e-12)
    assert fit.dispersion == pytest.approx(phi, rel=1e-8)
    assert fit.cov == pytest.approx(np.asarray(reference.cov_params()) * max(1.0, phi), rel=1e-7)


def test_concentration_index_interval_equals_statsmodels_wls(ranked):
    inside = ranked[ranked["exclusion_reason"].isna()]
    d, n, x = (inside[c].to_numpy(dtype=float) for c in ("deaths", "live_births", "ridit"))
    cix = concentration_index(d, n, x)
    w = n / n.sum()
    mu = float(w @ (d / n))
    lhs = 2 * float(w @ (x - w @ x) ** 2) * (d / n) / mu
    reference = sm.WLS(lhs, np.column_stack([np.ones_like(x), x]), weights=n).fit()
    assert cix.estimate == pytest.approx(reference.params[1], abs=1e-12)
    assert cix.upper - cix.estimate == pytest.approx(Z * reference.bse[1], rel=1e-10)


# --------------------------------------------------------------------------------------------
# The count model of the gradient's change (gradient_change_test)
# --------------------------------------------------------------------------------------------

SINGULAR = "the gradient's change is not identifiable (singular information)"
NOT_CONVERGED = "the gradient's change did not converge"


def dense_gradient_change(year, deaths, births, ridit) -> dict:
    """The expectation: gradient_change_test as first written, Newton-Raphson on the dense
    design (one dummy column per year, x and x (t - t_bar)), kept here verbatim."""
    from scipy import stats

    t = np.asarray(year, dtype=float)
    d, n, x = (np.asarray(v, dtype=float) for v in (deaths, births, ridit))
    keep = (n > 0) & np.isfinite(x) & np.isfinite(d)
    t, d, n, x = t[keep], d[keep], n[keep], x[keep]
    out = dict(log_rii_slope=np.nan, se=np.nan, p_value=np.nan, dispersion=np.nan, n_deaths=float(d.sum()), note=None)
    years = np.unique(t)
    df = len(d) - len(years) - 2
    if len(years) < 2 or df <= 0 or d.sum() == 0:
        out["note"] = "too few years or communes with deaths for the gradient's change"
        return out
    centred = t - t.mean()
    design = np.column_stack([(t[:, None] == years[None, :]).astype(float), x, x * centred])
    beta = np.zeros(design.shape[1])
    with np.errstate(divide="ignore"):
        year_rate = np.array([d[t == y].sum() / n[t == y].sum() for y in years])
    beta[:len(years)] = np.log(np.where(year_rate > 0, year_rate, 1e-12))
    for _ in range(100):
        mu = n * np.exp(design @ beta)
        info = design.T @ (mu[:, None] * design)
        try:
            step = np.linalg.solve(info, design.T @ (d - mu))
        except np.linalg.LinAlgError:
            out["note"] = SINGULAR
            return out
        beta += step
        if np.max(np.abs(step)) < 1e-10:
            break
    else:
        out["note"] = NOT_CONVERGED
        return out
    mu = n * np.exp(design @ beta)
    phi = float(((d - mu) ** 2 / mu).sum() / df)
    variance = float(np.linalg.inv(info)[-1, -1])
    quasi_se = float(np.sqrt(phi * variance))
    tests = [(quasi_se, float(2 * stats.t(df).sf(abs(beta[-1]) / quasi_se)))]
    if phi <= 1:
        tests.append((float(np.sqrt(variance)), float(2 * stats.norm.sf(abs(beta[-1]) / np.sqrt(variance)))))
    se, p_value = max(tests, key=lambda test: test[1])
    out.update(log_rii_slope=-float(beta[-1]), se=se, dispersion=phi, p_value=p_value)
    return out


def change_data(seed, communes, n_years, overdispersed=True, gap_change=0.03):
    """Commune-years of one area: births drifting by commune, the ridit of each year from its
    own births (the communes ranked in one fixed deprivation order), deaths with a year effect,
    a gradient (RII about 2) moving gap_change a year and, if overdispersed, gamma noise."""
    rng = np.random.default_rng(seed)
    years = np.arange(2019 - n_years + 1, 2020)
    base = rng.lognormal(np.log(1500), 1.0, communes)
    order = rng.permutation(communes)                       # most deprived first
    t, n, x = [], [], []
    for year in years:
        births = np.maximum(1, np.round(base * rng.lognormal(0, 0.1, communes)))
        ranked = births[order]
        ridit = np.empty(communes)
        ridit[order] = (np.cumsum(ranked) - ranked / 2) / ranked.sum()
        t.append(np.full(communes, year)), n.append(births), x.append(ridit)
    t, n, x = np.concatenate(t), np.concatenate(n), np.concatenate(x)
    log_rii = np.log(2.0) + np.log1p(gap_change) * (t - t.mean())
    lam = n * 0.008 * np.exp(rng.normal(0, 0.1, n_years))[t - years[0]] * np.exp(-log_rii * (x - 0.5))
    if overdispersed:
        lam = lam * rng.gamma(3.0, 1 / 3.0, len(lam))
    return t, rng.poisson(lam).astype(float), n, x


def assert_same_change_test(result, expected, rel=1e-8):
    assert result["note"] == expected["note"]
    assert result["n_deaths"] == expected["n_deaths"]
    for key in ("log_rii_slope", "se", "p_value", "dispersion"):
        if math.isnan(expected[key]):
            assert math.isnan(result[key]), key
        else:
            assert result[key] == pytest.approx(expected[key], rel=rel, abs=1e-300), key


@pytest.mark.parametrize("seed", range(10))
def test_gradient_change_test_equals_the_dense_newton_raphson(seed):
    # Regions of 3 to 52 communes and the country's 346, windows of 5 to 30 years, with and
    # without extra-Poisson variation (the quasi-Poisson and the floored, Poisson tests).
    from infant_mortality.statistics.inequality import gradient_change_test

    rng = np.random.default_rng(100 + seed)
    communes = int(rng.choice([3, 7, 15, 52])) if seed < 8 else 346
    n_years = int(rng.choice([5, 10, 30]))
    t, d, n, x = change_data(seed, communes, n_years, overdispersed=bool(seed % 2))
    n[3] = 0                                                 # a commune-year without births is left out
    result, expected = gradient_change_test(t, d, n, x), dense_gradient_change(t, d, n, x)
    assert expected["note"] is None
    assert_same_change_test(result, expected)


@pytest.mark.parametrize("seed", range(3))
def test_gradient_change_test_equals_statsmodels_glm(seed):
    # An independent fit of the same model: statsmodels' Poisson GLM with the log births as
    # offset, one dummy per year, x and x (t - t_bar); its model covariance, Pearson dispersion.
    from scipy import stats

    from infant_mortality.statistics.inequality import gradient_change_test

    t, d, n, x = change_data(seed, [15, 52, 346][seed], [5, 10, 30][seed], overdispersed=seed != 1)
    result = gradient_change_test(t, d, n, x)
    years = np.unique(t)
    design = np.column_stack([(t[:, None] == years[None, :]).astype(float), x, x * (t - t.mean())])
    reference = sm.GLM(d, design, family=sm.families.Poisson(), offset=np.log(n)).fit(tol=1e-13)
    df = len(d) - len(years) - 2
    phi = reference.pearson_chi2 / df
    variance = float(np.asarray(reference.cov_params())[-1, -1])
    g = reference.params[-1]
    tests = [(math.sqrt(phi * variance), 2 * stats.t.sf(abs(g) / math.sqrt(phi * variance), df))]
    if phi <= 1:
        tests.append((math.sqrt(variance), 2 * stats.norm.sf(abs(g) / math.sqrt(variance))))
    se, p_value = max(tests, key=lambda test: test[1])
    assert result["note"] is None
    assert result["log_rii_slope"] == pytest.approx(-g, rel=1e-8)
    assert result["dispersion"] == pytest.approx(phi, rel=1e-8)
    assert (result["se"], result["p_value"]) == pytest.approx((se, p_value), rel=1e-7)


def test_a_year_without_deaths_leaves_the_gradient_change_not_estimable():
    # The year's level runs to -infinity (the Newton step of a_t is -1 for ever), so the step
    # never falls under 1e-10: not estimable, did not converge. (On larger windows the dense
    # solve sometimes said singular instead: a level some 50 steps below the others, its LU's
    # rounding blew the step up until a year's expected deaths underflowed to 0. The Schur
    # complement divides by that year's own sum and keeps stepping by -1.)
    from infant_mortality.statistics.inequality import gradient_change_test

    for seed in range(4):
        t, d, n, x = change_data(seed, 12, 6)
        d[t == 2016] = 0
        result, expected = gradient_change_test(t, d, n, x), dense_gradient_change(t, d, n, x)
        assert result["note"] == expected["note"] == NOT_CONVERGED
        assert all(math.isnan(result[key]) for key in ("log_rii_slope", "se", "p_value", "dispersion"))
        assert result["n_deaths"] == expected["n_deaths"] == d.sum()


@pytest.mark.parametrize("case", ["constant_ridit", "ridit_varies_in_one_year"])
def test_a_gradient_change_that_is_not_identifiable_is_singular(case):
    # x constant: x and x (t - t_bar) are combinations of the year dummies. x varying within one
    # year only: there x (t - t_bar) is (t - t_bar) x. The dense information is singular in exact
    # arithmetic (its rank says so); its LU in floating point raised (the note) or, depending on
    # the rounding, went on without converging; the Schur complement onto (b, g) is zero up to
    # rounding: the note, always. (With x varying in one year, draws 32 and 41 leave it a rounding
    # error above 0: without the relative threshold they gave an estimate with a standard error
    # of 1e6.)
    from infant_mortality.statistics.inequality import gradient_change_test

    raised = 0
    for seed in [*range(6), 32, 41]:
        t, d, n, x = change_data(seed, 20, 8)
        if case == "constant_ridit":
            x = np.full_like(x, [0.5, 1 / 3, 0.8125][seed % 3])
        else:
            x = np.where(t == 2015, x, 0.25 + 0.5 * (t % 2))
        years = np.unique(t)
        design = np.column_stack([(t[:, None] == years[None, :]).astype(float), x, x * (t - t.mean())])
        assert np.linalg.matrix_rank(design) < design.shape[1]
        result, expected = gradient_change_test(t, d, n, x), dense_gradient_change(t, d, n, x)
        assert result["note"] == SINGULAR
        assert expected["note"] in (SINGULAR, NOT_CONVERGED)
        raised += expected["note"] == SINGULAR
        for key in ("log_rii_slope", "se", "p_value", "dispersion"):
            assert math.isnan(result[key]) and math.isnan(expected[key]), key
        assert result["n_deaths"] == expected["n_deaths"]
    assert raised >= 3   # where the dense solve raised (most draws), the notes are the same


def test_gradient_change_tests_are_the_per_period_groupby_of_the_test():
    # The driver groups once and masks each period; the expectation is the per-period filter
    # and groupby it replaced, with the dense fit: same rows in the same order, same results.
    from infant_mortality.statistics.inequality import PERIOD_KEYS, TREND_KEYS, gradient_change_tests

    frames = []
    for i, (area, indicator, stratifier) in enumerate(
            [(a, ind, s) for a in ("05", "13") for ind in ("imr", "nmr") for s in ("income", "schooling")]):
        t, d, n, x = change_data(i, [4, 9, 15][i % 3], 12, overdispersed=bool(i % 2))
        if i == 5:
            d[:] = 0                                          # no deaths: the too-few note
        frames.append(pd.DataFrame({"area_level": "region", "area_code": area, "indicator": indicator,
                                    "stratifier": stratifier, "period_start": t, "period_end": t,
                                    "deaths": d.astype(int), "live_births": n.astype(int), "ridit": x}))
    yearly = pd.concat(frames, ignore_index=True)
    pooled = yearly.assign(period_end=yearly["period_start"] + 4)   # multi-year rows: left out
    unranked = yearly.head(30).assign(ridit=np.nan, deaths=99)      # no ridit: left out
    membership = pd.concat([pooled.head(200), yearly, unranked], ignore_index=True)
    membership = membership.sample(frac=1, random_state=3).reset_index(drop=True)  # series interleaved
    periods = pd.DataFrame({"period_start": [2015, 2008, 2010, 2015, 2017],
                            "period_end": [2019, 2019, 2014, 2019, 2017]})

    result = gradient_change_tests(membership, periods)
    used = membership[(membership["period_start"] == membership["period_end"]) & membership["ridit"].notna()]
    rows = []
    for p in periods[PERIOD_KEYS].drop_duplicates().itertuples(index=False):
        inside = used[(used["period_start"] >= p.period_start) & (used["period_start"] <= p.period_end)]
        for keys, g in inside.groupby(TREND_KEYS, sort=False):
            rows.append({**dict(zip(TREND_KEYS, keys)), "period_start": p.period_start, "period_end": p.period_end,
                         **dense_gradient_change(g["period_start"], g["deaths"], g["live_births"], g["ridit"])})
    expected = pd.DataFrame(rows, columns=list(result.columns))
    assert len(result) == 4 * 8 and result["note"].notna().any() and result["note"].isna().any()
    pd.testing.assert_frame_equal(result[[*TREND_KEYS, *PERIOD_KEYS, "n_deaths", "note"]],
                                  expected[[*TREND_KEYS, *PERIOD_KEYS, "n_deaths", "note"]])
    pd.testing.assert_frame_equal(result, expected, check_exact=False, rtol=1e-8, atol=0)
