"""Commune polygons, queen contiguity with snapping, and the display GeoJSON (no dbt build)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import shapely

from infant_mortality.geography import communes as geo

SNAP_M = 300  # dbt var neighbour_snap_tolerance_m (dbt_project.yml)


@pytest.fixture(scope="module")
def polygons():
    return geo.load_commune_polygons()


@pytest.fixture(scope="module")
def neighbours(polygons):
    return geo.queen_neighbours(polygons.codes, polygons.geometries, SNAP_M)


def _pairs(frame):
    return set(zip(frame["commune_code"], frame["neighbour_code"]))


def test_polygon_file_has_the_345_communes_of_the_reference_except_antartica(polygons):
    reference = pd.read_csv(Path(__file__).resolve().parents[2] / "seeds" / "communes_chile.csv", dtype=str)
    assert len(polygons.codes) == 345
    assert set(reference["codigo_comuna"]) - set(polygons.codes) == {"12202"}
    assert set(polygons.codes) <= set(reference["codigo_comuna"])
    merged = polygons.attributes.merge(reference, left_on="commune_code", right_on="codigo_comuna")
    # Ñuble (16) and Arica y Parinacota (15) carry their post-2018 codes in both.
    assert (merged["region_code"] == merged["codigo_region"]).all()
    assert (merged["province_code"] == merged["codigo_provincia"]).all()


def test_known_pairs_of_santiago_present_and_absent(neighbours):
    pairs = _pairs(neighbours)
    for a, b in [
        ("13101", "13123"),  # Santiago - Providencia (polygons 0.5 m apart)
        ("13101", "13120"),  # Santiago - Ñuñoa (0.5 m apart)
        ("13114", "13132"),  # Las Condes - Vitacura
        ("13201", "13110"),  # Puente Alto - La Florida
        ("13119", "13102"),  # Maipú - Cerrillos
        ("13101", "13130"),  # Santiago - San Miguel (177 m gap, nothing in it)
    ]:
        assert (a, b) in pairs and (b, a) in pairs, (a, b)
    for a, b in [
        ("13101", "13201"),  # Santiago - Puente Alto: far apart
        ("13101", "13128"),  # Santiago - Renca: 48 m apart but Independencia lies in the gap
        ("13120", "13114"),  # Ñuñoa - Las Condes: 241 m, La Reina and Providencia in between
    ]:
        assert (a, b) not in pairs, (a, b)


def test_neighbours_are_symmetric_and_islands_have_none(neighbours, polygons):
    pairs = _pairs(neighbours)
    assert pairs == {(b, a) for a, b in pairs}
    assert not any(a == b for a, b in pairs)
    isolated = set(polygons.codes) - set(neighbours["commune_code"])
    # Juan Fernández, Isla de Pascua, Puqueldón (Lemuy island), Guaitecas (an archipelago).
    assert isolated == {"05104", "05201", "10206", "11203"}
    assert len(pairs) == 1704
    assert (neighbours["gap_m"] <= SNAP_M).all()


def test_tolerance_sits_between_land_gaps_and_the_narrowest_sea_channel(polygons):
    """The justification of the 300 m tolerance (docs/methods.md section 6), measured again."""
    gaps = geo.polygon_gaps(polygons.codes, polygons.geometries, 1000)
    empty = gaps[(gaps["gap_m"] > 0) & (gaps["blocked_m"] == 0)].sort_values("gap_m")
    below, above = empty[empty["gap_m"] <= SNAP_M], empty[empty["gap_m"] > SNAP_M]
    assert below["gap_m"].max() == pytest.approx(269.8, abs=0.5)  # Codegua - Rancagua
    assert above["gap_m"].min() == pytest.approx(388.8, abs=0.5)  # Dalcahue - Curaco de Vélez (sea)
    # Most neighbours overlap or touch; only 22 of 852 pairs needed the snap.
    assert len(below) == 22 and (gaps["gap_m"] == 0).sum() == 830


def test_snapping_never_jumps_over_a_third_commune():
    # Three unit squares in a row, 10 m apart: A and C are 1010 m apart, with B in between.
    square = lambda x: shapely.box(x, 0, x + 0.009, 0.009)  # noqa: E731 - about 1 km at the equator
    geometries = shapely.transform(
        np.array([square(0.0), square(0.0091), square(0.0182)], dtype=object), lambda xy: xy + [-71.0, 0.0]
    )
    out = geo.queen_neighbours(["A", "B", "C"], geometries, 50)
    assert _pairs(out) == {("A", "B"), ("B", "A"), ("B", "C"), ("C", "B")}
    assert out["gap_m"].tolist() == pytest.approx([11.1, 11.1, 11.1, 11.1], abs=0.2)
    assert _pairs(geo.queen_neighbours(["A", "B", "C"], geometries, 5)) == set()
    with pytest.raises(ValueError, match="snap_tolerance_m"):
        geo.queen_neighbours(["A", "B", "C"], geometries, -1)


def test_bad_polygon_file_is_refused_naming_file_and_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        "CUT_REG": ["13", "13"], "CUT_PROV": ["131", "131"], "CUT_COM": ["13101", "1310X"],
        "REGION": ["RM", "RM"], "PROVINCIA": ["Santiago", "Santiago"], "COMUNA": ["Santiago", "Bad"],
        "geometry": [shapely.to_wkb(shapely.box(0, 0, 1, 1)), shapely.to_wkb(shapely.box(0, 0, 1, 1))],
    })
    path = tmp_path / "dpa.parquet"
    pq.write_table(table, path)
    with pytest.raises(ValueError, match=r"dpa\.parquet: row 2: CUT_COM '1310X'"):
        geo.load_commune_polygons(path)


def test_geojson_for_the_report_is_small_complete_and_keeps_the_dense_core(polygons):
    collection = geo.communes_geojson(polygons=polygons)
    text = json.dumps(collection, separators=(",", ":"), ensure_ascii=False)
    assert len(text.encode()) < 700_000  # measured 0.59 MB for all 345 communes
    assert collection["type"] == "FeatureCollection" and collection["missing"] == []
    assert len(collection["features"]) == 345
    feature = next(f for f in collection["features"] if f["id"] == "13101")
    assert feature["properties"] == {"commune_code": "13101", "region_code": "13", "name": "Santiago"}

    # Santiago's 52 communes: every display polygon valid and within 3% of the shipped area, and
    # Santiago still meets its neighbours on the display polygons.
    shown = {f["id"]: shapely.from_geojson(json.dumps(f["geometry"])) for f in collection["features"]}
    original = dict(zip(polygons.codes, polygons.geometries))
    metropolitan = [code for code in polygons.codes if code.startswith("13")]
    assert len(metropolitan) == 52
    for code in metropolitan:
        assert shapely.is_valid(shown[code]), code
        ratio = shapely.area(shown[code]) / shapely.area(original[code])
        assert ratio == pytest.approx(1, abs=0.03), code
    for other in ("13123", "13120", "13130"):
        assert shapely.distance(shown["13101"], shown[other]) < 0.003  # within ~300 m

    subset = geo.communes_geojson(["13101", "12202", "13101"], names={"13101": "Santiago centro"}, polygons=polygons)
    assert [f["id"] for f in subset["features"]] == ["13101"]
    assert subset["features"][0]["properties"]["name"] == "Santiago centro"
    assert subset["missing"] == ["12202"]
