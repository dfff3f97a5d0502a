-- Pooled rate of each deprivation quintile (q1 most deprived ... q5 least deprived, the
-- reference), with exact Poisson 95% limits; computed in int_inequality__quintile_rates.
select
    area_level,
    area_code,
    area_name,
    indicator,
    cast(period_start as integer) as period_start,
    cast(period_end as integer) as period_end,
    period_label,
    period_kind,
    stratifier,
    cast(quintile as integer) as quintile,
    cast(n_communes as integer) as n_communes,
    cast(deaths as bigint) as deaths,
    cast(live_births as bigint) as live_births,
    cast(rate_per_1000 as double) as rate_per_1000,
    cast(ci95_lower as double) as ci95_lower,
    cast(ci95_upper as double) as ci95_upper,
    cast(value_min as double) as value_min,
    cast(value_max as double) as value_max
from {{ ref('int_inequality__quintile_rates') }}
