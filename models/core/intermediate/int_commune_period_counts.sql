-- Each commune's pooled counts over each analysis period beside its region's over the same
-- years (pool `commune_years` of int_period_pooled_counts, paired by pool_key): what a commune is
-- compared with (comparisons) and smoothed towards (maps). Both rooms read it here, so the maps
-- start as soon as the pooling is done, not after the comparisons are.
with pooled as (
    select * from {{ ref('int_period_pooled_counts') }}
    where pool = 'commune_years'
),

communes as (
    select
        pool_key, area_code as commune_code, area_name as commune_name, region_code, indicator,
        multiplier, period_start, period_end, period_label, n_years, n_years_in_period, deaths,
        live_births, rate_per_1000, ci95_lower, ci95_upper
    from pooled
    where area_level = 'commune'
),

regions as (
    select
        pool_key, area_name as region_name, indicator, period_start, period_end,
        deaths as region_deaths, live_births as region_live_births,
        rate_per_1000 as region_rate_per_1000
    from pooled
    where area_level = 'region'
)

select
    communes.commune_code,
    communes.commune_name,
    communes.region_code,
    regions.region_name,
    communes.indicator,
    communes.multiplier,
    cast(communes.period_start as integer) as period_start,
    cast(communes.period_end as integer) as period_end,
    communes.period_label,
    cast(communes.n_years as integer) as n_years,
    cast(communes.n_years_in_period as integer) as n_years_in_period,
    cast(communes.deaths as bigint) as deaths,
    cast(communes.live_births as bigint) as live_births,
    communes.rate_per_1000,
    communes.ci95_lower,
    communes.ci95_upper,
    cast(regions.region_deaths as bigint) as region_deaths,
    cast(regions.region_live_births as bigint) as region_live_births,
    regions.region_rate_per_1000
from communes
left join regions
    on communes.pool_key = regions.pool_key
    and communes.indicator = regions.indicator
    and communes.period_start = regions.period_start
    and communes.period_end = regions.period_end
