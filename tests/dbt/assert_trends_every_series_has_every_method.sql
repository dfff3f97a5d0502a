-- Every series and period has one row per method: the count model is beside every study fit.
select area_level, area_code, indicator, period_start, period_end, count(*) as methods
from {{ ref('fct_trends') }}
group by area_level, area_code, indicator, period_start, period_end
having count(*) <> (select count(distinct method) from {{ ref('fct_trends') }})
