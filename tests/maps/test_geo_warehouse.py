"""The maps marts in the bundled build: neighbours and smoothed rates, against the formulas."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from conftest import aggregate_indicators, query


def test_dim_commune_neighbours_known_pairs_and_symmetry(bundled_warehouse):
    pairs = set(query(bundled_warehouse, "select commune_code, neighbour_code from marts.dim_commune_neighbours"))
    assert len(pairs) == 1704
    assert pairs == {(b, a) for a, b in pairs}
    for a, b in [("13101", "13123"), ("13101", "13120"), ("13114", "13132"), ("13201", "13110"), ("13119", "13102")]:
        assert (a, b) in pairs
    assert ("13101", "13201") not in pairs
    with_neighbours = {a for a, _ in pairs}
    assert {"05104", "05201", "12202"}.isdisjoint(with_neighbours)  # islands, and Antártica (no polygon)


def test_every_commune_seat_lies_inside_its_polygon(bundled_warehouse):
    """dim_commune's latitude/longitude are label points inside the commune's polygon (the
    coverage drawn by the report and written to the GeoPackage); Antártica has none."""
    import shapely

    from infant_mortality.geography.communes import load_commune_polygons
    from infant_mortality.geography.coverage import load_coverage

    seats = {code: (lon, lat) for code, lat, lon in query(bundled_warehouse,
             "select commune_code, latitude, longitude from marts.dim_commune")}
    assert len(seats) == 346 and seats.pop("12202") == (None, None)
    coverage = load_coverage(load_commune_polygons())
    points = shapely.points([seats[code] for code in coverage.codes])
    assert [code for code, inside in zip(coverage.codes, shapely.contains(coverage.geometries, points)) if not inside] == []


def test_polygon_file_disagreements_are_audited(bundled_warehouse):
    rows = query(bundled_warehouse, """
        select commune_code, check_name from marts.audit_data_quality
        where source = 'commune_boundaries' order by commune_code""")
    assert rows == [
        ("04105", "polygon_name_differs"),  # Paihuano / Paiguano
        ("06204", "polygon_name_differs"),  # Marchigüe / Marchihue
        ("11101", "polygon_name_differs"),  # Coyhaique / Coihaique
        ("11201", "polygon_name_differs"),  # Aysén / Aisén
        ("12202", "commune_without_polygon"),  # Antártica
    ]


def test_smoothed_rates_follow_the_formulas_on_the_pooled_counts(bundled_warehouse):
    """An independent vectorised transcription of docs/methods/maps.md, "Smoothed rates" on fct_commune_vs_region.
    Global EB is fitted within each region: the Metropolitan Region's 52 communes here."""
    rows = query(bundled_warehouse, """
        select compared.commune_code, compared.deaths, compared.live_births, compared.region_rate_per_1000,
            smoothed.crude_rate_per_1000, smoothed.eb_global_rate_per_1000, smoothed.eb_local_rate_per_1000,
            smoothed.shrinkage, smoothed.prob_exceeds_region
        from marts.fct_commune_vs_region as compared
        join marts.fct_smoothed_rates as smoothed using (commune_code, indicator, period_start, period_end)
        where compared.indicator = 'imr' and compared.period_start = 2010 and compared.period_end = 2019
            and compared.region_code = '13'
        order by compared.commune_code""")
    codes = [r[0] for r in rows]
    d, n, region_rate = (np.array([r[i] for r in rows], dtype=float) for i in (1, 2, 3))
    crude, eb_global, eb_local, shrinkage, prob = (np.array([r[i] for r in rows], dtype=float) for i in range(4, 9))
    assert len(codes) == 52

    b = d.sum() / n.sum()
    a = max(0.0, np.sum(n * (d / n - b) ** 2) / n.sum() - b / n.mean())
    assert a > 0
    c = a / (a + b / n)
    np.testing.assert_allclose(crude, 1000 * d / n, rtol=1e-12)
    np.testing.assert_allclose(shrinkage, c, rtol=1e-10)
    np.testing.assert_allclose(eb_global, 1000 * (b + c * (d / n - b)), rtol=1e-10)
    # Posterior tail as a regularized incomplete gamma function (not scipy.stats.gamma.sf).
    np.testing.assert_allclose(prob, special.gammaincc(b * b / a + d, (b / a + n) * region_rate / 1000), rtol=1e-8)

    # Local estimate of Santiago (13101): moments over itself and its neighbours.
    around = {row[0] for row in query(bundled_warehouse,
        "select neighbour_code from marts.dim_commune_neighbours where commune_code = '13101'")}
    members = np.array([code == "13101" or code in around for code in codes])
    i = codes.index("13101")
    bl = d[members].sum() / n[members].sum()
    al = max(0.0, np.sum(n[members] * (d[members] / n[members] - bl) ** 2) / n[members].sum() - bl / n[members].mean())
    expected = bl + al / (al + bl / n[i]) * (d[i] / n[i] - bl)
    assert eb_local[i] == pytest.approx(1000 * expected, rel=1e-10)
    assert members.sum() == 10  # Santiago and 9 neighbours


def test_smoothed_rates_have_exactly_the_rows_and_counts_of_the_comparison(bundled_warehouse):
    # A pytest check rather than a dbt singular test: a singular test on both marts would be
    # selected (eager indirect selection) by `dbt build --select +fct_commune_vs_region` too.
    mismatches = query(bundled_warehouse, """
        select coalesce(smoothed.commune_code, compared.commune_code), smoothed.deaths, compared.deaths
        from marts.fct_smoothed_rates as smoothed
        full outer join marts.fct_commune_vs_region as compared
            using (commune_code, indicator, period_start, period_end)
        where smoothed.commune_code is null or compared.commune_code is null
            or smoothed.deaths is distinct from compared.deaths
            or smoothed.live_births is distinct from compared.live_births
            or smoothed.region_code is distinct from compared.region_code
            or abs(smoothed.crude_rate_per_1000 - compared.rate_per_1000) > 1e-9""")
    assert mismatches == []
    # Every commune of the country in each of the three analysis periods of each indicator of the
    # build; 52 x 3 in the RM.
    indicators = sorted(aggregate_indicators())
    assert query(bundled_warehouse, "select indicator, count(*) from marts.fct_smoothed_rates "
                                    "group by 1 order by 1") == [(indicator, 346 * 3) for indicator in indicators]
    assert query(bundled_warehouse, "select indicator, count(*) from marts.fct_smoothed_rates where region_code = '13' "
                                    "group by 1 order by 1") == [(indicator, 52 * 3) for indicator in indicators]
