"""Queen contiguity of the commune polygons, with a snapping tolerance (docs/methods.md section 6).

The rule lives in `infant_mortality.geography.communes.queen_neighbours` (tested with pytest); this model passes
the tolerance declared as var `neighbour_snap_tolerance_m` (through the YAML `config:`, since a
Python model cannot read project vars) and returns both directions of every pair.
"""

import math

from infant_mortality.geography.communes import load_commune_polygons, queen_neighbours


def model(dbt, session):
    dbt.config(materialized="table")
    raw = dbt.config.get("neighbour_snap_tolerance_m")
    try:
        tolerance_m = float(raw)
    except (TypeError, ValueError):
        tolerance_m = math.nan
    if not math.isfinite(tolerance_m) or tolerance_m < 0:
        raise ValueError(f"dbt var neighbour_snap_tolerance_m must be a number of metres >= 0, got {raw!r}")
    polygons = load_commune_polygons()
    return queen_neighbours(polygons.codes, polygons.geometries, tolerance_m)
