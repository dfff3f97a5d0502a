-- The trend class follows the p-value and the sign of the slope (threshold var trend_p_threshold).
select area_level, area_code, indicator, period_start, period_end, trend, p_value, slope_log10
from {{ ref('fct_trends') }}
where trend <> 'not_estimable'
    and trend is distinct from (
        case
            when p_value < {{ number_var('trend_p_threshold') }} and slope_log10 > 0 then 'increasing'
            when p_value < {{ number_var('trend_p_threshold') }} and slope_log10 < 0 then 'decreasing'
            else 'stationary'
        end
    )
