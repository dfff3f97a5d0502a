"""Local Moran's I clusters (statistics/clusters.py) against PySAL's esda and statsmodels."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from infant_mortality.statistics import clusters


def _lattice(side: int) -> list[list[int]]:
    """Rook neighbours on a side x side grid, plus one island at the end."""
    out = []
    for i in range(side * side):
        r, c = divmod(i, side)
        out.append([j for j, ok in ((i - side, r > 0), (i + side, r < side - 1), (i - 1, c > 0), (i + 1, c < side - 1)) if ok])
    return [*out, []]


def test_standardised_rates_equal_esda_assuncao_rate_even_where_a_is_negative():
    from esda.smoothing import assuncao_rate

    rng = np.random.default_rng(3)
    births = rng.integers(100, 3000, 40)
    deaths = rng.poisson(births * 0.008)
    assert clusters.eb_standardised_rates(deaths, births) == pytest.approx(assuncao_rate(deaths, births), rel=1e-12)
    # By hand: b = 0.008, s² = 1000 (0 + 1e-6 + 1e-6 + 0) / 4000 = 5e-7, a = 5e-7 - 0.008/1000 < 0
    # (not floored at 0), v_i = a + b/n_i = 5e-7.
    flat_deaths = np.array([8, 9, 7, 8])
    flat_births = np.array([1000, 1000, 1000, 1000])
    z = clusters.eb_standardised_rates(flat_deaths, flat_births)
    assert z == pytest.approx(assuncao_rate(flat_deaths, flat_births), rel=1e-12)
    assert z == pytest.approx(np.array([0.0, 0.001, -0.001, 0.0]) / np.sqrt(5e-7))
    # Where a + b/n_i is negative (a large area beside small ones), v_i = b / n_i, as esda.
    deaths, births = np.array([80, 1, 2, 0]), np.array([10000, 100, 100, 100])
    assert clusters.eb_standardised_rates(deaths, births) == pytest.approx(assuncao_rate(deaths, births), rel=1e-12)


def test_benjamini_hochberg_equals_statsmodels():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(5)
    p = np.concatenate([rng.uniform(0, 0.01, 10), rng.uniform(0, 1, 50), [0.001, 0.001, 1.0]])
    assert clusters.benjamini_hochberg(p) == pytest.approx(multipletests(p, method="fdr_bh")[1], rel=1e-12)
    # By hand: p = 0.01, 0.04, 0.03 -> sorted 0.01, 0.03, 0.04 x 3/1, 3/2, 3/3 = 0.03, 0.045, 0.04 -> min from the right.
    assert clusters.benjamini_hochberg([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.04, 0.04])


@pytest.fixture
def esda_numpy_path(monkeypatch):
    """esda's permutations as esda draws them without numba. With numba installed (the project
    compiles a BYM2 kernel with it), esda compiles its conditional randomisation and draws from
    numba's own generator; without, from numpy's global one, which our local Moran follows (it
    publishes what that path gives). esda's compiled functions are replaced here by their Python
    originals (``py_func``): its numpy path, whatever is installed."""
    import esda.crand
    import esda.moran

    for module in (esda.crand, esda.moran):
        for name, value in list(vars(module).items()):
            if hasattr(value, "py_func"):
                monkeypatch.setattr(module, name, value.py_func)
    monkeypatch.setattr(esda.crand, "boolean", bool)  # what esda.crand binds without numba
    monkeypatch.setattr(esda.crand, "prange", range)


def test_local_moran_equals_esda_moran_local_rate_with_the_same_seed(esda_numpy_path):
    import libpysal
    from esda.moran import Moran_Local, Moran_Local_Rate

    rng = np.random.default_rng(11)
    neighbours = _lattice(7)
    n = len(neighbours)
    births = rng.integers(200, 4000, n)
    rate = np.where(np.arange(n) % 7 < 3, 0.012, 0.006)  # a high west, a low east: clusters to find
    deaths = rng.poisson(births * rate)
    # alpha 0.15: on 49 communes with two to four neighbours each, the two-sided q-values start at 0.098.
    result = clusters.spatial_clusters(deaths, births, neighbours, alpha=0.15)
    w = libpysal.weights.W(dict(enumerate(neighbours)), silence_warnings=True)
    with np.errstate(all="ignore"):
        reference = Moran_Local_Rate(deaths, births, w, permutations=999, seed=clusters.SEED)
    tested = np.arange(n) < n - 1
    assert result["local_moran_i"][tested] == pytest.approx(reference.Is[tested], rel=1e-12)
    # The pseudo p-values: identical to esda's Moran_Local on the same standardised rates; against
    # Moran_Local_Rate, whose rates differ in the last bit (Python's sum), a permuted I may tie
    # the observed one on the other side: a count or two of 999.
    with np.errstate(all="ignore"):
        same_values = Moran_Local(result["eb_standardised_rate"], w, permutations=999, seed=clusters.SEED)
    # The published p is two-sided: twice esda's (one-sided in the direction observed), capped at 1.
    assert result["p_value"][tested] == pytest.approx(np.minimum(1, 2 * same_values.p_sim[tested]), abs=2e-7)
    assert result["p_value"][tested] == pytest.approx(np.minimum(1, 2 * reference.p_sim[tested]), abs=5e-3)
    assert clusters.two_sided([0.001, 0.3, 0.5, 0.6]) == pytest.approx([0.002, 0.6, 1.0, 1.0])
    # The island: no local I, no p, its own type.
    assert np.isnan(result["local_moran_i"][-1]) and np.isnan(result["q_value"][-1])
    assert result["cluster_type"][-1] == clusters.NO_NEIGHBOURS
    assert result["q_value"][tested] == pytest.approx(clusters.benjamini_hochberg(result["p_value"][tested]))
    kinds = set(result["cluster_type"])
    assert "low-low" in kinds and kinds <= {*clusters.QUADRANTS.values(), clusters.NOT_SIGNIFICANT, clusters.NO_NEIGHBOURS}
    # Types follow esda's quadrants where q <= alpha.
    significant = result["q_value"] <= 0.15
    quadrant_names = np.array([clusters.QUADRANTS[q] for q in reference.q])
    assert (result["cluster_type"][significant] == quadrant_names[significant]).all()
    assert (result["cluster_type"][tested & ~significant] == clusters.NOT_SIGNIFICANT).all()
    # Reproducible: the same seed, the same p-values.
    assert np.array_equal(clusters.spatial_clusters(deaths, births, neighbours, 0.05)["p_value"], result["p_value"],
                          equal_nan=True)


def _country_graph() -> list[list[int]]:
    """The country's 346 communes and their neighbour pairs, as the seed ships them."""
    pairs = pd.read_csv(Path(__file__).parents[2] / "seeds" / "commune_neighbours.csv", dtype=str)
    codes = sorted(set(pairs["commune_code"]) | set(pairs["neighbour_code"]))
    position = {code: i for i, code in enumerate(codes)}
    around: list[set[int]] = [set() for _ in codes]
    for a, b in zip(pairs["commune_code"], pairs["neighbour_code"]):
        around[position[a]].add(position[b])
        around[position[b]].add(position[a])
    return [sorted(a) for a in around]


