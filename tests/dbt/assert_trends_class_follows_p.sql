-- The trend class follows the p-value and the sign of the slope (threshold var trend_p_threshold),
-- for every method; rows without a class (not_estimable, insufficient_data) are not classes.
select area_level, area_code, indicator, period_start, period_end, method, trend, p_value, slope_log10
from {{ ref('fct_trends') }}
where trend in ('increasing', 'decreasing', 'stationary')
    and trend is distinct from (
        case
            when p_value < {{ number_var('trend_p_threshold') }} and slope_log10 > 0 then 'increasing'
            when p_value < {{ number_var('trend_p_threshold') }} and slope_log10 < 0 then 'decreasing'
            else 'stationary'
        end
    )
