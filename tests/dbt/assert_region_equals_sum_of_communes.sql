-- Region and country rows must equal the sum of their communes' counts (never an average);
-- when a commune inside has no count, the area's counts are null and it says why.
with communes as (
    select * from {{ ref('int_commune_year_counts') }} where region_code is not null
),

expected as (
    select 'region' as area_level, region_code as area_code, year, indicator,
        sum(deaths) as deaths, sum(live_births) as live_births
    from communes group by region_code, year, indicator
    union all
    select 'country', 'CL', year, indicator, sum(deaths), sum(live_births)
    from communes group by year, indicator
),

published as (
    select * from {{ ref('fct_area_year_rates') }} where area_level in ('region', 'country')
)

select published.area_level, published.area_code, published.year, published.indicator,
    published.deaths, expected.deaths as expected_deaths,
    published.live_births, expected.live_births as expected_live_births
from published
inner join expected using (area_level, area_code, year, indicator)
where (published.live_births is not null and published.live_births is distinct from expected.live_births)
    or (published.deaths is not null and published.deaths is distinct from expected.deaths)
    or (published.live_births is null and published.unavailable_reason is null)