@pytest.mark.parametrize("graph", ["lattice", "country"])
def test_local_moran_is_esdas_moran_local_to_the_bit(graph, esda_numpy_path):
    """Our local Moran (no PySAL at build time) against esda's Moran_Local itself, on the same
    values, weights and seed: I, the pseudo p-values and the quadrants equal to the bit, with an
    island, and with ties (integer values, half of them equal) where a draw can equal the
    observed I exactly."""
    import libpysal
    from esda.moran import Moran_Local

    neighbours = _lattice(9) if graph == "lattice" else _country_graph()
    n = len(neighbours)
    island = np.array([not a for a in neighbours])
    w = libpysal.weights.W({i: sorted(a) for i, a in enumerate(neighbours)}, silence_warnings=True)
    rng = np.random.default_rng(46)
    for values in (rng.normal(size=n), rng.integers(0, 3, n).astype(float)):
        for permutations, seed in ((999, clusters.SEED), (99, 7)):
            moran_i, p, quadrant = clusters.local_moran(values, neighbours, permutations, seed)
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                reference = Moran_Local(values, w, transformation="r", permutations=permutations, seed=seed,
                                        keep_simulations=False)
            assert np.array_equal(moran_i[~island], reference.Is[~island])
            # esda keeps p in single precision: (m + 1) / (P + 1) read back exactly.
            esda_p = np.round(np.asarray(reference.p_sim, float) * (permutations + 1)) / (permutations + 1)
            assert np.array_equal(p[~island], esda_p[~island])
            assert np.array_equal(quadrant[~island], reference.q[~island])
            assert np.isnan(moran_i[island]).all() and np.isnan(p[island]).all() and (quadrant[island] == 0).all()


