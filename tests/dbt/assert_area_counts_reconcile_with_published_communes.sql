-- The one pooling rule, as a reader checks it (docs/methods/core.md, "One rule for every aggregate of communes"): a region's (the
-- country's) deaths are the sum of its communes' published deaths plus
-- unpublished_commune_deaths, and the same for births, in every year. One parent only, so
-- that a partial build (`--select +fct_area_year_rates`) runs exactly the tests it can.
-- Rows returned are the areas that do not add up.
with yearly as (
    select * from {{ ref('fct_area_year_rates') }}
),

commune_years as (
    select region_code, year, indicator, deaths, live_births from yearly where area_level = 'commune'
),

published_sums as (
    select 'region' as area_level, region_code as area_code, year, indicator,
        coalesce(sum(deaths), 0) as deaths, coalesce(sum(live_births), 0) as live_births
    from commune_years group by region_code, year, indicator
    union all
    select 'country', 'CL', year, indicator, coalesce(sum(deaths), 0), coalesce(sum(live_births), 0)
    from commune_years where region_code is not null group by year, indicator
)

select areas.area_level, areas.area_code, areas.year, areas.indicator,
    areas.deaths, sums.deaths + areas.unpublished_commune_deaths as expected_deaths,
    areas.live_births, sums.live_births + areas.unpublished_commune_births as expected_live_births
from yearly as areas
inner join published_sums as sums
    on areas.area_level = sums.area_level and areas.area_code = sums.area_code
    and areas.year = sums.year and areas.indicator = sums.indicator
where areas.deaths is not null
    and (areas.deaths is distinct from sums.deaths + areas.unpublished_commune_deaths
        or areas.live_births is distinct from sums.live_births + areas.unpublished_commune_births)
