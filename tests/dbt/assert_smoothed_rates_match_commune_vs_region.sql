-- fct_smoothed_rates has exactly the rows and counts of fct_commune_vs_region.
select coalesce(smoothed.commune_code, compared.commune_code) as commune_code,
    coalesce(smoothed.indicator, compared.indicator) as indicator,
    coalesce(smoothed.period_start, compared.period_start) as period_start,
    smoothed.deaths, compared.deaths as compared_deaths,
    smoothed.crude_rate_per_1000, compared.rate_per_1000
from {{ ref('fct_smoothed_rates') }} as smoothed
full outer join {{ ref('fct_commune_vs_region') }} as compared
    on smoothed.commune_code = compared.commune_code and smoothed.indicator = compared.indicator
    and smoothed.period_start = compared.period_start and smoothed.period_end = compared.period_end
where smoothed.commune_code is null or compared.commune_code is null
    or smoothed.deaths is distinct from compared.deaths
    or smoothed.live_births is distinct from compared.live_births
    or abs(smoothed.crude_rate_per_1000 - compared.rate_per_1000) > 1e-9
    or (smoothed.crude_rate_per_1000 is null) <> (compared.rate_per_1000 is null)
