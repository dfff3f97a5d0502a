{{ config(materialized = 'view') }}

-- One row per record of the DEIS births base(s), nothing dropped: the union of the two shards of
-- the files, staged by macros/deis_births_staging.sql (see stg_deis__births_shard_1).

select * from {{ ref('stg_deis__births_shard_1') }}
union all
select * from {{ ref('stg_deis__births_shard_2') }}
