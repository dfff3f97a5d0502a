-- No mart publishes a negative count: a negative derived count must have become unavailable.
select 'fct_area_year_rates' as mart, area_code as key, deaths, live_births
from {{ ref('fct_area_year_rates') }}
where deaths < 0 or live_births < 0
