-- Which communes each inequality measure ranks, and where: per area, indicator, period and
-- stratifier, every commune of the area with its value, ridit, quintile (docs/methods/inequity.md,
-- "Order, ridit, quintile") and its rate on the area's fitted Poisson gradient. Communes without live births
-- or without a value are listed with the reason, never silently dropped.
with membership as (
    select * from {{ ref('int_inequality__membership') }}
),

gradients as (
    select
        area_level, area_code, indicator, period_start, period_end, stratifier,
        max(case when measure = 'gradient_a' then estimate end) as gradient_a,
        max(case when measure = 'gradient_b' then estimate end) as gradient_b
    from {{ ref('int_inequality__measures') }}
    group by area_level, area_code, indicator, period_start, period_end, stratifier
)

select
    membership.area_level,
    membership.area_code,
    membership.area_name,
    membership.indicator,
    cast(membership.period_start as integer) as period_start,
    cast(membership.period_end as integer) as period_end,
    membership.period_label,
    membership.period_kind,
    membership.stratifier,
    membership.commune_code,
    membership.commune_name,
    membership.region_code,
    cast(membership.value as double) as value,
    cast(membership.deaths as bigint) as deaths,
    cast(membership.live_births as bigint) as live_births,
    cast(membership.unpublished_deaths as bigint) as unpublished_deaths,
    cast(membership.unpublished_live_births as bigint) as unpublished_live_births,
    {{ rate('membership.deaths', 'membership.live_births', 'membership.multiplier') }} as rate_per_1000,
    {{ poisson_rate_limit('lower', 'membership.deaths', 'membership.live_births', 'membership.multiplier') }} as ci95_lower,
    {{ poisson_rate_limit('upper', 'membership.deaths', 'membership.live_births', 'membership.multiplier') }} as ci95_upper,
    membership.exclusion_reason is null as is_ranked,
    membership.exclusion_reason,
    cast(membership.deprivation_rank as integer) as deprivation_rank,
    cast(membership.births_before as bigint) as births_before,
    cast(membership.ridit as double) as ridit,
    cast(membership.quintile as integer) as quintile,
    -- The gradient log(rate per birth) = a + b x evaluated at the commune's ridit, per multiplier.
    case when membership.exclusion_reason is null
        then membership.multiplier * exp(gradients.gradient_a + gradients.gradient_b * membership.ridit)
    end as fitted_rate_per_1000
from membership
left join gradients
    on membership.area_level = gradients.area_level
    and membership.area_code = gradients.area_code
    and membership.indicator = gradients.indicator
    and membership.period_start = gradients.period_start
    and membership.period_end = gradients.period_end
    and membership.stratifier = gradients.stratifier
