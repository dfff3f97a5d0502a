-- The one pooling rule, as a reader checks it (methods.md section 8): a region's (the
-- country's) deaths are the sum of its communes' published deaths plus
-- unpublished_commune_deaths, and the same for births, every year; over a pooled period a
-- region's deaths are the sum of its communes' pooled deaths in fct_commune_vs_region plus
-- the period's unpublished_commune_deaths. Rows returned are the areas that do not add up.
with yearly as (
    select * from {{ ref('fct_area_year_rates') }}
),

commune_years as (
    select region_code, year, indicator, deaths, live_births from yearly where area_level = 'commune'
),

published_sums as (
    select 'region' as area_level, region_code as area_code, year, indicator,
        coalesce(sum(deaths), 0) as deaths, coalesce(sum(live_births), 0) as live_births
    from commune_years group by region_code, year, indicator
    union all
    select 'country', 'CL', year, indicator, coalesce(sum(deaths), 0), coalesce(sum(live_births), 0)
    from commune_years group by year, indicator
),

commune_periods as (
    select region_code, indicator, period_start, period_end,
        coalesce(sum(deaths), 0) as deaths, coalesce(sum(live_births), 0) as live_births
    from {{ ref('fct_commune_vs_region') }}
    group by region_code, indicator, period_start, period_end
),

yearly_gaps as (
    select 'year' as grain, areas.area_code, cast(areas.year as varchar) as period,
        areas.deaths, sums.deaths + areas.unpublished_commune_deaths as expected_deaths,
        areas.live_births, sums.live_births + areas.unpublished_commune_births as expected_live_births
    from yearly as areas
    inner join published_sums as sums
        on areas.area_level = sums.area_level and areas.area_code = sums.area_code
        and areas.year = sums.year and areas.indicator = sums.indicator
    where areas.deaths is not null
),

period_gaps as (
    select 'period', areas.area_code, areas.period_label,
        areas.deaths, sums.deaths + areas.unpublished_commune_deaths,
        areas.live_births, sums.live_births + areas.unpublished_commune_births
    from {{ ref('fct_area_period_rates') }} as areas
    inner join commune_periods as sums
        on areas.area_level = 'region' and areas.area_code = sums.region_code
        and areas.indicator = sums.indicator
        and areas.period_start = sums.period_start and areas.period_end = sums.period_end
    where areas.deaths is not null
)

select * from (select * from yearly_gaps union all select * from period_gaps) as gaps
where deaths is distinct from expected_deaths or live_births is distinct from expected_live_births