def test_cluster_types_by_hand():
    kinds = clusters.cluster_types([1, 2, 3, 4, 1, 0], [0.01, 0.02, 0.05, 0.04, 0.2, np.nan], alpha=0.05)
    assert kinds.tolist() == ["high-high", "low-high", "low-low", "high-low", "not significant", "no neighbours"]


def test_commune_rows_keep_communes_without_births_with_a_note():
    rng = np.random.default_rng(2)
    neighbours = _lattice(4)
    codes = [f"{i:05d}" for i in range(len(neighbours))]
    births = rng.integers(200, 3000, len(codes))
    births[5] = 0
    pooled = pd.DataFrame({"commune_code": codes, "commune_name": codes, "region_code": "01", "indicator": "imr",
                           "period_start": 2010, "period_end": 2019, "deaths": rng.poisson(births * 0.008),
                           "live_births": births})
    pairs = pd.DataFrame([(codes[i], codes[j]) for i, around in enumerate(neighbours) for j in around],
                         columns=["commune_code", "neighbour_code"])
    out = clusters.commune_clusters(pooled, pairs, alpha=0.05).set_index("commune_code")
    assert out.loc["00005", "note"] == "no rate: no live births in the period" and pd.isna(out.loc["00005", "cluster_type"])
    assert out.loc[codes[-1], "cluster_type"] == clusters.NO_NEIGHBOURS
    assert out["cluster_type"].notna().sum() == len(codes) - 1
    with pytest.raises(ValueError, match="alpha"):
        clusters.commune_clusters(pooled, pairs, alpha=1.5)


def test_commune_rows_do_not_depend_on_the_input_order():
    rng = np.random.default_rng(9)
    neighbours = _lattice(5)
    codes = [f"{i:05d}" for i in range(len(neighbours))]
    births = rng.integers(200, 3000, len(codes))
    pooled = pd.DataFrame({"commune_code": codes, "commune_name": codes, "region_code": "01", "indicator": "imr",
                           "period_start": 2010, "period_end": 2019, "deaths": rng.poisson(births * 0.008),
                           "live_births": births})
    pairs = pd.DataFrame([(codes[i], codes[j]) for i, around in enumerate(neighbours) for j in around],
                         columns=["commune_code", "neighbour_code"])
    forward = clusters.commune_clusters(pooled, pairs, alpha=0.05)
    backward = clusters.commune_clusters(pooled.iloc[::-1], pairs, alpha=0.05)
    pd.testing.assert_frame_equal(forward, backward)


def test_no_q_value_falls_below_its_p_value_by_rounding():
    """p * m / m is not always p in floating point (0.456 * 23 / 23 = 0.45599999999999996): the
    three-region build stopped on the mart's q >= p constraint before the factor was m / k."""
    from infant_mortality.statistics.clusters import benjamini_hochberg

    rng = np.random.default_rng(7)
    for m in range(1, 400):
        p = np.round(rng.uniform(0.001, 1, m), 3)
        q = benjamini_hochberg(p)
        assert (q >= p).all() and (q <= 1).all(), m
    assert benjamini_hochberg(np.array([0.456] * 23 + [0.1]))[0] == 0.456
