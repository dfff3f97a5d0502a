-- Empirical Bayes smoothed commune rates per indicator and period (computed by
-- int_smoothed_rates; docs/methods.md section 6).
select
    cast(commune_code as varchar) as commune_code,
    cast(commune_name as varchar) as commune_name,
    cast(region_code as varchar) as region_code,
    cast(indicator as varchar) as indicator,
    cast(period_start as integer) as period_start,
    cast(period_end as integer) as period_end,
    cast(deaths as bigint) as deaths,
    cast(live_births as bigint) as live_births,
    cast(crude_rate_per_1000 as double) as crude_rate_per_1000,
    cast(eb_global_rate_per_1000 as double) as eb_global_rate_per_1000,
    cast(eb_local_rate_per_1000 as double) as eb_local_rate_per_1000,
    cast(shrinkage as double) as shrinkage,
    cast(prob_exceeds_region as double) as prob_exceeds_region,
    cast(note as varchar) as note
from {{ ref('int_smoothed_rates') }}
