"""Commune geometry shared by the dbt Python models (boundaries, queen contiguity), the report's
map and the GeoPackage exporter: `communes` reads the IDE Chile polygons and computes neighbours."""
