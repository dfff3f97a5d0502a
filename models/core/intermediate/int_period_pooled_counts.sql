-- The one pooling rule of the warehouse (docs/methods/core.md, "Pooled period rates"): over an analysis period, deaths
-- and live births are summed over the years in which the rate is available, and the pooled
-- rate is sum(deaths) / sum(births) with exact Poisson limits; never an average of yearly rates.
-- It pools the published yearly rows (fct_area_year_rates), so "available" means exactly
-- "has a published rate". Two kinds of pool, by the years they cover:
--   area_years     every area (commune, region, country) over the years its own rate is
--                  available: the region's and country's period rates (fct_area_period_rates);
--   commune_years  a commune and its region over the years BOTH rates are available, so the
--                  rest of the region (region - commune) covers the same years on both sides
--                  (fct_commune_vs_region). pool_key is the commune.
-- An area's pool also says how much of it comes from commune-years outside their commune's
-- pool (no rate of their own): region deaths = the sum of its communes' commune_years deaths
-- + unpublished_commune_deaths, and the same for births (docs/methods/core.md, "One rule for every aggregate of communes").
with periods as (
    select period_start, period_end, period_label from {{ ref('int_analysis_periods') }}
),

rates as (
    select * from {{ ref('fct_area_year_rates') }}
),

-- Births of each region's (the country's) commune-years without a rate: published yearly, but
-- outside every commune's pool, so they enter an area's pool as unpublished commune births.
unrated_commune_births as (
    select region_code as area_code, indicator, year, sum(live_births) as live_births
    from rates
    where area_level = 'commune' and rate_per_1000 is null and region_code is not null
    group by region_code, indicator, year
    union all
    select 'CL', indicator, year, sum(live_births)
    from rates
    where area_level = 'commune' and rate_per_1000 is null and region_code is not null
    group by indicator, year
),

yearly as (
    select
        rates.area_level, rates.area_code, rates.area_name, rates.region_code, rates.indicator,
        indicators.multiplier, rates.year, rates.deaths, rates.live_births,
        rates.rate_per_1000 is not null as is_available,
        rates.unpublished_commune_deaths,
        rates.unpublished_commune_births + coalesce(unrated.live_births, 0)
            as unpublished_commune_births
    from rates
    -- The rate multiplier of the indicator (seed `indicators`), for the pooled rate below.
    inner join {{ ref('indicators') }} as indicators on rates.indicator = indicators.indicator
    left join unrated_commune_births as unrated
        on rates.area_level in ('region', 'country')
        and rates.area_code = unrated.area_code
        and rates.indicator = unrated.indicator
        and rates.year = unrated.year
),

area_years as (
    select 'area_years' as pool, area_code as pool_key, *, is_available as is_pooled
    from yearly
),

commune_region_years as (
    select
        commune.area_code as commune_code,
        commune.indicator,
        commune.year,
        commune.is_available and coalesce(region.is_available, false) as is_pooled
    from yearly as commune
    left join yearly as region
        on region.area_level = 'region'
        and commune.region_code = region.area_code
        and commune.indicator = region.indicator
        and commune.year = region.year
    where commune.area_level = 'commune'
),

-- The areas a commune's pool sums: the commune itself and its region.
commune_pool_members as (
    select distinct area_code as commune_code, 'commune' as member_level, area_code as member_code
    from yearly
    where area_level = 'commune'
    union all
    select distinct area_code, 'region', region_code
    from yearly
    where area_level = 'commune'
),

-- Their yearly rows, each flagged with the commune's pooled years.
commune_years as (
    select 'commune_years' as pool, pooling.commune_code as pool_key, yearly.*, pooling.is_pooled
    from commune_region_years as pooling
    inner join commune_pool_members as members
        on pooling.commune_code = members.commune_code
    inner join yearly
        on members.member_level = yearly.area_level
        and members.member_code = yearly.area_code
        and pooling.indicator = yearly.indicator
        and pooling.year = yearly.year
),

pool_years as (
    select * from area_years
    union all
    select * from commune_years
),

pooled as (
    select
        pool_years.pool,
        pool_years.pool_key,
        pool_years.area_level,
        pool_years.area_code,
        max(pool_years.area_name) as area_name,
        max(pool_years.region_code) as region_code,
        pool_years.indicator,
        pool_years.multiplier,
        periods.period_start,
        periods.period_end,
        periods.period_label,
        count(case when pool_years.is_pooled then 1 end) as n_years,
        periods.period_end - periods.period_start + 1 as n_years_in_period,
        sum(case when pool_years.is_pooled then pool_years.deaths end) as deaths,
        sum(case when pool_years.is_pooled then pool_years.live_births end) as live_births,
        sum(case when pool_years.is_pooled then pool_years.unpublished_commune_deaths end)
            as unpublished_commune_deaths,
        sum(case when pool_years.is_pooled then pool_years.unpublished_commune_births end)
            as unpublished_commune_births
    from pool_years
    inner join periods
        on pool_years.year between periods.period_start and periods.period_end
    group by pool_years.pool, pool_years.pool_key, pool_years.area_level, pool_years.area_code,
        pool_years.indicator, pool_years.multiplier, periods.period_start, periods.period_end, periods.period_label
)

select
    *,
    {{ rate('deaths', 'live_births', 'multiplier') }} as rate_per_1000,
    {{ poisson_rate_limit('lower', 'deaths', 'live_births', 'multiplier') }} as ci95_lower,
    {{ poisson_rate_limit('upper', 'deaths', 'live_births', 'multiplier') }} as ci95_upper
from pooled
