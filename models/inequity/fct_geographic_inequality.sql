-- Between-commune inequality per region and the country (int_geographic_inequality), with area
-- names, under a contract.
with inequality as (
    select * from {{ ref('int_geographic_inequality') }}
),

regions as (
    select distinct region_code, region_name from {{ ref('dim_commune') }}
)

select
    inequality.area_level,
    inequality.area_code,
    case when inequality.area_level = 'country' then 'Chile' else regions.region_name end as area_name,
    inequality.indicator,
    inequality.span,
    cast(inequality.period_start as integer) as period_start,
    cast(inequality.period_end as integer) as period_end,
    cast(inequality.n_communes as integer) as n_communes,
    cast(inequality.deaths as bigint) as deaths,
    cast(inequality.live_births as bigint) as live_births,
    cast(inequality.rate_per_1000 as double) as rate_per_1000,
    cast(inequality.crude_variance as double) as crude_variance,
    cast(inequality.crude_cv as double) as crude_cv,
    cast(inequality.index_of_disparity as double) as index_of_disparity,
    cast(inequality.noise_variance as double) as noise_variance,
    cast(inequality.true_variance as double) as true_variance,
    cast(inequality.true_variance_ci95_lower as double) as true_variance_ci95_lower,
    cast(inequality.true_variance_ci95_upper as double) as true_variance_ci95_upper,
    cast(inequality.true_cv as double) as true_cv,
    cast(inequality.true_cv_ci95_lower as double) as true_cv_ci95_lower,
    cast(inequality.true_cv_ci95_upper as double) as true_cv_ci95_upper,
    cast(inequality.n_years_trend as integer) as n_years_trend,
    cast(inequality.true_variance_slope as double) as true_variance_slope,
    cast(inequality.true_variance_slope_p_value as double) as true_variance_slope_p_value,
    cast(inequality.true_variance_trend as varchar) as true_variance_trend
from inequality
left join regions on inequality.area_level = 'region' and inequality.area_code = regions.region_code
