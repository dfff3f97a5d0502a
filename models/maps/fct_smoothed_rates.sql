-- Empirical Bayes smoothed commune rates per indicator and period (computed by
-- int_smoothed_rates; docs/methods/maps.md, "Smoothed rates").
with smoothed as (
    select * from {{ ref('int_smoothed_rates') }}
),

periods as (
    select * from {{ ref('int_analysis_periods') }}
)

select
    cast(smoothed.commune_code as varchar) as commune_code,
    cast(smoothed.commune_name as varchar) as commune_name,
    cast(smoothed.region_code as varchar) as region_code,
    cast(smoothed.indicator as varchar) as indicator,
    cast(smoothed.period_start as integer) as period_start,
    cast(smoothed.period_end as integer) as period_end,
    periods.period_label,
    cast(smoothed.deaths as bigint) as deaths,
    cast(smoothed.live_births as bigint) as live_births,
    cast(smoothed.crude_rate_per_1000 as double) as crude_rate_per_1000,
    cast(smoothed.eb_global_rate_per_1000 as double) as eb_global_rate_per_1000,
    cast(smoothed.eb_local_rate_per_1000 as double) as eb_local_rate_per_1000,
    cast(smoothed.shrinkage as double) as shrinkage,
    cast(smoothed.prob_exceeds_region as double) as prob_exceeds_region,
    cast(smoothed.note as varchar) as note
from smoothed
left join periods
    on smoothed.period_start = periods.period_start
    and smoothed.period_end = periods.period_end
