-- One audit row per commune-year count that cannot give a rate, in either input mode, and one
-- per region or country year whose rate is unavailable because of the communes inside, naming them;
-- and one per unreadable line of the population file (the births check's yardstick).
with problems as (
    select * from {{ ref('int_commune_year_counts') }}
    where count_problem is not null
),

area_problems as (
    select * from {{ ref('int_area_year_counts') }}
    where area_level in ('region', 'country') and count_problem is not null
),

-- The commune-years that keep an area from having a count.
blocking as (
    select region_code, year, indicator,
        commune_code || ' (' || count_problem || ')' as commune_problem
    from {{ ref('int_commune_year_counts') }}
    where region_code is not null and not is_poolable
),

commune_rows as (
    select
        'commune_year_counts' as source,
        cast(null as varchar) as source_file,
        cast(null as bigint) as source_line,
        'commune=' || commune_code || ' year=' || cast(year as varchar) || ' indicator=' || indicator as record_key,
        commune_code,
        year,
        indicator,
        count_problem as check_name,
        'deaths=' || coalesce(cast(deaths as varchar), 'missing')
            || ' live_births=' || coalesce(cast(live_births as varchar), 'missing')
            || case when count_problem = 'implausible_births'
                then ' population_aged_0=' || coalesce(cast(age_0_population as varchar), 'missing')
                    || ' median_births_of_its_series=' || cast(series_median_births as varchar)
                else '' end as observed_value,
        cast(1 as bigint) as records_affected,
        case
            when count_problem = 'commune_unknown'
                then 'commune code not in the 346-commune reference: no rate, not in any region'
            when is_poolable
                then 'no rate for this commune-year; its counts still enter the region and country sums'
                    || ' (bounded case: docs/methods/core.md, "Regions and the country")'
            else 'no rate for this commune-year; the region and country rates of this year are unavailable too'
        end as consequence,
        true as affects_results
    from problems
),

area_rows as (
    select
        'area_year_counts' as source,
        cast(null as varchar) as source_file,
        cast(null as bigint) as source_line,
        area_problems.area_level || '=' || area_problems.area_code || ' year=' || cast(area_problems.year as varchar)
            || ' indicator=' || area_problems.indicator as record_key,
        cast(null as varchar) as commune_code,
        area_problems.year,
        area_problems.indicator,
        area_problems.count_problem as check_name,
        coalesce(
            'communes: '
            || {{ dbt.listagg('blocking.commune_problem', "', '", 'order by blocking.commune_problem') }},
            'deaths=' || coalesce(cast(area_problems.deaths as varchar), 'missing')
            || ' live_births=' || coalesce(cast(area_problems.live_births as varchar), 'missing')
        ) as observed_value,
        greatest(count(blocking.commune_problem), 1) as records_affected,
        case
            when area_problems.count_problem like '%no_live_births'
                then 'no rate for this ' || area_problems.area_level
                || ' and year: no live births in any of its communes'
            else 'no rate for this ' || area_problems.area_level
                || ' and year: a commune inside has no count or one out of bounds'
        end as consequence,
        true as affects_results
    from area_problems
    -- Left join: an area without live births may have no blocking commune at all.
    left join blocking
        on (area_problems.area_level = 'country' or area_problems.area_code = blocking.region_code)
        and area_problems.year = blocking.year
        and area_problems.indicator = blocking.indicator
    group by area_problems.area_level, area_problems.area_code, area_problems.year,
        area_problems.indicator, area_problems.count_problem, area_problems.deaths, area_problems.live_births
),

-- A population line that cannot be read, in a year with counts: the births of that commune-year
-- are held to their own series only (no population yardstick).
population_rows as (
    select
        'ine_population' as source,
        source_file,
        source_line,
        source_file || ':' || cast(source_line as varchar) as record_key,
        commune_code,
        year,
        cast(null as varchar) as indicator,
        parse_problem as check_name,
        'line: ' || raw_line as observed_value,
        cast(1 as bigint) as records_affected,
        'population line not read: the births of its commune-year are checked against their own series only'
            as consequence,
        false as affects_results
    from {{ ref('stg_ine__population') }}
    where parse_problem is not null and parse_problem <> 'blank_line'
        and (year is null or year between (select min(year) from {{ ref('int_commune_year_counts') }})
            and (select max(year) from {{ ref('int_commune_year_counts') }}))
)

select * from commune_rows
union all
select * from area_rows
union all
select * from population_rows
