-- Chile's national rates beside UN IGME's estimates, per year and indicator (docs/methods/comparisons.md,
-- "External anchors: UN IGME"): the 2020 round (rate and deaths) and the 2015 round's 90% bounds. The
-- comparison needs the whole country: a build whose scope leaves out a region has a "country"
-- that is only part of it, so its rows carry no figures of ours and say why
-- (unavailable_reason), never a partial total beside a national estimate.
{% set tolerance = number_var('external_deaths_tolerance_percent') %}

with igme_2020 as (
    select * from {{ ref('stg_un_igme__estimates_2020_round') }}
    where sex = 'bothsex'
),

igme_2015 as (
    select * from {{ ref('stg_un_igme__bounds_2015_round') }}
    where measure = 'rate_per_1000'
),

rates as (
    select * from {{ ref('fct_area_year_rates') }}
),

-- The country is the whole of Chile only when every region of the reference is in the build.
regions as (
    select
        (select count(distinct region_code) from {{ ref('int_commune_year_counts') }}
            where region_code is not null) as in_build,
        (select count(distinct region_code) from {{ ref('stg_reference__communes') }}) as in_chile
),

grid as (
    select distinct year, indicator from igme_2020
    union
    select distinct year, indicator from igme_2015
),

igme as (
    select
        grid.year,
        grid.indicator,
        max(case when igme_2020.measure = 'rate_per_1000' then igme_2020.value end) as igme_rate_per_1000,
        max(case when igme_2020.measure = 'deaths' then igme_2020.value end) as igme_deaths
    from grid
    left join igme_2020 on grid.year = igme_2020.year and grid.indicator = igme_2020.indicator
    group by grid.year, grid.indicator
),

bounds as (
    select
        year,
        indicator,
        max(case when bound = 'lower_90' then value end) as lower_90,
        max(case when bound = 'median' then value end) as median,
        max(case when bound = 'upper_90' then value end) as upper_90
    from igme_2015
    group by year, indicator
),

compared as (
    select
        igme.*,
        bounds.lower_90,
        bounds.median,
        bounds.upper_90,
        country.deaths,
        country.live_births,
        country.rate_per_1000,
        country.ci95_lower,
        country.ci95_upper,
        case
            when regions.in_build < regions.in_chile then 'scope_not_national'
            when not exists (select 1 from rates where rates.indicator = igme.indicator) then 'indicator_not_in_build'
            when not exists (select 1 from rates where rates.year = igme.year) then 'year_not_in_build'
            when country.rate_per_1000 is null then 'country_rate_unavailable'
        end as unavailable_reason
    from igme
    cross join regions
    left join bounds on igme.year = bounds.year and igme.indicator = bounds.indicator
    left join rates as country
        on country.area_level = 'country'
        and igme.year = country.year
        and igme.indicator = country.indicator
),

published as (
    -- Our figures only where the comparison is valid.
    select
        * exclude (deaths, live_births, rate_per_1000, ci95_lower, ci95_upper),
        case when unavailable_reason is null then deaths end as deaths,
        case when unavailable_reason is null then live_births end as live_births,
        case when unavailable_reason is null then rate_per_1000 end as rate_per_1000,
        case when unavailable_reason is null then ci95_lower end as ci95_lower,
        case when unavailable_reason is null then ci95_upper end as ci95_upper
    from compared
)

select
    cast(year as integer) as year,
    indicator,
    cast(deaths as bigint) as country_deaths,
    cast(live_births as bigint) as country_live_births,
    rate_per_1000 as country_rate_per_1000,
    ci95_lower as country_ci95_lower,
    ci95_upper as country_ci95_upper,
    igme_rate_per_1000,
    cast(igme_deaths as bigint) as igme_deaths,
    lower_90 as igme_2015_round_lower_90,
    median as igme_2015_round_median,
    upper_90 as igme_2015_round_upper_90,
    rate_per_1000 - igme_rate_per_1000 as rate_difference_per_1000,
    cast(deaths - igme_deaths as bigint) as deaths_difference,
    100.0 * (deaths - igme_deaths) / nullif(igme_deaths, 0) as deaths_difference_percent,
    abs(100.0 * (deaths - igme_deaths) / nullif(igme_deaths, 0)) <= {{ tolerance }} as is_deaths_within_tolerance,
    unavailable_reason
from published
