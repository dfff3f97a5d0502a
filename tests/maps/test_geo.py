"""Commune polygons, queen contiguity with snapping, the coverage, label points and the display
GeoJSON (no dbt build)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import shapely

from infant_mortality.geography import communes as geo
from infant_mortality.geography import coverage as cov
from infant_mortality.geography import display

SNAP_M = geo.NEIGHBOUR_SNAP_TOLERANCE_M


@pytest.fixture(scope="module")
def polygons():
    return geo.load_commune_polygons()


@pytest.fixture(scope="module")
def coverage(polygons):
    return cov.load_coverage(polygons)


@pytest.fixture(scope="module")
def neighbours(polygons):
    return geo.queen_neighbours(polygons.codes, polygons.geometries, SNAP_M)


def test_the_geography_modules_build_on_each_other_in_one_direction():
    """communes <- coverage <- display: a module imports only the ones before it (communes and
    coverage used to import each other)."""
    order = ["communes", "coverage", "display"]
    for i, name in enumerate(order):
        tree = ast.parse(Path(geo.__file__).with_name(f"{name}.py").read_text(encoding="utf-8"))
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "infant_mortality.geography":
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("infant_mortality.geography."):
                imported.add(node.module.rsplit(".", 1)[1])
        assert imported <= set(order[:i]), (name, imported)


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


def test_region_and_province_names_of_the_reference_are_the_official_dpa_names():
    """The polygon file carries IDE Chile's official region and province names (DPA 2023)."""
    import pyarrow.parquet as pq

    official = pq.read_table(geo.dpa_path(), columns=["CUT_REG", "REGION", "CUT_PROV", "PROVINCIA"]).to_pandas()
    reference = pd.read_csv(Path(__file__).resolve().parents[2] / "seeds" / "communes_chile.csv", dtype=str)
    regions = official.drop_duplicates("CUT_REG").merge(
        reference.drop_duplicates("codigo_region"), left_on="CUT_REG", right_on="codigo_region")
    assert len(regions) == 16
    # "Región de Tarapacá", "Región del Maule", "Región Metropolitana de Santiago": the same name after the prefix.
    stripped = regions["nombre_region"].str.replace(r"^Región (del |de )?", "", regex=True)
    assert (stripped == regions["REGION"]).all(), regions.loc[stripped != regions["REGION"], "nombre_region"].tolist()
    assert "Región de Aysén del General Carlos Ibáñez del Campo" in set(reference["nombre_region"])
    provinces = official.drop_duplicates("CUT_PROV").merge(
        reference.drop_duplicates("codigo_provincia"), left_on="CUT_PROV", right_on="codigo_provincia")
    differ = provinces[provinces["PROVINCIA"] != provinces["nombre_provincia"]]
    # Spelling variants also found in the commune names (audited): Coyhaique / Coihaique, Aysén / Aisén.
    assert sorted(zip(differ["nombre_provincia"], differ["PROVINCIA"])) == [("Aysén", "Aisén"), ("Coyhaique", "Coihaique")]


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
    """The justification of the 300 m tolerance (docs/methods/maps.md, "Neighbours"), measured again."""
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


def _holes(geometries) -> list:
    """The slivers of a set of polygons: the holes of their union."""
    union = shapely.union_all(geo.to_metres(np.asarray(geometries)))
    return [shapely.Polygon(ring) for part in shapely.get_parts(union) for ring in part.interiors]


def test_geojson_for_the_report_is_small_complete_and_without_slivers(polygons, coverage):
    collection = display.communes_geojson(polygons=coverage)
    text = json.dumps(collection, separators=(",", ":"), ensure_ascii=False)
    assert len(text.encode()) < 900_000  # measured 0.87 MB for all 345 communes
    assert collection["type"] == "FeatureCollection" and collection["missing"] == []
    assert len(collection["features"]) == 345
    feature = next(f for f in collection["features"] if f["id"] == "13101")
    assert feature["properties"] == {"commune_code": "13101", "region_code": "13", "name": "Santiago"}

    shown = {f["id"]: shapely.from_geojson(json.dumps(f["geometry"])) for f in collection["features"]}
    assert shapely.coverage_is_valid(list(shown.values()))  # rounded, still no overlap
    # Santiago's 52 communes: every display polygon valid and within 2% of its coverage area;
    # Santiago meets its neighbours exactly, and no sliver is left in the country, while the
    # shipped polygons leave 114 in the Metropolitan Region alone.
    original = dict(zip(coverage.codes, coverage.geometries))
    metropolitan = [code for code in polygons.codes if code.startswith("13")]
    assert len(metropolitan) == 52
    for code in metropolitan:
        assert shapely.is_valid(shown[code]), code
        assert shapely.area(shown[code]) / shapely.area(original[code]) == pytest.approx(1, abs=0.02), code
    for other in ("13123", "13120"):  # Providencia, Ñuñoa: 0.5 m apart as shipped
        assert shapely.intersection(shown["13101"], shown[other]).length > 0.001  # a shared edge
    shipped = dict(zip(polygons.codes, polygons.geometries))
    assert len(_holes([shipped[code] for code in metropolitan])) == 114
    assert _holes(list(shown.values())) == []

    subset = display.communes_geojson(["13101", "12202", "13101"], names={"13101": "Santiago centro"}, polygons=coverage)
    assert [f["id"] for f in subset["features"]] == ["13101"]
    assert subset["features"][0]["properties"]["name"] == "Santiago centro"
    assert subset["missing"] == ["12202"]


