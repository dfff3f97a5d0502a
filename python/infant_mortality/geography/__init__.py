"""Commune geometry shared by the dbt Python models (boundaries, queen contiguity), the report's
map and the GeoPackage exporter: `communes` reads the IDE Chile polygons and computes neighbours,
`coverage` cleans them into a coverage, `display` draws it as GeoJSON for the report's map (each
builds only on the ones before it)."""
