-- The trend mart: the rows of int_trends (a Python model: dbt cannot put a contract on it)
-- under an enforced contract, in the column order readers know: one row per series, period and
-- method (the count model, the headline; the study's Prais-Winsten fit and joinpoint beside it).
with trends as (
    select * from {{ ref('int_trends') }}
)

select
    area_level,
    area_code,
    area_name,
    region_code,
    indicator,
    cast(period_start as bigint) as period_start,
    cast(period_end as bigint) as period_end,
    method,
    fitter,
    method_label,
    cast(n_years as bigint) as n_years,
    cast(n_years_used as bigint) as n_years_used,
    cast(n_zero_years as bigint) as n_zero_years,
    cast(n_deaths as bigint) as n_deaths,
    slope_log10,
    intercept_log10,
    slope_se,
    t_stat,
    p_value,
    rho,
    cast(iterations as bigint) as iterations,
    converged,
    dw_original,
    dw_transformed,
    dispersion,
    apc,
    apc_ci95_lower,
    apc_ci95_upper,
    trend,
    cast(n_methods_classed as bigint) as n_methods_classed,
    cast(n_methods_agreeing as bigint) as n_methods_agreeing,
    methods_disagreeing,
    note
from trends
