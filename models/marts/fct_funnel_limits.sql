-- The funnel plot's control limits, published for the report and BI tools (int_funnel_limits).
select
    region_code,
    indicator,
    cast(period_start as integer) as period_start,
    cast(period_end as integer) as period_end,
    cast(grid_point as integer) as grid_point,
    cast(live_births as double) as live_births,
    cast(region_rate_per_1000 as double) as region_rate_per_1000,
    cast(expected_deaths as double) as expected_deaths,
    cast(lower_95_per_1000 as double) as lower_95_per_1000,
    cast(upper_95_per_1000 as double) as upper_95_per_1000,
    cast(lower_998_per_1000 as double) as lower_998_per_1000,
    cast(upper_998_per_1000 as double) as upper_998_per_1000,
    cast(phi as double) as phi,
    cast(tau2 as double) as tau2,
    cast(adjusted_lower_95_per_1000 as double) as adjusted_lower_95_per_1000,
    cast(adjusted_upper_95_per_1000 as double) as adjusted_upper_95_per_1000,
    cast(adjusted_lower_998_per_1000 as double) as adjusted_lower_998_per_1000,
    cast(adjusted_upper_998_per_1000 as double) as adjusted_upper_998_per_1000
from {{ ref('int_funnel_limits') }}
