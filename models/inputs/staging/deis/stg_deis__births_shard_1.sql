{{ config(materialized = 'table') }}

-- The births of shard 1 of 2 of the files (macros/deis_births_staging.sql); stg_deis__births
-- is the union of the shards. Two shards, built by dbt's two threads at once, let DuckDB number
-- the records of both on two cores (one read is numbered on one core).

{{ deis_births_staging(shard=1, shards=2) }}
