-- Each commune against its own region over each analysis period (methods.md section 3).
-- Pooled rates are sum(deaths) / sum(births). A commune-year without a rate is left out of
-- the commune's sums AND of its region's sums for that comparison, so both sides always cover
-- the same years (n_years says how many).
{% set z95 = 1.959963984540054 %}  {# standard normal 0.975 quantile #}
{% set alpha = number_var('comparison_alpha') %}

with periods as (
    select period_start, period_end, period_label from {{ ref('int_analysis_periods') }}
),

yearly as (
    select * from {{ ref('fct_rates_commune_year') }}
),

commune_years as (
    select area_code as commune_code, area_name as commune_name, region_code, indicator, year,
        deaths, live_births, rate_per_1000 is not null as is_available
    from yearly
    where area_level = 'commune'
),

region_years as (
    select area_code as region_code, area_name as region_name, indicator, year,
        deaths as region_deaths, live_births as region_live_births
    from yearly
    where area_level = 'region' and rate_per_1000 is not null
),

pooled as (
    select
        commune_years.commune_code,
        max(commune_years.commune_name) as commune_name,
        commune_years.region_code,
        max(region_years.region_name) as region_name,
        commune_years.indicator,
        periods.period_start,
        periods.period_end,
        periods.period_label,
        count(region_years.year) as n_years,
        periods.period_end - periods.period_start + 1 as n_years_in_period,
        sum(case when region_years.year is not null then commune_years.deaths end) as deaths,
        sum(case when region_years.year is not null then commune_years.live_births end) as live_births,
        sum(region_years.region_deaths) as region_deaths,
        sum(region_years.region_live_births) as region_live_births
    from commune_years
    inner join periods
        on commune_years.year between periods.period_start and periods.period_end
    left join region_years
        on commune_years.is_available
        and commune_years.region_code = region_years.region_code
        and commune_years.indicator = region_years.indicator
        and commune_years.year = region_years.year
    group by commune_years.commune_code, commune_years.region_code, commune_years.indicator,
        periods.period_start, periods.period_end, periods.period_label
),

rates as (
    select
        *,
        region_deaths - deaths as rest_deaths,
        region_live_births - live_births as rest_live_births,
        {{ rate_per_1000('deaths', 'live_births') }} as rate_per_1000,
        {{ rate_per_1000('region_deaths', 'region_live_births') }} as region_rate_per_1000,
        {{ rate_per_1000('region_deaths - deaths', 'region_live_births - live_births') }} as rest_rate_per_1000
    from pooled
),

compared as (
    select
        *,
        rate_per_1000 / nullif(region_rate_per_1000, 0) as rate_ratio,
        -- The commune is inside the region: log-scale variance 1/d_c - 1/D (not + 1/D).
        case when deaths > 0 and region_deaths > deaths
            then sqrt(1.0 / deaths - 1.0 / region_deaths) end as log_rate_ratio_se,
        rate_per_1000 / nullif(rest_rate_per_1000, 0) as rest_rate_ratio,
        live_births * region_rate_per_1000 / 1000.0 as expected_deaths,
        live_births > 0 and rest_live_births > 0 as has_rest_of_region
    from rates
),

tested as (
    select
        *,
        case when has_rest_of_region
            then imr_rate_ratio_midp(deaths, live_births, rest_deaths, rest_live_births) end as p_value
    from compared
)

select
    commune_code,
    commune_name,
    region_code,
    region_name,
    indicator,
    cast(period_start as integer) as period_start,
    cast(period_end as integer) as period_end,
    period_label,
    cast(n_years as integer) as n_years,
    cast(n_years_in_period as integer) as n_years_in_period,
    cast(deaths as bigint) as deaths,
    cast(live_births as bigint) as live_births,
    rate_per_1000,
    {{ poisson_rate_limit('lower', 'deaths', 'live_births') }} as ci95_lower,
    {{ poisson_rate_limit('upper', 'deaths', 'live_births') }} as ci95_upper,
    deaths < {{ int_var('unreliable_below_deaths') }} as is_unreliable,
    cast(region_deaths as bigint) as region_deaths,
    cast(region_live_births as bigint) as region_live_births,
    region_rate_per_1000,
    rate_ratio,
    exp(ln(rate_ratio) - {{ z95 }} * log_rate_ratio_se) as rate_ratio_ci95_lower,
    exp(ln(rate_ratio) + {{ z95 }} * log_rate_ratio_se) as rate_ratio_ci95_upper,
    rate_per_1000 - region_rate_per_1000 as excess_rate_per_1000,
    100.0 * (rate_per_1000 - region_rate_per_1000) / nullif(rate_per_1000, 0) as attributable_percent,
    deaths - expected_deaths as excess_deaths,
    cast(rest_deaths as bigint) as rest_deaths,
    cast(rest_live_births as bigint) as rest_live_births,
    rest_rate_per_1000,
    rest_rate_ratio,
    case when has_rest_of_region
        then imr_rate_ratio_lower(deaths, live_births, rest_deaths, rest_live_births, 0.95) end
        as rest_rate_ratio_ci95_lower,
    case when has_rest_of_region
        then imr_rate_ratio_upper(deaths, live_births, rest_deaths, rest_live_births, 0.95) end
        as rest_rate_ratio_ci95_upper,
    p_value,
    case
        when p_value < {{ alpha }}
            then case when deaths * rest_live_births > rest_deaths * live_births then 'higher' else 'lower' end
        when p_value is not null then 'similar'
    end as comparison,
    -- Exact Poisson control limits at 95% and 99.8% (python/infant_mortality/poisson.py).
    imr_funnel_category(deaths, expected_deaths) as funnel_category,
    cast(row_number() over (
        partition by region_code, indicator, period_start, period_end
        order by rate_per_1000 desc nulls last, commune_code asc
    ) as integer) as rank_in_region
from tested
