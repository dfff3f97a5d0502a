"""The GeoPackage written from the bundled build, read back with GDAL (pyogrio)."""

from __future__ import annotations

import pyogrio
import pytest
import shapely

from conftest import REPO_ROOT, aggregate_indicators, query
from infant_mortality.tools.gis import SPATIAL_COLUMNS, write_geopackage


@pytest.fixture(scope="module")
def geopackage(bundled_warehouse, tmp_path_factory):
    return write_geopackage(bundled_warehouse, tmp_path_factory.mktemp("gis") / "infant_mortality.gpkg")


def _columns(warehouse, table):
    return [r[0] for r in query(warehouse,
        "select column_name from duckdb_columns() where schema_name = 'marts' and table_name = ? order by column_index",
        [table])]


def test_layers_crs_and_geometry_type(geopackage):
    assert [tuple(layer) for layer in pyogrio.list_layers(geopackage)] == [
        ("communes", "MultiPolygon"), ("commune_indicators", "MultiPolygon")]
    for layer in ("communes", "commune_indicators"):
        assert pyogrio.read_info(geopackage, layer=layer)["crs"] == "EPSG:4326"
    assert not list(geopackage.parent.glob(".*partial*"))  # the temporary file was renamed away


def test_geopackage_version_is_1_2_which_gdal_3_6_reads_without_a_warning(geopackage):
    # GeoPackage stores its version in SQLite's header: application_id 'GPKG', user_version
    # 10200 for 1.2 (GDAL 3.6 warns "partially supported" on 10400).
    import sqlite3

    with sqlite3.connect(geopackage) as con:
        assert con.execute("pragma application_id").fetchone()[0] == int.from_bytes(b"GPKG", "big")
        assert con.execute("pragma user_version").fetchone()[0] == 10200


def test_communes_layer_polygons_are_the_cleaned_coverage(geopackage):
    _, table = pyogrio.read_arrow(geopackage, layer="communes")
    polygons = [shapely.from_wkb(g) for g in table["geom"].to_pylist() if g is not None]
    assert len(polygons) == 345 and shapely.coverage_is_valid(polygons)  # no overlap, shared edges


def test_communes_layer_has_every_commune_and_every_dim_commune_column(geopackage, bundled_warehouse):
    _, table = pyogrio.read_arrow(geopackage, layer="communes")
    columns = _columns(bundled_warehouse, "dim_commune")
    assert table.column_names == [*columns, "geom"]
    assert table.num_rows == query(bundled_warehouse, "select count(*) from marts.dim_commune")[0][0] == 346
    geometry = dict(zip(table["commune_code"].to_pylist(), table["geom"].to_pylist()))
    assert geometry["12202"] is None  # Antártica: no polygon, row kept
    assert sum(g is not None for g in geometry.values()) == 345
    santiago = shapely.from_wkb(geometry["13101"])
    assert santiago.contains(shapely.Point(-70.6506, -33.4378))  # Plaza de Armas
    names = dict(zip(table["commune_code"].to_pylist(), table["commune_name"].to_pylist()))
    assert names["06204"] == query(bundled_warehouse,
        "select commune_name from marts.dim_commune where commune_code = '06204'")[0][0]


