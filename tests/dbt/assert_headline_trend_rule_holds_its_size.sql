-- The headline trend method (var trend_method) is the one the screening and the report read:
-- under no trend, in every period length and deaths band of fct_trend_calibration, it classes at
-- most var trend_p_threshold of series (within 2 Monte Carlo standard errors). Returns the cells
-- where it does not, and fails when the calibration has no row for the method at all (rerun
-- `make calibrate` after changing the trend vars).
with headline as (
    select * from {{ ref('fct_trend_calibration') }}
    where method = {{ string_var('trend_method') }} and yearly_change = 0
)

select method, scenario, period_years, deaths_band, rate, mc_se, nominal_size
from headline
where not holds_size or nominal_size <> {{ number_var('trend_p_threshold') }}
union all
select {{ string_var('trend_method') }}, 'no calibration row for the headline method', null, null, null, null, null
where not exists (select 1 from headline)
