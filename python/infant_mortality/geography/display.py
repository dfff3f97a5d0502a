"""The communes as a light GeoJSON for web maps (the report's map): the shipped coverage
(``coverage.load_coverage`` over ``communes.load_commune_polygons``) simplified as a whole for
display, with rounded coordinates. It builds on both modules; neither imports it.
"""

from __future__ import annotations

import json
from typing import Iterable, Mapping

import shapely

from infant_mortality.geography import coverage
from infant_mortality.geography.communes import CommunePolygons, load_commune_polygons

DISPLAY_DECIMALS = 4  # 11 m of latitude; more is invisible on a regional map


def communes_geojson(
    commune_codes: Iterable[str] | None = None,
    names: Mapping[str, str] | None = None,
    decimals: int = DISPLAY_DECIMALS,
    polygons: CommunePolygons | None = None,
) -> dict:
    """A GeoJSON FeatureCollection of the communes, simplified for display in a web map.

    ``commune_codes``: the communes wanted (default all 345); a code with no polygon (Antártica,
    12202, or an unknown code) is listed in the collection's ``missing`` member instead of
    failing, so the caller can say which communes cannot be drawn. Each feature has ``id`` and
    properties ``commune_code``, ``region_code`` and ``name`` (the DPA name, or ``names[code]``
    when given, e.g. the warehouse's ``dim_commune.commune_name``). The shapes are the shipped
    coverage (``coverage.load_coverage``; ``polygons``, when given, must be a coverage)
    simplified as a whole by ``coverage.display_coverage``, so neighbours meet without slivers;
    coordinates are rounded to ``decimals``, which moves shared vertices together.
    """
    polygons = polygons or coverage.load_coverage(load_commune_polygons())
    attributes = polygons.attributes
    shapes = coverage.display_coverage(polygons.geometries)
    wanted = attributes["commune_code"].tolist() if commune_codes is None else list(dict.fromkeys(commune_codes))
    position = {code: i for i, code in enumerate(attributes["commune_code"])}
    missing = [code for code in wanted if code not in position]
    features = []
    for i in (position[code] for code in wanted if code in position):
        code = attributes.at[i, "commune_code"]
        features.append({
            "type": "Feature",
            "id": code,
            "properties": {
                "commune_code": code,
                "region_code": attributes.at[i, "region_code"],
                "name": (names or {}).get(code, attributes.at[i, "commune_name"]),
            },
            "geometry": _rounded(json.loads(shapely.to_geojson(shapes[i])), decimals),
        })
    return {"type": "FeatureCollection", "features": features, "missing": missing}


def _rounded(geometry: dict, decimals: int) -> dict:
    def walk(value):
        if isinstance(value, float):
            return round(value, decimals)
        return [walk(item) for item in value]

    return {"type": geometry["type"], "coordinates": walk(geometry["coordinates"])}
