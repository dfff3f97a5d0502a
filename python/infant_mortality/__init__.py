"""Statistics and helpers for the small-area infant mortality warehouse, grouped by role.

    statistics/    the statistics the models compute with, as plain functions shared by the dbt
                   models (SQL through DuckDB UDFs, Python models directly) and pytest: poisson,
                   prais_winsten, trends + trend_fitters/, inequality, smoothing
    geography/     commune geometry (communes: IDE Chile polygons, queen contiguity) for the dbt
                   Python models, the report's map and the GeoPackage
    dbt_plugins/   what dbt loads: the dbt-duckdb plugins named in profiles/profiles.yml,
                   duckdb_plugin (the Poisson UDFs) and deis_files (imr_deis_inspect: reads and
                   checks the DEIS files), and model_inputs (how the Python models read refs)
    report/        the offline HTML report (`python -m infant_mortality.report`)
    tools/         commands and exporters: publish, query, gis, generate_deis; install_env
                   (creates .venv) and progress (status lines of silent steps)

The modules at this level (query, publish, gis, generate_deis, deis_files) are only the
stable `python -m infant_mortality.<name>` entry points of the documentation; each calls the
`main` of its module above.
"""
