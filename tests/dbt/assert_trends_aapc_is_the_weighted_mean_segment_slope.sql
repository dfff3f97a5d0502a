-- Every joinpoint AAPC of fct_trends is 100 (10^m - 1), m the segments' slopes weighted by their
-- lengths in years (Clegg et al. 2009), and the segments span the fitted years end to end.
with segments as (
    select
        area_level, area_code, indicator, period_start, period_end,
        sum((segment_end - segment_start) * slope_log10) / sum(segment_end - segment_start) as mean_slope,
        count(*) as n_segments
    from {{ ref('fct_trend_segments') }}
    group by area_level, area_code, indicator, period_start, period_end
),

joinpoint as (
    select * from {{ ref('fct_trends') }}
    where method = 'joinpoint' and slope_log10 is not null
)

select joinpoint.area_level, joinpoint.area_code, joinpoint.indicator, joinpoint.period_start,
    joinpoint.period_end, joinpoint.apc, segments.mean_slope
from joinpoint
left join segments
    on joinpoint.area_level = segments.area_level and joinpoint.area_code = segments.area_code
    and joinpoint.indicator = segments.indicator and joinpoint.period_start = segments.period_start
    and joinpoint.period_end = segments.period_end
where segments.mean_slope is null
    or abs(joinpoint.slope_log10 - segments.mean_slope) > 1e-12
    or abs(joinpoint.apc - 100 * (power(10, segments.mean_slope) - 1)) > 1e-9 * greatest(1, abs(joinpoint.apc))
