-- The region's and the country's pooled rate over each analysis period: sum(deaths) /
-- sum(births) over the years in which the area's own rate is available, with exact Poisson
-- limits (pool `area_years` of int_period_pooled_counts, the warehouse's one pooling rule).
with pooled as (
    select * from {{ ref('int_period_pooled_counts') }}
    where pool = 'area_years' and area_level in ('region', 'country')
)

select
    area_level,
    area_code,
    area_name,
    indicator,
    cast(period_start as integer) as period_start,
    cast(period_end as integer) as period_end,
    period_label,
    cast(n_years as integer) as n_years,
    cast(deaths as bigint) as deaths,
    cast(live_births as bigint) as live_births,
    rate_per_1000,
    ci95_lower,
    ci95_upper,
    cast(unpublished_commune_deaths as bigint) as unpublished_commune_deaths,
    cast(unpublished_commune_births as bigint) as unpublished_commune_births
from pooled
