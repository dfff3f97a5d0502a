"""The statistics, as plain functions that the dbt models (SQL through DuckDB UDFs, Python models
directly) and pytest share: exact Poisson limits and tests (`poisson`), Prais-Winsten
(`prais_winsten`), the trend shell and its fitting methods (`trends`, `trend_fitters/`), the
inequity measures (`inequality`) and empirical Bayes smoothing (`smoothing`)."""
