"""Empirical Bayes smoothing against a hand computation and against PySAL's esda."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from infant_mortality.statistics.smoothing import eb_global, eb_local, prob_exceeds, smooth_commune_rates

# Hand computation (docs/methods/maps.md, "Smoothed rates") on three areas, deaths (1, 6, 3), births
# (100, 200, 300): b = 10/600 = 1/60; r - b = (-1/150, 1/75, -1/150);
# s² = (100/22500 + 200/5625 + 300/22500) / 600 = 1/11250; b / (600/3) = 1/12000;
# a = 1/11250 - 1/12000 = 1/180000. b/n = (1/6000, 1/12000, 1/18000), so
# C = 1/(1 + 30), 1/(1 + 15), 1/(1 + 10) = 1/31, 1/16, 1/11 and
# EB = 1/60 - (1/31)(1/150), 1/60 + (1/16)(1/75), 1/60 - (1/11)(1/150)
#    = 16.451613, 17.5, 16.060606 per 1000.
HAND_D = [1, 6, 3]
HAND_N = [100, 200, 300]


def test_global_eb_matches_the_hand_computation():
    fit = eb_global(HAND_D, HAND_N)
    assert fit.b == pytest.approx(1 / 60, rel=1e-12)
    assert fit.a == pytest.approx(1 / 180000, rel=1e-9)
    assert fit.shrinkage == pytest.approx([1 / 31, 1 / 16, 1 / 11], rel=1e-9)
    assert fit.estimate * 1000 == pytest.approx([16.451613, 17.5, 16.060606], abs=5e-7)


def test_global_eb_with_no_extra_poisson_variation_shrinks_fully():
    # Rates equal: s² = 0 < b/n̄, so a = 0 and every estimate is b.
    fit = eb_global([2, 4, 6], [100, 200, 300])
    assert fit.a == 0
    assert fit.shrinkage == pytest.approx([0, 0, 0])
    assert fit.estimate == pytest.approx([0.02, 0.02, 0.02])


def test_local_eb_matches_the_hand_computation_on_a_chain():
    # Areas 0-1-2-3 in a line; area 3 (deaths 0, births 100) is a neighbour of 2 only.
    # Area 0's set {0, 1} = deaths (1, 6), births (100, 200): b = 7/300,
    # s² = (100 (1/100 - 7/300)² + 200 (6/200 - 7/300)²) / 300 = (100 (4/300)² + 200 (2/300)²) / 300
    #    = (1600 + 800) / 300³ = 2400 / 27e6 = 1/11250; b/(300/2) = 7/45000 > s², so a = 0 and
    # EB_0 = b = 23.333333 per 1000. Area 1's set {0, 1, 2} is the global fixture: 17.5.
    # Area 3's set {2, 3} = deaths (3, 0), births (300, 100): b = 3/400, s² = (300 (1/400)² +
    # 100 (3/400)²) / 400 = 1200 / 400³ = 3/160000; b/(400/2) = 3/80000 > s², so a = 0: 7.5.
    deaths = HAND_D + [0]
    births = HAND_N + [100]
    chain = [[1], [0, 2], [1, 3], [2]]
    estimate = eb_local(deaths, births, chain) * 1000
    assert estimate[0] == pytest.approx(1000 * 7 / 300, rel=1e-12)
    assert estimate[1] == pytest.approx(17.5, rel=1e-12)
    assert estimate[3] == pytest.approx(7.5, rel=1e-12)
    # Listing an area among its own neighbours changes nothing; an island keeps its crude rate.
    assert eb_local(deaths, births, [[0, 1], [1, 0, 2], [1, 3], [3, 2]]) == pytest.approx(estimate / 1000)
    assert eb_local([5, 1], [100, 50], [[], []]) == pytest.approx([0.05, 0.02])


def test_posterior_mean_is_the_eb_estimate_and_tail_matches_poisson_identity():
    fit = eb_global(HAND_D, HAND_N)
    # Area 2: shape = b²/a + d = 50 + 6 = 56, rate = b/a + n = 3000 + 200 = 3200; mean 56/3200 = EB.
    assert 56 / 3200 == pytest.approx(fit.estimate[1], rel=1e-12)
    # P(Gamma(k, 1) > x) = P(Poisson(x) <= k - 1) for integer k: an independent formula.
    expected = stats.poisson.cdf(55, 3200 / 60)
    got = prob_exceeds(HAND_D, HAND_N, fit.a, fit.b, 1 / 60)
    assert got[1] == pytest.approx(expected, rel=1e-10)
    # Area 1: shape 51, rate 3100; area 3: shape 53, rate 3300.
    assert got[0] == pytest.approx(stats.poisson.cdf(50, 3100 / 60), rel=1e-10)
    assert got[2] == pytest.approx(stats.poisson.cdf(52, 3300 / 60), rel=1e-10)
    assert np.isnan(prob_exceeds([2, 4, 6], [100, 200, 300], 0.0, 0.02, 0.02)).all()


@pytest.mark.parametrize("deaths, births, message", [
    ([1, -1], [10, 10], "negative deaths"),
    ([1, 1], [10, 0], "births must be > 0"),
    ([1, np.nan], [10, 10], "finite"),
    ([1], [10, 10], "same"),
])
def test_bad_counts_are_refused_with_the_reason(deaths, births, message):
    with pytest.raises(ValueError, match=message):
        eb_global(deaths, births)


def _random_fixture(seed: int, k: int = 40):
    rng = np.random.default_rng(seed)
    births = rng.integers(80, 6000, size=k).astype(float)
    true_rates = rng.gamma(shape=6.0, scale=0.0012, size=k)  # extra-Poisson variation: a > 0
    deaths = rng.poisson(births * true_rates).astype(float)
    # A ring of k areas, each also joined to the area 5 steps ahead: a connected graph, no islands.
    neighbours = [sorted({(i - 1) % k, (i + 1) % k, (i + 5) % k, (i - 5) % k}) for i in range(k)]
    return deaths, births, neighbours


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_global_and_local_eb_agree_with_pysal_esda(seed):
    esda_smoothing = pytest.importorskip("esda.smoothing")
    libpysal_weights = pytest.importorskip("libpysal.weights")
    deaths, births, neighbours = _random_fixture(seed)

    fit = eb_global(deaths, births)
    assert fit.a > 0  # esda does not floor a at 0; the comparison needs a > 0
    reference = esda_smoothing.Empirical_Bayes(deaths, births).r.ravel()
    np.testing.assert_allclose(fit.estimate, reference, rtol=1e-12)

    w = libpysal_weights.W({i: list(nb) for i, nb in enumerate(neighbours)}, id_order=list(range(len(deaths))))
    reference = esda_smoothing.Spatial_Empirical_Bayes(deaths, births, w).r.ravel()
    np.testing.assert_allclose(eb_local(deaths, births, neighbours), reference, rtol=1e-12)


def _pooled(rows):
    columns = ["commune_code", "region_code", "deaths", "live_births", "region_rate_per_1000"]
    frame = pd.DataFrame(rows, columns=columns)
    frame["commune_name"] = "name " + frame["commune_code"]
    frame["indicator"] = "imr"
    frame["multiplier"] = 1000
    frame["period_start"] = 2010
    frame["period_end"] = 2019
    return frame


def test_mart_rows_global_within_region_local_over_neighbours_islands_and_gaps():
    pooled = _pooled([
        ("01001", "01", 1, 100, 1000 / 60),
        ("01002", "01", 6, 200, 1000 / 60),
        ("01003", "01", 3, 300, 1000 / 60),
        ("01004", "01", None, 0, 1000 / 60),  # no births: no rate, left out of the moments
        ("02001", "02", 2, 100, 20.0),  # region 02: equal rates, a = 0
        ("02002", "02", 4, 200, 20.0),
        ("02003", "02", 6, 300, 20.0),
    ])
    neighbours = pd.DataFrame(
        [("01001", "01002"), ("01002", "01001"), ("01002", "01003"), ("01003", "01002"),
         ("01003", "01004"), ("01004", "01003"),  # 01003's only other neighbour has no rate
         ("02001", "02002"), ("02002", "02001")],  # 02003 is an island
        columns=["commune_code", "neighbour_code"],
    )
    out = smooth_commune_rates(pooled, neighbours).set_index("commune_code")

    assert out.loc[["01001", "01002", "01003"], "eb_global_rate_per_1000"].tolist() == pytest.approx(
        [16.451613, 17.5, 16.060606], abs=5e-7)
    assert out.loc["01002", "shrinkage"] == pytest.approx(1 / 16)
    assert out.loc["01002", "crude_rate_per_1000"] == pytest.approx(30.0)
    assert out.loc["01001", "eb_local_rate_per_1000"] == pytest.approx(1000 * 7 / 300)  # set {01001, 01002}
    assert out.loc["01002", "eb_local_rate_per_1000"] == pytest.approx(17.5)  # set {01001, 01002, 01003}
    assert out.loc["01002", "prob_exceeds_region"] == pytest.approx(stats.poisson.cdf(55, 3200 / 60), rel=1e-10)
    assert pd.isna(out.loc["01002", "note"])

    assert pd.isna(out.loc["01004", "eb_global_rate_per_1000"]) and pd.isna(out.loc["01004", "crude_rate_per_1000"])
    assert "no live births" in out.loc["01004", "note"]

    # 01003: neighbours 01002 (rate) and 01004 (no rate): local set {01002, 01003}.
    d, n = np.array([6.0, 3.0]), np.array([200.0, 300.0])
    assert out.loc["01003", "eb_local_rate_per_1000"] == pytest.approx(1000 * eb_local(d, n, [[1], [0]])[1])

    region_02 = out.loc[["02001", "02002", "02003"]]
    assert region_02["eb_global_rate_per_1000"].tolist() == pytest.approx([20.0, 20.0, 20.0])
    assert region_02["prob_exceeds_region"].isna().all()
    assert region_02["note"].str.contains("a = 0 in region 02").all()
    assert out.loc["02003", "eb_local_rate_per_1000"] == out.loc["02003", "eb_global_rate_per_1000"]
    assert "no neighbours" in out.loc["02003", "note"]


def test_mart_rows_refuse_repeated_or_negative_counts():
    pooled = _pooled([("01001", "01", 1, 100, 10.0), ("01001", "01", 1, 100, 10.0)])
    with pytest.raises(ValueError, match="repeat"):
        smooth_commune_rates(pooled, pd.DataFrame(columns=["commune_code", "neighbour_code"]))
    pooled = _pooled([("01001", "01", -2, 100, 10.0)])
    with pytest.raises(ValueError, match="01001"):
        smooth_commune_rates(pooled, pd.DataFrame(columns=["commune_code", "neighbour_code"]))
