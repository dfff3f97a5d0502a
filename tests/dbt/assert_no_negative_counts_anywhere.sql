-- No mart publishes a negative count: a negative derived count must have become unavailable.
select 'fct_rates_commune_year' as mart, area_code as key, deaths, live_births
from {{ ref('fct_rates_commune_year') }}
where deaths < 0 or live_births < 0
