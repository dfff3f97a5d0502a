"""What dbt itself loads from this package, besides the statistics: the dbt-duckdb plugins named
under `plugins:` in profiles/profiles.yml, which register Python functions on the build's DuckDB
connection (`duckdb_plugin`: the exact Poisson statistics `imr_poisson_lower`, ...;
`deis_files`: `imr_deis_inspect`, which lists, unpacks and checks the DEIS input files), and
`model_inputs`, through which every dbt Python model reads its inputs in one fixed order."""
