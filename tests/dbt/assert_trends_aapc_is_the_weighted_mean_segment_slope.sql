-- Every joinpoint fit's AAPC (fct_trends' row, carried beside its segments) is 100 (10^m - 1),
-- m the segments' slopes weighted by their lengths in years (Clegg et al. 2009), and the
-- segments of a fit are numbered 1..n_segments, each starting where the previous one ends.
with fits as (
    select
        area_level, area_code, indicator, period_start, period_end,
        any_value(aapc_slope_log10) as aapc_slope_log10,
        any_value(aapc) as aapc,
        sum((segment_end - segment_start) * slope_log10) / sum(segment_end - segment_start) as mean_slope,
        count(*) as n_rows,
        any_value(n_segments) as n_segments,
        bool_and(segment = 1 or segment_start = previous_end) as contiguous
    from (
        select *, lag(segment_end) over (
            partition by area_level, area_code, indicator, period_start, period_end order by segment) as previous_end
        from {{ ref('fct_trend_segments') }}
    )
    group by area_level, area_code, indicator, period_start, period_end
)

select *
from fits
where abs(aapc_slope_log10 - mean_slope) > 1e-12
    or abs(aapc - 100 * (power(10, mean_slope) - 1)) > 1e-9 * greatest(1, abs(aapc))
    or n_rows <> n_segments
    or not contiguous
