-- The same over analysis periods: a region's pooled deaths (pool area_years, what
-- fct_area_period_rates publishes) are the sum of its communes' pooled deaths (pool
-- commune_years, what fct_commune_vs_region publishes) plus the period's
-- unpublished_commune_deaths, and the same for births. Rows returned do not add up.
with pooled as (
    select * from {{ ref('int_period_pooled_counts') }}
),

commune_sums as (
    select region_code, indicator, period_start, period_end,
        coalesce(sum(deaths), 0) as deaths, coalesce(sum(live_births), 0) as live_births
    from pooled
    where pool = 'commune_years' and area_level = 'commune'
    group by region_code, indicator, period_start, period_end
)

select regions.area_code, regions.indicator, regions.period_label,
    regions.deaths, sums.deaths + regions.unpublished_commune_deaths as expected_deaths,
    regions.live_births, sums.live_births + regions.unpublished_commune_births as expected_live_births
from pooled as regions
inner join commune_sums as sums
    on regions.area_code = sums.region_code and regions.indicator = sums.indicator
    and regions.period_start = sums.period_start and regions.period_end = sums.period_end
where regions.pool = 'area_years' and regions.area_level = 'region' and regions.deaths is not null
    and (regions.deaths is distinct from sums.deaths + regions.unpublished_commune_deaths
        or regions.live_births is distinct from sums.live_births + regions.unpublished_commune_births)
