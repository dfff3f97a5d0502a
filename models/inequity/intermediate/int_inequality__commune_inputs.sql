-- The commune rows every inequality measure starts from: for each area (each region, and the
-- country when more than one region is present), indicator, period and stratifier, every
-- commune of the area with its deaths, live births and stratifier value (null when it has none).
--   * Analysis periods: the commune's pooled deaths and births of int_period_pooled_counts, pool
--     `commune_years` (years whose commune and region rates are available): what
--     fct_commune_vs_region compares. Read from the pool, not from that mart, so that the
--     inequity models need not wait for the comparisons (2 s sooner in a national build).
--   * Single years (period_kind 'single_year', period_start = period_end): commune rows of
--     fct_area_year_rates with an available rate. A year that is itself an analysis period
--     (a one-year custom period) is not repeated.
-- A stratifier is measured in an area only when every region of the area has at least one
-- usable value (income_poverty_2013 and social_priority_index_2019 cover only region 13);
-- int_audit__covariates lists the regions left without measures.
with pooled as (
    select
        area_code as commune_code, area_name as commune_name, region_code, indicator,
        period_start, period_end, period_label, deaths, live_births
    from {{ ref('int_period_pooled_counts') }}
    where pool = 'commune_years' and area_level = 'commune'
),

yearly as (
    select * from {{ ref('fct_area_year_rates') }}
),

periods as (
    select * from {{ ref('int_analysis_periods') }}
),

stratifier_values as (
    select stratifier, commune_code, value from {{ ref('int_stratifier_values') }}
    where problem is null
),

area_names as (
    select distinct area_level, area_code, area_name from yearly
    where area_level in ('region', 'country')
),

period_rows as (
    select
        pooled.commune_code, pooled.commune_name, pooled.region_code, pooled.indicator,
        pooled.period_start, pooled.period_end, pooled.period_label, periods.period_kind,
        pooled.deaths, pooled.live_births
    from pooled
    inner join periods
        on pooled.period_start = periods.period_start and pooled.period_end = periods.period_end
),

single_year_rows as (
    select
        yearly.area_code as commune_code, yearly.area_name as commune_name, yearly.region_code,
        yearly.indicator,
        yearly.year as period_start, yearly.year as period_end,
        cast(yearly.year as varchar) as period_label, 'single_year' as period_kind,
        yearly.deaths, yearly.live_births
    from yearly
    left join periods on yearly.year = periods.period_start and yearly.year = periods.period_end
    where yearly.area_level = 'commune' and yearly.rate_per_1000 is not null
        and periods.period_start is null
),

commune_rows as (
    select * from period_rows
    union all
    select * from single_year_rows
),

n_regions as (
    select count(distinct region_code) as n from pooled
),

-- Each commune row once per area it belongs to: its region, and the country.
area_rows as (
    select 'region' as area_level, region_code as area_code, commune_rows.* from commune_rows
    union all
    select 'country', 'CL', commune_rows.* from commune_rows
    where (select n from n_regions) > 1
),

stratifiers as (
    select distinct stratifier from stratifier_values
),

regions_covered as (
    select distinct stratifier_values.stratifier, communes.region_code
    from stratifier_values
    inner join {{ ref('stg_reference__communes') }} as communes
        on stratifier_values.commune_code = communes.commune_code
),

areas_covered as (
    select area_rows.area_level, area_rows.area_code, stratifiers.stratifier
    from (select distinct area_level, area_code, region_code from area_rows) as area_rows
    cross join stratifiers
    left join regions_covered
        on stratifiers.stratifier = regions_covered.stratifier
        and area_rows.region_code = regions_covered.region_code
    group by area_rows.area_level, area_rows.area_code, stratifiers.stratifier
    having count(regions_covered.region_code) = count(*)
)

select
    area_rows.area_level,
    area_rows.area_code,
    area_names.area_name,
    area_rows.indicator,
    cast(area_rows.period_start as integer) as period_start,
    cast(area_rows.period_end as integer) as period_end,
    area_rows.period_label,
    area_rows.period_kind,
    areas_covered.stratifier,
    area_rows.commune_code,
    area_rows.commune_name,
    area_rows.region_code,
    cast(area_rows.deaths as bigint) as deaths,
    cast(area_rows.live_births as bigint) as live_births,
    stratifier_values.value
from area_rows
inner join areas_covered
    on area_rows.area_level = areas_covered.area_level and area_rows.area_code = areas_covered.area_code
left join area_names
    on area_rows.area_level = area_names.area_level and area_rows.area_code = area_names.area_code
left join stratifier_values
    on areas_covered.stratifier = stratifier_values.stratifier
    and area_rows.commune_code = stratifier_values.commune_code
