-- The one availability rule of every aggregate of communes (issue 41; docs/methods/core.md, "One availability rule for
-- every mart"):
-- each commune-year once per area it belongs to (its region, and the country when the build has
-- more than one region), with whether that area has a rate in that year (`area_is_available`,
-- exactly the rate of fct_area_year_rates) and, if not, why. A mart that sums, ranks, compares
-- or measures the communes of an area reads them from here and uses only the commune-years
-- whose area is available: an area-year without a rate publishes nothing, and a period pools
-- the years in which the area has a rate, as fct_area_period_rates does (never a silently
-- smaller or larger sum than the area's own).
with counts as (
    select * from {{ ref('int_area_year_counts') }}
),

communes as (
    select
        area_code as commune_code, area_name as commune_name, region_code, indicator, multiplier,
        year, deaths, live_births, count_problem is null as is_published
    from counts
    where area_level = 'commune' and region_code is not null
),

areas as (
    select area_level, area_code, area_name, region_code, indicator, year,
        count_problem is null as is_available, count_problem as unavailable_reason
    from counts
    where area_level in ('region', 'country')
)

select
    areas.area_level,
    areas.area_code,
    areas.area_name,
    communes.commune_code,
    communes.commune_name,
    communes.region_code,
    communes.indicator,
    communes.multiplier,
    cast(communes.year as integer) as year,
    -- The commune-year's counts as the area's sum takes them: signed, also without a rate of its own.
    communes.deaths,
    communes.live_births,
    -- Whether the commune-year has a published rate (fct_area_year_rates).
    communes.is_published,
    areas.is_available as area_is_available,
    areas.unavailable_reason as area_unavailable_reason
from communes
inner join areas
    on communes.indicator = areas.indicator
    and communes.year = areas.year
    and (communes.region_code = areas.area_code or areas.area_level = 'country')