def test_indicators_layer_joins_comparison_and_smoothing_per_indicator_and_period(geopackage, bundled_warehouse):
    _, table = pyogrio.read_arrow(geopackage, layer="commune_indicators")
    compared = _columns(bundled_warehouse, "fct_commune_vs_region")
    smoothed = _columns(bundled_warehouse, "fct_smoothed_rates")
    spatial = [c for columns in SPATIAL_COLUMNS.values() for c in columns]
    assert table.column_names == [*compared, *[c for c in smoothed if c not in compared], *spatial, "geom"]
    # Every commune of the country in each of the three analysis periods of each indicator of the build.
    n_indicators = len(aggregate_indicators())
    assert table.num_rows == query(bundled_warehouse, "select count(*) from marts.fct_commune_vs_region")[0][0] \
        == n_indicators * 346 * 3
    assert sorted(set(table["indicator"].to_pylist())) == sorted(aggregate_indicators())
    # Only Antártica (12202, no polygon) lacks a geometry: its rows are kept, as in the communes layer.
    codes, geometries = table["commune_code"].to_pylist(), table["geom"].to_pylist()
    assert sorted(code for code, geom in zip(codes, geometries) if geom is None) == ["12202"] * 3 * n_indicators
    expected = dict(((r[0], r[1], r[2], r[3]), (r[4], r[5])) for r in query(bundled_warehouse, """
        select commune_code, indicator, period_start, period_end, prob_exceeds_region, eb_global_rate_per_1000
        from marts.fct_smoothed_rates"""))
    got = zip(table["commune_code"].to_pylist(), table["indicator"].to_pylist(), table["period_start"].to_pylist(),
              table["period_end"].to_pylist(), table["prob_exceeds_region"].to_pylist(),
              table["eb_global_rate_per_1000"].to_pylist())
    for code, indicator, start, end, prob, eb in got:
        assert (prob, eb) == pytest.approx(expected[(code, indicator, start, end)])
    assert table["rank_in_region"].type.bit_width == 32 and str(table["is_unreliable"].type) == "bool"


def test_indicators_layer_carries_the_bym2_rate_its_exceedance_and_the_cluster_type(geopackage, bundled_warehouse):
    """Issue 46: the BYM2 posterior mean, interval and P(rate > region's) of fct_bym2_rates and the
    cluster type of fct_spatial_clusters, on every feature (islands included)."""
    _, table = pyogrio.read_arrow(geopackage, layer="commune_indicators")
    expected = {(r[0], r[1], r[2], r[3]): r[4:] for r in query(bundled_warehouse, """
        select bym2.commune_code, bym2.indicator, bym2.period_start, bym2.period_end, bym2.bym2_rate_per_1000,
               bym2.bym2_ci95_lower, bym2.bym2_ci95_upper, bym2.bym2_prob_exceeds_region, clusters.cluster_type
        from marts.fct_bym2_rates as bym2
        inner join marts.fct_spatial_clusters as clusters using (commune_code, indicator, period_start, period_end)""")}
    rows = table.select(["commune_code", "indicator", "period_start", "period_end", "bym2_rate_per_1000",
                         "bym2_ci95_lower", "bym2_ci95_upper", "bym2_prob_exceeds_region", "cluster_type"]).to_pylist()
    assert len(rows) == len(expected) == table.num_rows
    for row in rows:
        values = list(row.values())
        assert tuple(values[4:8]) == pytest.approx(expected[tuple(values[:4])][:4])
        assert values[8] == expected[tuple(values[:4])][4]
    by_code = {row["commune_code"]: row for row in rows if row["period_start"] == 2010 and row["period_end"] == 2019}
    assert by_code["05201"]["cluster_type"] == "no neighbours"  # Isla de Pascua
    assert by_code["05201"]["bym2_rate_per_1000"] > 0


def test_missing_warehouse_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no warehouse"):
        write_geopackage(tmp_path / "nope.duckdb", tmp_path / "x.gpkg")


def test_a_missing_geometry_is_null_as_the_readme_says(geopackage):
    """Issue 44: the README said Antártica had an empty geometry; the file has none (SQL NULL,
    what GDAL and QGIS read as a feature without geometry), and the GIS page (docs/using/gis.md, once the README) says so."""
    import sqlite3

    # Antártica's one row in the communes layer; in the indicators layer one per indicator and period.
    with sqlite3.connect(geopackage) as con:
        for layer, rows in (("communes", 1), ("commune_indicators", 3 * len(aggregate_indicators()))):
            assert con.execute(f"select count(*) from {layer} where geom is null").fetchone()[0] == rows
            assert con.execute(f"select count(*) from {layer} where commune_code = '12202' and geom is null"
                               ).fetchone()[0] == rows
    readme = (REPO_ROOT / "docs" / "using" / "gis.md").read_text(encoding="utf-8")
    assert "Antártica with a NULL geometry" in readme and "empty geometry" not in readme
