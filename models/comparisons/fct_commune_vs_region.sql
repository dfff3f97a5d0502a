-- Each commune against its own region over each analysis period (docs/methods/comparisons.md, "A commune against its region").
-- The pooled counts come from core's int_commune_period_counts (pool `commune_years` of
-- int_period_pooled_counts): a commune-year without a rate is left out of the commune's sums AND
-- of its region's sums for that comparison, so both sides, and the rest of the region, always
-- cover the same years (n_years says how many).
{% set alpha = number_var('comparison_alpha') %}

with paired_counts as (
    select * from {{ ref('int_commune_period_counts') }}
),

dispersion as (
    select region_code, indicator, period_start, period_end, tau2 from {{ ref('int_funnel_dispersion') }}
),

paired as (
    select paired_counts.*, dispersion.tau2
    from paired_counts
    left join dispersion
        on paired_counts.region_code = dispersion.region_code
        and paired_counts.indicator = dispersion.indicator
        and paired_counts.period_start = dispersion.period_start
        and paired_counts.period_end = dispersion.period_end
),

rates as (
    select
        *,
        region_deaths - deaths as rest_deaths,
        region_live_births - live_births as rest_live_births,
        {{ rate('region_deaths - deaths', 'region_live_births - live_births', 'multiplier') }} as rest_rate_per_1000
    from paired
),

compared as (
    select
        *,
        rate_per_1000 / nullif(region_rate_per_1000, 0) as rate_ratio,
        -- The commune is inside the region: log-scale variance 1/d_c - 1/D (not + 1/D); none
        -- when the commune holds every death of the region.
        case when region_deaths > deaths then {{ log_rate_ratio_se('deaths', 'region_deaths', 'true') }} end
            as log_rate_ratio_se,
        rate_per_1000 / nullif(rest_rate_per_1000, 0) as rest_rate_ratio,
        {{ expected_deaths('live_births', 'region_rate_per_1000', 'multiplier') }} as expected_deaths,
        live_births > 0 and rest_live_births > 0 as has_rest_of_region
    from rates
),

tested as (
    select
        *,
        case when has_rest_of_region
            then imr_rate_ratio_midp(deaths, live_births, rest_deaths, rest_live_births) end as p_value
    from compared
),

published as (
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
    ci95_lower,
    ci95_upper,
    deaths < {{ int_var('unreliable_below_deaths') }} as is_unreliable,
    cast(region_deaths as bigint) as region_deaths,
    cast(region_live_births as bigint) as region_live_births,
    region_rate_per_1000,
    rate_ratio,
    {{ log_scale_limit('lower', 'rate_ratio', 'log_rate_ratio_se') }} as rate_ratio_ci95_lower,
    {{ log_scale_limit('upper', 'rate_ratio', 'log_rate_ratio_se') }} as rate_ratio_ci95_upper,
    rate_per_1000 - region_rate_per_1000 as excess_rate_per_1000,
    {{ attributable_percent('rate_per_1000', 'region_rate_per_1000') }} as attributable_percent,
    deaths - expected_deaths as excess_deaths,
    cast(rest_deaths as bigint) as rest_deaths,
    cast(rest_live_births as bigint) as rest_live_births,
    rest_rate_per_1000,
    rest_rate_ratio,
    -- The interval of the label: it inverts the mid-p test at level 1 - comparison_alpha, so
    -- `comparison` says exactly whether it excludes 1.
    case when has_rest_of_region
        then imr_rate_ratio_midp_lower(deaths, live_births, rest_deaths, rest_live_births, 1 - {{ alpha }}) end
        as rest_rate_ratio_ci95_lower,
    case when has_rest_of_region
        then imr_rate_ratio_midp_upper(deaths, live_births, rest_deaths, rest_live_births, 1 - {{ alpha }}) end
        as rest_rate_ratio_ci95_upper,
    -- The exact (Clopper-Pearson) conditional interval, conservative: it may include 1 beside a
    -- `higher` or `lower` (its test is not the label's).
    case when has_rest_of_region
        then imr_rate_ratio_lower(deaths, live_births, rest_deaths, rest_live_births, 0.95) end
        as rest_rate_ratio_exact_lower,
    case when has_rest_of_region
        then imr_rate_ratio_upper(deaths, live_births, rest_deaths, rest_live_births, 0.95) end
        as rest_rate_ratio_exact_upper,
    p_value,
    case
        when p_value < {{ alpha }}
            then case when deaths * rest_live_births > rest_deaths * live_births then 'higher' else 'lower' end
        when p_value is not null then 'similar'
    end as comparison,
    -- Exact Poisson control limits at 95% and 99.8% (python/infant_mortality/statistics/poisson.py).
    imr_funnel_category(deaths, expected_deaths) as funnel_category,
    -- The same against the limits adjusted for the region's over-dispersion (int_funnel_dispersion).
    case when expected_deaths > 0
        then imr_funnel_category_adjusted(deaths, expected_deaths, tau2) end as funnel_category_adjusted,
    cast(row_number() over (
        partition by region_code, indicator, period_start, period_end
        order by rate_per_1000 desc nulls last, commune_code asc
    ) as integer) as rank_in_region
from tested
)

select
    *,
    -- The two classifications answer different questions; where they part, say why, so a
    -- reader of the funnel plot is not left with two contradicting marks.
    case
        when comparison = 'higher' and funnel_category not in ('above_95', 'above_99_8')
            then 'higher than the rest of the region by the mid-p test, but within the funnel''s 95% limits: '
                || 'the funnel compares with the whole region''s rate (this commune included) by exact Poisson limits'
        when comparison = 'lower' and funnel_category not in ('below_95', 'below_99_8')
            then 'lower than the rest of the region by the mid-p test, but within the funnel''s 95% limits: '
                || 'the funnel compares with the whole region''s rate (this commune included) by exact Poisson limits'
        when comparison = 'similar' and funnel_category <> 'within'
            then 'outside the funnel''s 95% limits around the whole region''s rate (exact Poisson), but not different '
                || 'from the rest of the region by the mid-p test at comparison_alpha'
        when comparison in ('higher', 'lower') and funnel_category in ('above_95', 'above_99_8', 'below_95', 'below_99_8')
            and (comparison = 'higher') <> (funnel_category in ('above_95', 'above_99_8'))
            then 'the funnel and the mid-p test point in opposite directions'
    end as funnel_differs_note
from published
