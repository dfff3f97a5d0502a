-- Yearly rates per the indicator's multiplier of live births (1000) for every commune, region and (with several regions) the
-- country, with exact Poisson 95% limits. A count that cannot give a rate (see
-- audit_data_quality) has deaths, rate and limits null and says why in unavailable_reason.
-- A region (the country) row also says how much of its count comes from commune-years whose
-- own count is not published here, so that its deaths = the sum of its communes' published
-- deaths + unpublished_commune_deaths, and the same for births (docs/methods/core.md, "One rule for every aggregate of
-- communes").
with counts as (
    select * from {{ ref('int_area_year_counts') }}
),

usable as (
    select
        *,
        count_problem is null as is_usable,
        -- What a row publishes: deaths only with a rate, births whenever counted.
        case when count_problem is null then deaths end as published_deaths,
        live_births as published_live_births
    from counts
),

-- The part of each commune-year's counts (signed) that its published row leaves out.
commune_unpublished as (
    select
        region_code,
        year,
        indicator,
        deaths - coalesce(published_deaths, 0) as deaths,
        live_births - coalesce(published_live_births, 0) as live_births
    from usable
    where area_level = 'commune' and region_code is not null
),

unpublished as (
    select 'region' as area_level, region_code as area_code, year, indicator,
        sum(deaths) as deaths, sum(live_births) as live_births
    from commune_unpublished
    group by region_code, year, indicator
    union all
    select 'country', 'CL', year, indicator, sum(deaths), sum(live_births)
    from commune_unpublished
    group by year, indicator
),

with_unpublished as (
    select
        usable.*,
        unpublished.deaths as unpublished_deaths,
        unpublished.live_births as unpublished_live_births
    from usable
    left join unpublished
        on usable.area_level = unpublished.area_level
        and usable.area_code = unpublished.area_code
        and usable.year = unpublished.year
        and usable.indicator = unpublished.indicator
)

select
    area_level,
    area_code,
    area_name,
    region_code,
    cast(year as integer) as year,
    indicator,
    cast(published_deaths as bigint) as deaths,
    cast(published_live_births as bigint) as live_births,
    case when is_usable then {{ rate('deaths', 'live_births', 'multiplier') }} end as rate_per_1000,
    case when is_usable then {{ poisson_rate_limit('lower', 'deaths', 'live_births', 'multiplier') }} end as ci95_lower,
    case when is_usable then {{ poisson_rate_limit('upper', 'deaths', 'live_births', 'multiplier') }} end as ci95_upper,
    case when is_usable then deaths < {{ int_var('unreliable_below_deaths') }} end as is_unreliable,
    {% if bool_var('suppress_small_counts') %}
    coalesce(is_usable and deaths between {{ int_var('suppress_min_deaths') }} and {{ int_var('suppress_max_deaths') }}, false)
    {% else %}
    false
    {% endif %} as is_suppressed,
    count_basis,
    births_basis,
    count_problem as unavailable_reason,
    cast(communes_unavailable as integer) as communes_unavailable,
    cast(case when is_usable then unpublished_deaths end as bigint) as unpublished_commune_deaths,
    cast(case when is_usable then unpublished_live_births end as bigint) as unpublished_commune_births
from with_unpublished
