-- Every trend with statistics has its APC inside its interval, and APC has the sign of the slope.
select area_level, area_code, indicator, period_start, period_end, method, apc, apc_ci95_lower, apc_ci95_upper
from {{ ref('fct_trends') }}
where slope_log10 is not null
    and not (
        apc_ci95_lower <= apc and apc <= apc_ci95_upper
        and sign(apc) = sign(slope_log10)
    )
