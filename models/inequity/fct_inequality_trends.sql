-- Is the gap closing? The Prais-Winsten trend of the yearly RII (log10) over each analysis
-- period, confirmed by the count model of the gradient's change (int_inequality__gap_trends),
-- next to the RII of the pooled period.
with trends as (
    select * from {{ ref('int_inequality__gap_trends') }}
),

pooled_rii as (
    select * from {{ ref('int_inequality__measures') }}
    where measure = 'RII'
),

periods as (
    select * from {{ ref('int_analysis_periods') }}
)

select
    trends.area_level,
    trends.area_code,
    pooled_rii.area_name,
    trends.indicator,
    trends.stratifier,
    cast(trends.period_start as integer) as period_start,
    cast(trends.period_end as integer) as period_end,
    periods.period_label,
    cast(pooled_rii.estimate as double) as rii,
    cast(pooled_rii.ci95_lower as double) as rii_ci95_lower,
    cast(pooled_rii.ci95_upper as double) as rii_ci95_upper,
    cast(trends.n_years as integer) as n_years,
    cast(trends.n_years_used as integer) as n_years_used,
    cast(trends.slope_log10 as double) as slope_log10,
    cast(trends.slope_se as double) as slope_se,
    cast(trends.intercept_log10 as double) as intercept_log10,
    cast(trends.p_value as double) as p_value,
    cast(trends.rho as double) as rho,
    cast(trends.iterations as integer) as iterations,
    cast(trends.converged as boolean) as converged,
    cast(trends.apc as double) as apc,
    cast(trends.apc_ci95_lower as double) as apc_ci95_lower,
    cast(trends.apc_ci95_upper as double) as apc_ci95_upper,
    cast(trends.fitted_log10_rii_mid as double) as fitted_log10_rii_mid,
    trends.trend,
    trends.gap_change,
    cast(trends.n_deaths as bigint) as n_deaths,
    cast(trends.count_test_p_value as double) as count_test_p_value,
    trends.note
from trends
inner join periods
    on trends.period_start = periods.period_start and trends.period_end = periods.period_end
left join pooled_rii
    on trends.area_level = pooled_rii.area_level
    and trends.area_code = pooled_rii.area_code
    and trends.indicator = pooled_rii.indicator
    and trends.stratifier = pooled_rii.stratifier
    and trends.period_start = pooled_rii.period_start
    and trends.period_end = pooled_rii.period_end
