-- Screening of every commune (docs/methods/screening.md): its comparison with the rest of its
-- region (fct_commune_vs_region.comparison) and its trend over the same period (fct_trends, each
-- method), combined into one category, so that "worse and worsening" needs no hand join.
-- A higher rate is worse and an increasing trend is worsening (mortality indicators).
with comparisons as (
    select
        commune_code, commune_name, region_code, indicator, period_start, period_end, period_label,
        rate_per_1000, rest_rate_ratio, p_value as comparison_p_value, comparison
    from {{ ref('fct_commune_vs_region') }}
),

trends as (
    select area_code, indicator, period_start, period_end, method, apc, apc_ci95_lower, apc_ci95_upper,
        p_value as trend_p_value, trend, n_methods_agreeing, methods_disagreeing
    from {{ ref('fct_trends') }}
    where area_level = 'commune'
),

joined as (
    select
        comparisons.*,
        trends.method,
        trends.method = {{ string_var('trend_method') }} as is_headline_method,
        trends.apc,
        trends.apc_ci95_lower,
        trends.apc_ci95_upper,
        trends.trend_p_value,
        trends.trend,
        trends.n_methods_agreeing,
        trends.methods_disagreeing
    from comparisons
    inner join trends
        on comparisons.commune_code = trends.area_code
        and comparisons.indicator = trends.indicator
        and comparisons.period_start = trends.period_start
        and comparisons.period_end = trends.period_end
),

classified as (
    select
        *,
        case
            when comparison is null or trend not in ('increasing', 'decreasing', 'stationary')
                then 'not_classifiable'
            when comparison = 'higher' and trend = 'increasing' then 'worse_and_worsening'
            when comparison = 'higher' then 'worse'
            when comparison = 'lower' and trend = 'decreasing' then 'better_and_improving'
            when comparison = 'lower' then 'better'
            when trend = 'increasing' then 'worsening'
            when trend = 'decreasing' then 'improving'
            else 'similar_no_trend'
        end as screening_category
    from joined
)

select
    commune_code,
    commune_name,
    region_code,
    indicator,
    cast(period_start as integer) as period_start,
    cast(period_end as integer) as period_end,
    period_label,
    method,
    is_headline_method,
    rate_per_1000,
    rest_rate_ratio,
    comparison_p_value,
    comparison,
    apc,
    apc_ci95_lower,
    apc_ci95_upper,
    trend_p_value,
    trend,
    n_methods_agreeing,
    methods_disagreeing,
    screening_category,
    -- Worst first, for lists that lead with the communes to look at.
    cast(case screening_category
        when 'worse_and_worsening' then 1
        when 'worse' then 2
        when 'worsening' then 3
        when 'similar_no_trend' then 4
        when 'improving' then 5
        when 'better' then 6
        when 'better_and_improving' then 7
        else 8
    end as integer) as screening_order
from classified
