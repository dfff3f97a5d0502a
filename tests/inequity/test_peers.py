"""Peer groups against a brute-force nearest-neighbour search, and the peer comparison against
scipy's exact binomial interval."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from conftest import query
from infant_mortality.statistics.peers import nearest_peers

COVARIATES = ["income_poverty_2022", "multidimensional_poverty_2022", "log10_population"]


def peers_by_hand(codes, values, k):
    """For each commune, the k others nearest in z-score space, by a plain double loop."""
    values = np.asarray(values, dtype=float)
    means = [sum(col) / len(col) for col in values.T]
    sds = [math.sqrt(sum((x - m) ** 2 for x in col) / (len(col) - 1)) for col, m in zip(values.T, means)]
    z = [[(x - m) / s for x, m, s in zip(row, means, sds)] for row in values]
    out = {}
    for i, code in enumerate(codes):
        others = [(math.dist(z[i], z[j]), codes[j]) for j in range(len(codes)) if j != i]
        out[code] = sorted(others)[:k]
    return out


def test_nearest_peers_match_a_brute_force_search():
    rng = np.random.default_rng(31)
    codes = [f"{13100 + i:05d}" for i in range(40)]
    values = np.column_stack([rng.uniform(2, 30, 40), rng.uniform(5, 40, 40), rng.uniform(3, 6, 40)])
    got = nearest_peers(pd.DataFrame(values, index=codes), 5)
    expected = peers_by_hand(codes, values, 5)
    for code, group in got.groupby("commune_code"):
        assert group["peer_rank"].tolist() == [1, 2, 3, 4, 5]
        assert group["peer_code"].tolist() == [c for _, c in expected[code]]
        np.testing.assert_allclose(group["distance"], [d for d, _ in expected[code]], rtol=1e-12)


def test_ties_are_broken_by_commune_code_and_scale_does_not_matter():
    # B and C are equally far from A; B's code sorts first.
    frame = pd.DataFrame({"x": [0.0, 1.0, -1.0, 5.0]}, index=["00003", "00001", "00002", "00004"])
    got = nearest_peers(frame, 2)
    assert got[got["commune_code"] == "00003"]["peer_code"].tolist() == ["00001", "00002"]
    # A covariate in other units (x 1000) ranks the same: z-scores remove the unit.
    rng = np.random.default_rng(5)
    base = pd.DataFrame(rng.normal(size=(20, 2)), index=[f"{i:05d}" for i in range(20)])
    rescaled = base.copy()
    rescaled[1] = base[1] * 1000
    pd.testing.assert_frame_equal(nearest_peers(base, 3), nearest_peers(rescaled, 3))


@pytest.mark.parametrize("k", [0, 4, True, 2.5])
def test_bad_peer_counts_are_refused(k):
    frame = pd.DataFrame({"x": [0.0, 1.0, 2.0, 3.0]}, index=["a", "b", "c", "d"])
    with pytest.raises(ValueError, match="peers"):
        nearest_peers(frame, k)


def test_missing_covariates_name_the_commune():
    frame = pd.DataFrame({"x": [0.0, 1.0, np.nan, 3.0]}, index=["a", "b", "c", "d"])
    with pytest.raises(ValueError, match="'c'"):
        nearest_peers(frame, 2)


def test_warehouse_covariates_are_the_files_values(bundled_warehouse):
    """Independencia's three covariates straight from the poverty file and the commune seed."""
    raw = dict(query(bundled_warehouse, "select dimension, cast(tasa as double) from "
                     "read_csv('data/raw/covariates/poverty_2022_communes.csv', all_varchar = true) "
                     "where cast(codigo_comuna as integer) = 13108"))
    ((population,),) = query(bundled_warehouse, "select poblacion_estimada from read_csv('seeds/communes_chile.csv', "
                             "all_varchar = true) where codigo_comuna = '13108'")
    ((income, multidimensional, log_population, complete),) = query(
        bundled_warehouse, "select " + ", ".join(COVARIATES) + ", has_all_covariates "
        "from intermediate.int_commune_peer_covariates where commune_code = '13108'")
    assert (income, multidimensional) == (raw["ingresos"], raw["multidimensional"])
    assert log_population == pytest.approx(math.log10(int(population)), rel=1e-12)
    assert complete


def test_warehouse_peers_of_independencia_and_its_rate_ratio(bundled_warehouse):
    rows = query(bundled_warehouse, "select commune_code, " + ", ".join(COVARIATES)
                 + " from intermediate.int_commune_peer_covariates where has_all_covariates order by 1")
    codes = [r[0] for r in rows]
    expected = peers_by_hand(codes, [r[1:] for r in rows], 10)["13108"]
    published = query(bundled_warehouse, "select peer_code, distance from marts.dim_commune_peers "
                      "where commune_code = '13108' order by peer_rank")
    assert [p for p, _ in published] == [c for _, c in expected]
    np.testing.assert_allclose([d for _, d in published], [d for d, _ in expected], rtol=1e-9)
    # Antártica has no 2022 poverty estimate: no peers, nobody's peer.
    assert "12202" not in codes
    assert query(bundled_warehouse, "select count(*) from marts.dim_commune_peers "
                 "where '12202' in (commune_code, peer_code)") == [(0,)]

    # The peers' pooled rate and the exact interval, from the yearly published rates by hand.
    peer_list = ", ".join(f"'{c}'" for _, c in expected)
    ((d_c, n_c),) = query(bundled_warehouse, "select sum(deaths), sum(live_births) from marts.fct_area_year_rates "
                          "where area_code = '13108' and indicator = 'imr' and year between 2010 and 2014 "
                          "and rate_per_1000 is not null")
    ((d_p, n_p),) = query(bundled_warehouse, "select sum(deaths), sum(live_births) from marts.fct_area_year_rates "
                          f"where area_code in ({peer_list}) and area_level = 'commune' and indicator = 'imr' "
                          "and year between 2010 and 2014 and rate_per_1000 is not null")
    ((got_rr, low, high, comparison),) = query(
        bundled_warehouse, "select rate_ratio, rate_ratio_ci95_lower, rate_ratio_ci95_upper, comparison "
        "from marts.fct_commune_vs_peers where commune_code = '13108' and indicator = 'imr' "
        "and period_start = 2010 and period_end = 2014")
    rr = (d_c / n_c) / (d_p / n_p)
    interval = stats.binomtest(int(d_c), int(d_c + d_p)).proportion_ci(0.95, method="exact")

    def to_ratio(p):  # the odds that a death is the commune's, scaled by the births
        return p / (1 - p) * n_p / n_c

    assert got_rr == pytest.approx(rr, rel=1e-12)
    assert low == pytest.approx(to_ratio(interval.low), rel=1e-9)
    assert high == pytest.approx(to_ratio(interval.high), rel=1e-9)
    assert comparison == ("higher" if low > 1 else "lower" if high < 1 else "similar")
