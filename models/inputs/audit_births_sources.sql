-- The two bundled sources of live births by commune side by side where both cover a year
-- (2010-2016): the INE yearbook (the births of the aggregates mode) and the DEIS births by
-- commune 2001-2016 (the births of the microdata mode when no births file is given). Neither
-- is chosen silently over the other: every commune-year of the common years is a row, with the
-- difference, so a reader sees which commune-years differ and by how much.
with bundle as (
    select year, commune_code, live_births
    from {{ ref('stg_deis_aggregates__births_by_commune_year') }}
),

ine as (
    select year, commune_code, event_count as live_births
    from {{ ref('stg_ine__vital_statistics') }}
    where event_type = 'live_birth' and sex = 'total'
),

common_years as (
    select distinct year from bundle
    intersect
    select distinct year from ine
),

communes as (
    select commune_code, commune_name, region_code
    from {{ ref('stg_reference__communes') }}
),

-- Every commune in every common year: a commune-year the DEIS bundle does not list had no
-- births there (DEIS lists no zero rows); the INE file lists every commune.
compared as (
    select
        communes.commune_code,
        communes.commune_name,
        communes.region_code,
        common_years.year,
        coalesce(bundle.live_births, 0) as births_deis_bundle,
        ine.live_births as births_ine
    from communes
    cross join common_years
    left join bundle on communes.commune_code = bundle.commune_code and common_years.year = bundle.year
    left join ine on communes.commune_code = ine.commune_code and common_years.year = ine.year
)

select
    commune_code,
    commune_name,
    region_code,
    cast(year as integer) as year,
    cast(births_deis_bundle as bigint) as births_deis_bundle,
    cast(births_ine as bigint) as births_ine,
    cast(births_deis_bundle - births_ine as bigint) as difference,
    case when births_ine > 0 then round(100.0 * (births_deis_bundle - births_ine) / births_ine, 2) end
        as difference_percent,
    births_ine is not null and births_deis_bundle <> births_ine as is_different
from compared
