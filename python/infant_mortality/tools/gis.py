"""The GIS layer: a GeoPackage of the communes and their measures, for QGIS / ArcGIS users.

``write_geopackage(db_path, out_path)`` reads the marts of a built warehouse (read-only) and the
commune polygons of ``infant_mortality.geography.communes``, and writes one GeoPackage (EPSG:4326) with:

* ``communes``: one feature per row of ``marts.dim_commune`` (all its columns) with its polygon;
  a commune without a polygon (Antártica, 12202) is kept with a null geometry.
* ``commune_indicators``: one feature per commune, indicator and period: every column of
  ``marts.fct_commune_vs_region`` and of ``marts.fct_smoothed_rates`` (columns the two share,
  which the warehouse tests to be equal, appear once), the BYM2 rate, its 95% credible interval
  and exceedance probability of ``marts.fct_bym2_rates`` and the cluster type of
  ``marts.fct_spatial_clusters`` (``SPATIAL_COLUMNS``), with the commune's polygon.

Nothing is computed here: the measures are the marts' columns. The polygons are the cleaned
coverage of ``infant_mortality.geography.coverage`` (no overlaps, no slivers, shared edges
identical), every one as a MultiPolygon so each layer has one geometry type. The file is
GeoPackage 1.2 (``GPKG_VERSION``), which every GDAL since 2.2 reads without a warning (GDAL 3.6,
Debian 12's, warns that 1.4 is "partially supported"); 1.3 and 1.4 add nothing these two
layers use. It is written beside ``out_path`` under a temporary name and renamed onto it, so a
reader never sees a half-written file.

    python -m infant_mortality.gis warehouse/infant_mortality.duckdb warehouse/gis/infant_mortality.gpkg
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyogrio
import shapely

from infant_mortality.geography.communes import load_commune_polygons
from infant_mortality.geography.coverage import load_coverage

CRS = "EPSG:4326"
KEYS = ["commune_code", "indicator", "period_start", "period_end"]
LAYERS = ("communes", "commune_indicators")
# Columns of the spatial marts added to commune_indicators (same grain, joined on KEYS).
SPATIAL_COLUMNS = {
    "fct_bym2_rates": ["bym2_rate_per_1000", "bym2_ci95_lower", "bym2_ci95_upper", "bym2_prob_exceeds_region"],
    "fct_spatial_clusters": ["cluster_type"],
}
GPKG_VERSION = "1.2"


def _relation_columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    rows = con.execute(
        "select column_name from duckdb_columns() where schema_name = 'marts' and table_name = ? "
        "order by column_index",
        [table],
    ).fetchall()
    if not rows:
        raise ValueError(f"the warehouse has no table marts.{table}; build it first (make warehouse)")
    return [row[0] for row in rows]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def read_layers(db_path: Path) -> dict[str, pa.Table]:
    """The attribute tables of both layers, straight from the marts (no geometry yet)."""
    with duckdb.connect(str(db_path), read_only=True) as con:
        commune_columns = _relation_columns(con, "dim_commune")
        compared_columns = _relation_columns(con, "fct_commune_vs_region")
        smoothed_columns = _relation_columns(con, "fct_smoothed_rates")
        extra = [c for c in smoothed_columns if c not in compared_columns]
        spatial = []
        for table, columns in SPATIAL_COLUMNS.items():
            missing = set(columns) - set(_relation_columns(con, table))
            if missing:
                raise ValueError(f"marts.{table} lacks {sorted(missing)}; rebuild the warehouse (make warehouse)")
            spatial += [f"{table}.{_quoted(c)}" for c in columns]
        select = ", ".join([f"compared.{_quoted(c)}" for c in compared_columns]
                           + [f"smoothed.{_quoted(c)}" for c in extra] + spatial)
        join = " and ".join(f"smoothed.{_quoted(k)} = compared.{_quoted(k)}" for k in KEYS)
        spatial_joins = " ".join(
            f"left join marts.{table} on " + " and ".join(f"{table}.{_quoted(k)} = compared.{_quoted(k)}" for k in KEYS)
            for table in SPATIAL_COLUMNS)
        communes = con.sql(
            f"select {', '.join(map(_quoted, commune_columns))} from marts.dim_commune order by commune_code"
        ).to_arrow_table()
        indicators = con.sql(
            f"select {select} from marts.fct_commune_vs_region as compared "
            f"full outer join marts.fct_smoothed_rates as smoothed on {join} {spatial_joins} "
            "order by compared.indicator, compared.period_start, compared.period_end, compared.commune_code"
        ).to_arrow_table()
    unmatched = indicators.filter(pa.compute.is_null(indicators["commune_code"])).num_rows
    if unmatched:
        raise ValueError(f"{db_path}: {unmatched} rows of marts.fct_smoothed_rates match no row of fct_commune_vs_region")
    return {"communes": communes, "commune_indicators": indicators}


def _with_geometry(table: pa.Table, wkb_by_code: dict[str, bytes]) -> pa.Table:
    codes = table["commune_code"].to_pylist()
    geometry = pa.array([wkb_by_code.get(code) for code in codes], type=pa.binary())
    return table.append_column("geometry", geometry)


def write_geopackage(db_path: Path | str, out_path: Path | str) -> Path:
    """Write the GeoPackage from the warehouse at ``db_path``; return ``out_path``."""
    db_path, out_path = Path(db_path), Path(out_path)
    if not db_path.exists():
        raise FileNotFoundError(f"no warehouse at {db_path}")
    layers = read_layers(db_path)
    polygons = load_coverage(load_commune_polygons())
    as_multi = [
        geometry if geometry.geom_type == "MultiPolygon" else shapely.MultiPolygon([geometry])
        for geometry in polygons.geometries
    ]
    wkb_by_code = dict(zip(polygons.codes, shapely.to_wkb(np.array(as_multi, dtype=object))))

    out_path.parent.mkdir(parents=True, exist_ok=True)
    partial = out_path.with_name(f".{out_path.stem}.partial.gpkg")
    partial.unlink(missing_ok=True)
    try:
        for name in LAYERS:
            pyogrio.write_arrow(
                _with_geometry(layers[name], wkb_by_code),
                partial,
                layer=name,
                driver="GPKG",
                geometry_name="geometry",
                geometry_type="MultiPolygon",
                crs=CRS,
                append=name != LAYERS[0],
                dataset_options={"VERSION": GPKG_VERSION} if name == LAYERS[0] else None,
                layer_metadata={"source": f"marts of {db_path.name}; polygons {polygons.source}, cleaned into a coverage"},
            )
        os.replace(partial, out_path)
    finally:
        partial.unlink(missing_ok=True)
    return out_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infant_mortality.gis", description=__doc__.split("\n\n")[0])
    parser.add_argument("warehouse", type=Path, help="the DuckDB warehouse to read (opened read-only)")
    parser.add_argument("out", type=Path, help="the GeoPackage to write (.gpkg)")
    args = parser.parse_args(argv)
    written = write_geopackage(args.warehouse, args.out)
    print(f"Wrote {written} ({written.stat().st_size / 1e6:.1f} MB): layers {', '.join(LAYERS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
