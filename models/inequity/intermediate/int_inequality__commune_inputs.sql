-- The commune rows every inequality measure starts from: for each area (each region, and the
-- country when more than one region is present), indicator, period and stratifier, every
-- commune of the area with its deaths, live births and stratifier value (null when it has none).
-- The one rule for aggregates of communes (docs/methods/core.md, "One rule for every aggregate of communes"): a period
-- sums the area's own
-- commune-years, the years in which the area has a count. `deaths`, `live_births` are the
-- commune's published counts in those years (its years with a rate: for a region exactly what
-- fct_commune_vs_region pools); `unpublished_deaths`, `unpublished_live_births` the signed
-- counts of its other years there (no rate of its own, but inside the area's count), so that
-- any set of communes covering the area adds up to the area's pooled count.
-- Periods: the analysis periods and every single year (period_kind 'single_year') that is not
-- itself an analysis period (a one-year custom period is not repeated).
-- A stratifier is measured in an area only when every region of the area has at least one
-- usable value (income_poverty_2013 and social_priority_index_2019 cover only region 13);
-- int_audit__covariates lists the regions left without measures.
-- Each commune-year once per area it belongs to (its region; the country), with whether the
-- area has a rate that year: core's int_area_commune_years, the one availability rule of every
-- aggregate of communes (issue 41). A span in which the area has no available year has no rows.
with member_years as (
    select
        area_level, area_code, commune_code, commune_name, region_code, indicator, multiplier, year,
        deaths, live_births, is_published, area_is_available as in_area_count
    from {{ ref('int_area_commune_years') }}
),

analysis_periods as (
    select * from {{ ref('int_analysis_periods') }}
),

stratifier_values as (
    select stratifier, commune_code, value from {{ ref('int_stratifier_values') }}
    where problem is null
),

area_names as (
    select distinct area_level, area_code, area_name from {{ ref('int_area_commune_years') }}
),

single_years as (
    select distinct
        member_years.year as period_start, member_years.year as period_end,
        cast(member_years.year as varchar) as period_label, 'single_year' as period_kind
    from member_years
    left join analysis_periods
        on member_years.year = analysis_periods.period_start
        and member_years.year = analysis_periods.period_end
    where analysis_periods.period_start is null
),

periods as (
    select period_start, period_end, period_label, period_kind from analysis_periods
    union all
    select * from single_years
),

-- The spans in which the area has at least one year with a rate (fct_area_period_rates pools those).
available_spans as (
    select member_years.area_level, member_years.area_code, member_years.indicator,
        periods.period_start, periods.period_end
    from member_years
    inner join periods on member_years.year between periods.period_start and periods.period_end
    group by member_years.area_level, member_years.area_code, member_years.indicator,
        periods.period_start, periods.period_end
    having bool_or(member_years.in_area_count)
),

{% set counted = 'member_years.in_area_count and ' %}
area_rows as (
    select
        member_years.area_level, member_years.area_code,
        member_years.commune_code, member_years.commune_name, member_years.region_code,
        member_years.indicator, member_years.multiplier,
        periods.period_start, periods.period_end, periods.period_label, periods.period_kind,
        coalesce(sum(case when {{ counted }}member_years.is_published then member_years.deaths end), 0) as deaths,
        coalesce(sum(case when {{ counted }}member_years.is_published then member_years.live_births end), 0)
            as live_births,
        coalesce(sum(case when {{ counted }}not member_years.is_published then member_years.deaths end), 0)
            as unpublished_deaths,
        coalesce(sum(case when {{ counted }}not member_years.is_published then member_years.live_births end), 0)
            as unpublished_live_births
    from member_years
    inner join periods on member_years.year between periods.period_start and periods.period_end
    inner join available_spans
        on member_years.area_level = available_spans.area_level
        and member_years.area_code = available_spans.area_code
        and member_years.indicator = available_spans.indicator
        and periods.period_start = available_spans.period_start
        and periods.period_end = available_spans.period_end
    group by member_years.area_level, member_years.area_code, member_years.commune_code,
        member_years.commune_name, member_years.region_code, member_years.indicator, member_years.multiplier,
        periods.period_start, periods.period_end, periods.period_label, periods.period_kind
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
    -- The indicator's rate multiplier (seed `indicators`), for the measures' rates.
    area_rows.multiplier,
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
    cast(area_rows.unpublished_deaths as bigint) as unpublished_deaths,
    cast(area_rows.unpublished_live_births as bigint) as unpublished_live_births,
    stratifier_values.value,
    -- Which way the ranking runs (seed `stratifiers`); constant within a stratifier.
    stratifiers_seed.higher_is_more_deprived
from area_rows
inner join areas_covered
    on area_rows.area_level = areas_covered.area_level and area_rows.area_code = areas_covered.area_code
left join area_names
    on area_rows.area_level = area_names.area_level and area_rows.area_code = area_names.area_code
left join stratifier_values
    on areas_covered.stratifier = stratifier_values.stratifier
    and area_rows.commune_code = stratifier_values.commune_code
inner join {{ ref('stratifiers') }} as stratifiers_seed on areas_covered.stratifier = stratifiers_seed.stratifier
