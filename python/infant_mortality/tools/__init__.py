"""Commands and exporters around the warehouse: `publish` (build, test and publish a release),
`query` (the read-only query command), `gis` (the GeoPackage) and `generate_deis` (DEIS-layout
microdata for tests and benchmarks); the benchmark harness is not installed, it lives beside its
results in `benchmarks/` (`make bench`, `make bench-compare`). The documented commands
`python -m infant_mortality.<name>` are thin entry points at the package's top level.
`install_env` creates `.venv` (`make` runs it as a file with the system Python) and `progress`
says how far a silent step is; both use the standard library only."""
