"""The commune polygons as a coverage (no overlaps, no slivers, shared edges identical), the
display version of it for web maps, and a label point inside every commune.

The shipped polygons (``communes.load_commune_polygons``) were simplified one by one, so
neighbours overlap by hundreds of metres or leave slivers between them. ``clean_coverage`` turns
them into a coverage with GEOS's CoverageCleaner (shapely >= 2.2): each overlap goes to the
commune with which it shares the longest border, and each enclosed gap narrower than
``COVERAGE_GAP_WIDTH_M`` to its neighbour with the longest border, so the map has no sliver.
Its result is the polygon of every map and of the GeoPackage. ``display_coverage`` simplifies
that coverage as a whole (each shared edge once, so neighbours still meet exactly) and leaves
out the islets. Contiguity is not taken from the coverage (docs/methods/maps.md, "Neighbours" says why).

Cleaning takes 13 to 20 s, so it is not done in the build: ``infant_mortality.tools.
generate_geography`` writes the coverage once (``COVERAGE_PATH``) with the seeds derived from
it, and a test regenerates them and compares.
"""

from __future__ import annotations

from dataclasses import replace
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import shapely

from infant_mortality.geography.communes import (
    CENTRAL_MERIDIAN_DEG,
    EARTH_RADIUS_M,
    CommunePolygons,
    to_metres,
)

# Enclosed gaps narrower than this (the diameter of the largest circle inside the gap) are
# filled. Measured on the shipped polygons: with 300 m, 41 gaps of up to 2.9 km² stay open in the
# Metropolitan Region alone; with 1000 m none stays in the country. Sea channels are not
# enclosed, so they stay open whatever the width.
COVERAGE_GAP_WIDTH_M = 1000.0
# Vertices closer than this are snapped together: a fixed metre rather than GEOS's default
# (derived from the extent), for the same result on every machine and a faster clean (13 s).
COVERAGE_SNAP_M = 1.0
# Display: Visvalingam-Whyatt tolerance (square root of the area of the triangles removed) of
# the coverage simplification, and the islets left out (below max(2 km², 0.5% of the commune),
# touching no other commune: the fjord communes of Aysén and Magallanes are 97% of all parts).
# Measured: all 345 communes in 0.82 MB of GeoJSON, the Metropolitan Region's within 2% of
# their area.
DISPLAY_SIMPLIFY_M = 500.0
DISPLAY_MIN_PART_KM2 = 2.0
DISPLAY_MIN_PART_SHARE = 0.005
# Label points: the search for the pole of inaccessibility stops at cells this small (metres).
LABEL_PRECISION_M = 10.0

COVERAGE_PATH = Path(str(resources.files("infant_mortality.geography") / "data" / "commune_coverage.parquet"))


def from_metres(geometries: np.ndarray) -> np.ndarray:
    """Inverse of ``communes.to_metres`` (sinusoidal projection centred on 71°W)."""
    lambda0 = np.radians(CENTRAL_MERIDIAN_DEG)

    def unproject(xy: np.ndarray) -> np.ndarray:
        lat = xy[:, 1] / EARTH_RADIUS_M
        lon = lambda0 + xy[:, 0] / (EARTH_RADIUS_M * np.cos(lat))
        return np.column_stack([np.degrees(lon), np.degrees(lat)])

    return shapely.transform(geometries, unproject)


def clean_coverage(polygons: CommunePolygons) -> CommunePolygons:
    """The polygons as a valid coverage, in lon/lat (see the module docstring).

    Raises ValueError when the cleaner leaves a commune empty, a polygon invalid or the set of
    polygons not a coverage (none of which happens with the pinned polygons).
    """
    cleaned = from_metres(shapely.coverage_clean(
        to_metres(polygons.geometries),
        gap_width=COVERAGE_GAP_WIDTH_M,
        snapping_distance=COVERAGE_SNAP_M,
        merge_strategy="longest_border",
    ))
    broken = [code for code, geometry in zip(polygons.codes, cleaned)
              if shapely.is_empty(geometry) or not shapely.is_valid(geometry)]
    if broken or not shapely.coverage_is_valid(cleaned):
        raise ValueError(f"{polygons.source}: cleaning left an invalid coverage (empty or invalid: {broken or 'none'})")
    return replace(polygons, geometries=cleaned)


def label_points(geometries: np.ndarray) -> np.ndarray:
    """A point inside every commune (lon/lat): its pole of inaccessibility.

    The pole is the centre of the largest circle inside the commune (GEOS
    MaximumInscribedCircle, over all its parts), the interior point farthest from the boundary,
    so a label centred on it keeps as far from the borders as the shape allows;
    ``point_on_surface`` is only guaranteed inside and can land near a border in the long, bent
    communes of the Andes and the coast.
    """
    circles = shapely.maximum_inscribed_circle(to_metres(geometries), tolerance=LABEL_PRECISION_M)
    return from_metres(shapely.get_point(circles, 0))


def display_coverage(coverage: np.ndarray) -> np.ndarray:
    """The coverage (lon/lat) without islets, simplified as a whole; still a valid coverage."""
    coverage_m = to_metres(coverage)
    parts, owner = shapely.get_parts(coverage_m, return_index=True)
    areas_km2 = shapely.area(parts) / 1e6
    commune_km2 = np.bincount(owner, weights=areas_km2, minlength=len(coverage_m))
    small = areas_km2 < np.maximum(DISPLAY_MIN_PART_KM2, DISPLAY_MIN_PART_SHARE * commune_km2[owner])
    # A small part that meets another commune stays: leaving it out would open a sliver.
    # (Every part against a tree of the small ones: the query side is prepared, which makes
    # testing the large mainland parts fast.)
    small_rows = np.flatnonzero(small)
    other_part, small_index = shapely.STRtree(parts[small]).query(parts, predicate="intersects")
    meets_other = np.zeros(len(parts), dtype=bool)
    meets_other[small_rows[small_index[owner[small_rows[small_index]] != owner[other_part]]]] = True
    keep = ~small | meets_other
    largest = pd.Series(areas_km2).groupby(owner).idxmax().to_numpy()
    keep[largest] = True  # a commune always keeps its largest part
    kept = pd.Series(parts[keep]).groupby(owner[keep]).agg(lambda group: shapely.multipolygons(list(group)))
    return from_metres(shapely.coverage_simplify(kept.to_numpy(), DISPLAY_SIMPLIFY_M))


def write_coverage(coverage: CommunePolygons, path: Path) -> None:
    """Codes and lon/lat WKB of the coverage, one row per commune."""
    table = pa.table({
        "commune_code": coverage.codes,
        "geometry": pa.array(shapely.to_wkb(coverage.geometries), type=pa.binary()),
    })
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="zstd")


def load_coverage(polygons: CommunePolygons, path: Path = COVERAGE_PATH) -> CommunePolygons:
    """The shipped coverage (lon/lat) with the attributes of ``polygons``.

    Raises ValueError naming the file when its communes are not those of the polygon file (the
    pinned package changed: regenerate with ``python -m infant_mortality.tools.generate_geography``).
    """
    table = pq.read_table(path)
    if table["commune_code"].to_pylist() != polygons.codes:
        raise ValueError(
            f"{path}: its communes differ from those of {polygons.source}; regenerate it with "
            "python -m infant_mortality.tools.generate_geography"
        )
    return replace(polygons, geometries=shapely.from_wkb(table["geometry"].to_pylist()))