def test_the_coverage_meets_the_neighbour_rule_but_for_seven_pairs(coverage, neighbours):
    """Why contiguity stays with the snap rule (docs/methods/maps.md, "Neighbours"): the cleaner gives the
    overlap or gap at a junction to one commune, which makes 4 true neighbours lose contact and 3
    pairs meet, 1 of them false."""
    tree = shapely.STRtree(coverage.geometries)
    left, right = tree.query(coverage.geometries, predicate="intersects")
    meeting = {(coverage.codes[a], coverage.codes[b]) for a, b in zip(left, right) if coverage.codes[a] < coverage.codes[b]}
    pairs = {(a, b) for a, b in _pairs(neighbours) if a < b}
    assert sorted(pairs - meeting) == [
        ("02102", "02301"),  # Mejillones - Tocopilla, on the coast
        ("11303", "12401"),  # Tortel - Natales, across the ice field
        ("12101", "12103"),  # Punta Arenas - Río Verde
        ("13122", "13203"),  # Peñalolén - San José de Maipo
    ]
    assert sorted(meeting - pairs) == [
        ("13101", "13128"),  # Santiago - Renca, 72 m of edge at the Mapocho junction
        ("13103", "13128"),  # Cerro Navia - Renca: true neighbours across the Mapocho, 320 m apart as shipped
        ("13110", "13114"),  # La Florida - Las Condes: false, Peñalolén lies between them
    ]


def test_cleaning_gives_each_overlap_to_one_commune_and_fills_narrow_gaps():
    # Two 10 km squares (in metres, then as lon/lat) overlapping by 200 m, and a third 100 m
    # away from the second, the gap closed at both ends by a fourth and a fifth: after cleaning,
    # no overlap, the enclosed gap filled, and the third meets the second along 6 km.
    def box(x0, y0, x1, y1):
        return shapely.box(x0, y0, x1, y1)

    metres = np.array([box(0, 0, 10_000, 10_000), box(9_800, 0, 20_000, 10_000),
                       box(20_100, 2_000, 30_000, 8_000), box(19_000, 0, 31_000, 2_000),
                       box(19_000, 8_000, 31_000, 10_000)], dtype=object)
    attributes = pd.DataFrame({"commune_code": list("ABCDE"), "province_code": "x", "region_code": "x",
                               "commune_name": list("ABCDE")})
    toy = geo.CommunePolygons(attributes=attributes, geometries=cov.from_metres(metres), source="toy")
    cleaned = cov.clean_coverage(toy)
    assert shapely.coverage_is_valid(cleaned.geometries)
    assert not shapely.coverage_is_valid(toy.geometries)
    in_metres = geo.to_metres(cleaned.geometries)
    assert shapely.area(in_metres).sum() == pytest.approx(shapely.area(shapely.union_all(geo.to_metres(toy.geometries))) + 100 * 6_000, rel=1e-6)
    assert shapely.intersection(in_metres[1], in_metres[2]).length == pytest.approx(6_000, rel=1e-6)


def test_label_point_is_the_pole_of_inaccessibility():
    # A 2 km square: the pole is its centre. An L with 1 km arms, whose centroid lies outside it:
    # the pole is on the diagonal of the corner square, at x = y = r where r = √2 (1000 - r)
    # (as far from the two outer walls as from the inner corner): r = 1000 √2 / (1 + √2) = 585.8 m.
    square = cov.from_metres(np.array([shapely.box(0, 0, 2_000, 2_000)], dtype=object))
    centre = geo.to_metres(cov.label_points(square))[0]
    assert (centre.x, centre.y) == pytest.approx((1_000, 1_000), abs=cov.LABEL_PRECISION_M)
    ell_m = shapely.Polygon([(0, 0), (10_000, 0), (10_000, 1_000), (1_000, 1_000), (1_000, 10_000), (0, 10_000)])
    ell = cov.from_metres(np.array([ell_m], dtype=object))
    label = geo.to_metres(cov.label_points(ell))[0]
    assert ell_m.contains(label) and not ell_m.contains(ell_m.centroid)
    r = 1000 * np.sqrt(2) / (1 + np.sqrt(2))
    assert (label.x, label.y) == pytest.approx((r, r), abs=cov.LABEL_PRECISION_M)
    assert ell_m.boundary.distance(label) > ell_m.boundary.distance(ell_m.point_on_surface())


def test_every_label_point_lies_inside_its_commune_in_every_version_of_the_polygons(polygons, coverage):
    """The seats of dim_commune (seed commune_boundaries) inside the shipped polygon, the coverage
    (GeoPackage) and the display shape (report map)."""
    seed = pd.read_csv(Path(__file__).resolve().parents[2] / "seeds" / "commune_boundaries.csv", dtype={"commune_code": str})
    seed = seed.set_index("commune_code").loc[polygons.codes]
    points = shapely.points(seed["label_longitude"], seed["label_latitude"])
    for version in (polygons.geometries, coverage.geometries, cov.display_coverage(coverage.geometries)):
        outside = [code for code, inside in zip(polygons.codes, shapely.contains(version, points)) if not inside]
        assert outside == []
    # The seats the commune list brought: 108 of 345 outside their polygon (Coquimbo 137 km at sea).
    reference = pd.read_csv(Path(__file__).resolve().parents[2] / "seeds" / "communes_chile.csv", dtype=str)
    reference = reference.set_index("codigo_comuna").loc[polygons.codes]
    old = shapely.points(reference["longitud_cabecera"].astype(float), reference["latitud_cabecera"].astype(float))
    missed = shapely.distance(geo.to_metres(old), geo.to_metres(polygons.geometries))
    assert (missed > 0).sum() == 108
    assert missed[polygons.codes.index("04102")] == pytest.approx(137_000, abs=1_000)
