-- BYM2 smoothed commune rates per indicator and period (computed by int_bym2_rates;
-- docs/methods/maps.md, "BYM2 smoothing and spatial clusters").
with bym2 as (
    select * from {{ ref('int_bym2_rates') }}
),

periods as (
    select * from {{ ref('int_analysis_periods') }}
)

select
    cast(bym2.commune_code as varchar) as commune_code,
    cast(bym2.commune_name as varchar) as commune_name,
    cast(bym2.region_code as varchar) as region_code,
    cast(bym2.indicator as varchar) as indicator,
    cast(bym2.period_start as integer) as period_start,
    cast(bym2.period_end as integer) as period_end,
    periods.period_label,
    cast(bym2.deaths as bigint) as deaths,
    cast(bym2.live_births as bigint) as live_births,
    cast(bym2.crude_rate_per_1000 as double) as crude_rate_per_1000,
    cast(bym2.region_rate_per_1000 as double) as region_rate_per_1000,
    cast(bym2.bym2_rate_per_1000 as double) as bym2_rate_per_1000,
    cast(bym2.bym2_ci95_lower as double) as bym2_ci95_lower,
    cast(bym2.bym2_ci95_upper as double) as bym2_ci95_upper,
    cast(bym2.bym2_prob_exceeds_region as double) as bym2_prob_exceeds_region,
    cast(bym2.phi_posterior_mean as double) as phi_posterior_mean,
    cast(bym2.spatial_part as varchar) as spatial_part,
    cast(bym2.component_size as integer) as component_size,
    cast(bym2.scaling_factor as double) as scaling_factor,
    cast(bym2.method as varchar) as method,
    cast(bym2.note as varchar) as note
from bym2
left join periods
    on bym2.period_start = periods.period_start
    and bym2.period_end = periods.period_end
