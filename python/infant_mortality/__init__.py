"""Statistics and helpers for the small-area infant mortality warehouse.

Pure functions live here so that the dbt models (SQL through DuckDB UDFs, Python models
directly) and pytest use the very same code.
"""
