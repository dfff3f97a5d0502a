-- Every trend row's class is the rule of docs/methods/trends.md, "Valid trend conclusions for small communes", for
-- every method: too few deaths
-- (var trend_min_deaths) -> insufficient_data; too few usable years (var trend_min_years) or no
-- valid fit (no p-value) -> not_estimable; else the p-value against var trend_p_threshold and the
-- sign of the slope; and a prais_winsten or joinpoint increase or decrease that the poisson row
-- of the same series does not share -> not_confirmed ("Trend calibration"). Rows returned are the
-- classes that break the rule.
{% set p_threshold = number_var('trend_p_threshold') %}
with by_p as (
    select *,
        case
            when n_deaths < {{ int_var('trend_min_deaths') }} then 'insufficient_data'
            when n_years_used < {{ int_var('trend_min_years') }} or p_value is null then 'not_estimable'
            when p_value < {{ p_threshold }} and slope_log10 > 0 then 'increasing'
            when p_value < {{ p_threshold }} and slope_log10 < 0 then 'decreasing'
            else 'stationary'
        end as class_by_p
    from {{ ref('fct_trends') }}
),

expected as (
    select trend_row.*,
        case
            when trend_row.method <> 'poisson' and trend_row.class_by_p in ('increasing', 'decreasing')
                and coalesce(trend_row.class_by_p <> count_model.class_by_p, true) then 'not_confirmed'
            else trend_row.class_by_p
        end as expected_trend
    from by_p as trend_row
    left join by_p as count_model
        on count_model.method = 'poisson'
        and (trend_row.area_level, trend_row.area_code, trend_row.indicator, trend_row.period_start, trend_row.period_end)
            = (count_model.area_level, count_model.area_code, count_model.indicator,
               count_model.period_start, count_model.period_end)
)

select area_level, area_code, indicator, period_start, period_end, method, trend, expected_trend,
    n_deaths, n_years_used, p_value, slope_log10
from expected
where trend is distinct from expected_trend
