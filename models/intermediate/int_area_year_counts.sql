-- Counts at every area level: each commune, each region (sum over its communes) and, when the
-- scope has more than one region, the country (sum over everything in scope).
-- A region sums its communes' counts as derived, including one whose own rate is unavailable
-- because its derived count is negative: at region level the mismatches between the two source
-- releases (a death placed in one commune by INE and in another by DEIS) cancel out, so this is
-- the region-level derivation itself. `communes_unavailable` says how many communes had no rate.
with communes as (
    select * from {{ ref('int_commune_year_counts') }}
    where region_code is not null
),

reference as (
    select distinct region_code, region_name from {{ ref('stg_reference__communes') }}
),

commune_rows as (
    select
        'commune' as area_level,
        commune_code as area_code,
        commune_name as area_name,
        region_code,
        year,
        indicator,
        deaths,
        live_births,
        count_basis,
        count_problem,
        case when count_problem is null then 0 else 1 end as communes_unavailable
    from communes
),

region_rows as (
    select
        'region' as area_level,
        communes.region_code as area_code,
        reference.region_name as area_name,
        communes.region_code,
        year,
        indicator,
        sum(deaths) as deaths,
        sum(live_births) as live_births,
        min(count_basis) as count_basis,
        -- A commune with no count at all (not merely negative) leaves the region incomplete.
        case when count(deaths) < count(*) then 'region_incomplete' end as count_problem,
        sum(case when count_problem is null then 0 else 1 end) as communes_unavailable
    from communes
    left join reference on communes.region_code = reference.region_code
    group by communes.region_code, reference.region_name, year, indicator
),

country_rows as (
    select
        'country' as area_level,
        'CL' as area_code,
        'Chile' as area_name,
        cast(null as varchar) as region_code,
        year,
        indicator,
        sum(deaths) as deaths,
        sum(live_births) as live_births,
        min(count_basis) as count_basis,
        case when count(deaths) < count(*) then 'country_incomplete' end as count_problem,
        sum(case when count_problem is null then 0 else 1 end) as communes_unavailable
    from communes
    group by year, indicator
    having (select count(distinct region_code) from communes) > 1
)

select * from commune_rows
union all
select * from region_rows
union all
select * from country_rows
