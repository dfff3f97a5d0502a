-- Every trend row's class is the rule of methods.md section 5, for every method: too few deaths
-- (var trend_min_deaths) -> insufficient_data; too few usable years (var trend_min_years) or no
-- valid fit (no p-value) -> not_estimable; else the p-value against var trend_p_threshold and the
-- sign of the slope. Rows returned are the classes that break the rule.
{% set p_threshold = number_var('trend_p_threshold') %}
select area_level, area_code, indicator, period_start, period_end, method, trend, n_deaths, n_years_used,
    p_value, slope_log10
from {{ ref('fct_trends') }}
where trend is distinct from (
    case
        when n_deaths < {{ int_var('trend_min_deaths') }} then 'insufficient_data'
        when n_years_used < {{ int_var('trend_min_years') }} or p_value is null then 'not_estimable'
        when p_value < {{ p_threshold }} and slope_log10 > 0 then 'increasing'
        when p_value < {{ p_threshold }} and slope_log10 < 0 then 'decreasing'
        else 'stationary'
    end
)
